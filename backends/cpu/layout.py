"""The CPU backend's layout transform: convolutions and pools run NHWC, and a CNN stays NHWC.

Backend-private ops (domain "glow.cpu", declared here with shape rules, NumPy references and
lowering rules back to the ONNX ops, so verifier, interpreters and other backends understand them):

    ConvNHWC(X[N,H,W,C] already padded (a depthwise one: its `pads`), W[M,C/group,kh,kw], B?) -> Y[N,Ho,Wo,M]
    ConvIntegerNHWC(X[N,H,W,C] 8-bit, padded with its zero point, W, zero points) -> Y[N,Ho,Wo,M] int32
    MaxPoolNHWC / AveragePoolNHWC (ONNX pool attributes) / GlobalAveragePoolNHWC

`transform_graph` tracks, for every value, the layout its data is really in: a permutation q of
its logical (ONNX) axes, physical = transpose(logical, q); NHWC is q = (0, 2, 3, 1). Conv and pools
produce NHWC; elementwise ops and Concat compute in their inputs' layout (constants are
transposed at compile time); a Transpose only changes the permutation (no data moves); a
Reshape runs on the physical data when its axis groups are contiguous there (ShuffleNet's channel
shuffle costs one transpose, as in NCHW). Every other op, and every graph output, gets its data
back in the logical layout through one Transpose (a Reshape when only size-1 axes move). So
transposes appear only where the layout really changes, never in pairs.

1-D convolutions and pools (Whisper's stem, wav2vec's feature extractor, temporal CNNs) become
the 2-D window over [N, C, 1, L] first (`windows_1d_as_2d`), so they run on the same kernels; where
the optimiser did not run, the NCHW kernels read a rank-3 window as that 2-D one.
"""

from __future__ import annotations

import numpy as np
from glow import dtypes as dt
from glow.graph import Graph
from glow.lowering.registry import lowering
from glow.ops import get_op
from glow.ops.conv import out_extents, window_attrs
from glow.ops.registry import ELEMENTWISE, EPILOGUE_PRODUCER, NN, POOL, Attr, Tier, op
from glow.passes.base import run_passes
from glow.passes.sinking import SINK
from glow.rewrite import rebuild

DOMAIN = "glow.cpu"
NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
F32 = frozenset({dt.float32})


# -- eligibility (shared with the kernels' support predicates) -------------------------------------

def static_f32(v, rank=None) -> bool:
    """A static, non-empty float32 tensor value (with `rank` dims when given)."""
    t = None if v is None else v.type
    return (isinstance(t, dt.TensorType) and t.is_static and t.dtype == dt.float32 and t.numel > 0
            and (rank is None or len(t.shape) == rank))


def as_2d(shape):
    """A 1-D window's [N, C, L] as the [N, C, 1, L] of the same bytes; other shapes unchanged."""
    return (shape[0], shape[1], 1, shape[2]) if len(shape) == 3 else tuple(shape)


def conv_geometry(node):
    """(kernel, strides, dilations, pads_begin, pads_end) of a 2-D Conv or pool node (of a 1-D
    one: those of the 2-D window over [1, L] it is run as)."""
    x = node.inputs[0].type.shape
    a = node.attrs
    kernel = a.get("kernel_shape") or node.inputs[1].type.shape[2:]
    if len(x) == 3:
        a = attrs_2d({**a, "kernel_shape": tuple(kernel)})
        x, kernel = as_2d(x), a["kernel_shape"]
    k, s, d, p = window_attrs(ValueError, 2, kernel, a.get("strides"), a.get("dilations"), a.get("pads"))
    _, pb, pe = out_extents(ValueError, x[2:], k, s, d, p, a.get("auto_pad", "NOTSET"),
                            a.get("ceil_mode", 0))
    return k, s, d, pb, pe


