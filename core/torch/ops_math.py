"""ATen rules: elementwise arithmetic, comparisons, activations, reductions, softmax, matmul.

Arithmetic computes in the dtype torch recorded for the result (its type promotion, scalars
included); comparisons compute in the promoted type of their operands (`torch.result_type`).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import dtypes as dt
from .table import Unsupported, aten

# -- elementwise -------------------------------------------------------------------------------

_UNARY = {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos",
          "tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu", "erf": "Erf", "reciprocal": "Reciprocal",
          "floor": "Floor", "ceil": "Ceil", "round": "Round", "sign": "Sign", "hardswish": "HardSwish",
          "logical_not": "Not", "bitwise_not": "Not", "isnan": "IsNaN", "tan": "Tan", "atan": "Atan"}


def _unary(onnx_op):
    def rule(cx, a):
        x = cx.v(a["self"])
        if onnx_op == "Not" and x.type.dtype != dt.bool_:
            raise Unsupported("bitwise_not of integers has no glow form")
        if onnx_op in ("Not", "IsNaN", "Sign", "Abs", "Neg"):
            return cx.add(onnx_op, [x])
        return cx.add(onnx_op, [cx.operand(a["self"], cx.out_dtype)])

    return rule


for _name, _op in _UNARY.items():
    aten(f"{_name}.default")(_unary(_op))


@aten("rsqrt.default")
def _rsqrt(cx, a):
    return cx.add("Reciprocal", [cx.add("Sqrt", [cx.operand(a["self"], cx.out_dtype)])])


@aten("silu.default")
def _silu(cx, a):
    x = cx.v(a["self"])
    return cx.add("Mul", [x, cx.add("Sigmoid", [x])])


@aten("gelu.default")
def _gelu(cx, a):
    return cx.add("Gelu", [cx.v(a["self"])], approximate=a["approximate"])


@aten("leaky_relu.default")
def _leaky_relu(cx, a):
    return cx.add("LeakyRelu", [cx.v(a["self"])], alpha=float(a["negative_slope"]))


@aten("elu.default")
def _elu(cx, a):
    if a["scale"] != 1 or a["input_scale"] != 1:
        raise Unsupported("elu with scale or input_scale other than 1")
    return cx.add("Elu", [cx.v(a["self"])], alpha=float(a["alpha"]))


@aten("hardsigmoid.default")
def _hardsigmoid(cx, a):
    return cx.add("HardSigmoid", [cx.v(a["self"])], alpha=1 / 6, beta=0.5)


@aten("softplus.default")
def _softplus(cx, a):
    if a["beta"] != 1:
        raise Unsupported("softplus with beta other than 1")
    # torch returns x itself above `threshold` (20); log1p(exp(x)) equals x there to float precision
    return cx.add("Softplus", [cx.v(a["self"])])


@aten("hardtanh.default", "clamp.default", "clamp_min.default", "clamp_max.default")
def _clamp(cx, a):
    lo = a.get("min_val", a.get("min"))
    hi = a.get("max_val", a.get("max"))
    d = cx.out_dtype
    lo_v = None if lo is None else cx.operand(lo, d)
    hi_v = None if hi is None else cx.operand(hi, d)
    return cx.add("Clip", [cx.operand(a["self"], d), lo_v, hi_v])


@aten("clamp.Tensor")
def _clamp_tensor(cx, a):
    d = cx.out_dtype
    x = cx.operand(a["self"], d)
    if a["min"] is not None:
        x = cx.add("Max", [x, cx.operand(a["min"], d)])
    if a["max"] is not None:
        x = cx.add("Min", [x, cx.operand(a["max"], d)])
    return x


def _scaled(cx, x, alpha, d):
    return x if alpha == 1 else cx.add("Mul", [x, cx.const(alpha, d)])


def _binary(onnx_op, swap=False):
    def rule(cx, a):
        d = cx.out_dtype
        other = a.get("other", a.get("exponent"))
        x, y = cx.operand(a["self"], d), cx.operand(other, d)
        if "alpha" in a and a["alpha"] is not None:
            y = _scaled(cx, y, a["alpha"], d)
        return cx.add(onnx_op, [y, x] if swap else [x, y])

    return rule


for _keys, _op, _swap in (
        (("add.Tensor", "add.Scalar"), "Add", False), (("sub.Tensor", "sub.Scalar"), "Sub", False),
        (("rsub.Scalar", "rsub.Tensor"), "Sub", True), (("mul.Tensor", "mul.Scalar"), "Mul", False),
        (("maximum.default", "max.other"), "Max", False), (("minimum.default", "min.other"), "Min", False),
        (("pow.Tensor_Tensor",), "Pow", False)):
    aten(*_keys)(_binary(_op, _swap))


@aten("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode", "floor_divide.default")
def _div(cx, a):
    mode = a.get("rounding_mode", "floor" if "floor_divide" in str(cx.node.target) else None)
    d = cx.out_dtype
    if mode is None or d.is_float:
        q = cx.add("Div", [cx.operand(a["self"], d), cx.operand(a["other"], d)])
        if mode == "floor":
            return cx.add("Floor", [q])
        return q if mode is None else cx.add("Cast", [cx.add("Cast", [q], to=dt.int64)], to=d)
    if mode == "trunc":
        return cx.add("Div", [cx.operand(a["self"], d), cx.operand(a["other"], d)])
    # integer floor division: through float64, exact for the sizes and indices models divide
    q = cx.add("Floor", [cx.add("Div", [cx.operand(a["self"], dt.float64), cx.operand(a["other"], dt.float64)])])
    return cx.add("Cast", [q], to=d)


@aten("pow.Tensor_Scalar")
def _pow(cx, a):
    d = cx.out_dtype
    x, e = cx.operand(a["self"], d), a["exponent"]
    if e == 2:
        return cx.add("Mul", [x, x])
    if e == 1:
        return cx.add("Identity", [x])
    if e == 0.5:
        return cx.add("Sqrt", [x])
    return cx.add("Pow", [x, cx.operand(e, d)])


@aten("remainder.Tensor", "remainder.Scalar")
def _remainder(cx, a):
    d = cx.out_dtype
    if d.is_float:
        raise Unsupported("float remainder has no exact glow form")
    return cx.add("Mod", [cx.operand(a["self"], d), cx.operand(a["other"], d)], fmod=0)


def _compute_dtype(cx, x, y):
    def m(v):
        got = cx.meta(v)
        return got if isinstance(got, (torch.Tensor, bool, int, float)) else int(got)

    from .importer import glow_dtype

    return glow_dtype(torch.result_type(m(x), m(y)))


_COMPARE = {"eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
            "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
            "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}


def _compare(name, onnx_op):
    def rule(cx, a):
        logical = onnx_op in ("And", "Or", "Xor")
        d = dt.bool_ if logical else _compute_dtype(cx, a["self"], a["other"])
        if name.startswith("bitwise") and cx.out_dtype != dt.bool_:
            raise Unsupported(f"{name} of integers has no glow form")
        out = cx.add(onnx_op, [cx.operand(a["self"], d), cx.operand(a["other"], d)])
        return cx.add("Not", [out]) if name == "ne" else out

    return rule


for _name, _op in _COMPARE.items():
    keys = [f"{_name}.Tensor"] + ([f"{_name}.Scalar"] if not _name.startswith("logical") else [])
    if _name.startswith("logical"):
        keys = [f"{_name}.default"]
    aten(*keys)(_compare(_name, _op))


@aten("where.self", "where.ScalarOther", "where.ScalarSelf", "where.Scalar")
def _where(cx, a):
    d = cx.out_dtype
    cond = cx.operand(a["condition"], dt.bool_)
    return cx.add("Where", [cond, cx.operand(a["self"], d), cx.operand(a["other"], d)])


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(cx, a):
    d = cx.out_dtype
    return cx.add("Where", [cx.operand(a["mask"], dt.bool_), cx.operand(a["value"], d), cx.operand(a["self"], d)])


# -- reductions ----------------------------------------------------------------------------------

def _axes(cx, x, dims):
    r = cx.rank(x)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(r))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [d % r if r else 0 for d in dims]


def _reduce(onnx_op):
    def rule(cx, a):
        d = cx.out_dtype
        x = cx.operand(a["self"], d)
        dims = a.get("dim")
        axes = _axes(cx, a["self"], dims)
        if not axes:  # a 0-d tensor: nothing to reduce
            return cx.add("Identity", [x])
        return cx.add(onnx_op, [x, cx.const(np.array(axes, np.int64))], keepdims=int(bool(a.get("keepdim", False))))

    return rule


aten("sum.dim_IntList", "sum.default")(_reduce("ReduceSum"))
aten("mean.dim", "mean.default")(_reduce("ReduceMean"))
aten("amax.default")(_reduce("ReduceMax"))
aten("amin.default")(_reduce("ReduceMin"))
aten("prod.dim_int", "prod.default")(_reduce("ReduceProd"))


@aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def _any_all(cx, a):
    x = cx.operand(a["self"], dt.int32)
    axes = _axes(cx, a["self"], a.get("dim"))
    op = "ReduceMax" if "any" in str(cx.node.target) else "ReduceMin"
    r = cx.add(op, [x, cx.const(np.array(axes, np.int64))], keepdims=int(bool(a.get("keepdim", False))))
    return cx.add("Cast", [r], to=dt.bool_)


@aten("max.dim", "min.dim")
def _max_dim(cx, a):
    x = cx.v(a["self"])
    axis = a["dim"] % max(cx.rank(a["self"]), 1)
    keep = int(bool(a["keepdim"]))
    big = "max" in str(cx.node.target)
    vals = cx.add("ReduceMax" if big else "ReduceMin", [x, cx.const(np.array([axis], np.int64))], keepdims=keep)
    idx = cx.add("ArgMax" if big else "ArgMin", [x], axis=axis, keepdims=keep)
    return vals, idx


@aten("argmax.default", "argmin.default")
def _argmax(cx, a):
    x = cx.v(a["self"])
    op = "ArgMax" if "argmax" in str(cx.node.target) else "ArgMin"
    if a["dim"] is None:
        x, axis = cx.add("Reshape", [x, cx.const(np.array([-1], np.int64))]), 0
        return cx.add(op, [x], axis=0, keepdims=0)
    axis = a["dim"] % max(cx.rank(a["self"]), 1)
    return cx.add(op, [x], axis=axis, keepdims=int(bool(a["keepdim"])))


@aten("cumsum.default")
def _cumsum(cx, a):
    d = cx.out_dtype
    axis = a["dim"] % max(cx.rank(a["self"]), 1)
    return cx.add("CumSum", [cx.operand(a["self"], d), cx.const(np.array(axis, np.int64))])


@aten("var.correction", "var.dim")
def _var(cx, a):
    d = cx.out_dtype
    x = cx.operand(a["self"], d)
    axes = _axes(cx, a["self"], a.get("dim"))
    corr = a.get("correction")
    corr = (1 if a.get("unbiased", True) else 0) if corr is None else corr
    ax = cx.const(np.array(axes, np.int64))
    mean = cx.add("ReduceMean", [x, ax], keepdims=1)
    diff = cx.add("Sub", [x, mean])
    ss = cx.add("ReduceSum", [cx.add("Mul", [diff, diff]), ax], keepdims=int(bool(a.get("keepdim", False))))
    shape = cx.shape(a["self"])
    n = 1
    for i in axes:
        if not isinstance(shape[i], int):
            raise Unsupported("var over a dimension of symbolic size")
        n *= shape[i]
    return cx.add("Div", [ss, cx.const(max(n - corr, 0), d)])


# -- softmax -------------------------------------------------------------------------------------

@aten("_softmax.default", "softmax.int", "_log_softmax.default", "log_softmax.int")
def _softmax(cx, a):
    d = cx.out_dtype
    x = cx.operand(a["self"], d)
    op = "LogSoftmax" if "log_softmax" in str(cx.node.target) else "Softmax"
    return cx.add(op, [x], axis=a["dim"] % max(cx.rank(a["self"]), 1))


# -- matrix products -----------------------------------------------------------------------------

@aten("mm.default", "bmm.default", "matmul.default")
def _matmul(cx, a):
    d = cx.out_dtype
    other = a["other"] if "other" in a else a["mat2"]  # matmul's name, mm's and bmm's
    return cx.add("MatMul", [cx.operand(a["self"], d), cx.operand(other, d)])


@aten("addmm.default")
def _addmm(cx, a):
    d = cx.out_dtype
    beta, alpha = float(a["beta"]), float(a["alpha"])
    return cx.add("Gemm", [cx.operand(a["mat1"], d), cx.operand(a["mat2"], d), cx.operand(a["self"], d)],
                  alpha=alpha, beta=beta)


@aten("baddbmm.default")
def _baddbmm(cx, a):
    d = cx.out_dtype
    prod = cx.add("MatMul", [cx.operand(a["batch1"], d), cx.operand(a["batch2"], d)])
    prod = _scaled(cx, prod, a["alpha"], d)
    return cx.add("Add", [_scaled(cx, cx.operand(a["self"], d), a["beta"], d), prod])


@aten("linear.default")
def _linear(cx, a):
    d = cx.out_dtype
    w = cx.add("Transpose", [cx.operand(a["weight"], d)], perm=(1, 0))
    y = cx.add("MatMul", [cx.operand(a["input"], d), w])
    return y if a["bias"] is None else cx.add("Add", [y, cx.operand(a["bias"], d)])


# -- math used by size computations -----------------------------------------------------------

@aten("operator.add", "operator.sub", "operator.mul", "operator.floordiv", "operator.mod")
def _sym_arith(cx, a):
    # SymInt arithmetic (FX records Python operators on sizes): 1-element int64 values
    name = cx.node.target.__name__
    x, y = (cx.sizes([a[0]])[0], cx.sizes([a[1]])[0])
    vals = [v if not isinstance(v, int) else cx.const(np.array([v], np.int64)) for v in (x, y)]
    op = {"add": "Add", "sub": "Sub", "mul": "Mul", "floordiv": "Div", "mod": "Mod"}[name]
    return cx.add(op, vals)

