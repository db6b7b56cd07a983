"""Elementwise arithmetic ops (binary, with NumPy broadcasting, variadic, and unary math)."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes as dt
from ._shape import broadcast_shapes, same_as
from .registry import BINARY, COMMUTATIVE, ELEMENTWISE, UNARY, Attr, Tier, op

NUM = dt.NUMERIC
FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
SIGNED = NUM - {dt.uint8, dt.uint16, dt.uint32, dt.uint64}
#: Types IsInf/IsNaN accept: the ordinary floats plus the 8-bit float storage formats.
FLT8 = FLT | {dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz}


def _broadcast_rule(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.inputs))]
    return [dt.TensorType(broadcast_shapes(ctx, *shapes), ctx.dtype(0))]


def broadcast_as(dtype):
    """Shape rule: the broadcast of all inputs' shapes, with a fixed element type (e.g. bool)."""

    def rule(ctx):
        shapes = [ctx.shape(i) for i in range(len(ctx.inputs))]
        return [dt.TensorType(broadcast_shapes(ctx, *shapes), dtype)]

    return rule


def _keep(dtype_of, fn):
    """Wrap a NumPy function so the result keeps the input's element type (no promotion).

    Floating-point warnings are silenced: ONNX defines log(-1) = NaN, 1/0 = inf and so on, so they
    are results here, not mistakes.
    """

    def ref(*xs, **_):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*xs)).astype(dtype_of(*xs).dtype, copy=False)

    return ref


def widened(x: np.ndarray) -> np.ndarray:
    """x in a type NumPy computes accurately in: 16-bit and 8-bit floats go to float32."""
    if x.dtype.itemsize < 4 and x.dtype.kind not in "biuO" and dt.from_numpy(x.dtype).is_float:
        return x.astype(np.float32)
    return x


def float_math(fn):
    """Reference decorator for float formulas: compute in float32 or wider, return the input's type.

    Composite formulas (alpha * x, x / (1 + |x|), ...) would otherwise round at every step in
    float16/bfloat16, or promote to float32 when a Python float meets a bfloat16.
    """

    @functools.wraps(fn)
    def ref(x, *rest, **attrs):
        with np.errstate(all="ignore"):
            y = fn(widened(x), *rest, **attrs)
        return np.asarray(y).astype(x.dtype, copy=False)

    return ref


def binary(name, fn, types=NUM, since=7, tier=Tier.PRIMITIVE, doc="", groups=()):
    return op(name, inputs=("A:T", "B:T"), outputs=("C:T",), types={"T": types},
              infer=_broadcast_rule, reference=_keep(lambda a, b: a, fn),
              groups={ELEMENTWISE, BINARY, *groups}, tier=tier, onnx_since=since, doc=doc)


def unary(name, fn, types=FLT, since=6, tier=Tier.PRIMITIVE, doc="", groups=()):
    return op(name, inputs=("X:T",), outputs=("Y:T",), types={"T": types}, infer=same_as(0),
              reference=_keep(lambda x: x, fn), groups={ELEMENTWISE, UNARY, *groups}, tier=tier,
              onnx_since=since, doc=doc)


# -- binary arithmetic -------------------------------------------------------------------------------

binary("Add", np.add, doc="A + B, broadcasting.", groups={COMMUTATIVE})
binary("Sub", np.subtract, doc="A - B, broadcasting.")
binary("Mul", np.multiply, doc="A * B, broadcasting.", groups={COMMUTATIVE})


def _div(a, b):
    if a.dtype.kind in "iu":
        # ONNX integer division truncates toward zero (C semantics); NumPy's // floors. Stay in
        # integers: a float64 detour would lose precision beyond 2**53.
        q = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + inexact.astype(q.dtype)
    return np.divide(a, b)


binary("Div", _div, doc="A / B, broadcasting; integer division truncates toward zero.")


def _mod_ref(a, b, fmod):
    with np.errstate(all="ignore"):
        x, y = widened(a), widened(b)
        r = np.fmod(x, y) if fmod else np.mod(x, y)
    return r.astype(a.dtype, copy=False)


def _mod_infer(ctx):
    if ctx.attrs["fmod"] not in (0, 1):
        raise ctx.error(f"attribute fmod must be 0 or 1, got {ctx.attrs['fmod']}")
    return _broadcast_rule(ctx)


op("Mod", inputs=("A:T", "B:T"), outputs=("C:T",), types={"T": NUM}, attrs=(Attr("fmod", "int", 0),),
   infer=_mod_infer, reference=_mod_ref, groups={ELEMENTWISE, BINARY}, tier=Tier.PRIMITIVE,
   onnx_since=10,
   doc="Remainder of A / B, broadcasting: sign of B (floored, fmod=0) or of A (truncated, fmod=1).")


def _pow_ref(x, y):
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":
            # Exact integer powers where the exponent is >= 0 (NumPy refuses negative integer
            # exponents); a negative exponent gives 1/x^n, truncated like a C cast.
            neg = y < 0
            exact = np.power(x.astype(np.int64), np.where(neg, 0, y).astype(np.int64))
            frac = np.trunc(np.power(x.astype(np.float64), y.astype(np.float64)))
            r = np.where(neg, frac, exact)
        else:
            r = np.power(x.astype(np.float64), y.astype(np.float64))
            if x.dtype.kind in "iu":
                r = np.trunc(r)
    return np.asarray(r).astype(x.dtype)