def depthwise(node) -> bool:
    """A Conv (or ConvNHWC) with one input channel per group and one output per group: the cpu's
    depthwise kernel, which pads implicitly (an explicit Pad was a tenth of MobileNetV2's time)."""
    w = node.inputs[1].type.shape
    g = node.attrs.get("group", 1) or 1
    return g > 1 and len(w) >= 3 and w[1] == 1 and w[0] == g


def _ranks_ok(x, w=None) -> bool:
    """A 2-D window (rank 4), or a 1-D one (rank 3: run as the 2-D one over [1, L])."""
    return any(static_f32(x, r) and (w is None or static_f32(w, r)) for r in (3, 4))


def conv_ok(node) -> bool:
    """A float32 1-D or 2-D Conv with constant weights: runs NHWC on the implicit-GEMM kernels."""
    ins = node.inputs
    if node.op.name != "Conv" or not _ranks_ok(ins[0], ins[1]):
        return False
    if not ins[1].is_constant or (len(ins) > 2 and ins[2] is not None and not static_f32(ins[2])):
        return False
    return _geometry_ok(node)


def _static(v, dtypes, rank=None) -> bool:
    t = None if v is None else v.type
    return (isinstance(t, dt.TensorType) and t.is_static and t.dtype in dtypes and t.numel > 0
            and (rank is None or len(t.shape) == rank))


_INT8 = frozenset({dt.int8, dt.uint8})


def conv_integer_ok(node) -> bool:
    """A 2-D, ungrouped ConvInteger with constant 8-bit weights and constant (per-tensor x,
    per-tensor or per-channel w) zero points: runs NHWC on the integer GEMM (int8_conv.py)."""
    return node.op.name == "ConvInteger" and integer_operands_ok(node) and _geometry_ok(node)


def integer_operands_ok(node) -> bool:
    """The operands and group of conv_integer_ok (ConvInteger's or ConvIntegerNHWC's)."""
    ins = list(node.inputs) + [None, None]
    x, w, xzp, wzp = ins[:4]
    if node.attrs.get("group", 1) != 1:
        return False
    if not (_static(x, _INT8, 4) and _static(w, _INT8, 4) and w.is_constant):
        return False
    if xzp is not None and not (xzp.is_constant and xzp.type.numel == 1):
        return False
    if wzp is not None and not (wzp.is_constant and wzp.type.numel in (1, w.type.shape[0])):
        return False
    return _static(node.outputs[0], frozenset({dt.int32}), 4)


def pool_ok(node) -> bool:
    """A float32 1-D or 2-D MaxPool (without Indices) or AveragePool, dilation 1; a 2-D
    GlobalAveragePool."""
    x = node.inputs[0]
    if not _ranks_ok(x) or not static_f32(node.outputs[0], len(x.type.shape)):
        return False
    if node.op.name == "GlobalAveragePool":
        return static_f32(node.inputs[0], 4)
    if node.op.name == "MaxPool" and len(node.outputs) > 1 and node.outputs[1] is not None:
        return False
    if any(d != 1 for d in node.attrs.get("dilations") or ()):
        return False
    return node.op.name in ("MaxPool", "AveragePool") and _geometry_ok(node)


def lrn_ok(node) -> bool:
    """A float32 4-D LRN (AlexNet's, GoogLeNet's): between NHWC convolutions it runs NHWC."""
    return static_f32(node.inputs[0], 4) and static_f32(node.outputs[0], 4)


def nhwc_ok(node) -> bool:
    """Whether a pool or LRN node (an op of NHWC_OF other than Conv) runs on NHWC data."""
    return lrn_ok(node) if node.op.name == "LRN" else pool_ok(node)


def _geometry_ok(node) -> bool:
    try:
        conv_geometry(node)
        return True
    except (ValueError, TypeError):
        return False


# -- the NHWC ops ---------------------------------------------------------------------------------

def _nchw(t: dt.TensorType) -> dt.TensorType:
    s = t.shape
    return dt.TensorType((s[0], s[3], s[1], s[2]), t.dtype)


def _nhwc_shape(s):
    return (s[0], s[2], s[3], s[1])


