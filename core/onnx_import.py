"""ONNX import: ModelProto -> typed `Graph`.

* initializers become constants; graph inputs that are also initializers (IR version 3 models) are
  constants too, not placeholders;
* attributes get their defaults from the op table; older opset forms are rewritten by the op's
  `from_onnx` adapter into the newest form;
* every unsupported op anywhere in the model (sub-graphs included) is named in one error, with counts;
* external-data tensors are read only from inside the model's folder;
* model-local functions are inlined; control-flow sub-graphs become `Graph` attributes whose
  outer-scope reads are explicit captures.
"""

from __future__ import annotations

import functools
import os
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from . import dtypes as dt
from .aligned import SPILL_MIN_BYTES, aligned_empty, frozen, spilled
from .errors import GlowError, GraphError, ModelLoadError, UnsupportedOpError, internal_errors, warn
from .fileio import map_regular_file, read_regular_file
from .graph import Graph, GraphBuilder, Value
from .limits import check_alloc
from .ops import find_onnx_op

#: Element types whose external data is the array's bytes as they lie (little-endian), read
#: straight into an array; the rest (bfloat16, float8, 4-bit, strings) go through onnx's decoder.
_PLAIN_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
                onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT8: np.int8,
                onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT16: np.int16,
                onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT32: np.int32,
                onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.INT64: np.int64,
                onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_}





#: Models of any opset import; ops whose old forms differ are rewritten by their `from_onnx`
#: adapters (and opset <= 6 attributes by `_legacy_opset6`); a form glow cannot read is a
#: GraphError naming the node.
MIN_OPSET = 1
#: Binary ops whose opset-6-and-older form has `broadcast` (and `axis`) attributes.
_LEGACY_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less",
                     "Gemm"}


#: The largest model file read: protobuf cannot parse a message over 2 GiB anyway (weights
#: beyond that go in external data files), and the cap bounds what a hostile path makes us read.
MAX_MODEL_BYTES = 2**31 - 1

#: The most nodes a model may have once its model-local functions are inlined (a function that
#: calls another twice, that one calls a third twice, ... doubles at each level).
MAX_INLINED_NODES = 2_000_000


