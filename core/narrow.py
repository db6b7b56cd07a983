"""The narrow element formats stored one element per byte (ml_dtypes' layouts): their encoding
parameters, in one place for every code generator (the LLVM CPU backend's
backends/cpu/kernels/narrow.py, the C-style renderer's glow.render.helpers).

Encoding a float rounds to nearest even on the format's grid: with e' = max(exponent of |x|, the
format's smallest normal exponent), code = (e' + bias - 1) * 2^M + roundeven(|x| * 2^(M - e')); the
scalings are exact, and a mantissa that rounds up carries into the exponent by itself. Codes past
the largest finite one overflow the way ml_dtypes does (inf, NaN or saturation). The value is
rounded once, from the source's exact value (a float64 source is not rounded to float32 first:
code generators that compute in float32 round it to odd on the way, which keeps the one rounding
exact). `encode_float_array` is this rule for the reference, in NumPy. Decoding is a
256-entry float32 table made from ml_dtypes itself. The integer formats: a float truncates toward
zero and one out of the format's range gives 0; an integer keeps its low bits. That is glow's own
rule (`encode_int_array` for the reference, and each code generator), never `ndarray.astype`
(ml_dtypes 0.5 wrapped out-of-range floats, 0.7 gives 0, as onnx.reference does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as dt


@dataclass(frozen=True)
class FloatFormat:
    e_bits: int
    m_bits: int
    bias: int
    max_code: int  # the largest finite positive code
    overflow: int  # the code of a too-large magnitude, before the sign
    nan: int  # the code of NaN, before the sign
    signed_zero: bool = True  # fnuz formats have no -0 (0x80 is their NaN)
    nan_sign: bool = True  # the NaN code carries the sign bit
    sign_bit: int = 0x80


FLOAT_FORMATS = {
    dt.float8e4m3fn: FloatFormat(4, 3, 7, 126, 127, 127),
    dt.float8e4m3fnuz: FloatFormat(4, 3, 8, 127, 128, 128, signed_zero=False, nan_sign=False),
    dt.float8e5m2: FloatFormat(5, 2, 15, 123, 124, 126),
    dt.float8e5m2fnuz: FloatFormat(5, 2, 16, 127, 128, 128, signed_zero=False, nan_sign=False),
    dt.float4e2m1: FloatFormat(2, 1, 1, 7, 7, 8, nan_sign=False, sign_bit=0x8),
}
#: Formats whose Cast honours `saturate` (clamp to the largest finite value instead of overflow).
SATURATING = (dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz)
INT_BITS = {dt.int4: 4, dt.uint4: 4, dt.int2: 2, dt.uint2: 2}


def int_range(to: dt.DType) -> tuple[int, int]:
    """The values integer format `to` holds."""
    bits = INT_BITS[to]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if to.is_signed else (0, (1 << bits) - 1)


def encode_int_array(x: np.ndarray, to: dt.DType) -> np.ndarray:
    """`x` (any numeric array) as integer format `to`. A float truncates toward zero and a value
    outside the format's range (NaN and infinities too) gives 0, as onnx.reference does (ONNX
    leaves float -> fixed point out of range undefined); integers keep their low bits (ONNX's
    rule), sign-extended for the signed formats."""
    bits = INT_BITS[to]
    x = np.asarray(x)
    if x.dtype.kind not in "biu":  # IEEE floats and ml_dtypes' float formats
        lo, hi = int_range(to)
        t = np.trunc(x.astype(np.float64))
        ok = (t >= lo) & (t <= hi)  # False for NaN
        return np.where(ok, t, 0).astype(np.int8).astype(to.np)
    v = x.astype(np.int64) if x.dtype != np.uint64 else x.view(np.int64)
    code = v & ((1 << bits) - 1)
    if to.is_signed:
        half = 1 << (bits - 1)
        code = (code ^ half) - half
    return code.astype(np.int8).astype(to.np)  # every value is now in range: an exact conversion


def code_value(fmt: FloatFormat, code: int) -> float:
    """The magnitude of a positive code of `fmt` (subnormal when its exponent field is 0)."""
    e_field, m = code >> fmt.m_bits, code & ((1 << fmt.m_bits) - 1)
    if e_field == 0:
        return m * 2.0 ** (1 - fmt.bias - fmt.m_bits)
    return (1 + m / 2 ** fmt.m_bits) * 2.0 ** (e_field - fmt.bias)


def encode_float_array(x: np.ndarray, to: dt.DType, saturate: bool) -> np.ndarray:
    """`x` (IEEE floats) as the byte codes of float format `to`, viewed as `to`'s dtype: the rule in
    this module's docstring, bit for bit the code generators' (backends/cpu/kernels/narrow.py)."""
    f = FLOAT_FORMATS[to]
    x = np.asarray(x, np.float64)
    nan, sign = np.isnan(x), np.signbit(x)
    a = np.abs(np.where(nan, 0.0, x))
    a = np.minimum(a, 2.0 ** (1 - f.bias) * 2.0 ** (2 ** f.e_bits))  # beyond every finite value
    if to in SATURATING and saturate:
        a = np.minimum(a, code_value(f, f.max_code))
    _, e = np.frexp(a)  # a = m * 2^e with m in [0.5, 1): the binary exponent is e - 1
    e = np.maximum(np.where(a > 0, e.astype(np.int64) - 1, -(1 << 20)), 1 - f.bias)  # frexp(0) says 0
    q = np.rint(np.ldexp(a, f.m_bits - e)).astype(np.int64)  # exact scaling, round half to even
    code = (e + f.bias - 1) * (1 << f.m_bits) + q
    code = np.where(code > f.max_code, f.overflow, code)
    keep_sign = sign & ((code != 0) | f.signed_zero)
    if f.overflow & 0x80:  # the overflow code is NaN, which has no sign in fnuz formats
        keep_sign &= code != f.overflow
    code = np.where(keep_sign, code | f.sign_bit, code)
    if f.nan_sign:
        nan_code = np.where(sign, f.nan | 0x80, f.nan)
    elif to == dt.float4e2m1:  # as ml_dtypes 0.5 did: +NaN -> 0b1000 (-0), -NaN -> 0
        nan_code = np.where(sign, 0, 8)
    else:
        nan_code = np.full(x.shape, f.nan)
    return np.where(nan, nan_code, code).astype(np.uint8).view(to.np)