class _NchwCtx:
    """An InferContext whose first input is seen in NCHW, for reusing the ONNX ops' shape rules."""

    def __init__(self, ctx, opdef):
        self._ctx, self.op = ctx, opdef
        self.inputs = [_nchw(ctx.inputs[0])] + list(ctx.inputs[1:])

    def __getattr__(self, k):
        return getattr(self._ctx, k)

    def input(self, i):
        return self.inputs[i] if self.has(i) else self._ctx.input(i)

    def has(self, i):
        return i < len(self.inputs) and self.inputs[i] is not None

    def shape(self, i):
        return self.input(i).shape

    def dtype(self, i):
        return self.input(i).dtype

    def rank(self, i):
        return self.input(i).rank


def _nhwc_op(name: str, base: str, inputs, attrs, doc: str, outputs=("Y:T",), types=None, groups=None):
    onnx_op = get_op(base)

    def infer(ctx):
        if ctx.input(0).shape is None or len(ctx.input(0).shape) != 4:
            raise ctx.error("expects a rank-4 NHWC input")
        out = onnx_op.infer(_NchwCtx(ctx, onnx_op))[0]
        return [dt.TensorType(_nhwc_shape(out.shape), out.dtype)]

    def reference(x, *rest, **a):
        y = onnx_op.reference(np.ascontiguousarray(x.transpose(TO_NCHW)), *rest, **a)
        y = y[0] if isinstance(y, tuple) else y
        return np.ascontiguousarray(y.transpose(NHWC))

    opdef = op(name, domain=DOMAIN, inputs=inputs, outputs=outputs, types=types or {"T": F32}, attrs=attrs,
               infer=infer, reference=reference, groups=groups or {POOL}, tier=Tier.KERNEL, doc=doc)

    @lowering(name, domain=DOMAIN)
    def lower(rb, node, ins):
        x = rb.emit1("Transpose", [ins[0]], {"perm": TO_NCHW})
        y = rb.emit(base, [x, *ins[1:]], dict(node.attrs))[0]
        return [rb.emit1("Transpose", [y], {"perm": NHWC})]

    return opdef


_POOL = (Attr("auto_pad", "string", "NOTSET"), Attr("ceil_mode", "int", 0), Attr("dilations", "ints", None),
         Attr("kernel_shape", "ints"), Attr("pads", "ints", None), Attr("strides", "ints", None))
CONV_NHWC = _nhwc_op(
    "ConvNHWC", "Conv", ("X:T", "W:T", "B:T?"), get_op("Conv").attrs,
    "Conv with NHWC input and output (weights stay [M, C/group, kh, kw]); the CPU backend's layout.",
    groups={NN, EPILOGUE_PRODUCER})
_CONV_INTEGER = get_op("ConvInteger")
CONV_INTEGER_NHWC = _nhwc_op(
    "ConvIntegerNHWC", "ConvInteger", _CONV_INTEGER.inputs, _CONV_INTEGER.attrs,
    "ConvInteger with NHWC input (padded with x_zero_point) and int32 NHWC output.",
    outputs=_CONV_INTEGER.outputs, types=dict(_CONV_INTEGER.types), groups={NN, EPILOGUE_PRODUCER})
MAXPOOL_NHWC = _nhwc_op("MaxPoolNHWC", "MaxPool", ("X:T",), (*_POOL, Attr("storage_order", "int", 0)),
                        "MaxPool on NHWC data (no Indices output).")
AVGPOOL_NHWC = _nhwc_op("AveragePoolNHWC", "AveragePool", ("X:T",), (*_POOL, Attr("count_include_pad", "int", 0)),
                        "AveragePool on NHWC data.")
GAP_NHWC = _nhwc_op("GlobalAveragePoolNHWC", "GlobalAveragePool", ("X:T",), (),
                    "GlobalAveragePool on NHWC data: [N,H,W,C] -> [N,1,1,C].")