op("Pow", inputs=("X:T", "Y:T1"), outputs=("Z:T",),
   types={"T": frozenset({dt.int32, dt.int64}) | FLT, "T1": NUM},
   infer=_broadcast_rule, reference=_pow_ref, groups={ELEMENTWISE, BINARY}, tier=Tier.PRIMITIVE,
   onnx_since=7, doc="X ** Y, broadcasting; the result has X's element type.")


# -- variadic ----------------------------------------------------------------------------------------

def _variadic(fn):
    def ref(*xs):
        with np.errstate(all="ignore"):
            return np.asarray(fn([widened(x) for x in xs])).astype(xs[0].dtype, copy=False)

    return ref


def variadic(name, fn, types=NUM, tier=Tier.PRIMITIVE, doc=""):
    """An op over one or more inputs, broadcasting; each of them is commutative."""
    return op(name, inputs=("data_0:T*",), outputs=(f"{name.lower()}:T",), types={"T": types},
              infer=_broadcast_rule, reference=_variadic(fn), groups={ELEMENTWISE, COMMUTATIVE}, tier=tier,
              onnx_since=8, doc=doc)


variadic("Max", lambda xs: functools.reduce(np.maximum, xs),
         doc="Elementwise maximum of one or more inputs, broadcasting; NaN wins.")
variadic("Min", lambda xs: functools.reduce(np.minimum, xs),
         doc="Elementwise minimum of one or more inputs, broadcasting; NaN wins.")
variadic("Sum", lambda xs: functools.reduce(np.add, xs), types=FLT, tier=Tier.HIGH,
         doc="Elementwise sum of one or more inputs, broadcasting.")
variadic("Mean", lambda xs: functools.reduce(np.add, xs) / len(xs), types=FLT, tier=Tier.HIGH,
         doc="Elementwise mean of one or more inputs, broadcasting.")


# -- unary math --------------------------------------------------------------------------------------

unary("Neg", np.negative, types=SIGNED, doc="-X.")
unary("Abs", np.abs, types=NUM, doc="|X|.")
unary("Sign", np.sign, types=NUM, since=9, doc="-1, 0 or 1 by the sign of X (NaN stays NaN).")
unary("Reciprocal", lambda x: np.reciprocal(widened(x)), doc="1 / X.")
unary("Exp", np.exp, doc="e^X.")
unary("Log", np.log, doc="Natural logarithm.")
unary("Sqrt", np.sqrt, doc="Square root.")
unary("Ceil", np.ceil, doc="Smallest integer value not less than X.")
unary("Floor", np.floor, doc="Largest integer value not greater than X.")
unary("Round", np.rint, since=11, doc="Nearest integer value; halves round to even.")
unary("Sin", np.sin, since=7, doc="Sine.")
unary("Cos", np.cos, since=7, doc="Cosine.")
unary("Tan", np.tan, since=7, doc="Tangent.")
unary("Asin", np.arcsin, since=7, doc="Arcsine.")
unary("Acos", np.arccos, since=7, doc="Arccosine.")
unary("Atan", np.arctan, since=7, doc="Arctangent.")
unary("Sinh", np.sinh, since=9, doc="Hyperbolic sine.")
unary("Cosh", np.cosh, since=9, doc="Hyperbolic cosine.")
unary("Tanh", np.tanh, doc="Hyperbolic tangent.")
unary("Asinh", np.arcsinh, since=9, doc="Inverse hyperbolic sine.")
unary("Acosh", np.arccosh, since=9, doc="Inverse hyperbolic cosine.")
unary("Atanh", np.arctanh, since=9, doc="Inverse hyperbolic tangent.")

#: Gauss error function, exact to float64 (NumPy has none; math.erf is the C library's).
erf = np.vectorize(math.erf, otypes=[np.float64])

unary("Erf", lambda x: erf(x.astype(np.float64)), since=9, doc="Gauss error function.")


def _sigmoid(x):
    # exp of a negative argument only, so no overflow on either side.
    x = widened(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


unary("Sigmoid", _sigmoid, doc="1 / (1 + e^-X).")
unary("Relu", lambda x: np.maximum(x, 0).astype(x.dtype), types=SIGNED, tier=Tier.HIGH,
      doc="max(X, 0).")


def _isinf_ref(x, detect_negative, detect_positive):
    x = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    return (np.isposinf(x) & bool(detect_positive)) | (np.isneginf(x) & bool(detect_negative))


op("IsInf", inputs=("X:T1",), outputs=("Y:T2",), types={"T1": FLT8, "T2": frozenset({dt.bool_})},
   attrs=(Attr("detect_negative", "int", 1), Attr("detect_positive", "int", 1)),
   infer=lambda ctx: [dt.TensorType(ctx.shape(0), dt.bool_)], reference=_isinf_ref,
   groups={ELEMENTWISE, UNARY}, tier=Tier.PRIMITIVE, onnx_since=10,
   doc="True where X is infinite (of the signs selected by detect_negative/detect_positive).")

op("IsNaN", inputs=("X:T1",), outputs=("Y:T2",), types={"T1": FLT8, "T2": frozenset({dt.bool_})},
   infer=lambda ctx: [dt.TensorType(ctx.shape(0), dt.bool_)],
   reference=lambda x: np.isnan(x.astype(np.float32) if x.dtype.itemsize < 4 else x),
   groups={ELEMENTWISE, UNARY}, tier=Tier.PRIMITIVE, onnx_since=9, doc="True where X is NaN.")