def load_model_proto(path_or_proto) -> tuple[onnx.ModelProto, str | None]:
    """Read a model from a path, bytes or ModelProto; return it and its folder (for external data)."""
    if isinstance(path_or_proto, onnx.ModelProto):
        return path_or_proto, None
    if isinstance(path_or_proto, (bytes, bytearray)):
        return _parse(bytes(path_or_proto), "<bytes>"), None
    path = os.fspath(path_or_proto)
    data = read_regular_file(path, MAX_MODEL_BYTES, "an ONNX model",
                             limit_note="bytes protobuf can parse (store the weights as external data)")
    return _parse(data, path), os.path.dirname(os.path.abspath(path))


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{where}: empty file, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:
        raise ModelLoadError(f"{where}: not a valid ONNX model ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else 'protobuf parse error'})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(f"{where}: not a valid ONNX model (no graph)")
    return model


def load_onnx(path_or_proto) -> Graph:
    """Import an ONNX model (path, bytes or ModelProto) as a glow `Graph`."""
    model, folder = load_model_proto(path_or_proto)
    where = os.fspath(path_or_proto) if isinstance(path_or_proto, (str, os.PathLike)) else "model"
    try:
        with internal_errors(f"importing {where}"):  # anything but a GlowError is a glow bug
            return Importer(model, folder, where).run()
    except GlowError as e:
        if isinstance(e, UnsupportedOpError):
            raise
        raise type(e)(f"{where}: {e}") from None


class Importer:
    def __init__(self, model: onnx.ModelProto, folder: str | None, where: str):
        self.model = model
        self.folder = folder
        self._maps: dict[str, np.ndarray] = {}  # external data file -> its read-only mapping
        self.where = where
        self.opsets = {(d.domain if d.domain != "ai.onnx" else ""): d.version for d in model.opset_import}
        self.opset = self.opsets.get("", 0)
        if "" in self.opsets and self.opset < MIN_OPSET:
            raise ModelLoadError(f"opset {self.opset} is older than the oldest supported ({MIN_OPSET})")
        self.functions = {(f.domain, f.name): f for f in model.functions}

    def run(self) -> Graph:
        self._check_supported()
        g = self.model.graph
        return self.import_graph(g, None, g.name or "main", top=True)

    # -- checks ----------------------------------------------------------------------------------
    def _check_supported(self):
        missing: Counter = Counter()
        calling: list = []  # the model-local functions being walked, outermost first
        size: dict = {}  # function -> its node count once inlined (each body walked once)

        def walk(nodes) -> int:
            total = 0
            for n in nodes:
                key = (n.domain, n.op_type)
                fn = self.functions.get(key)
                if fn is not None:
                    if key in calling:  # inlining would never end: ONNX forbids recursion
                        cycle = " -> ".join(_fn_name(k) for k in calling[calling.index(key):] + [key])
                        raise ModelLoadError(f"model-local function '{_fn_name(key)}' "
                                             f"calls itself ({cycle})")
                    if key not in size:
                        calling.append(key)
                        size[key] = walk(fn.node)
                        calling.pop()
                    total += size[key]
                else:
                    total += 1
                    if find_onnx_op(n.op_type, n.domain) is None:
                        missing[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"] += 1
                for a in n.attribute:
                    for sub in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)):
                        total += walk(sub.node)
            return total

        nodes = walk(self.model.graph.node)
        if nodes > MAX_INLINED_NODES:  # functions calling functions several times each grow
            raise ModelLoadError(f"model-local functions expand to {nodes} nodes, more than the "
                                 f"{MAX_INLINED_NODES} glow inlines")
        if missing:
            listing = ", ".join(f"{op} (x{c})" for op, c in sorted(missing.items()))
            raise UnsupportedOpError(f"{self.where}: {len(missing)} unsupported op type(s): {listing}",
                                     dict(missing))

    # -- tensors ---------------------------------------------------------------------------------
    def tensor(self, t: onnx.TensorProto) -> np.ndarray:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            np_type = _PLAIN_TYPES.get(t.data_type)
            if np_type is not None:  # straight from the file into the array the graph keeps
                return frozen(self._load_external(t, np_type))
            self._load_external(t)
        try:
            arr = frozen(self._decoded(t))
        except Exception as e:
            raise ModelLoadError(f"tensor '{t.name}': cannot decode ({e})") from None
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        if arr.dtype == object:
            arr = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else s, otypes=[object])(arr) \
                if arr.size else arr
        return arr

    @staticmethod
    def _decoded(t: onnx.TensorProto) -> np.ndarray:
        """The tensor's array; a large one's raw bytes go straight into a temporary file's pages
        (glow.aligned.spilled: dropped from memory once a backend has packed its copy, as an
        external-data weight's are), else into aligned memory (glow.aligned: a backend can read
        it where it lies, and no second copy is made to align it)."""
        np_type = _PLAIN_TYPES.get(t.data_type)
        if np_type is None or len(t.raw_data) < SPILL_MIN_BYTES or sys.byteorder != "little":
            return numpy_helper.to_array(t)
        raw = t.raw_data
        dims = tuple(t.dims)
        if len(raw) != int(np.prod(dims, dtype=np.int64)) * np.dtype(np_type).itemsize:
            return numpy_helper.to_array(t)  # its own error for a wrong size
        out = spilled(raw, np_type, dims)
        if out is None:
            out = aligned_empty(dims, np_type)
            out.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, np.uint8)
        return out

    def _load_external(self, t: onnx.TensorProto, np_type=None):
        """Read an external-data tensor's bytes: the location must stay inside the model's folder,
        offset and length must be non-negative integers, and the bytes must be exactly the
        tensor's size (dims x element size), all checked before anything is read. With `np_type`
        (a plain little-endian element type), read them straight into a 64-byte-aligned array
        of the tensor's shape and return it: no bytes object, no copy into the proto and out of
        it again (a 2 GB decoder's import touched 6 GB, and the process kept most of it); the
        cpu backend then reads such a weight where it lies (backends/cpu/shared_weights.py)."""
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        what = f"tensor '{t.name}'"
        if self.folder is None:
            raise ModelLoadError(f"{what} uses external data '{loc}', but the model was not "
                                 "loaded from a file")
        if not loc or "\0" in loc:
            raise ModelLoadError(f"{what}: external data location {loc!r} is "
                                 f"{'empty' if not loc else 'not a file name (it contains a NUL)'}")
        base = os.path.realpath(self.folder)
        path = os.path.realpath(os.path.join(base, loc))
        if os.path.isabs(loc) or os.path.commonpath([base, path]) != base:
            raise ModelLoadError(f"{what}: external data path '{loc}' points outside the "
                                 f"model's folder")
        offset = _byte_count(info.get("offset"), "offset", what) or 0
        length = _byte_count(info.get("length"), "length", what)
        need = _tensor_bytes(t, what)
        if length is not None and length != need:
            raise ModelLoadError(f"{what}: external data length {length} does not match its "
                                 f"{len(t.dims)}-d shape {list(t.dims)}, which needs {need} bytes")
        if not os.path.exists(path):
            raise ModelLoadError(f"{what}: external data file '{loc}' not found")
        if np_type is not None and offset % np.dtype(np_type).itemsize == 0:
            mapped = self._mapped(path, loc, what)
            # without a length the tensor is the rest of the file, which must be exactly its
            # bytes: anything else is read, whose errors say why
            fits = mapped is not None and (offset + need == mapped.size if length is None
                                           else offset + need <= mapped.size)
            if fits:
                return mapped[offset:offset + need].view(np.dtype(np_type).newbyteorder("<")) \
                    .astype(np_type, copy=False).reshape(tuple(t.dims))
        note = f"bytes its shape {list(t.dims)} needs"
        into = None if np_type is None else (lambda n: aligned_empty(n, np.uint8))
        try:
            raw = read_regular_file(path, need, "external tensor data", offset, length, note, into=into)
        except ModelLoadError as e:
            raise ModelLoadError(f"{what}: external data file '{loc}': "
                                 f"{str(e).removeprefix(path + ': ')}") from None
        if len(raw) != need:  # to the end of the file, and fewer bytes than the shape needs
            raise ModelLoadError(f"{what}: external data file '{loc}' has {len(raw)} bytes from offset "
                                 f"{offset} to its end; its shape {list(t.dims)} needs {need}")
        if np_type is not None:
            return raw[:need].view(np.dtype(np_type).newbyteorder("<")).astype(np_type, copy=False) \
                .reshape(tuple(t.dims))
        t.raw_data = raw
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT

    def _mapped(self, path: str, loc: str, what: str) -> np.ndarray | None:
        """The external data file `path` mapped read-only (once per file and import), as bytes; None
        where it cannot be mapped (empty, or a file system without mappings: then it is read).
        Mapped, a weight's pages are read from the file when first touched and, being the file's,
        can be dropped again and re-read: the cpu backend drops those of a weight it has packed a
        copy of (shared_weights.py), so a decoder's resident memory holds each weight once, not
        twice. As with a saved executable, truncating the file in place while glow uses it is not
        supported (replacing it, as writers that rename do, is)."""
        if path not in self._maps:
            try:
                self._maps[path] = map_regular_file(path, 1 << 62, "external tensor data")
            except ModelLoadError as e:
                if "cannot map" not in str(e):
                    raise ModelLoadError(f"{what}: external data file '{loc}': "
                                         f"{str(e).removeprefix(path + ': ')}") from None
                self._maps[path] = None
        m = self._maps[path]
        return m if m is not None and m.size else None

    # -- types -----------------------------------------------------------------------------------
    def vtype(self, tp: onnx.TypeProto, what: str):
        kind = tp.WhichOneof("value")
        if kind == "tensor_type":
            tt = tp.tensor_type
            if tt.elem_type == 0:
                raise ModelLoadError(f"{what}: tensor type has no element type")
            shape = None
            if tt.HasField("shape"):
                shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                              for d in tt.shape.dim)
            return dt.TensorType(shape, dt.from_onnx(tt.elem_type))
        if kind == "sequence_type":
            return dt.SequenceType(self.vtype(tp.sequence_type.elem_type, what))
        if kind == "optional_type":
            return dt.OptionalType(self.vtype(tp.optional_type.elem_type, what))
        raise ModelLoadError(f"{what}: unsupported value type '{kind}'")

    # -- graphs ----------------------------------------------------------------------------------
    def import_graph(self, g: onnx.GraphProto, outer: Scope | None, name: str, top=False,
                     input_types: Sequence | None = None) -> Graph:
        b = GraphBuilder(name)
        scope = Scope(b, outer)
        inits = {t.name: t for t in g.initializer}
        for t in g.sparse_initializer:
            inits[t.values.name] = t
        for name_, t in inits.items():
            arr = self.tensor(t) if isinstance(t, onnx.TensorProto) else self._sparse(t)
            scope.bind(name_, b.constant(arr, name=name_))
        for i, vi in enumerate(g.input):
            if vi.name in inits:
                continue  # IR v3: initializers are listed as inputs; they are weights, not feeds
            given = input_types[i] if input_types is not None and i < len(input_types) else None
            if not _complete(vi.type):
                if given is None:
                    raise ModelLoadError(f"sub-graph input '{vi.name}' has no type and none can be "
                                         "derived from its node")
                t = given  # a body input ONNX leaves (partly) untyped: the node's input fixes it
            else:
                t = self.vtype(vi.type, f"graph input '{vi.name}'")
            scope.bind(vi.name, b.input(vi.name, t))
        scope.declared = {vi.name: vi.type for vi in list(g.value_info) + list(g.output)}
        self.import_nodes(g.node, scope)
        outs = []
        for vi in g.output:
            v = scope.lookup(vi.name)
            if v is None:
                raise GraphError(f"graph output '{vi.name}' is not produced by any node")
            if v.name != vi.name or any(o is v for o in outs):
                v = b.add1("Identity", [v], name=vi.name + "_out", output_names=[vi.name])
            outs.append(v)
        meta = {"opset": self.opset, "producer": self.model.producer_name} if top else {}
        return b.build(outs, doc=g.doc_string, meta=meta)

    def import_nodes(self, nodes, scope: Scope):
        for node in nodes:
            inputs = [scope.lookup_required(n, node) if n else None for n in node.input]
            fn = self.functions.get((node.domain, node.op_type))
            if fn is not None:
                outs = self._inline_function(fn, node, inputs, scope)
            else:
                outs = self.import_node(node, inputs, scope)
            for oname, v in zip(node.output, outs):
                if oname:
                    if oname in scope.declared and v is not None and v.node is not None:
                        self._refine(v, scope.declared[oname], node)
                    scope.bind(oname, v)

    def _refine(self, v: Value, tp: onnx.TypeProto, node):
        """Use the model's declared type (value_info, graph outputs) where inference knows less.

        Inference stays the authority: a declared type may only fill in unknown dims. A declared
        element type that contradicts the inferred one is an error naming the node (onnxruntime
        refuses it too); a declared *shape* that contradicts it (a dim or the rank) never refuses
        the model: glow's shape rules follow the ONNX spec, so one GlowWarning names the node and
        the value and the computed shape is kept, as onnxruntime keeps its own ("falling back to
        lenient merge"). Exporters and hand-edited models get declared shapes wrong; where they
        differ from onnxruntime it is onnxruntime that departs from the spec (issue 40, item 6:
        a backward Slice whose end is INT_MAX is empty, as the spec clamps ends to [-1, dim-1];
        MaxPool with SAME_* padding and dilations has ceil(in / stride) outputs, where
        onnxruntime drops the padding).
        """
        if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape") or \
                not isinstance(v.type, dt.TensorType):
            return
        try:
            declared = self.vtype(tp, f"value '{v.name}'")
        except GlowError:
            return
        have = v.type
        where = f"node '{node.name or node.op_type}' ({node.op_type})"
        if declared.dtype != have.dtype:
            raise GraphError(f"{where}: output '{v.name}' is declared {declared} but computes {have}")
        if have.shape is None:
            v.type = dt.TensorType(declared.shape, have.dtype)
            return
        if len(declared.shape) != len(have.shape) or any(
                isinstance(h, int) and isinstance(d, int) and d != h for d, h in zip(declared.shape, have.shape)):
            warn(f"{where}: output '{v.name}' is declared {declared} but computes {have} (glow's shape "
                 "follows the ONNX spec); the computed shape is used")
            return
        dims = [h if isinstance(h, int) or not isinstance(d, int) else d for d, h in zip(declared.shape, have.shape)]
        v.type = dt.TensorType(tuple(dims), have.dtype)

    def import_node(self, node: onnx.NodeProto, inputs, scope: Scope) -> list[Value]:
        opdef = find_onnx_op(node.op_type, node.domain)
        self._check_attribute_types(node, opdef)
        attrs, captures = {}, []
        for a in node.attribute:
            attrs[a.name], caps = self.attribute(a, scope, node)
            captures.extend(caps)
        uniq = list({id(c): c for c in captures}.values())
        if self.opsets.get(node.domain or "", self.opset) < 7:
            inputs = self._legacy_opset6(node, inputs, attrs, scope)
        ic = ImportContext(self, scope, node, opdef, inputs, attrs, uniq)
        where = f"node '{node.name or node.op_type}' ({node.op_type})"
        try:
            outs = opdef.from_onnx(ic) if opdef.from_onnx else ic.emit(opdef, inputs, attrs)
        except GraphError as e:
            msg = str(e)
            raise GraphError(msg if msg.startswith("node ") else f"{where}: {msg}") from None
        return list(outs)

    def _legacy_opset6(self, node, inputs, attrs, scope: Scope):
        """Opset <= 6 forms: drop `is_test`, and turn explicit `broadcast`/`axis` into NumPy-style
        broadcasting by reshaping B with trailing ones."""
        attrs.pop("is_test", None)
        attrs.pop("consumed_inputs", None)  # opset 1-5 in-place hint, meaningless here
        if node.op_type not in _LEGACY_BROADCAST:
            return inputs
        attrs.pop("broadcast", None)
        axis = attrs.pop("axis", None)
        if axis is None or node.op_type == "Gemm" or len(inputs) < 2:
            return inputs
        a, b = inputs[0], inputs[1]
        ra, rb_ = a.type.rank, b.type.rank
        if ra is None or rb_ is None or b.type.shape is None:
            raise GraphError(f"node '{node.name or node.op_type}' ({node.op_type}): legacy broadcast "
                             "with axis needs known ranks")
        axis = axis % ra if ra else 0
        trailing = ra - axis - rb_
        if trailing <= 0:
            return inputs
        shape = list(b.type.shape) + [1] * trailing
        if not all(isinstance(d, int) for d in shape):
            shape = [0] * rb_ + [1] * trailing  # 0 copies the dim
        target = scope.builder.constant(np.asarray(shape, np.int64), name=f"{node.name}_bshape")
        b2 = scope.builder.add1("Reshape", [b, target], name=f"{node.name or node.op_type}_legacy_bcast")
        return [a, b2, *inputs[2:]]

    def _check_attribute_types(self, node: onnx.NodeProto, opdef):
        """Every attribute has the type its op gives it, or a GraphError names the node, the
        attribute, the type expected and the type found (as onnx.checker and onnxruntime refuse
        such a model), before any value is read: a STRING axis or a FLOATS perm would otherwise
        be coerced. The type expected is ONNX's own, from the op's schema at the opset the model
        imports for the node's domain (an attribute whose type changed across opsets is read as
        that opset had it); for ops ONNX has no schema of (contrib domains), the kind the op
        table declares. An attribute neither knows is left to the op (an unknown attribute)."""
        version = self.opsets.get(node.domain if node.domain != "ai.onnx" else "")
        schema = _schema_attribute_types(node.op_type, node.domain or "", version)
        for a in node.attribute:
            if a.ref_attr_name:
                continue  # a function body's reference, replaced when the function is inlined
            want = schema.get(a.name) if schema is not None else None
            if want is None and opdef is not None and a.name in opdef.attr_map:
                want = _KIND_TYPES.get(opdef.attr_map[a.name].kind)
            if want is not None and a.type not in want:
                raise GraphError(f"node '{node.name or node.op_type}' ({node.op_type}): attribute '{a.name}' "
                                 f"must be {_ATTR_WORDS[min(want)]}, got {_ATTR_WORDS.get(a.type, 'no known type')}")

    def attribute(self, a: AttributeProto, scope: Scope, node):
        if a.type == AttributeProto.GRAPH:
            sub = self.import_graph(a.g, scope, a.g.name or f"{node.op_type}_{a.name}",
                                    input_types=self._body_input_types(node, scope))
            return sub, [scope.lookup(c.name) for c in sub.captures]
        if a.type == AttributeProto.GRAPHS:
            subs = tuple(self.import_graph(g, scope, g.name or f"{node.op_type}_{a.name}")
                         for g in a.graphs)
            return subs, [scope.lookup(c.name) for s in subs for c in s.captures]
        if a.type == AttributeProto.TENSOR:
            return self.tensor(a.t), []
        if a.type == AttributeProto.TENSORS:
            return tuple(self.tensor(t) for t in a.tensors), []
        if a.type == AttributeProto.SPARSE_TENSOR:
            return self._sparse(a.sparse_tensor), []
        if a.type == AttributeProto.TYPE_PROTO:
            return self.vtype(a.tp, f"attribute '{a.name}'"), []
        if a.ref_attr_name:
            raise GraphError(f"attribute '{a.name}' refers to a function attribute outside a function")
        return onnx.helper.get_attribute_value(a), []

    def _body_input_types(self, node, scope: Scope):
        """Types for a control-flow body's inputs, from the node's inputs (see ops/control.py)."""
        from .ops.control import body_input_types

        inputs = [scope.lookup(n) if n else None for n in node.input]
        raw = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
               if a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS)}
        types = [None if v is None else v.type for v in inputs]
        return body_input_types(node.op_type, types, raw, self.opsets.get(node.domain or "", 0))

    def _sparse(self, st) -> np.ndarray:
        """A sparse tensor made dense. Its indices are checked first (ONNX: NNZ linear indices,
        or an [NNZ, rank] array of coordinates, each within its dimension), so a bad one is a
        ModelLoadError naming the tensor, not a NumPy IndexError or a write elsewhere."""
        values = self.tensor(st.values)
        idx = self.tensor(st.indices)
        what = f"sparse tensor '{st.values.name}'"
        dims = tuple(int(d) for d in st.dims)
        if any(d < 0 for d in dims):
            raise ModelLoadError(f"{what}: negative dimension in shape {list(dims)}")
        numel = 1
        for d in dims:
            numel *= d
        nnz = values.size
        if values.ndim != 1 or idx.dtype.kind not in "iu" or (idx.shape not in ((nnz,), (nnz, len(dims)))):
            raise ModelLoadError(f"{what}: expected {nnz} integer indices (or [{nnz}, {len(dims)}] "
                                 f"coordinates) for its {nnz} values, got indices of shape {list(idx.shape)}")
        bounds = np.asarray(dims if idx.ndim == 2 else (numel,), dtype=object)
        bad = np.argwhere((idx < 0) | (idx.astype(object) >= bounds))
        if bad.size:
            at = tuple(int(i) for i in bad[0])
            raise ModelLoadError(f"{what}: index {int(idx[at])} at position {list(at)} is out of range "
                                 f"for shape {list(dims)}")
        try:  # the dense form is what the graph holds: it must fit the memory budget first
            check_alloc(what, "its dense form", dims, values.dtype.itemsize)
        except GlowError as e:
            raise ModelLoadError(str(e)) from None
        dense = np.zeros(numel, dtype=values.dtype)
        if idx.ndim == 2:
            idx = np.ravel_multi_index(tuple(idx.T), dims) if nnz else idx.reshape(0)
        dense[idx] = values
        return dense.reshape(dims)

    def _inline_function(self, fn: onnx.FunctionProto, node, inputs, scope: Scope) -> list[Value]:
        """Inline a model-local function: bind formals, rename its body's values, substitute attrs."""
        inner = Scope(scope.builder, scope.parent, dict(scope.names))
        prefix = f"{node.name or fn.name}/"
        rename = {o: a for o, a in zip(fn.output, node.output) if a}
        missing = set()
        for formal, actual in zip(fn.input, list(inputs) + [None] * len(fn.input)):
            if actual is None:
                missing.add(formal)
            inner.names[prefix + formal] = actual
        given = {a.name: a for a in node.attribute}
        defaults = {a.name: a for a in fn.attribute_proto}
        body = []
        for n in fn.node:
            n2 = onnx.NodeProto()
            n2.CopyFrom(n)
            n2.name = prefix + (n.name or n.op_type)
            n2.input[:] = [prefix + i if i and i not in missing else "" for i in n.input]
            n2.output[:] = [rename.get(o, prefix + o) if o else "" for o in n.output]
            for a in list(n2.attribute):
                if a.ref_attr_name:
                    src = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                    n2.attribute.remove(a)
                    if src is not None:  # the caller's attribute as given (its type too)
                        n2.attribute.add().CopyFrom(src)
                        n2.attribute[-1].name = a.name
            body.append(n2)
        self.import_nodes(body, inner)
        return [inner.lookup(rename.get(o, prefix + o)) for o in fn.output]


