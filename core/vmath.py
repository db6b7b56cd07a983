"""float32 polynomial approximations of exp, log, tanh and erf, shared by the code generators.

The coefficients and ranges only; each generator writes the method in its own language (the LLVM
CPU backend in backends/cpu/kernels/vmath.py, the C-style renderer's device helpers in
glow.render.helpers for CPU-kind devices, whose OpenCL math library is a scalar call per element).
Fitted by benchmarks/fit_vmath.py; errors measured by tests/test_cpu_vmath.py.

* exp: x = n ln2 + r with ln2 split in two (Cody-Waite), exp(r) = 1 + r + r^2 P(r), times 2^n.
* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)); s = (m - 1) / (m + 1), log m = 2s + s^3 Q(s^2).
* tanh: x + x^3 T(x^2) for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1) with x's sign.
* erf: x E(x^2) for |x| <= 1, else 1 - exp(-x^2) C(1/|x|) (|x| clamped to 4, where erf is 1).
"""

EXP_P = (0.5, 0.16666576266288757, 0.04166646674275398, 0.008363175205886364, 0.0013933643931522965)
LOG_Q = (0.6666666865348816, 0.40000101923942566, 0.28552231192588806, 0.23303401470184326)
TANH_T = (-0.3333333432674408, 0.13333310186862946, -0.053960490971803665, 0.02177690528333187,
          -0.00836582388728857, 0.0023141251876950264)
ERF_E = (1.128379225730896, -0.3761262893676758, 0.11283612251281738, -0.026854807510972023,
         0.0051900530233979225, -0.000802435155492276, 7.898201874922961e-05)
ERFC_C = (0.00011466929572634399, 0.5618857145309448, 0.019603915512561798, -0.37169361114501953,
          0.2187654823064804, 0.25932660698890686, -0.5615038871765137, 0.4562140107154846,
          -0.18719515204429626, 0.03206583485007286)

LN2_HI = 0.693145751953125  # ln 2 to 16 bits: n * LN2_HI is exact for |n| < 2^8
LN2_LO = 1.4286068203094173e-06
EXP_HI = 88.72283  # above: inf
EXP_LO = -87.33654  # below: 0 (the result would be subnormal)
TANH_SMALL = 0.625  # |x| below: the odd polynomial
ERF_SMALL, ERF_CLAMP = 1.0, 4.0
