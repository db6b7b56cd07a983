"""Lowering rules for activation functions (ops/activation.py): short formulas over compare,
select, exp/log and the stable building blocks of rules_elementwise (expm1, log1p, sigmoid).

Multi-step formulas run in float32 for 16-bit inputs (`wide_float`), as the references do.
Where a branch is selected with Where, the unselected branch may overflow harmlessly.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ._build import ints, scalar
from .registry import lowering
from .rules_elementwise import absval, expm1, log1p, op1, sigmoid, wide_float


def _less0(rb, x):
    return op1(rb, "Less", x, scalar(rb, 0, x))


@lowering("LeakyRelu")
@wide_float
def lower_leaky_relu(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Where", _less0(rb, x), op1(rb, "Mul", x, scalar(rb, node.attrs["alpha"], x)), x)]


@lowering("PRelu")
def lower_prelu(rb, node, ins):
    # slope broadcasts to X's shape (never the other way), so the Where has X's shape. One
    # rounding per element in any type: no widening needed.
    x, slope = ins
    return [op1(rb, "Where", _less0(rb, x), op1(rb, "Mul", slope, x), x)]


@lowering("ThresholdedRelu")
@wide_float
def lower_thresholded_relu(rb, node, ins):
    (x,) = ins
    keep = op1(rb, "Greater", x, scalar(rb, node.attrs["alpha"], x))
    return [op1(rb, "Where", keep, x, scalar(rb, 0, x))]


@lowering("Elu")
@wide_float
def lower_elu(rb, node, ins):
    # alpha * expm1(x) below 0: e^x - 1 would lose all precision for small |x|.
    (x,) = ins
    neg = op1(rb, "Mul", scalar(rb, node.attrs["alpha"], x), expm1(rb, x))
    return [op1(rb, "Where", _less0(rb, x), neg, x)]


@lowering("Selu")
@wide_float
def lower_selu(rb, node, ins):
    (x,) = ins
    neg = op1(rb, "Mul", scalar(rb, node.attrs["alpha"], x), expm1(rb, x))
    pos = op1(rb, "Greater", x, scalar(rb, 0, x))
    return [op1(rb, "Mul", scalar(rb, node.attrs["gamma"], x), op1(rb, "Where", pos, x, neg))]


@lowering("Celu")
@wide_float
def lower_celu(rb, node, ins):
    # max(0, x) + min(0, alpha * expm1(x / alpha))
    (x,) = ins
    alpha = scalar(rb, node.attrs["alpha"], x)
    zero = scalar(rb, 0, x)
    e = op1(rb, "Mul", alpha, expm1(rb, op1(rb, "Div", x, alpha)))
    return [op1(rb, "Add", op1(rb, "Max", x, zero), op1(rb, "Min", e, zero))]


def _clamp01(rb, y):
    return op1(rb, "Max", op1(rb, "Min", y, scalar(rb, 1, y)), scalar(rb, 0, y))


@lowering("HardSigmoid")
@wide_float
def lower_hard_sigmoid(rb, node, ins):
    (x,) = ins
    lin = op1(rb, "Add", op1(rb, "Mul", x, scalar(rb, node.attrs["alpha"], x)),
              scalar(rb, node.attrs["beta"], x))
    return [_clamp01(rb, lin)]


@lowering("HardSwish")
@wide_float
def lower_hard_swish(rb, node, ins):
    (x,) = ins
    lin = op1(rb, "Add", op1(rb, "Div", x, scalar(rb, 6, x)), scalar(rb, 0.5, x))
    return [op1(rb, "Mul", x, _clamp01(rb, lin))]


def softplus(rb, x):
    """log(1 + e^x) = max(x, 0) + log1p(e^-|x|): never overflows, exact for large |x|."""
    tail = log1p(rb, op1(rb, "Exp", op1(rb, "Sub", scalar(rb, 0, x), absval(rb, x))))
    return op1(rb, "Add", op1(rb, "Max", x, scalar(rb, 0, x)), tail)


@lowering("Softplus")
@wide_float
def lower_softplus(rb, node, ins):
    return [softplus(rb, ins[0])]


@lowering("Softsign")
@wide_float
def lower_softsign(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Div", x, op1(rb, "Add", scalar(rb, 1, x), absval(rb, x)))]


#: Above this, tanh(softplus(x)) is 1 to float64 precision (and e^(2x) may overflow).
_MISH_SATURATED = 20.0


@lowering("Mish")
@wide_float
def lower_mish(rb, node, ins):
    # tanh(log(1 + e)) = n / (n + 2) with n = e (e + 2), e = e^x: no cancellation for x < 0.
    (x,) = ins
    e = op1(rb, "Exp", x)
    n = op1(rb, "Mul", e, op1(rb, "Add", e, scalar(rb, 2, x)))
    t = op1(rb, "Div", n, op1(rb, "Add", n, scalar(rb, 2, x)))
    big = op1(rb, "Greater", x, scalar(rb, _MISH_SATURATED, x))
    return [op1(rb, "Where", big, x, op1(rb, "Mul", x, t))]


@lowering("Swish")
@wide_float
def lower_swish(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Mul", x, sigmoid(rb, op1(rb, "Mul", x, scalar(rb, node.attrs["alpha"], x))))]


@lowering("Gelu")
@wide_float
def lower_gelu(rb, node, ins):
    (x,) = ins
    if node.attrs["approximate"] == "tanh":
        # (1 + tanh u) / 2 = sigmoid(2u): no cancellation for very negative x.
        c = math.sqrt(2 / math.pi)
        cube = op1(rb, "Mul", op1(rb, "Mul", x, x), x)
        u = op1(rb, "Mul", scalar(rb, c, x),
                op1(rb, "Add", x, op1(rb, "Mul", scalar(rb, 0.044715, x), cube)))
        return [op1(rb, "Mul", x, sigmoid(rb, op1(rb, "Mul", scalar(rb, 2, x), u)))]
    phi = op1(rb, "Add", scalar(rb, 1, x), op1(rb, "Erf", op1(rb, "Mul", x, scalar(rb, math.sqrt(0.5), x))))
    return [op1(rb, "Mul", op1(rb, "Mul", x, scalar(rb, 0.5, x)), phi)]


@lowering("Shrink")
def lower_shrink(rb, node, ins):
    # Integer inputs are shrunk in float64 and truncated back, as the reference does (x + bias
    # is fractional); 16-bit floats in float32.
    (x,) = ins
    t = x.type.dtype
    work = dt.float64 if t.is_int else (dt.float32 if t in (dt.float16, dt.bfloat16) else t)
    w = x if work == t else op1(rb, "Cast", x, to=work)
    bias, lambd = scalar(rb, node.attrs["bias"], w), node.attrs["lambd"]
    zero = scalar(rb, 0, w)
    y = op1(rb, "Where", op1(rb, "Greater", w, scalar(rb, lambd, w)), op1(rb, "Sub", w, bias), zero)
    y = op1(rb, "Where", op1(rb, "Less", w, scalar(rb, -lambd, w)), op1(rb, "Add", w, bias), y)
    return [y if work == t else op1(rb, "Cast", y, to=t)]


@lowering("Clip")
def lower_clip(rb, node, ins):
    # Max then Min, so that min > max gives max everywhere (ONNX). Bounds are scalars, possibly
    # of shape [1]: made 0-d so that they never broadcast X's shape up.
    x, lo, hi = (list(ins) + [None, None])[:3]
    y = x
    for op, bound in (("Max", lo), ("Min", hi)):
        if bound is not None:
            if bound.type.rank != 0:
                bound = op1(rb, "Reshape", bound, ints(rb, []))
            y = op1(rb, op, y, bound)
    return [y if y is not x else op1(rb, "Identity", x)]