_A = AttributeProto
#: How an error names each attribute type ("must be an int, got a string").
_ATTR_WORDS = {
    _A.UNDEFINED: "no type", _A.INT: "an int", _A.FLOAT: "a float", _A.STRING: "a string",
    _A.TENSOR: "a tensor", _A.GRAPH: "a graph", _A.SPARSE_TENSOR: "a sparse tensor", _A.TYPE_PROTO: "a type",
    _A.INTS: "a list of ints", _A.FLOATS: "a list of floats", _A.STRINGS: "a list of strings",
    _A.TENSORS: "a list of tensors", _A.GRAPHS: "a list of graphs", _A.SPARSE_TENSORS: "a list of sparse tensors",
    _A.TYPE_PROTOS: "a list of types",
}
#: The ONNX attribute types each kind of the op table (ops/registry.py ATTR_KINDS) is read from.
_KIND_TYPES = {
    "int": {_A.INT}, "float": {_A.FLOAT}, "string": {_A.STRING}, "ints": {_A.INTS}, "floats": {_A.FLOATS},
    "strings": {_A.STRINGS}, "tensor": {_A.TENSOR, _A.SPARSE_TENSOR}, "tensors": {_A.TENSORS},
    "graph": {_A.GRAPH}, "graphs": {_A.GRAPHS}, "dtype": {_A.INT}, "type": {_A.TYPE_PROTO},
}


