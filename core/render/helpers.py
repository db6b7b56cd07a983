"""Device helper functions shared by all kernels of a program, written once for every dialect.

A kernel names the helpers it calls (`KernelWriter.need`); the program's prelude holds each
needed helper once. They are plain C over the dialect's bit-cast built-ins, so OpenCL and CUDA
round 16-bit floats identically (IEEE round-to-nearest-even, as NumPy and ml_dtypes do), and
decode and encode the narrow formats (float8, float4, int4, int2) identically too.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..narrow import FLOAT_FORMATS, INT_BITS, int_range
from .fastmath import HELPERS as FAST_HELPERS


def _h2f(r) -> str:
    return f"""{r.helper_qualifier} float glow_h2f(unsigned short h) {{
  unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return {r.bits_as_float("s | 0x7f800000u | (m << 13)")};
  if (e == 0u) {{
    float f = (float)m * 5.9604644775390625e-8f;  /* m * 2^-24: subnormal (or zero) */
    return s ? -f : f;
  }}
  return {r.bits_as_float("s | ((e + 112u) << 23) | (m << 13)")};
}}"""


def _f2h(r) -> str:
    return f"""{r.helper_qualifier} unsigned short glow_f2h(float f) {{
  unsigned int x = {r.float_as_bits("f")}, s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);  /* rounds past 65504: inf */
  if (a < 0x38800000u) {{  /* below 2^-14: subnormal half, round to nearest even */
    if (a < 0x33000000u) return (unsigned short)s;
    unsigned int m = (a & 0x7fffffu) | 0x800000u, sh = 126u - (a >> 23);
    unsigned int q = m >> sh, rem = m & ((1u << sh) - 1u), mid = 1u << (sh - 1u);
    q += (rem > mid || (rem == mid && (q & 1u))) ? 1u : 0u;
    return (unsigned short)(s | q);
  }}
  unsigned int r = a - 0x38000000u;  /* rebias the exponent by 127 - 15 */
  r += 0xfffu + ((r >> 13) & 1u);
  return (unsigned short)(s | (r >> 13));
}}"""


def _bf2f(r) -> str:
    return f"""{r.helper_qualifier} float glow_bf2f(unsigned short h) {{
  return {r.bits_as_float("(unsigned int)h << 16")};
}}"""


def _f2bf(r) -> str:
    return f"""{r.helper_qualifier} unsigned short glow_f2bf(float f) {{
  unsigned int x = {r.float_as_bits("f")};
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}}"""


def _ipow(r) -> str:
    ll = r.storage(__import__("glow").dtypes.int64)
    return f"""{r.helper_qualifier} {ll} glow_ipow({ll} x, {ll} y) {{
  if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);  /* 1/x^n truncated */
  {ll} acc = 1;
  while (y) {{ if (y & 1) acc *= x; x *= x; y >>= 1; }}
  return acc;
}}"""


def _powf(r) -> str:
    # x^c for a constant c > 0 (LRN's x^0.75) in plain arithmetic that a CPU OpenCL compiler
    # vectorises (PoCL's own pow is a scalar library call, ~60 ns per element). x = 2^e * m with
    # m in [sqrt(1/2), sqrt(2)); log2(m) from 2*atanh(s) = log((1+s)/(1-s)); c*e kept exact as a
    # two-float sum (fma), so the fraction fed to 2^f keeps full precision for any exponent size;
    # 2^f from a degree-7 polynomial. About 2 ulp; 0 -> 0, negative or NaN -> NaN, inf -> inf.
    inf = r.bits_as_float("0x7f800000u")
    fma = r.math("fma", "float")
    rint = r.math("rint", "float")
    return f"""{r.helper_qualifier} float glow_powf(float x, float c) {{
  const int sub = x < 1.17549435e-38f;  /* subnormals: scale by 2^23 first */
  const unsigned int bits = {r.float_as_bits("sub ? x * 8388608.0f : x")};
  int e = (int)((bits >> 23) & 0xffu) - 127 - (sub ? 23 : 0);
  float m = {r.bits_as_float("(bits & 0x7fffffu) | 0x3f800000u")};
  const int hi = m > 1.41421356f;
  m = hi ? 0.5f * m : m;
  e += hi;
  const float f = m - 1.0f, s = f / (2.0f + f), s2 = s * s;
  const float l = 2.88539008f * s * (1.0f + s2 * (0.33333333f + s2 * (0.2f + s2 * (0.14285715f + s2 * 0.11111111f))));
  const float ce = c * (float)e, ce_lo = {fma}(c, (float)e, -ce);
  const float n1 = {rint}(ce);
  float t = ((ce - n1) + ce_lo) + c * l;
  const float n2 = {rint}(t);
  t = (t - n2) * 0.69314718f;
  const float p = 1.0f + t * (1.0f + t * (0.5f + t * (0.16666667f + t * (0.041666668f
                  + t * (0.0083333338f + t * (0.0013888889f + t * 0.00019841270f))))));
  const float nf = n1 + n2;
  const int k = (int)(nf < -200.0f ? -200.0f : (nf > 200.0f ? 200.0f : nf));
  const int lo = k < -126;  /* subnormal results: scale in two steps */
  const int kk = lo ? (k < -190 ? -126 : k + 64) : (k > 127 ? 127 : k);
  const float s1 = {r.bits_as_float("(unsigned int)(kk + 127) << 23")};
  /* 2^128 itself is not a float: p * 2^127 * 2 (p < 1 there may still be finite) */
  const float v = k > 128 ? {inf} : (k == 128 ? p * s1 * 2.0f : (lo ? p * s1 * 5.42101086e-20f : p * s1));
  return x > 0.0f ? (x < {inf} ? v : x) : (x == 0.0f ? 0.0f : {r.bits_as_float("0x7fc00000u")});
}}"""


# -- narrow formats: float8, float4, int4, int2, one element per byte (ml_dtypes' layouts) -------
# The method and the formats' parameters are glow.narrow's: decode through a 256-entry table of
# float32 bit patterns made from ml_dtypes; encode by rounding to nearest even on the format's
# grid; `saturate` clamps to the largest finite value first (ONNX Cast); the integer formats are
# ints in registers, their low bits kept (sign-extended for int4 / int2).

E8M0_ROUND = {"up": 0, "down": 1, "nearest": 2}
#: Sources whose values float32 does not hold exactly (e8m0's rounding looks at every bit).
_WIDE = (dt.float64, dt.int32, dt.uint32, dt.int64, dt.uint64)


def narrow_int(dtype, v: str) -> str:
    """The value of the low bits of int `v` in an integer format (sign-extended when signed)."""
    bits = INT_BITS[dtype]
    mask = (1 << bits) - 1
    if not dtype.is_signed:
        return f"(({v}) & {mask})"
    half = 1 << (bits - 1)
    return f"(((({v}) & {mask}) ^ {half}) - {half})"


def narrow_decode(w, dtype, byte: str) -> str:
    """The compute value of a stored narrow element: float via the format's table, or int."""
    if dtype in INT_BITS:
        return narrow_int(dtype, f"(int){byte}")
    w.need(f"glow_{dtype.name}_dec")
    return f"glow_{dtype.name}_dec({byte})"


