"""The narrow element formats stored one element per byte (ml_dtypes' layouts): their encoding
parameters, in one place for every code generator (the LLVM CPU backend's
backends/cpu/kernels/narrow.py, the C-style renderer's glow.render.helpers).

Encoding a float rounds to nearest even on the format's grid: with e' = max(exponent of |x|, the
format's smallest normal exponent), code = (e' + bias - 1) * 2^M + roundeven(|x| * 2^(M - e')); the
scalings are exact, and a mantissa that rounds up carries into the exponent by itself. Codes past
the largest finite one overflow the way ml_dtypes does (inf, NaN or saturation). Decoding is a
256-entry float32 table made from ml_dtypes itself. The integer formats keep the low bits of a
C-style truncation.
"""

from __future__ import annotations

from dataclasses import dataclass

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
