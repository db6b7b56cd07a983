"""FX graph of ATen ops -> glow `Graph` (the PyTorch frontend's one importer).

* placeholders become graph inputs whose dims are ints or, for SymInt sizes, the symbol's name
  ("s0"): glow's symbolic dims, so one compile serves every batch or sequence length;
* placeholders named in `constants` (parameters, buffers) become constants holding a NumPy view
  of the tensor's memory: no copy where NumPy has the dtype (bfloat16 is viewed through
  ml_dtypes);
* SymInt values the graph computes (`sym_size`, size arithmetic) become 1-element int64 values
  derived from the inputs' shapes (Shape -> Mul ...), as an ONNX exporter would spell them;
* every call goes through the rule table (glow.torch.table, rules in ops_*.py) and its result is
  cast to the dtype torch recorded for it (`node.meta["val"]`), so torch's type promotion holds.

`Importer.check(node)` is the support check the dynamo partitioner asks: it imports that one call
alone, so "supported" means exactly "this rule maps these arguments".
"""

from __future__ import annotations

import numpy as np
import torch

from .. import dtypes as dt
from ..errors import GlowError, UnsupportedOpError
from ..graph import Graph, GraphBuilder, Value
from . import ops_math, ops_nn, ops_shape  # noqa: F401  (register their rules)
from .table import ATEN, Unsupported, bind, target_key

_DTYPES = {torch.float32: dt.float32, torch.float64: dt.float64, torch.float16: dt.float16,
           torch.bfloat16: dt.bfloat16, torch.int8: dt.int8, torch.int16: dt.int16, torch.int32: dt.int32,
           torch.int64: dt.int64, torch.uint8: dt.uint8, torch.bool: dt.bool_}
_TORCH = {v: k for k, v in _DTYPES.items()}


def glow_dtype(t) -> dt.DType:
    try:
        return _DTYPES[t]
    except KeyError:
        raise Unsupported(f"dtype {t} has no glow element type") from None


def torch_dtype(d: dt.DType):
    return _TORCH[d]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor's memory (bfloat16 through ml_dtypes); copies only what is
    not a plain strided CPU tensor."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(dt.bfloat16.np)
    glow_dtype(t.dtype)
    return t.numpy()


def is_sym(x) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))


def dim_of(d):
    """A torch size as a glow dim: the int, or the symbol's expression as a name."""
    if isinstance(d, int):
        return d
    hint = _concrete(d)
    return hint if hint is not None else str(d.node.expr)


def _concrete(d):
    try:
        from torch.fx.experimental.symbolic_shapes import is_concrete_int

        return int(d) if is_concrete_int(d) else None
    except Exception:  # a SymInt with no hint
        return None


def meta_val(x):
    return x.meta.get("val", x.meta.get("example_value")) if isinstance(x, torch.fx.Node) else x


