"""Device helper functions shared by all kernels of a program, written once for every dialect.

A kernel names the helpers it calls (`KernelWriter.need`); the program's prelude holds each
needed helper once. They are plain C over the dialect's bit-cast built-ins, so OpenCL and CUDA
round 16-bit floats identically (IEEE round-to-nearest-even, as NumPy and ml_dtypes do).
"""

from __future__ import annotations


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


#: name -> (dialect -> C text). Order matters only for readability of the prelude.
HELPERS = {"glow_h2f": _h2f, "glow_f2h": _f2h, "glow_bf2f": _bf2f, "glow_f2bf": _f2bf,
           "glow_ipow": _ipow, "glow_powf": _powf}


def render_helpers(renderer, names) -> list[str]:
    return [HELPERS[n](renderer) for n in HELPERS if n in names]