def narrow_encode(w, dtype, value: str, saturate: bool = False, round_mode: str = "up") -> str:
    """The storage byte of compute value `value` in a narrow format."""
    st = w.r.storage(dtype)
    if dtype in INT_BITS:
        return f"({st})(({value}) & {(1 << INT_BITS[dtype]) - 1})"
    w.need(f"glow_{dtype.name}_enc")
    if dtype == dt.float8e8m0:
        return f"glow_{dtype.name}_enc({value}, {int(saturate)}, {E8M0_ROUND[round_mode]})"
    return f"glow_{dtype.name}_enc({value}, {int(saturate)})"


def narrow_cast(w, value: str, src, dtype, saturate: bool, round_mode: str = "up") -> str:
    """Cast `value` (compute type of `src`) to a narrow format: its compute value, rounded as
    the format rounds (ml_dtypes: a float64 source is rounded to float32 first)."""
    r = w.r
    if dtype in INT_BITS:
        if not src.is_float:
            return narrow_int(dtype, f"(int)({value})")
        lo, hi = int_range(dtype)
        t = f"{r.math('trunc', r.compute(src))}({value})"
        # truncate toward zero; out of the format's range (NaN too) gives 0 (glow.narrow's rule)
        return narrow_int(dtype, f"(({t}) >= {lo} && ({t}) <= {hi} ? (int)({t}) : 0)")
    if src == dt.float64 or (dtype == dt.float8e8m0 and src in _WIDE):
        # one rounding from the source's value: float64 rounds to odd in float32 first (glow.narrow)
        w.uses(dt.float64)
        w.need("glow_d2f_odd")
        x = f"glow_d2f_odd((double)({value}))"  # the reference decides in float64
    else:
        x = value if r.compute(src) == "float" else f"(float)({value})"
    return narrow_decode(w, dtype, narrow_encode(w, dtype, x, saturate, round_mode))


