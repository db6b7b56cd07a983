"""Vectorised float32 math: exp, log, tanh, erf and sigmoid as straight-line LLVM IR.

LLVM turns `llvm.exp.v16f32` into sixteen libm calls; these are polynomials instead, so a loop of
them stays in zmm registers. Each works on a float or a vector of floats of any width:

    y = vmath.emit_unary(kb, "Exp", x)      # kb: a KernelBuilder, x: <16 x float> (or float)

Method (coefficients in glow.vmath, fitted by benchmarks/fit_vmath.py, errors measured by
tests/test_cpu_vmath.py):
* exp: x = n ln2 + r with ln2 split in two (Cody-Waite), exp(r) = 1 + r + r^2 P(r), times 2^n
  built in the exponent bits (in two halves, so 2^128 does not overflow early). About 1 ulp.
* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)); s = (m - 1) / (m + 1), log m = 2s + s^3 Q(s^2).
* tanh: x + x^3 T(x^2) for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1) with x's sign.
* erf: x E(x^2) for |x| <= 1, else 1 - exp(-x^2) C(1/|x|) (|x| clamped to 4, where erf is 1).
* sigmoid: 1 / (1 + exp(-x)).
Infinities and NaN follow IEEE (exp(inf) = inf, log(0) = -inf, log(-1) = NaN, NaN in, NaN out);
results that would be subnormal flush to zero (below every tolerance glow tests with).
"""

from __future__ import annotations

import math

import llvmlite.ir as ir
from glow.vmath import ERF_E, ERFC_C, EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, LOG_Q, TANH_T

from ..irutil import F32, I32, KernelBuilder


