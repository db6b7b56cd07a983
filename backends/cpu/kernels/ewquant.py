"""Requantize (glow-internal, ops/quant.py) for the op table in ewops.py: the int32 accumulator of
an integer convolution or matrix product to int8/uint8, bit for bit the reference's

    y = saturate(round_half_even(float32(float32(acc * (a_scale * b_scale)) / y_scale)) + y_zero_point)

whose product is float64 (exact scale product, one rounding) and whose quotient is a float32
division: at the avx2 level, per eight lanes, two conversions to float64, two multiplies, two
conversions back and a divide (the requantisations and the float work fused with them took 11
of 50.6 ms of an int8 ResNet-50 there). Where a_scale and y_scale are constants in the kernel
(QLinearConv's are scalars, so the fused body holds them as immediates), most lanes take a
float32 shortcut:

    q' = float32(acc) * float32(b_scale * c),   c = float32(a_scale / y_scale) (made here)

Each of its four roundings (acc, c, the two products) is off by at most 2^-24 of the value, and
the reference's two (to float32, the division; its float64 product is 2^-53) likewise, so
|q' - q| <= 6.01 x 2^-24 |q| + 2^-23 (the last: the reference's float32 rounding below 2^-126,
divided by a normal y_scale). Below |q| = 2^10 that is less than 2^-11: a q' farther than
TIE = 2^-10 from every half-integer rounds to the integer q rounds to. At or above 2^10 both
round to at least 1023 in magnitude and saturate alike (a zero point is within [-128, 255]).
A lane nearer a half-integer than TIE, or whose q' is not finite, sends its whole vector to the
reference's arithmetic (a lane in 500, a 16-lane vector in 30). Constants that break an assumption keep
every lane on the reference's path: a_scale or y_scale zero, subnormal or not finite, c not
normal, or y_scale above 2^117 (then the reference's float32 product could overflow while q
stays small; below it, such a product makes |q'| at least 2^11 and both saturate).
Tested against the reference at ties, near ties and extremes (tests/test_requantize.py).
QuantizeLinear of float32 data keeps its division: the same shortcut there (one multiply, no
float64 work to save) made an int8 ResNet-50's fused kernels slower (9.5 -> 11.1 ms at avx2),
its check and branch costing more than the divide they replace.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt

from ..irutil import F32, F64, I1
from .cast import cast
from .ewarith import constant_value, maximum, minimum
from .ewops import op

TIE = 2.0 ** -10
_OUT = (dt.int8, dt.uint8)


def _types_ok(ins, out, attrs) -> bool:
    return ins[0] == dt.int32 and all(t == dt.float32 for t in ins[1:4]) and ins[4] == out and out in _OUT


def _normal(v) -> bool:
    return v is not None and np.isfinite(v) and abs(v) >= 2.0 ** -126


def shortcut_multiplier(a_scale, y_scale) -> float | None:
    """c = float32(a_scale / y_scale) where the float32 shortcut is exact (see the module doc)."""
    if not (_normal(a_scale) and _normal(y_scale)) or abs(y_scale) > 2.0 ** 117:
        return None
    c = float(np.float32(a_scale / y_scale))
    return c if _normal(c) else None


@op("Requantize", tuple(dt.ALL), check=_types_ok, domain="glow")
def _requantize(L, args, ins, out, attrs):
    acc, a_s, b_s, y_s, zp = args
    zp32 = cast(L, zp, ins[4], dt.float32)

    def reference():
        # The reference's quotient, rounded. A NaN (from NaN or infinite scales) becomes -zp, so
        # the result is 0, as NumPy's cast of NaN is here; float -> int of a NaN would be poison
        # to LLVM, which then folds a constant NaN to anything.
        r = L.intrinsic("roundeven", [_reference_quotient(L, acc, a_s, b_s, y_s)])
        return L.b.select(L.b.fcmp_unordered("uno", r, r), L.b.fneg(zp32), r)

    c = shortcut_multiplier(constant_value(a_s), constant_value(y_s))
    rounded = reference() if c is None else _shortcut(L, acc, b_s, c, reference)
    lo, hi = _range(out)
    y = L.b.fadd(rounded, zp32)
    y = maximum(L, minimum(L, y, L.of(hi, F32), dt.float32), L.of(lo, F32), dt.float32)
    return cast(L, y, dt.float32, out)


def _range(out):
    info = np.iinfo(out.np)
    return float(info.min), float(info.max)


def _reference_quotient(L, acc, a_s, b_s, y_s):
    """float32(float32(acc * (a_scale * b_scale)) / y_scale), the scale product and acc times it
    in float64: the lowering rule's arithmetic (rules_quant `lower_requantize`)."""
    b = L.b
    scale = b.fmul(b.fpext(a_s, L.t(F64)), b.fpext(b_s, L.t(F64)))
    real = b.fptrunc(b.fmul(b.sitofp(acc, L.t(F64)), scale), L.t(F32))
    return b.fdiv(real, y_s)


def _shortcut(L, acc, b_s, c: float, reference):
    """round_half_even(q) by the float32 shortcut, the vector taking `reference()` (rounded)
    instead where a lane is within TIE of a half-integer or not finite."""
    b = L.b
    q = b.fmul(b.sitofp(acc, L.t(F32)), b.fmul(b_s, L.of(c, F32)))
    r = L.intrinsic("roundeven", [q])
    off = L.intrinsic("fabs", [b.fsub(q, r)])
    near = b.fcmp_unordered(">", off, L.of(0.5 - TIE, F32))  # NaN (inf - inf) is near too
    if L.n > 1:
        fn = L.kb.intrinsic(f"llvm.vector.reduce.or.v{L.n}i1", I1, [near.type])
        near = b.call(fn, [near])
    result = L.kb.var(r.type, r)
    with L.kb.if_then(b.call(L.kb.intrinsic("llvm.expect.i1", I1, [I1, I1]), [near, ir.Constant(I1, 0)])):
        b.store(reference(), result)
    return b.load(result)


__all__ = ["TIE", "shortcut_multiplier"]