def _table(r, dtype) -> str:
    codes = np.arange(256, dtype=np.uint8).view(dtype.np).astype(np.float32).view(np.uint32)
    rows = [", ".join(f"0x{int(c):08x}u" for c in codes[k:k + 8]) for k in range(0, 256, 8)]
    body = ",\n  ".join(rows)
    return f"""{r.table_qualifier} unsigned int glow_{dtype.name}_bits[256] = {{
  {body}
}};
{r.helper_qualifier} float glow_{dtype.name}_dec(unsigned char b) {{
  return {r.bits_as_float(f"glow_{dtype.name}_bits[b]")};
}}"""


def _float_encoder(r, dtype) -> str:
    f, st = FLOAT_FORMATS[dtype], r.storage(dt.uint8)
    m, e_min = f.m_bits, 1 - f.bias
    big = 2.0 ** (e_min + 2 ** f.e_bits)  # past every code: overflows below, scales exactly
    top = float(ml_dtypes.finfo(dtype.np).max)
    shift = f.sign_bit.bit_length() - 1
    lit_top, lit_big = r.literal(top, dt.float32), r.literal(big, dt.float32)
    sat = f"  a = saturate && a > {lit_top} ? {lit_top} : a;\n" if f.overflow != f.max_code else ""
    if f.nan_sign:
        nan = f"{f.nan}u | (neg << {shift})"
    elif dtype == dt.float4e2m1:  # ml_dtypes: +NaN -> 0b1000 (-0), -NaN -> 0
        nan = "neg ? 0u : 8u"
    else:
        nan = f"{f.nan}u"
    keep = [] if f.signed_zero else ["c == 0"]
    if f.overflow & f.sign_bit:  # the overflow code is NaN, which has no sign here
        keep.append(f"c == {f.overflow}")
    signed = f"c | (neg << {shift})"
    signed = f"{' || '.join(keep)} ? c : {signed}" if keep else signed
    fabs, rint = r.math("fabs", "float"), r.math("rint", "float")
    return f"""{r.helper_qualifier} {st} glow_{dtype.name}_enc(float x, int saturate) {{
  const unsigned int neg = {r.float_as_bits("x")} >> 31;
  if (x != x) return ({st})({nan});
  float a = {fabs}(x);
  a = a > {lit_big} ? {lit_big} : a;
{sat}  int e = (int)({r.float_as_bits("a")} >> 23) - 127;
  e = e < {e_min} ? {e_min} : e;
  const float q = {rint}(a * {r.bits_as_float(f"(unsigned int)({m + 127} - e) << 23")});
  int c = (e + {f.bias - 1}) * {1 << m} + (int)q;
  c = c > {f.max_code} ? {f.overflow} : c;
  return ({st})({signed});
}}"""