@functools.lru_cache(maxsize=1024)
def _schema_attribute_types(op_type: str, domain: str, version: int | None) -> dict | None:
    """{attribute name: {its ONNX type}} from ONNX's schema of the op at `version` (the newest
    schema when the model names no version for the domain), or None when ONNX has none."""
    try:
        if version is None:
            schema = onnx.defs.get_schema(op_type, domain=domain)
        else:
            schema = onnx.defs.get_schema(op_type, max_inclusive_version=version, domain=domain)
    except Exception:  # noqa: BLE001 - no schema (a contrib domain, or an op newer than the opset)
        return None
    return {name: {a.type} for name, a in schema.attributes.items() if a.type != _A.UNDEFINED}


def _fn_name(key) -> str:
    domain, name = key
    return f"{domain}.{name}" if domain else name


def _complete(tp: onnx.TypeProto) -> bool:
    """Whether a TypeProto names a full type (element types all the way down)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return tp.tensor_type.elem_type != 0
    if kind == "sequence_type":
        return _complete(tp.sequence_type.elem_type)
    if kind == "optional_type":
        return _complete(tp.optional_type.elem_type)
    return False


class Scope:
    """ONNX names -> Values, with lookup through enclosing graphs (creating captures)."""

    def __init__(self, builder: GraphBuilder, parent: Scope | None, names: dict | None = None):
        self.builder = builder
        self.parent = parent
        self.names: dict[str, Value | None] = names if names is not None else {}
        self.declared: dict[str, onnx.TypeProto] = {}  # the graph's value_info and output types

    def bind(self, name: str, v: Value):
        self.names[name] = v

    def lookup(self, name: str) -> Value | None:
        if name in self.names:
            return self.names[name]
        if self.parent is None:
            return None
        outer = self.parent.lookup(name)
        if outer is None:
            return None
        if outer.is_constant:  # constants need no capture: share the weight
            self.names[name] = outer
            return outer
        v = self.builder.capture(name, outer.type)
        self.names[name] = v
        return v

    def lookup_required(self, name: str, node) -> Value:
        v = self.lookup(name)
        if v is None:
            raise GraphError(f"node '{node.name or node.op_type}' ({node.op_type}): input '{name}' is "
                             "not defined by any earlier node, input or initializer")
        return v


class ImportContext:
    """What an op's `from_onnx` adapter sees: the ONNX node, its inputs as Values, its raw attributes."""

    def __init__(self, importer: Importer, scope: Scope, node, opdef, inputs, attrs, captures):
        self.importer = importer
        self.scope = scope
        self.b: GraphBuilder = scope.builder
        self.node = node
        self.opdef = opdef
        self.inputs: list[Value | None] = list(inputs)
        self.attrs: dict = attrs
        self.captures = captures
        self.opset: int = importer.opsets.get(node.domain if node.domain != "ai.onnx" else "", 0)
        self.num_outputs = len(node.output)
        self.name = node.name or node.op_type.lower()

    def error(self, message: str) -> GraphError:
        return GraphError(f"node '{self.name}' ({self.node.op_type}): {message}")

    def const(self, value, dtype: dt.DType | None = None) -> Value:
        return self.b.constant(value, name=f"{self.name}_c", dtype=dtype)

    def add(self, op: str, inputs, attrs=None, num_outputs: int = 1) -> list[Value]:
        """An intermediate node of the adapter's expansion (generated names)."""
        return self.b.add(op, inputs, attrs, name=f"{self.name}_{op.lower()}", num_outputs=num_outputs)

    def emit(self, op, inputs, attrs=None) -> list[Value]:
        """The node that produces this ONNX node's outputs (keeps the ONNX names)."""
        return self.b.add(op, inputs, attrs, name=self.node.name or None,
                          num_outputs=self.num_outputs, output_names=list(self.node.output),
                          captures=self.captures)