LRN_NHWC = _nhwc_op("LRNNHWC", "LRN", ("X:T",), get_op("LRN").attrs,
                    "LRN on NHWC data: each pixel's channels, contiguous, normalised in one pass.",
                    groups={NN})
NHWC_OF = {"Conv": CONV_NHWC, "MaxPool": MAXPOOL_NHWC, "AveragePool": AVGPOOL_NHWC,
           "GlobalAveragePool": GAP_NHWC, "LRN": LRN_NHWC}


# -- layout tracking ------------------------------------------------------------------------------

def _inverse(p):
    return tuple(int(i) for i in np.argsort(p))


def _identity(p) -> bool:
    return p is None or tuple(p) == tuple(range(len(p)))


class _Layouts:
    """Physical values and their permutations, for the values of the graph being rewritten."""

    def __init__(self, rb):
        self.rb = rb
        self.phys: dict[int, tuple] = {}  # id(old value) -> (new value, perm)
        #: (id(v), p, q) -> (v, v re-laid out). The entry holds `v` itself: an id is only unique
        #: while its object lives, and the values converted here include transient constants
        #: (a reshaped scalar); once one died, the next one could take its id and be handed the
        #: dead one's data (a compile-order-dependent wrong answer).
        self._cache: dict = {}

    def get(self, old, new):
        """(value, perm or None) holding `old` (whose rebuilt value is `new`)."""
        return self.phys.get(id(old), (new, None)) if old is not None else (None, None)

    def convert(self, v, p, q):
        """v (physical under perm p; None = logical) re-laid out under perm q."""
        p = None if _identity(p) else tuple(p)
        q = None if _identity(q) else tuple(q)
        if p == q:
            return v
        key = (id(v), p, q)
        hit = self._cache.get(key)
        if hit is None:
            rank = len(v.type.shape)
            inv_p = _inverse(p) if p else tuple(range(rank))
            qq = q or tuple(range(rank))
            t = tuple(inv_p[qq[i]] for i in range(rank))
            hit = self._cache[key] = (v, self._move(v, t))
        return hit[1]

    def _move(self, v, t):
        rb = self.rb
        if v.is_constant:
            return rb.constant(np.ascontiguousarray(np.transpose(v.data, t)), v.name)
        shape = v.type.shape
        moved = [a for a in t if shape[a] != 1]
        if moved == sorted(moved):  # only size-1 axes move: the bytes are already in order
            return _reshape_to(rb, v, [shape[a] for a in t])
        return rb.emit1("Transpose", [v], {"perm": t})

    def logical(self, old, new):
        v, p = self.get(old, new)
        return self.convert(v, p, None) if v is not None else None


def _shape_const(rb, shape):
    return rb.constant(np.asarray(shape, np.int64), "shape")


def _reshape_to(rb, v, shape):
    """Reshape to literal dims: a 0 is an empty dim (allowzero), not ONNX's "keep the input's dim"."""
    return rb.emit1("Reshape", [v, _shape_const(rb, shape)], {"allowzero": 1} if 0 in shape else {})


def _logical_shape(phys_shape, p):
    s = [0] * len(p)
    for i, a in enumerate(p):
        s[a] = phys_shape[i]
    return tuple(s)


# -- the rewrite ----------------------------------------------------------------------------------

