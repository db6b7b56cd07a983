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


def _log2f(r) -> str:
    # log2 of a float from its exponent bits and 2*atanh(s) = log((1+s)/(1-s)) on the mantissa:
    # plain arithmetic, so a CPU OpenCL compiler vectorises it (PoCL's own log2 is a scalar call).
    # 0 -> -inf, negative or NaN -> NaN, inf -> inf; about 1 ulp.
    return f"""{r.helper_qualifier} float glow_log2f(float x) {{
  const float big = x * 8388608.0f;  /* 2^23: subnormals become normal */
  const int sub = x < 1.17549435e-38f;
  const unsigned int bits = {r.float_as_bits("sub ? big : x")};
  int e = (int)((bits >> 23) & 0xffu) - 127 - (sub ? 23 : 0);
  float m = {r.bits_as_float("(bits & 0x7fffffu) | 0x3f800000u")};
  const int hi = m > 1.41421356f;
  m = hi ? 0.5f * m : m;
  e += hi;
  const float f = m - 1.0f, s = f / (2.0f + f), s2 = s * s;
  const float ln = 2.0f * s * (1.0f + s2 * (0.33333333f + s2 * (0.2f + s2 * (0.14285715f + s2 * 0.11111111f))));
  const float y = (float)e + ln * 1.44269504f;
  return x > 0.0f ? (x < {r.bits_as_float("0x7f800000u")} ? y : x) : (x == 0.0f ? -{r.bits_as_float("0x7f800000u")} : {r.bits_as_float("0x7fc00000u")});
}}"""


def _exp2f(r) -> str:
    # 2^y as 2^n * 2^f (n = rint(y), |f| <= 1/2, degree-7 Taylor of e^(f ln 2)); about 1 ulp.
    return f"""{r.helper_qualifier} float glow_exp2f(float y) {{
  const float c = y < -149.0f ? -149.0f : (y > 128.0f ? 128.0f : y);
  const float n = {r.math("rint", "float")}(c), z = (c - n) * 0.69314718f;
  const float p = 1.0f + z * (1.0f + z * (0.5f + z * (0.16666667f + z * (0.041666668f
                  + z * (0.0083333338f + z * (0.0013888889f + z * 0.00019841270f))))));
  const int k = (int)n;
  const int lo = k < -126;  /* subnormal results: scale in two steps */
  const float s1 = {r.bits_as_float("(unsigned int)((lo ? k + 64 : k) + 127) << 23")};
  const float v = lo ? p * s1 * 5.42101086e-20f : (k > 127 ? {r.bits_as_float("0x7f800000u")} : p * s1);
  return y != y ? y : v;
}}"""


#: name -> (dialect -> C text). Order matters only for readability of the prelude.
HELPERS = {"glow_h2f": _h2f, "glow_f2h": _f2h, "glow_bf2f": _bf2f, "glow_f2bf": _f2bf,
           "glow_ipow": _ipow, "glow_log2f": _log2f, "glow_exp2f": _exp2f}


def render_helpers(renderer, names) -> list[str]:
    return [HELPERS[n](renderer) for n in HELPERS if n in names]
