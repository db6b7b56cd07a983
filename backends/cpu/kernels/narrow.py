"""Casts to and from the narrow formats stored one element per byte: float8 (e4m3fn, e4m3fnuz,
e5m2, e5m2fnuz, e8m0), float4e2m1, int4/uint4/int2/uint2 (ml_dtypes' layouts).

* decode: a byte indexes a 256-entry float32 table (every such value is exact in float32),
  made from ml_dtypes itself, so decoding agrees with the reference by construction.
* encode a float: round to nearest even on the format's grid. With e' = max(exponent of |x|,
  the format's smallest normal exponent), code = (e' + bias - 1) * 2^M + roundeven(|x| * 2^(M - e')):
  the scalings are exact, and a mantissa that rounds up carries into the exponent by itself.
  Codes past the largest finite one overflow the way ml_dtypes does (inf, NaN or saturation).
* encode an integer format from a float: truncate toward zero, and a value out of the format's
  range (NaN too) gives 0; integer sources keep their low bits (glow.narrow's rule).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.narrow import FLOAT_FORMATS, INT_BITS, SATURATING, int_range

from ..irutil import F32, I8, I32

FORMATS = FLOAT_FORMATS
DECODABLE = tuple(FORMATS) + tuple(INT_BITS) + (dt.float8e8m0,)
ENCODABLE = tuple(FORMATS) + tuple(INT_BITS)


def _table(L, d):
    """The module-level constant float32[256] of every byte's value."""
    name = f"glow.decode.{d.name}"
    try:
        return L.kb.module.get_global(name)
    except KeyError:
        values = np.arange(256, dtype=np.uint8).view(d.np).astype(np.float32)
        t = ir.ArrayType(F32, 256)
        g = ir.GlobalVariable(L.kb.module, t, name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(t, [float(v) for v in values])
        return g


def decode(L, code, d):
    """float32 value(s) of byte code(s) of format d."""
    table = _table(L, d)
    b = L.b

    def one(c):
        idx = b.zext(c, ir.IntType(64))
        return b.load(b.gep(table, [ir.Constant(ir.IntType(64), 0), idx], inbounds=True), typ=F32)

    if L.n == 1:
        return one(code)
    out = ir.Constant(L.t(F32), ir.Undefined)
    for k in range(L.n):
        lane = one(b.extract_element(code, ir.Constant(I32, k)))
        out = b.insert_element(out, lane, ir.Constant(I32, k))
    return out


def encode(L, x, d, saturate: bool):
    """Byte code(s) of float32 value(s) x in format d."""
    if d in INT_BITS:
        return _encode_int(L, x, d)
    f = FORMATS[d]
    b = L.b
    bits = b.bitcast(x, L.t(I32))
    sign = b.icmp_signed("<", bits, L.of(0, I32))
    a = L.intrinsic("fabs", [x])
    nan = b.fcmp_unordered("uno", x, x)
    big = 2.0 ** (1 - f.bias) * 2.0 ** (2 ** f.e_bits)  # beyond every format's largest value
    a = b.select(b.fcmp_ordered(">", a, L.of(big, F32)), L.of(big, F32), a)
    if d in SATURATING and saturate:
        top = float(np.asarray(f.max_code, np.uint8).view(d.np).astype(np.float32))
        a = b.select(b.fcmp_ordered(">", a, L.of(top, F32)), L.of(top, F32), a)
    e = b.sub(b.and_(b.lshr(b.bitcast(a, L.t(I32)), L.of(23, I32)), L.of(255, I32)), L.of(127, I32))
    e_min = 1 - f.bias
    e = b.select(b.icmp_signed("<", e, L.of(e_min, I32)), L.of(e_min, I32), e)
    scale = b.bitcast(b.shl(b.add(b.sub(L.of(f.m_bits, I32), e), L.of(127, I32)), L.of(23, I32)), L.t(F32))
    q = b.fptosi(L.intrinsic("roundeven", [b.fmul(a, scale)]), L.t(I32))
    code = b.add(b.mul(b.add(e, L.of(f.bias - 1, I32)), L.of(1 << f.m_bits, I32)), q)
    code = b.select(b.icmp_signed(">", code, L.of(f.max_code, I32)), L.of(f.overflow, I32), code)
    signed = b.or_(code, b.select(sign, L.of(f.sign_bit, I32), L.of(0, I32)))
    keep_sign = b.icmp_signed("!=", code, L.of(0, I32)) if not f.signed_zero else L.of(1, ir.IntType(1))
    if f.overflow & 0x80:  # the overflow code is NaN, which has no sign in fnuz formats
        keep_sign = b.and_(keep_sign, b.icmp_signed("!=", code, L.of(f.overflow, I32)))
    code = b.select(keep_sign, signed, code)
    nan_code = L.of(f.nan, I32)
    if f.nan_sign:
        nan_code = b.or_(nan_code, b.select(sign, L.of(0x80, I32), L.of(0, I32)))
    elif d == dt.float4e2m1:  # ml_dtypes: NaN -> 0b1000 (-0) for +NaN, 0 for -NaN
        nan_code = b.select(sign, L.of(0, I32), L.of(8, I32))
    return b.trunc(b.select(nan, nan_code, code), L.t(I8))


def _encode_int(L, x, d):
    """Truncate toward zero; a value outside d's range (NaN too) gives 0 (glow.narrow's rule)."""
    b = L.b
    lo, hi = int_range(d)
    t = L.intrinsic("trunc", [x])
    ok = b.and_(b.fcmp_ordered(">=", t, L.of(float(lo), F32)), b.fcmp_ordered("<=", t, L.of(float(hi), F32)))
    v = b.select(ok, b.fptosi(t, L.t(I32)), L.of(0, I32))
    return truncate_int(L, v, d)


def truncate_int(L, v, d):
    """The low bits of integer(s) v as d's byte code."""
    w = v.type.element.width if isinstance(v.type, ir.VectorType) else v.type.width
    v8 = L.b.trunc(v, L.t(I8)) if w > 8 else v
    return L.b.and_(v8, L.of((1 << INT_BITS[d]) - 1, I8))


__all__ = ["DECODABLE", "ENCODABLE", "decode", "encode", "truncate_int"]