def to_nhwc(graph: Graph, supports=None) -> Graph:
    """Rewrite eligible Conv/pool nodes (and `supports(nhwc_node)` permitting) to NHWC ops and
    propagate the layout as described in the module docstring."""
    if any(n.captures or n.op.has_subgraphs for n in graph.nodes):
        return graph  # sub-graphs read outer values by name: keep every value logical
    if not any(conv_ok(n) or conv_integer_ok(n) or (n.op.name in NHWC_OF and pool_ok(n)) for n in graph.nodes):
        return graph
    outputs = {id(v) for v in graph.outputs}
    state: dict = {}

    def visit(rb, node, ins):
        lay = state.get("lay")
        if lay is None or lay.rb is not rb:
            lay = state["lay"] = _Layouts(rb)
        pairs = [lay.get(o, n) for o, n in zip(node.inputs, ins)]
        results = _rewrite(lay, node, ins, pairs)
        if results is None:
            if not any(p is not None for _, p in pairs):
                return None
            logical = [lay.convert(v, p, None) if v is not None else None for v, p in pairs]
            return rb.add_node_like(node, logical)
        outs = []
        for old, (v, p) in zip(node.outputs, results):
            p = None if _identity(p) else p
            if p is not None:
                lay.phys[id(old)] = (v, p)
            outs.append(lay.convert(v, p, None) if id(old) in outputs else v)
        return outs

    new, _ = rebuild(graph, visit)
    return new


def _rewrite(lay, node, ins, pairs):
    """[(value, perm)] per output of `node` in some layout, or None for "run it logically"."""
    name = node.op.name if node.op.domain == "" else None
    if name in ("Conv", *NHWC_OF) and len(node.inputs[0].type.shape or ()) != 4:
        name = None  # a 1-D window (windows_1d_as_2d made the ones to run NHWC 2-D) runs as it is
    if name == "Conv" and conv_ok(node):
        return [_conv(lay, node, ins, pairs)]
    if name == "ConvInteger" and conv_integer_ok(node):
        return [_conv(lay, node, ins, pairs, integer=True)]
    if name in NHWC_OF and nhwc_ok(node):
        x = lay.convert(*pairs[0], NHWC)
        return [(lay.rb.emit1(NHWC_OF[name], [x], dict(node.attrs)), NHWC)]
    if not any(p is not None for _, p in pairs):
        return None
    if name == "Transpose":
        v, p = pairs[0]
        t = node.attrs.get("perm") or tuple(reversed(range(len(p))))
        inv_t = _inverse(t)
        return [(v, tuple(inv_t[a] for a in p))]
    if name == "Reshape":
        return _reshape(lay, node, pairs)
    if name == "Concat":
        return _concat(lay, node, pairs)
    if name in ("Pad", "Slice") and pairs[0][1] is not None:
        return _pad_or_slice(lay, node, ins, pairs)
    if _elementwise(node):
        return _elementwise_rewrite(lay, node, pairs)
    return None


def _conv(lay, node, ins, pairs, integer: bool = False):
    rb = lay.rb
    x = lay.convert(*pairs[0], NHWC)
    k, s, d, pb, pe = conv_geometry(node)
    implicit = not integer and depthwise(node)  # its kernel reads the border as zeros itself
    if (any(pb) or any(pe)) and not implicit:
        pads = [_shape_const(rb, [0, pb[0], pb[1], 0, 0, pe[0], pe[1], 0])]
        if integer and len(ins) > 2 and ins[2] is not None:  # padding is x_zero_point: it adds 0
            pads.append(rb.constant(np.asarray(ins[2].data).reshape(()), "x_zero_point"))
        x = rb.emit1("Pad", [x, *pads], {"mode": "constant"})
    attrs = {"kernel_shape": tuple(k), "strides": tuple(s), "dilations": tuple(d),
             "group": node.attrs.get("group", 1),
             "pads": (pb[0], pb[1], pe[0], pe[1]) if implicit else (0, 0, 0, 0)}
    return (rb.emit1(CONV_INTEGER_NHWC if integer else CONV_NHWC, [x, *ins[1:]], attrs), NHWC)


def _elementwise(node) -> bool:
    return (node.op.in_group(ELEMENTWISE) and node.op.pure and len(node.outputs) == 1
            and isinstance(node.outputs[0].type, dt.TensorType) and node.outputs[0].type.is_static
            and all(v is None or isinstance(v.type, dt.TensorType) and v.type.is_static
                    for v in node.inputs))