class _Math:
    """Float ops on one value type (float or <n x float>) with matching constants."""

    def __init__(self, kb: KernelBuilder, t):
        self.kb, self.b, self.t = kb, kb.b, t
        self.n = t.count if isinstance(t, ir.VectorType) else None
        self.it = ir.VectorType(I32, self.n) if self.n else I32
        self.bt = ir.VectorType(ir.IntType(1), self.n) if self.n else ir.IntType(1)
        self.sfx = f"v{self.n}f32" if self.n else "f32"

    def c(self, x: float):
        return ir.Constant(self.t, [float(x)] * self.n) if self.n else ir.Constant(F32, float(x))

    def ci(self, x: int):
        return ir.Constant(self.it, [int(x)] * self.n) if self.n else ir.Constant(I32, int(x))

    def call(self, name: str, *args):
        f = self.kb.intrinsic(f"llvm.{name}.{self.sfx}", self.t, [self.t] * len(args))
        return self.b.call(f, list(args))

    def fma(self, a, b, c):
        # fmuladd: fused on FMA targets; on others a multiply and an add, not a libm call per lane
        # (the Cody-Waite split of ln 2 keeps n * LN2_HI exact, so nothing relies on one rounding)
        return self.call("fmuladd", a, b, c)

    def horner(self, x, coefs):
        acc = self.c(coefs[-1])
        for k in reversed(coefs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def is_nan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    def pow2(self, n_int):
        """2^n for integer n in [-126, 127] (bits of the float)."""
        e = self.b.shl(self.b.add(n_int, self.ci(127)), self.ci(23))
        return self.b.bitcast(e, self.t)


def _exp(m: _Math, x):
    b = m.b
    xc = m.call("minnum", m.call("maxnum", x, m.c(EXP_LO)), m.c(EXP_HI))
    n = m.call("rint", b.fmul(xc, m.c(1 / math.log(2))))
    r = m.fma(n, m.c(-LN2_HI), xc)
    r = m.fma(n, m.c(-LN2_LO), r)
    p = m.fma(b.fmul(r, r), m.horner(r, EXP_P), b.fadd(r, m.c(1.0)))
    ni = b.fptosi(n, m.it)
    half = b.ashr(ni, m.ci(1))  # 2^n = 2^half * 2^(n - half): both factors stay normal
    y = b.fmul(b.fmul(p, m.pow2(half)), m.pow2(b.sub(ni, half)))
    y = m.sel(m.gt(x, m.c(EXP_HI)), m.c(math.inf), y)
    y = m.sel(m.lt(x, m.c(EXP_LO)), m.c(0.0), y)
    return m.sel(m.is_nan(x), x, y)


def _log(m: _Math, x):
    b = m.b
    tiny = m.lt(x, m.c(2.0 ** -126))  # subnormal (or <= 0, handled below): scale up by 2^23
    xs = m.sel(tiny, b.fmul(x, m.c(2.0 ** 23)), x)
    bits = b.bitcast(xs, m.it)
    e = b.sub(b.lshr(bits, m.ci(23)), m.sel(tiny, m.ci(127 + 23), m.ci(127)))
    mant = b.bitcast(b.or_(b.and_(bits, m.ci(0x7FFFFF)), m.ci(0x3F800000)), m.t)  # [1, 2)
    big = m.gt(mant, m.c(math.sqrt(2.0)))
    mant = m.sel(big, b.fmul(mant, m.c(0.5)), mant)
    e = m.sel(big, b.add(e, m.ci(1)), e)
    f = b.fsub(mant, m.c(1.0))
    s = b.fdiv(f, b.fadd(f, m.c(2.0)))
    z = b.fmul(s, s)
    lm = m.fma(b.fmul(s, z), m.horner(z, LOG_Q), b.fmul(s, m.c(2.0)))
    ef = b.sitofp(e, m.t)
    y = m.fma(ef, m.c(LN2_HI), m.fma(ef, m.c(LN2_LO), lm))
    y = m.sel(b.fcmp_ordered("==", x, m.c(math.inf)), x, y)
    y = m.sel(b.fcmp_ordered("==", x, m.c(0.0)), m.c(-math.inf), y)
    y = m.sel(m.lt(x, m.c(0.0)), m.c(math.nan), y)
    return m.sel(m.is_nan(x), x, y)


def _tanh(m: _Math, x):
    b = m.b
    a = m.call("fabs", x)
    z = b.fmul(x, x)
    small = m.fma(b.fmul(x, z), m.horner(z, TANH_T), x)
    e = _exp(m, b.fmul(a, m.c(2.0)))
    large = b.fsub(m.c(1.0), b.fdiv(m.c(2.0), b.fadd(e, m.c(1.0))))
    large = m.call("copysign", large, x)
    return m.sel(m.lt(a, m.c(0.625)), small, large)


def _erf(m: _Math, x):
    b = m.b
    a = m.call("fabs", x)
    small = b.fmul(x, m.horner(b.fmul(x, x), ERF_E))
    ac = m.call("minnum", m.call("maxnum", a, m.c(1.0)), m.c(4.0))
    e = _exp(m, b.fneg(b.fmul(ac, ac)))
    large = b.fsub(m.c(1.0), b.fmul(e, m.horner(b.fdiv(m.c(1.0), ac), ERFC_C)))
    large = m.call("copysign", large, x)
    y = m.sel(b.fcmp_ordered("<=", a, m.c(1.0)), small, large)
    return m.sel(m.is_nan(x), x, y)


def _sigmoid(m: _Math, x):
    b = m.b
    return b.fdiv(m.c(1.0), b.fadd(m.c(1.0), _exp(m, b.fneg(x))))


_EMITTERS = {"Exp": _exp, "Log": _log, "Tanh": _tanh, "Erf": _erf, "Sigmoid": _sigmoid}
SUPPORTED = frozenset(_EMITTERS)


def emit_unary(kb: KernelBuilder, op_name: str, value):
    """`op_name`(value) for a float32 scalar or vector value; KeyError for ops not listed in
    SUPPORTED (the caller falls back to LLVM's intrinsics or its own code)."""
    t = value.type
    elem = t.element if isinstance(t, ir.VectorType) else t
    if elem != F32:
        raise KeyError(f"vmath works on float32, not {elem}")
    return _EMITTERS[op_name](_Math(kb, t), value)


__all__ = ["SUPPORTED", "emit_unary"]