class Importer:
    """Imports one FX GraphModule. `constants`: placeholder name -> tensor to bake in."""

    def __init__(self, gm: torch.fx.GraphModule, name: str = "torch", constants: dict | None = None):
        self.gm = gm
        self.b = GraphBuilder(name)
        self.constants = constants or {}
        self.env: dict = {}
        self.node: torch.fx.Node | None = None
        self.symbols: dict[str, Value] = {}  # symbol name -> 1-element int64 value
        self._shape_sources: dict[str, tuple] = {}  # symbol name -> (input value, axis)
        #: per placeholder, how a call's argument feeds the graph: ("input", name), ("const",),
        #: ("sym", name) for a SymInt argument fed as a 1-element int64 input, or ("derived",)
        self.plan: list[tuple] = []

    # -- the walk ----------------------------------------------------------------------------------
    def run(self) -> Graph:
        places = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for n in places:  # tensors first: SymInt placeholders are derived from their shapes
            self._placeholder(n)
        for n in places:
            if n not in self.env:
                self._sym_placeholder(n)
        self.plan = [self._plan_of(n) for n in places]
        outputs = []
        for n in self.gm.graph.nodes:
            if n.op == "call_function":
                self.env[n] = self.call(n)
            elif n.op == "get_attr":
                self.env[n] = self.b.constant(to_numpy(_attr(self.gm, n.target)), n.target.replace(".", "_"))
            elif n.op == "output":
                self.node = None  # errors from here on are the graph's, not the last call's
                outputs = self._outputs(n.args[0])
            elif n.op != "placeholder":
                raise Unsupported(f"FX node '{n.name}': {n.op} (a submodule call) cannot be imported")
        return self.b.build(outputs)

    def call(self, n: torch.fx.Node):
        key = target_key(n.target)
        rule = ATEN.get(key)
        if rule is None:
            raise Unsupported(f"no glow rule for {_op_name(key)}")
        self.node = n
        val = meta_val(n)
        if isinstance(val, (int, float, bool)) and not isinstance(val, torch.Tensor):
            return val  # a size that tracing already knows
        out = rule(self, bind(n.target, n.args, n.kwargs))
        return self._as_recorded(out, val)

    def _as_recorded(self, out, val):
        """Cast each tensor result to the dtype torch recorded for it."""
        if isinstance(out, Value) and isinstance(val, torch.Tensor):
            want = glow_dtype(val.dtype)
            return out if out.type.dtype == want else self.add("Cast", [out], to=want)
        if isinstance(out, tuple) and isinstance(val, (tuple, list)):
            return tuple(self._as_recorded(o, v) if o is not None else None for o, v in zip(out, val))
        return out

    # -- placeholders ------------------------------------------------------------------------------
    def _placeholder(self, n):
        if n.name in self.constants:
            self.env[n] = self.b.constant(np.ascontiguousarray(to_numpy(self.constants[n.name])), n.name)
            return
        val = meta_val(n)
        if isinstance(val, torch.Tensor):
            v = self.b.input(n.name, dt.TensorType(tuple(dim_of(d) for d in val.shape), glow_dtype(val.dtype)))
            for axis, d in enumerate(val.shape):
                if is_sym(d) and _concrete(d) is None and d.node.expr.is_Symbol:
                    self._shape_sources.setdefault(str(d.node.expr), (v, axis))
            self.env[n] = v
        elif val is None:
            raise Unsupported(f"placeholder '{n.name}' carries no example value")

    def _sym_placeholder(self, n):
        val = meta_val(n)
        if isinstance(val, (int, float, bool)):
            self.env[n] = val
            return
        if not isinstance(val, torch.SymInt):
            raise Unsupported(f"placeholder '{n.name}' is a {type(val).__name__}, not a tensor or size")
        try:
            self.env[n] = self.sym_value(val)
        except Unsupported:  # not a function of the input shapes: fed at run time
            self.env[n] = self.b.input(n.name, dt.tensor((1,), dt.int64))

    def _plan_of(self, n):
        if n.name in self.constants:
            return ("const",)
        v = self.env[n]
        if isinstance(v, Value) and v.kind == "input":
            return ("sym", n.name) if isinstance(meta_val(n), torch.SymInt) else ("input", n.name)
        return ("derived",)

    def sym_value(self, s) -> Value:
        """A SymInt as a 1-element int64 value computed from the input shapes."""
        c = _concrete(s)
        if c is not None:
            return self.const(np.array([c], np.int64))
        return self._expr(s.node.expr)

    def _expr(self, e) -> Value:
        import sympy

        if e.is_Integer:
            return self.const(np.array([int(e)], np.int64))
        if e.is_Symbol:
            name = str(e)
            if name not in self.symbols:
                if name not in self._shape_sources:
                    raise Unsupported(f"size {name} is not a dimension of any input")
                src, axis = self._shape_sources[name]
                self.symbols[name] = self.add("Shape", [src], start=axis, end=axis + 1)
            return self.symbols[name]
        parts = [self._expr(a) for a in e.args]
        op = {sympy.Add: "Add", sympy.Mul: "Mul"}.get(type(e))
        if op is None and type(e).__name__ == "FloorDiv":
            op = "Div"  # sizes are non-negative: truncation is floor
        if op is None:
            raise Unsupported(f"size expression {e} has no glow form")
        acc = parts[0]
        for p in parts[1:]:
            acc = self.add(op, [acc, p])
        return acc

    def _outputs(self, args) -> list[Value]:
        flat = list(args) if isinstance(args, (tuple, list)) else [args]
        outs, seen = [], set()
        for i, a in enumerate(flat):
            v = self.env.get(a) if isinstance(a, torch.fx.Node) else None
            if not isinstance(v, Value) or not isinstance(meta_val(a), torch.Tensor):
                raise Unsupported(f"output {i} ({a}) is not a tensor")
            if v.kind != "node" or id(v) in seen:  # an input, constant or repeat gets its own name
                v = self.add("Identity", [v])
            seen.add(id(v))
            outs.append(v)
        return outs

    # -- what rules call ---------------------------------------------------------------------------
    def add(self, op: str, inputs, **attrs) -> Value:
        return self.b.add1(op, inputs, attrs or None, name=self.node.name if self.node is not None else None)

    def add_n(self, op: str, inputs, n: int, **attrs) -> list[Value]:
        return self.b.add(op, inputs, attrs or None, num_outputs=n,
                          name=self.node.name if self.node is not None else None)

    def const(self, arr, dtype: dt.DType | None = None) -> Value:
        return self.b.constant(np.asarray(arr, None if dtype is None else dtype.np), "c")

    def v(self, x) -> Value:
        """The glow value of a tensor argument."""
        if isinstance(x, torch.fx.Node):
            got = self.env[x]
            if isinstance(got, Value):
                return got
        raise Unsupported(f"argument {x!r} is not a tensor")

    def operand(self, x, dtype: dt.DType) -> Value:
        """A tensor argument cast to `dtype`, or a Python number as a 0-d constant of `dtype`."""
        if isinstance(x, torch.fx.Node) and isinstance(self.env.get(x), Value):
            v = self.env[x]
            return v if v.type.dtype == dtype else self.add("Cast", [v], to=dtype)
        if isinstance(x, torch.fx.Node):  # a SymInt/SymFloat used as a number
            return self.add("Cast", [self.add("Squeeze", [self.env[x]])], to=dtype) \
                if isinstance(self.env[x], Value) else self.const(self.env[x], dtype)
        if isinstance(x, (bool, int, float)):
            return self.const(x, dtype)
        raise Unsupported(f"argument {x!r} is not a tensor or a number")

    def meta(self, x):
        return meta_val(x)

    def shape(self, x) -> tuple:
        """The torch-recorded shape of a tensor argument (ints, SymInts)."""
        return tuple(meta_val(x).shape)

    def rank(self, x) -> int:
        return meta_val(x).dim()

    @property
    def out_dtype(self) -> dt.DType:
        val = meta_val(self.node)
        val = val[0] if isinstance(val, (tuple, list)) else val
        return glow_dtype(val.dtype)

    def sizes(self, seq) -> list:
        """A size list: each entry an int, or (for a size only known at run time) a 1-element
        int64 value."""
        out = []
        for s in seq:
            if isinstance(s, torch.fx.Node):
                got = self.env[s]
                out.append(got if isinstance(got, Value) else int(got))
            elif is_sym(s):
                out.append(self.sym_value(s))
            else:
                out.append(int(s))
        return out

    def size_value(self, seq) -> Value:
        """A size list as a 1-D int64 value: a constant if every entry is known."""
        parts = self.sizes(seq)
        if all(isinstance(p, int) for p in parts):
            return self.const(np.array(parts, np.int64))
        vals = [p if isinstance(p, Value) else self.const(np.array([p], np.int64)) for p in parts]
        return self.add("Concat", vals, axis=0)

    def scalar_int(self, x) -> int | Value:
        """An int argument: the int, or a 0-d int64 value for a size known at run time."""
        got = self.sizes([x])[0]
        return got if isinstance(got, int) else self.add("Squeeze", [got])

    # -- the partitioner's question ------------------------------------------------------------
    @staticmethod
    def check(n: torch.fx.Node) -> str | None:
        """None if glow imports this call, else why not (one line)."""
        if n.op != "call_function":
            return f"{n.op} nodes are not imported"
        key = target_key(n.target)
        if ATEN.get(key) is None:
            return f"no glow rule for {_op_name(key)}"
        if key == "operator.getitem":  # a piece of a tuple result: as its producer
            src = n.args[0]
            return Importer.check(src) if isinstance(src, torch.fx.Node) else "getitem of a Python value"
        val = meta_val(n)
        if val is None:
            return "no example value recorded"
        if not isinstance(val, torch.Tensor) and not (isinstance(val, (tuple, list)) and val
                                                      and isinstance(val[0], torch.Tensor)):
            return "computes a size or a Python value (left to torch)"
        vals = [meta_val(a) for a in n.all_input_nodes] + (list(val) if isinstance(val, (tuple, list)) else [val])
        devices = {v.device.type for v in vals if isinstance(v, torch.Tensor)}
        if devices - {"cpu"}:  # glow takes host memory: a CUDA model's tensors stay with torch
            return f"tensors on {', '.join(sorted(devices - {'cpu'}))} (glow.torch runs CPU tensors)"
        probe = Importer(None, "probe")
        try:
            for arg in n.all_input_nodes:
                a = meta_val(arg)
                if isinstance(a, torch.Tensor):
                    probe.env[arg] = probe.b.input(arg.name, dt.TensorType(
                        tuple(dim_of(d) for d in a.shape), glow_dtype(a.dtype)))
                elif isinstance(a, torch.SymInt) and _concrete(a) is None:
                    probe.env[arg] = probe.b.input(arg.name, dt.tensor((1,), dt.int64))
                elif isinstance(a, (tuple, list)):
                    return "reads a tuple result (left to torch)"
                else:
                    probe.env[arg] = a if not is_sym(a) else _concrete(a)
            probe.call(n)
        except Unsupported as e:
            return str(e)
        except GlowError as e:
            return f"glow rejects it: {e}"
        except Exception as e:  # a rule's bug must not fail the user's model: it stays eager
            return f"glow bug in the rule for {_op_name(key)}: {type(e).__name__}: {e}"
        return None


def _attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, torch.Tensor):
        raise Unsupported(f"attribute '{target}' is a {type(obj).__name__}, not a tensor")
    return obj


def _op_name(key: str) -> str:
    return key if key.startswith("operator.") or "." not in key else f"aten.{key}"


def import_graph_module(gm, name: str = "torch", constants: dict | None = None) -> tuple[Graph, list]:
    """`gm` as a glow Graph and its input plan (Importer.plan). Anything glow cannot import is an
    UnsupportedOpError naming the op and the FX node."""
    imp = Importer(gm, name, constants)
    try:
        graph = imp.run()
    except Unsupported as e:
        where = f" at node '{imp.node.name}'" if imp.node is not None else ""
        key = target_key(imp.node.target) if imp.node is not None else "graph"
        raise UnsupportedOpError(f"{e}{where}", {_op_name(key): 1}) from None
    except GlowError as e:  # a rule built a node glow's type checks refuse: say which ATen node
        if imp.node is None or isinstance(e, UnsupportedOpError):
            raise
        raise type(e)(f"node '{imp.node.name}' ({_op_name(target_key(imp.node.target))}): {e}") from None
    return graph, imp.plan