def _elementwise_rewrite(lay, node, pairs):
    out_shape = node.outputs[0].type.shape
    r = len(out_shape)
    q = next((p for (v, p), old in zip(pairs, node.inputs)
              if p is not None and old.type.shape == out_shape), None)
    if q is None or len(q) != r:
        return None
    rb = lay.rb
    new_ins = []
    for (v, p), old in zip(pairs, node.inputs):
        if v is None:
            new_ins.append(None)
            continue
        if p is not None and tuple(p) == tuple(q):
            new_ins.append(v)
            continue
        logical = lay.convert(v, p, None)
        shape = old.type.shape
        if len(shape) < r:
            full = (1,) * (r - len(shape)) + tuple(shape)
            logical = (rb.constant(logical.data.reshape(full), logical.name) if logical.is_constant
                       else _reshape_to(rb, logical, full))
        new_ins.append(lay.convert(logical, None, q))
    return [(rb.emit1(node.op, new_ins, dict(node.attrs)), q)]


def _concat(lay, node, pairs):
    q = next(p for _, p in pairs if p is not None)
    r = len(node.outputs[0].type.shape)
    if len(q) != r:
        return None
    axis = node.attrs["axis"] % r
    ins = [lay.convert(v, p, q) for v, p in pairs]
    return [(lay.rb.emit1("Concat", ins, {"axis": list(q).index(axis)}), q)]


def _pad_or_slice(lay, node, ins, pairs):
    """Pad (constant pads, every axis) or Slice (constant axes) on the physical data: the per-axis
    arguments follow the axes to their physical positions."""
    v, q = pairs[0]
    r = len(q)
    pos = {a: i for i, a in enumerate(q)}  # logical axis -> physical position
    rb = lay.rb
    if node.op.name == "Pad":
        if node.attrs.get("mode", "constant") != "constant" or (len(ins) > 3 and ins[3] is not None) \
                or ins[1].data is None:
            return None
        pads = [int(x) for x in ins[1].data.reshape(-1)]
        phys = [pads[q[i]] for i in range(r)] + [pads[r + q[i]] for i in range(r)]
        rest = [ins[2]] if len(ins) > 2 and ins[2] is not None else []
        return [(rb.emit1("Pad", [v, _shape_const(rb, phys), *rest], dict(node.attrs)), q)]
    starts = ins[1]
    axes = ins[3] if len(ins) > 3 else None
    n = starts.type.shape[0] if starts.type.shape else None
    if (axes is not None and axes.data is None) or (axes is None and not isinstance(n, int)):
        return None  # the axes (or, without them, how many) are known only at run time
    logical = ([int(a) % r for a in axes.data.reshape(-1)] if axes is not None
               else list(range(n)))
    # starts/ends/axes/steps share one index type (int32 or int64): the new axes take the starts'.
    new_axes = rb.constant(np.asarray([pos[a] for a in logical], starts.type.dtype.np), "axes")
    rest = list(ins[4:5]) if len(ins) > 4 else []
    return [(rb.emit1("Slice", [v, ins[1], ins[2], new_axes, *rest], dict(node.attrs)), q)]


def _reshape(lay, node, pairs):
    (v, p), _ = pairs[0], pairs[1]
    S = _logical_shape(v.type.shape, p)
    T = tuple(node.outputs[0].type.shape)
    if 0 in S or 0 in T:
        return None
    groups = _groups(S, T)
    if groups is None:
        return None
    phys = [a for a in p if S[a] != 1]
    order = sorted(groups, key=lambda g: min(phys.index(a) for a in g[0]))
    wanted = [a for g in order for a in g[0]]
    if wanted != phys:  # one transpose puts every group's axes together, in order
        p2 = tuple([a for a in range(len(S)) if S[a] == 1] + wanted)
        v, p = lay.convert(v, p, p2), p2
    r = tuple([a for a in range(len(T)) if T[a] == 1] + [a for g in order for a in g[1]])
    y = _reshape_to(lay.rb, v, [T[a] for a in r])
    return [(y, r)]