def _e8m0_encoder(r) -> str:
    # The reference's power-of-two rounding: mode 0 up, 1 down, 2 nearest (a tie, 1.5 * 2^k, goes
    # up); the sign is ignored. Out of range: NaN (0xff), or the nearest end with `saturate`.
    st = r.storage(dt.uint8)
    inf = r.bits_as_float("0x7f800000u")
    return f"""{r.helper_qualifier} {st} glow_float8e8m0_enc(float x, int saturate, int mode) {{
  const float a = {r.math("fabs", "float")}(x);
  if (a != a) return ({st})255;
  if (a == 0.0f || a == {inf}) return ({st})(saturate ? (a == 0.0f ? 0 : 254) : 255);
  const int sub = a < 1.17549435e-38f;  /* subnormals: scale by 2^23 first */
  const unsigned int bits = {r.float_as_bits("sub ? a * 8388608.0f : a")};
  const unsigned int m = bits & 0x7fffffu;
  const int lo = (int)(bits >> 23) - 127 - (sub ? 23 : 0);
  const int c = 127 + (mode == 1 ? lo : mode == 2 ? lo + (m >= 0x400000u) : lo + (m != 0u));
  if (c < 0) return ({st})(saturate ? 0 : 255);
  return ({st})(c > 254 ? (saturate ? 254 : 255) : c);
}}"""


def _d2f_odd(r) -> str:
    # float64 -> float32 rounding to odd: the float32 keeps whether the float64 was exact, so a
    # second rounding (to a power of two, float8e8m0) decides as the float64 would.
    fabs = r.math("fabs", "double")
    return f"""{r.helper_qualifier} float glow_d2f_odd(double x) {{
  const float t = (float)x;
  if ((double)t == x || x != x || {fabs}(x) >= 3.402823669209385e+38) return t;
  const unsigned int b = {r.float_as_bits("t")} - ({fabs}((double)t) > {fabs}(x) ? 1u : 0u);
  return {r.bits_as_float("b | 1u")};
}}"""


def _udiv(r) -> str:
    """Division and remainder of an index in [0, 2**31) by a size passed as its magic multiplier
    and shift (glow.render.sizes.magic): a multiply-high and a shift, which vectorise."""
    q = r.helper_qualifier
    hi = r.umul_hi("(unsigned int)a", "(unsigned int)m")
    return f"""{q} int glow_udiv(int a, int m, int s) {{
  return m == 0 ? a : (int)({hi} >> s);
}}
{q} int glow_umod(int a, int d, int m, int s) {{
  return a - glow_udiv(a, m, s) * d;
}}"""


def _narrow_helpers() -> dict:
    out = {f"glow_{d.name}_dec": (lambda r, d=d: _table(r, d))
           for d in (*FLOAT_FORMATS, dt.float8e8m0)}
    out.update({f"glow_{d.name}_enc": (lambda r, d=d: _float_encoder(r, d)) for d in FLOAT_FORMATS})
    out["glow_float8e8m0_enc"] = _e8m0_encoder
    out["glow_d2f_odd"] = _d2f_odd
    return out


#: name -> (dialect -> C text). Order matters only for readability of the prelude.
HELPERS = {"glow_h2f": _h2f, "glow_f2h": _f2h, "glow_bf2f": _bf2f, "glow_f2bf": _f2bf,
           "glow_ipow": _ipow, "glow_powf": _powf, "glow_udiv": _udiv, **FAST_HELPERS, **_narrow_helpers()}


def render_helpers(renderer, names) -> list[str]:
    return [HELPERS[n](renderer) for n in HELPERS if n in names]
