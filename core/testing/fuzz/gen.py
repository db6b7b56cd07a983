"""The random graph generator: a pool of typed values and a table of op generators.

`generate(seed, index)` builds one ONNX model (deterministic for the pair) and its feeds. Each op
generator (see ops_*.py) picks compatible inputs from the pool (reusing values gives fan-out) or
makes new graph inputs / constants, picks legal attributes and states its outputs' shapes; the
finished model must pass `onnx.checker` and strict shape inference, whose shapes must equal the
generator's (a graph failing that is a generator bug and is dropped, see `validate`).

Value ranges keep comparisons well conditioned, because a fuzzer that reports rounding noise is
useless. Each value carries `mag` (a bound on |x|), `pos` (every element >= 0.25) and `exact` (the
same bits on every conforming implementation: graph inputs, constants, movement/indexing of exact
values, Abs/Neg/Relu/Floor...). Discontinuous ops (Floor, Round, Sign, comparisons, ArgMax, TopK,
casts to integers, nearest Resize) only read exact values, since one ulp of difference in a computed
input can flip their result. Log/Sqrt/Reciprocal/Div read positive values, Exp/Pow/Softplus bounded
ones, normalisations read `noisy` values (random data, never a constant along an axis, whose variance
would be 0 and the output rounding noise divided by sqrt(epsilon)).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
I64, I32, BOOL = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)
FLOATS = (F32, F16)
INTS = (I64, I32)
OPSETS = (17, 18, 19, 20, 21)
INF = float("inf")


class Val:
    __slots__ = ("name", "dtype", "shape", "mag", "pos", "exact", "noisy")

    def __init__(self, name, dtype, shape, mag=INF, pos=False, exact=False, noisy=False):
        self.name, self.dtype, self.shape = name, np.dtype(dtype), tuple(int(d) for d in shape)
        self.mag, self.pos, self.exact, self.noisy = float(mag), pos, exact, noisy

    @property
    def rank(self):
        return len(self.shape)

    @property
    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def like(self, name=None, **kw):
        dtype, shape = kw.pop("dtype", self.dtype), kw.pop("shape", self.shape)
        d = dict(mag=self.mag, pos=self.pos, exact=self.exact, noisy=self.noisy)
        d.update(kw)
        return Val(name or self.name, dtype, shape, **d)


def onnx_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class Builder:
    """One graph under construction. Op generators call pick/input/const/node."""

    def __init__(self, rng: np.random.Generator, opset: int, *, fp16: bool, sym: bool, empty: bool):
        self.rng, self.opset = rng, opset
        self.fp16, self.sym, self.empty = fp16, sym, empty
        self.nodes, self.inputs, self.inits, self.feeds = [], [], [], {}
        self.pool: list[Val] = []
        self.values: dict[str, Val] = {}  # every node output
        self.ops_used: list[str] = []
        self._n = 0

    # -- names and random helpers --
    def fresh(self, prefix="v"):
        self._n += 1
        return f"{prefix}{self._n}"

    def chance(self, p) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def randint(self, lo, hi):  # inclusive
        return int(self.rng.integers(lo, hi + 1))

    def float_dtype(self):
        return F16 if self.fp16 and self.chance(0.25) else F32

    def shape(self, rank=None, lo=1, hi=5, min_rank=0, max_rank=4, empty_ok=True):
        rank = self.randint(min_rank, max_rank) if rank is None else rank
        dims = [self.randint(lo, hi) for _ in range(rank)]
        if dims and self.chance(0.2):
            dims[-1] = self.randint(6, 40)  # past a vector width: code generators' main loops and tails
        if empty_ok and self.empty and dims and self.chance(0.25):
            dims[self.randint(0, rank - 1)] = 0
        return tuple(dims)

    # -- making values --
    def data(self, dtype, shape, kind="normal"):
        r, dtype = self.rng, np.dtype(dtype)
        if dtype == BOOL:
            return r.random(shape) < 0.5
        if dtype.kind in "iu":
            lo, hi = {"pos": (1, 6), "small": (-2, 3)}.get(kind, (-5, 6))
            return r.integers(lo, hi, size=shape).astype(dtype)
        if kind == "pos":
            a = r.uniform(0.5, 3.0, shape)
        elif kind == "unit":
            a = r.uniform(-0.9, 0.9, shape)
        elif kind == "small":
            a = r.uniform(-1.0, 1.0, shape)
        else:
            a = r.standard_normal(shape) * 1.5
        return np.asarray(a).astype(dtype)

    def _props(self, a, noisy):
        a64 = a.astype(np.float64)
        mag = float(np.abs(a64).max()) if a.size else 0.0
        pos = bool(a.size == 0 or a64.min() >= 0.25)
        return dict(mag=mag, pos=pos, exact=True, noisy=noisy and a.dtype.kind == "f")

    def input(self, dtype, shape, kind="normal", pool=True) -> Val:
        """A new graph input fed with random data of `kind` (normal, pos, unit, small)."""
        name = self.fresh("in")
        a = self.data(dtype, shape, kind)
        self.inputs.append((name, a.dtype, a.shape))
        self.feeds[name] = a
        v = Val(name, a.dtype, a.shape, **self._props(a, kind == "normal"))
        if pool:
            self.pool.append(v)
        return v

    def const(self, array, as_input=False, name=None) -> Val:
        """A constant (initializer) or, with as_input, a graph input fed with this exact array."""
        a = np.asarray(array)
        name = name or self.fresh("c")
        if as_input:
            self.inputs.append((name, a.dtype, a.shape))
            self.feeds[name] = a
        else:
            self.inits.append(numpy_helper.from_array(a, name))
        return Val(name, a.dtype, a.shape, **self._props(a, False))

    def ints(self, values, dtype=I64, runtime_p=0.15) -> Val:
        """An int index/shape tensor: mostly a constant, sometimes a run-time input."""
        return self.const(np.asarray(values, dtype=dtype), as_input=self.chance(runtime_p))

    def node(self, op, inputs, outs, pool=True, **attrs) -> list[Val]:
        """Add a node; `outs` are Vals whose names are replaced by fresh ones. '' skips an input."""
        names = [v if isinstance(v, str) else v.name for v in inputs]
        res = []
        for o in outs:
            res.append(o.like(self.fresh()))
            self.values[res[-1].name] = res[-1]
        self.nodes.append(helper.make_node(op, names, [r.name for r in res], name=self.fresh("n"),
                                           **{k: v for k, v in attrs.items() if v is not None}))
        self.ops_used.append(op)
        if pool:
            self.pool.extend(r for r in res if r.dtype != BOOL or self.chance(0.7))
        return res

    # -- picking inputs --
    def pick(self, dtypes=FLOATS, *, min_rank=0, max_rank=4, nonempty=False, exact=False, pos=False,
             bound=None, noisy=False, max_numel=4096, kind=None, fresh_p=0.3, pred=None,
             new_shape=None) -> Val:
        """A pool value matching the constraints, or a new graph input that does."""
        dtypes = tuple(np.dtype(d) for d in dtypes)

        def ok(v):
            return (v.dtype in dtypes and min_rank <= v.rank <= max_rank and v.numel <= max_numel
                    and (v.numel > 0 or not nonempty) and (v.exact or not exact) and (v.pos or not pos)
                    and (bound is None or v.mag <= bound) and (v.noisy or not noisy)
                    and (pred is None or pred(v)))
        cands = [v for v in self.pool if ok(v)]
        if cands and not self.chance(fresh_p):
            return self.choice(cands)
        dtype = self.choice([d for d in dtypes if d != F16 or self.fp16] or list(dtypes))
        for _ in range(20):
            shp = new_shape() if new_shape else self.shape(min_rank=min_rank, max_rank=max_rank,
                                                          empty_ok=not nonempty)
            if min_rank <= len(shp) <= max_rank and (not nonempty or 0 not in shp):
                break
        kind = kind or ("pos" if pos else "unit" if bound is not None and bound < 2 else "normal")
        return self.input(dtype, shp, kind)

    def positive(self, v: Val) -> Val:
        """A positive value derived from v: Abs(v) + 0.5 (v itself when already positive)."""
        if v.pos:
            return v
        (a,) = self.node("Abs", [v], [v.like(pos=False)], pool=False)
        c = self.const(np.asarray(0.5, v.dtype))
        (p,) = self.node("Add", [a, c], [v.like(mag=v.mag + 0.5, pos=True, noisy=False)])
        return p

    def bounded(self, v: Val, lim: float) -> Val:
        """v when |v| <= lim, else Tanh(v) (|.| < 1)."""
        if v.mag <= lim:
            return v
        (t,) = self.node("Tanh", [v], [v.like(mag=1.0, pos=False, exact=False)])
        return t

    # -- the finished model --
    def model(self, outputs: list[Val], sym_dims: dict | None = None) -> onnx.ModelProto:
        sym_dims = sym_dims or {}
        ins = []
        for name, dt, shp in self.inputs:
            dims = [sym_dims.get((name, i), d) for i, d in enumerate(shp)]
            ins.append(helper.make_tensor_value_info(name, onnx_type(dt), dims))
        # symbolic inputs: output dims left unknown (rank kept), for the importer to infer
        outs = [helper.make_tensor_value_info(v.name, onnx_type(v.dtype),
                                              [None] * v.rank if sym_dims else list(v.shape))
                for v in outputs]
        g = helper.make_graph(self.nodes, "fuzz", ins, outs, self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=min(onnx.IR_VERSION, 10))


def out(dtype, shape, mag=INF, pos=False, exact=False, noisy=False) -> Val:
    """An output description for Builder.node (its name is assigned there)."""
    return Val("", dtype, shape, mag=mag, pos=pos, exact=exact, noisy=noisy)


OPS: dict = {}  # op name -> (generator function, minimum opset)


def gen(*names, opset=1):
    """Register an op generator `fn(b, op) -> bool` (False: could not apply here) for these ops."""
    def deco(fn):
        for n in names:
            OPS[n] = (fn, opset)
        return fn
    return deco


def broadcast(*shapes):
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


def validate(model: onnx.ModelProto, expected: dict) -> str | None:
    """None when onnx accepts the model and infers the generator's shapes, else why not."""
    try:
        onnx.checker.check_model(model, full_check=False)
        inf = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                                data_prop=True)
    except Exception as e:  # any onnx refusal means the generator made an ill-formed graph
        return f"onnx rejects the model: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    known = {vi.name: vi for vi in list(inf.graph.value_info) + list(inf.graph.output)}
    for name, (dtype, shape) in expected.items():
        vi = known.get(name)
        if vi is None or not vi.type.tensor_type.HasField("shape"):
            continue
        tt = vi.type.tensor_type
        if tt.elem_type and tt.elem_type != onnx_type(dtype):
            return f"{name}: onnx infers element type {tt.elem_type}, generator says {dtype}"
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if len(dims) != len(shape) or any(a is not None and a != b for a, b in zip(dims, shape)):
            return f"{name}: onnx infers shape {dims}, generator says {list(shape)}"
    return None


__all__ = ["Builder", "Val", "OPS", "gen", "out", "broadcast", "validate", "F32", "F16", "I64", "I32", "BOOL", "FLOATS",
           "INTS", "OPSETS", "TensorProto"]