def _groups(S, T):
    """Minimal groups (S axes, T axes) of equal size, over the axes of size > 1; None if the
    sizes do not factor (cannot happen for a valid reshape)."""
    sa = [a for a in range(len(S)) if S[a] != 1]
    ta = [a for a in range(len(T)) if T[a] != 1]
    groups, i, j = [], 0, 0
    while i < len(sa) and j < len(ta):
        gs, gt, ps, pt = [sa[i]], [ta[j]], S[sa[i]], T[ta[j]]
        i, j = i + 1, j + 1
        while ps != pt:
            if ps < pt and i < len(sa):
                gs.append(sa[i])
                ps *= S[sa[i]]
                i += 1
            elif pt < ps and j < len(ta):
                gt.append(ta[j])
                pt *= T[ta[j]]
                j += 1
            else:
                return None
        groups.append((gs, gt))
    return groups if i == len(sa) and j == len(ta) else None


# -- 1-D windows as 2-D ones ------------------------------------------------------------------------

def _window_1d(node) -> bool:
    """A 1-D Conv or pool the NHWC kernels run (as the 2-D window over [1, L])."""
    if node.op.domain != "" or node.op.name not in NHWC_OF or not node.inputs or not static_f32(node.inputs[0], 3):
        return False  # (a node with no inputs, a Constant, is none)
    return conv_ok(node) if node.op.name == "Conv" else pool_ok(node)


def attrs_2d(attrs: dict) -> dict:
    """A 1-D window's attributes for the same window over [1, L]: height 1, no padding there."""
    a = dict(attrs)
    for key, fill in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if a.get(key):
            a[key] = (fill, *a[key])
    if a.get("pads"):
        a["pads"] = (0, a["pads"][0], 0, a["pads"][1])
    return a


def windows_1d_as_2d(graph: Graph) -> Graph:
    """Every 1-D Conv and pool (Whisper's and wav2vec's stems, temporal CNNs) as the 2-D one over
    [N, C, 1, L]: the NHWC kernels then run it (im2col + MatMul otherwise, with a Pad, a Slice per
    tap and a Concat around it). The Reshapes cost nothing: with height 1, NCHW and NHWC [N, 1, L,
    C] are the layouts of [N, C, L] and of its transpose, which to_nhwc tracks like any other."""
    if not any(_window_1d(n) for n in graph.nodes) or any(n.captures or n.op.has_subgraphs for n in graph.nodes):
        return graph

    def visit(rb, node, ins):
        if not _window_1d(node):
            return None
        n, c, length = ins[0].type.shape
        x = _reshape_to(rb, ins[0], [n, c, 1, length])
        rest = list(ins[1:])
        if node.op.name == "Conv":
            m, cg, k = rest[0].type.shape
            rest[0] = rb.constant(np.asarray(rest[0].data).reshape(m, cg, 1, k), rest[0].name)
        y = rb.emit(node.op.name, [x, *rest], attrs_2d(node.attrs))[0]
        return [_reshape_to(rb, y, list(node.outputs[0].type.shape))] + [None] * (len(node.outputs) - 1)

    return rebuild(graph, visit)[0]


def transform_graph(graph: Graph) -> Graph:
    """The CPU backend's graph transform (Backend.transform_graph)."""
    two_d = windows_1d_as_2d(graph)
    if two_d is graph:
        return to_nhwc(graph)
    # Relu(Reshape(conv)) -> Reshape(Relu(conv)): the activation then fuses into the convolution's
    # epilogue, and the Reshape meets the next window's one (clean-up merges the two)
    return run_passes(to_nhwc(two_d), [SINK])


__all__ = ["transform_graph", "to_nhwc", "windows_1d_as_2d", "as_2d", "attrs_2d", "conv_ok", "conv_integer_ok",
           "pool_ok", "conv_geometry", "depthwise", "CONV_NHWC", "CONV_INTEGER_NHWC", "MAXPOOL_NHWC", "AVGPOOL_NHWC",
           "GAP_NHWC", "DOMAIN", "NHWC"]
