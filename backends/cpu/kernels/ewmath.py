"""Elementwise math and activations for the op table in ewops.py: exp, log, trigonometry, erf,
sigmoid, tanh, reciprocal, neg, abs, relu, sign, isnan.

Float32 vectors use CPU-2's polynomials (vmath.py) where it has one; the rest call LLVM's
intrinsics or the C library lane by lane. float16 computes in float32 and rounds once per op.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from ..irutil import F32
from .ewarith import maximum
from .ewops import op
from .lanes import FLOATS, HALF, SIGNED_INTS, UNSIGNED_INTS, compute_type, icmp, is_float

try:  # CPU-2's vector polynomials (exp, log, tanh, erf, sigmoid on float32)
    from . import vmath
except ImportError:  # pragma: no cover
    vmath = None


def _in_f32(fn):
    """Float math computed in float32 for float16 (and float64 / float32 as themselves)."""
    def emit(L, args, ins, out, attrs):
        x = args[0]
        if compute_type(out) == HALF:
            return L.b.fptrunc(fn(L, L.b.fpext(x, L.t(F32))), L.t(HALF))
        return fn(L, x)

    return emit


def _math(name, libm=None, intrinsic=None):
    def compute(L, x):
        if vmath is not None and name in vmath.SUPPORTED and x.type in (F32, L.t(F32)):
            return vmath.emit_unary(L.kb, name, x)
        if intrinsic:
            return L.intrinsic(intrinsic, [x])
        return L.libm(libm, x)

    op(name, FLOATS)(_in_f32(lambda L, x: compute(L, x)))


for _n, _c, _intr in (("Exp", "exp", "exp"), ("Log", "log", "log"), ("Sqrt", None, "sqrt"),
                      ("Floor", None, "floor"), ("Ceil", None, "ceil"), ("Round", None, "roundeven"),
                      ("Sin", "sin", None), ("Cos", "cos", None), ("Tan", "tan", None),
                      ("Asin", "asin", None), ("Acos", "acos", None), ("Atan", "atan", None),
                      ("Sinh", "sinh", None), ("Cosh", "cosh", None), ("Asinh", "asinh", None),
                      ("Acosh", "acosh", None), ("Atanh", "atanh", None), ("Erf", "erf", None),
                      ("Tanh", "tanh", None)):
    _math(_n, _c, _intr)


@op("Sigmoid", FLOATS)
@_in_f32
def _sigmoid(L, x):
    if vmath is not None and x.type in (F32, L.t(F32)):
        return vmath.emit_unary(L.kb, "Sigmoid", x)
    one = L.of(1.0, x.type.element if isinstance(x.type, ir.VectorType) else x.type)
    return L.b.fdiv(one, L.b.fadd(one, L.intrinsic("exp", [L.b.fneg(x)])))


@op("Reciprocal", FLOATS)
def _reciprocal(L, args, ins, out, attrs):
    t = compute_type(out)
    return L.b.fdiv(L.of(1.0, t), args[0])


@op("Neg", FLOATS + SIGNED_INTS)
def _neg(L, args, ins, out, attrs):
    return L.b.fneg(args[0]) if is_float(out) else L.b.sub(L.of(0, compute_type(out)), args[0])


@op("Abs")
def _abs(L, args, ins, out, attrs):
    x = args[0]
    if is_float(out):
        return L.intrinsic("fabs", [x])
    if out in UNSIGNED_INTS:
        return x
    t = compute_type(out)
    return L.b.select(L.b.icmp_signed("<", x, L.of(0, t)), L.b.sub(L.of(0, t), x), x)


@op("Relu", FLOATS + SIGNED_INTS)
def _relu(L, args, ins, out, attrs):
    t = compute_type(out)
    return maximum(L, args[0], L.of(0.0 if is_float(out) else 0, t), out)


@op("LeakyRelu", FLOATS)
def _leaky_relu(L, args, ins, out, attrs):
    x, t = args[0], compute_type(out)
    neg = L.b.fcmp_ordered("<", x, L.of(0.0, t))
    return L.b.select(neg, L.b.fmul(x, L.of(float(np.asarray(attrs["alpha"], out.np)), t)), x)


@op("Sign")
def _sign(L, args, ins, out, attrs):
    x, t = args[0], compute_type(out)
    if is_float(out):
        pos, neg = L.b.fcmp_ordered(">", x, L.of(0.0, t)), L.b.fcmp_ordered("<", x, L.of(0.0, t))
        return L.b.select(pos, L.of(1.0, t), L.b.select(neg, L.of(-1.0, t), x))
    pos, neg = icmp(L, out, ">", x, L.of(0, t)), icmp(L, out, "<", x, L.of(0, t))
    return L.b.select(pos, L.of(1, t), L.b.select(neg, L.of(-1, t), L.of(0, t)))


@op("IsNaN", FLOATS)
def _isnan(L, args, ins, out, attrs):
    return L.b.fcmp_unordered("uno", args[0], args[0])