def _byte_count(text, key: str, what: str) -> int | None:
    """An external-data offset or length: a non-negative decimal integer (None when absent)."""
    if text is None or text == "":
        return None
    t = str(text).strip()
    if not (t.isascii() and t.isdigit()):
        raise ModelLoadError(f"{what}: external data {key} {text!r} is not a non-negative integer")
    return int(t)


#: Element types stored two to a byte.
_NIBBLE_TYPES = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1")
                 if hasattr(onnx.TensorProto, n)}


def _tensor_bytes(t: onnx.TensorProto, what: str) -> int:
    """The bytes a tensor's raw data must have: its element count (Python ints, no overflow)
    times its element size. Strings have no fixed size and cannot be external."""
    if any(d < 0 for d in t.dims):
        raise ModelLoadError(f"{what}: negative dimension in shape {list(t.dims)}")
    count = 1
    for d in t.dims:
        count *= int(d)
    if t.data_type in _NIBBLE_TYPES:
        return (count + 1) // 2
    if t.data_type == onnx.TensorProto.STRING:
        raise ModelLoadError(f"{what}: string tensors cannot be stored as external data")
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except Exception:  # noqa: BLE001 - any unknown code is a bad model
        raise ModelLoadError(f"{what}: unknown element type {t.data_type}") from None
    return count * itemsize
