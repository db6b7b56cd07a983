"""Lowering rules for elementwise ops outside the floor (unary math, activations, logic)."""

from __future__ import annotations

import math

from ._build import is_float, scalar
from .registry import lowering


@lowering("Relu")
def lower_relu(rb, node, ins):
    (x,) = ins
    return [rb.emit1("Max", [x, scalar(rb, 0, x)])]


@lowering("Neg")
def lower_neg(rb, node, ins):
    (x,) = ins
    return [rb.emit1("Sub", [scalar(rb, 0, x), x])]


@lowering("Abs")
def lower_abs(rb, node, ins):
    (x,) = ins
    if not x.type.dtype.is_signed:
        return [rb.emit1("Identity", [x])]
    return [rb.emit1("Max", [x, rb.emit1("Sub", [scalar(rb, 0, x), x])])]


@lowering("Reciprocal")
def lower_reciprocal(rb, node, ins):
    (x,) = ins
    return [rb.emit1("Div", [scalar(rb, 1, x), x])]


@lowering("Ceil")
def lower_ceil(rb, node, ins):
    (x,) = ins
    neg = rb.emit1("Sub", [scalar(rb, 0, x), x])
    return [rb.emit1("Sub", [scalar(rb, 0, x), rb.emit1("Floor", [neg])])]


@lowering("Cos")
def lower_cos(rb, node, ins):
    (x,) = ins
    return [rb.emit1("Sin", [rb.emit1("Add", [x, scalar(rb, math.pi / 2, x)])])]


@lowering("Tan")
def lower_tan(rb, node, ins):
    (x,) = ins
    cos = rb.emit1("Sin", [rb.emit1("Add", [x, scalar(rb, math.pi / 2, x)])])
    return [rb.emit1("Div", [rb.emit1("Sin", [x]), cos])]


@lowering("Sigmoid")
def lower_sigmoid(rb, node, ins):
    (x,) = ins
    e = rb.emit1("Exp", [rb.emit1("Sub", [scalar(rb, 0, x), x])])
    return [rb.emit1("Div", [scalar(rb, 1, x), rb.emit1("Add", [scalar(rb, 1, x), e])])]


@lowering("Tanh")
def lower_tanh(rb, node, ins):
    # tanh(x) = 2 / (1 + exp(-2x)) - 1: saturates correctly at both ends in float arithmetic.
    (x,) = ins
    e = rb.emit1("Exp", [rb.emit1("Mul", [x, scalar(rb, -2, x)])])
    s = rb.emit1("Div", [scalar(rb, 2, x), rb.emit1("Add", [scalar(rb, 1, x), e])])
    return [rb.emit1("Sub", [s, scalar(rb, 1, x)])]


@lowering("Or")
def lower_or(rb, node, ins):
    a, b = ins
    return [rb.emit1("Not", [rb.emit1("And", [rb.emit1("Not", [a]), rb.emit1("Not", [b])])])]


@lowering("Xor")
def lower_xor(rb, node, ins):
    a, b = ins
    return [rb.emit1("Not", [rb.emit1("Equal", [a, b])])]


@lowering("LessOrEqual")
def lower_less_equal(rb, node, ins):
    a, b = ins  # not Not(Greater): NaN compares false both ways
    return [lower_or(rb, node, [rb.emit1("Less", [a, b]), rb.emit1("Equal", [a, b])])[0]]


@lowering("GreaterOrEqual")
def lower_greater_equal(rb, node, ins):
    a, b = ins
    return [lower_or(rb, node, [rb.emit1("Greater", [a, b]), rb.emit1("Equal", [a, b])])[0]]


@lowering("IsNaN")
def lower_isnan(rb, node, ins):
    (x,) = ins
    return [rb.emit1("Not", [rb.emit1("Equal", [x, x])])]


@lowering("Sign")
def lower_sign(rb, node, ins):
    (x,) = ins
    zero, one = scalar(rb, 0, x), scalar(rb, 1, x)
    pos = rb.emit1("Cast", [rb.emit1("Greater", [x, zero])], {"to": x.type.dtype})
    if not x.type.dtype.is_signed:
        return [pos]
    neg = rb.emit1("Cast", [rb.emit1("Less", [x, zero])], {"to": x.type.dtype})
    out = rb.emit1("Sub", [pos, neg])
    if is_float(x):  # NaN stays NaN
        out = rb.emit1("Where", [rb.emit1("Equal", [x, x]), out, rb.emit1("Mul", [x, one])])
    return [out]
