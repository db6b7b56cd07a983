"""Vectorisable float32 exp, log, tanh, erf and sigmoid for CPU-kind devices.

A CPU OpenCL compiler (PoCL) turns `erf(x)` into one scalar library call per element (about 17 ns
on the machine of TOOLCHAIN.md: GELU's erf was 40% of a transformer block's run); these helpers
are straight-line arithmetic over glow.vmath's polynomials (the ones the LLVM CPU backend emits),
so a work-group's loop over them vectorises. GPUs keep their own math library (fast there).
Results agree with the LLVM backend's to the rounding of fma vs mul-add: about 1-2 ulp;
infinities and NaN as IEEE; results that would be subnormal flush to zero.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from .. import vmath as vm

#: ONNX op -> helper name, for float32 on CPU-kind devices (expr.py); Sigmoid is spelled inline.
FAST_UNARY = {"Exp": "glow_expf", "Log": "glow_logf", "Tanh": "glow_tanhf", "Erf": "glow_erff"}
#: Helpers a helper calls (the prelude holds helpers in HELPERS order: callees first).
DEPENDS = {"glow_tanhf": ("glow_expf",), "glow_erff": ("glow_expf",)}


def _horner(r, x: str, coefs) -> str:
    """coefs[0] + x * (coefs[1] + ...) as nested fma."""
    fma = r.math("fma", "float")
    acc = _lit(r, coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = f"{fma}({x}, {acc}, {_lit(r, c)})"
    return acc


def _lit(r, v: float) -> str:
    return r.literal(v, dt.float32)


def _inf(r) -> str:
    return r.bits_as_float("0x7f800000u")


def _expf(r) -> str:
    fma, rint = r.math("fma", "float"), r.math("rint", "float")
    fmin, fmax = r.math("fmin", "float"), r.math("fmax", "float")
    lo, hi = (r.bits_as_float(f"(unsigned int)({e} + 127) << 23") for e in ("nh", "ni - nh"))
    return f"""{r.helper_qualifier} float glow_expf(float x) {{
  const float xc = {fmin}({fmax}(x, {_lit(r, vm.EXP_LO)}), {_lit(r, vm.EXP_HI)});
  const float n = {rint}(xc * {_lit(r, 1 / math.log(2))});
  float t = {fma}(n, {_lit(r, -vm.LN2_HI)}, xc);
  t = {fma}(n, {_lit(r, -vm.LN2_LO)}, t);
  const float p = {fma}(t * t, {_horner(r, "t", vm.EXP_P)}, t + 1.0f);
  const int ni = (int)n, nh = ni >> 1;  /* 2^n as 2^nh * 2^(n - nh): both stay normal */
  float y = p * {lo} * {hi};
  y = x > {_lit(r, vm.EXP_HI)} ? {_inf(r)} : (x < {_lit(r, vm.EXP_LO)} ? 0.0f : y);
  return x != x ? x : y;
}}"""


def _logf(r) -> str:
    fma = r.math("fma", "float")
    return f"""{r.helper_qualifier} float glow_logf(float x) {{
  const int tiny = x < 1.17549435e-38f;  /* subnormal (or <= 0, below): scale up by 2^23 */
  const float xs = tiny ? x * 8388608.0f : x;
  const unsigned int bits = {r.float_as_bits("xs")};
  int e = (int)(bits >> 23) - (tiny ? 150 : 127);
  float m = {r.bits_as_float("(bits & 0x7fffffu) | 0x3f800000u")};
  const int big = m > {_lit(r, math.sqrt(2.0))};
  m = big ? 0.5f * m : m;
  e += big;
  const float f = m - 1.0f, s = f / (f + 2.0f), z = s * s;
  const float lm = {fma}(s * z, {_horner(r, "z", vm.LOG_Q)}, 2.0f * s);
  const float ef = (float)e;
  float y = {fma}(ef, {_lit(r, vm.LN2_HI)}, {fma}(ef, {_lit(r, vm.LN2_LO)}, lm));
  y = x == {_inf(r)} ? x : (x == 0.0f ? -{_inf(r)} : (x < 0.0f ? {r.bits_as_float("0x7fc00000u")} : y));
  return x != x ? x : y;
}}"""


def _tanhf(r) -> str:
    fma = r.math("fma", "float")
    return f"""{r.helper_qualifier} float glow_tanhf(float x) {{
  const float a = {r.math("fabs", "float")}(x), z = x * x;
  const float small = {fma}(x * z, {_horner(r, "z", vm.TANH_T)}, x);
  const float large = {r.math("copysign", "float")}(1.0f - 2.0f / (glow_expf(2.0f * a) + 1.0f), x);
  return a < {_lit(r, vm.TANH_SMALL)} ? small : large;
}}"""


def _erff(r) -> str:
    fmin, fmax = r.math("fmin", "float"), r.math("fmax", "float")
    return f"""{r.helper_qualifier} float glow_erff(float x) {{
  const float a = {r.math("fabs", "float")}(x);
  const float small = x * {_horner(r, "x * x", vm.ERF_E)};
  const float ac = {fmin}({fmax}(a, {_lit(r, vm.ERF_SMALL)}), {_lit(r, vm.ERF_CLAMP)});
  const float q = 1.0f / ac, c = {_horner(r, "q", vm.ERFC_C)};
  const float large = {r.math("copysign", "float")}(1.0f - glow_expf(-(ac * ac)) * c, x);
  return x != x ? x : (a <= {_lit(r, vm.ERF_SMALL)} ? small : large);
}}"""


HELPERS = {"glow_expf": _expf, "glow_logf": _logf, "glow_tanhf": _tanhf, "glow_erff": _erff}
