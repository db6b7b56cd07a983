"""Lowering rules for elementwise ops outside the floor: unary math, variadic arithmetic, Mod, logic.

Numerics: expansions are chosen to stay accurate over the whole input range, not just near 0:
`expm1`/`log1p` (Kahan's and Goldberg's tricks) where the naive formula cancels, argument
symmetry (odd functions work on |x|), and no intermediate that overflows before the result does.
16-bit floats are widened to float32 for multi-step formulas (`wide_float`), exactly as the
reference computes them, so results are rounded once.
"""

from __future__ import annotations

import functools
import math

from .. import dtypes as dt
from ._build import is_float, scalar
from .registry import lowering

HALF = frozenset({dt.float16, dt.bfloat16})
LN2 = math.log(2)
#: Above this magnitude asinh(x)/acosh(x) equal log(2x) to within float64 precision.
BIG_ARG = 1e10


# -- shared building blocks (also used by rules_activation) ----------------------------------------

def wide_float(rule):
    """Run `rule` in float32 when the node's inputs are float16/bfloat16, then cast back.

    Multi-step formulas in a 16-bit type would round at every step; the reference computes them
    in float32 and rounds once.
    """

    @functools.wraps(rule)
    def wrapped(rb, node, ins):
        half = [v is not None and v.type.dtype in HALF for v in ins]
        if not any(half):
            return rule(rb, node, ins)
        wide = [rb.emit1("Cast", [v], {"to": dt.float32}) if h else v for v, h in zip(ins, half)]
        outs = rule(rb, node, wide)
        if outs is None:
            return None
        return [o if o.type.dtype == old.type.dtype else rb.emit1("Cast", [o], {"to": old.type.dtype})
                for o, old in zip(outs, node.outputs)]

    return wrapped


def op1(rb, op, *inputs, **attrs):
    return rb.emit1(op, list(inputs), attrs or None)


def neg(rb, x):
    # x * -1, not 0 - x: keeps the sign of zero (1 / -0.0 is -inf), wraps like Neg for integers
    return op1(rb, "Mul", x, scalar(rb, -1, x))


def absval(rb, x):
    """|x| as max(x, -x). Of the zeros it may give -0.0: nothing here relies on the sign of a
    zero (no 1/|x|)."""
    return op1(rb, "Max", x, neg(rb, x))


def odd(rb, x, r):
    """r(|x|) extended to an odd function of x: -r where x < 0 (NaN stays NaN)."""
    return op1(rb, "Where", op1(rb, "Less", x, scalar(rb, 0, x)), neg(rb, r), r)


def expm1(rb, x):
    """e^x - 1, accurate near 0 (Kahan): (u - 1) * x / log(u) with u = e^x."""
    u = op1(rb, "Exp", x)
    um1 = op1(rb, "Sub", u, scalar(rb, 1, x))
    r = op1(rb, "Div", op1(rb, "Mul", um1, x), op1(rb, "Log", u))
    r = op1(rb, "Where", op1(rb, "Equal", um1, scalar(rb, -1, x)), um1, r)  # e^x underflowed
    r = op1(rb, "Where", op1(rb, "Equal", u, scalar(rb, math.inf, x)), u, r)  # e^x overflowed
    return op1(rb, "Where", op1(rb, "Equal", u, scalar(rb, 1, x)), x, r)  # |x| below rounding


def log1p(rb, u):
    """log(1 + u), accurate near 0 (Goldberg): log(w) * u / (w - 1) with w = 1 + u."""
    w = op1(rb, "Add", u, scalar(rb, 1, u))
    r = op1(rb, "Mul", op1(rb, "Log", w), op1(rb, "Div", u, op1(rb, "Sub", w, scalar(rb, 1, u))))
    r = op1(rb, "Where", op1(rb, "Equal", w, scalar(rb, math.inf, u)), w, r)
    return op1(rb, "Where", op1(rb, "Equal", w, scalar(rb, 1, u)), u, r)


def half_exp(rb, a):
    """e^a / 2, computed as e^(a - ln 2) so that it overflows only when the result does."""
    return op1(rb, "Exp", op1(rb, "Sub", a, scalar(rb, LN2, a)))


def cos(rb, x):
    # 1 - 2 sin^2(x/2): x/2 is exact, so the error does not grow with |x| (x + pi/2 would).
    s = op1(rb, "Sin", op1(rb, "Mul", x, scalar(rb, 0.5, x)))
    return op1(rb, "Sub", scalar(rb, 1, x), op1(rb, "Mul", scalar(rb, 2, x), op1(rb, "Mul", s, s)))


def log_twice(rb, a, small):
    """log(2a) where a > BIG_ARG (asinh/acosh of huge arguments), else `small`."""
    big = op1(rb, "Add", op1(rb, "Log", a), scalar(rb, LN2, a))
    return op1(rb, "Where", op1(rb, "Greater", a, scalar(rb, BIG_ARG, a)), big, small)


def chain(rb, op, xs):
    """op(op(x0, x1), x2) ..., one binary node per extra input."""
    return functools.reduce(lambda a, b: op1(rb, op, a, b), xs)


# -- sign, magnitude, rounding ---------------------------------------------------------------------

@lowering("Neg")
def lower_neg(rb, node, ins):
    return [neg(rb, ins[0])]


@lowering("Abs")
def lower_abs(rb, node, ins):
    (x,) = ins
    if not x.type.dtype.is_signed:
        return [op1(rb, "Identity", x)]
    return [absval(rb, x)]


@lowering("Reciprocal")
def lower_reciprocal(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Div", scalar(rb, 1, x), x)]


@lowering("Ceil")
def lower_ceil(rb, node, ins):
    (x,) = ins
    return [neg(rb, op1(rb, "Floor", neg(rb, x)))]


@lowering("Round")
def lower_round(rb, node, ins):
    # Halves go to the even neighbour: floor(x) + 1 when the fraction is > 1/2, or == 1/2 with
    # an odd floor. x - floor(x) is exact, so the comparisons are too; inf and NaN pass through.
    (x,) = ins
    f = op1(rb, "Floor", x)
    frac = op1(rb, "Sub", x, f)
    half = scalar(rb, 0.5, x)
    halved = op1(rb, "Mul", f, half)
    is_odd = op1(rb, "Not", op1(rb, "Equal", op1(rb, "Floor", halved), halved))
    up = op1(rb, "And", op1(rb, "Equal", frac, half), is_odd)
    up = lower_or(rb, node, [op1(rb, "Greater", frac, half), up])[0]
    return [op1(rb, "Where", up, op1(rb, "Add", f, scalar(rb, 1, x)), f)]


@lowering("Sign")
def lower_sign(rb, node, ins):
    # (x > 0) - (x < 0) as numbers; NaN stays NaN
    (x,) = ins
    t, zero = x.type.dtype, scalar(rb, 0, x)
    pos = op1(rb, "Cast", op1(rb, "Greater", x, zero), to=t)
    if not t.is_signed:
        return [pos]
    out = op1(rb, "Sub", pos, op1(rb, "Cast", op1(rb, "Less", x, zero), to=t))
    if is_float(x):
        out = op1(rb, "Where", op1(rb, "Equal", x, x), out, x)
    return [out]


# -- trigonometric and hyperbolic ------------------------------------------------------------------

@lowering("Cos")
@wide_float
def lower_cos(rb, node, ins):
    return [cos(rb, ins[0])]


@lowering("Tan")
@wide_float
def lower_tan(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Div", op1(rb, "Sin", x), cos(rb, x))]


@lowering("Asin")
@wide_float
def lower_asin(rb, node, ins):
    # asin x = 2 atan(x / (1 + sqrt((1 - x)(1 + x)))): exact at +-1 (no division by 0), no
    # cancellation near +-1, NaN outside [-1, 1] from the square root.
    (x,) = ins
    one = scalar(rb, 1, x)
    root = op1(rb, "Sqrt", op1(rb, "Mul", op1(rb, "Sub", one, x), op1(rb, "Add", one, x)))
    t = op1(rb, "Atan", op1(rb, "Div", x, op1(rb, "Add", one, root)))
    return [op1(rb, "Mul", scalar(rb, 2, x), t)]


@lowering("Acos")
@wide_float
def lower_acos(rb, node, ins):
    # acos x = 2 atan(sqrt((1 - x) / (1 + x))): accurate near both ends (pi/2 - asin x is not
    # near x = 1); x = -1 divides by 0 into atan(inf) = pi/2.
    (x,) = ins
    one = scalar(rb, 1, x)
    ratio = op1(rb, "Div", op1(rb, "Sub", one, x), op1(rb, "Add", one, x))
    return [op1(rb, "Mul", scalar(rb, 2, x), op1(rb, "Atan", op1(rb, "Sqrt", ratio)))]


@lowering("Sinh")
@wide_float
def lower_sinh(rb, node, ins):
    # Odd: work on a = |x|. Below 1, (e^a - e^-a)/2 cancels: use m = expm1(a),
    # sinh a = (m + m / (m + 1)) / 2. Above, h - 1/(4h) with h = e^a / 2 (no early overflow).
    (x,) = ins
    a = absval(rb, x)
    m = expm1(rb, a)
    small = op1(rb, "Mul", scalar(rb, 0.5, x),
                op1(rb, "Add", m, op1(rb, "Div", m, op1(rb, "Add", m, scalar(rb, 1, x)))))
    h = half_exp(rb, a)
    large = op1(rb, "Sub", h, op1(rb, "Div", scalar(rb, 0.25, x), h))
    r = op1(rb, "Where", op1(rb, "Less", a, scalar(rb, 1, x)), small, large)
    return [odd(rb, x, r)]


@lowering("Cosh")
@wide_float
def lower_cosh(rb, node, ins):
    # cosh x = h + 1/(4h), h = e^|x| / 2: no cancellation, overflows only when cosh does.
    (x,) = ins
    h = half_exp(rb, absval(rb, x))
    return [op1(rb, "Add", h, op1(rb, "Div", scalar(rb, 0.25, x), h))]


@lowering("Tanh")
@wide_float
def lower_tanh(rb, node, ins):
    # tanh a = -m / (2 + m), m = expm1(-2a), a = |x|: exact near 0, saturates to 1 (m = -1).
    (x,) = ins
    m = expm1(rb, op1(rb, "Mul", absval(rb, x), scalar(rb, -2, x)))
    r = op1(rb, "Div", neg(rb, m), op1(rb, "Add", scalar(rb, 2, x), m))
    return [odd(rb, x, r)]


@lowering("Asinh")
@wide_float
def lower_asinh(rb, node, ins):
    # asinh a = log1p(a + a^2 / (1 + sqrt(1 + a^2))) on a = |x| (odd): no cancellation near 0.
    # a^2 overflows only far above BIG_ARG, where log(2a) is taken instead.
    (x,) = ins
    one = scalar(rb, 1, x)
    a = absval(rb, x)
    sq = op1(rb, "Mul", a, a)
    t = op1(rb, "Div", sq, op1(rb, "Add", one, op1(rb, "Sqrt", op1(rb, "Add", one, sq))))
    r = log1p(rb, op1(rb, "Add", a, t))
    return [odd(rb, x, log_twice(rb, a, r))]


@lowering("Acosh")
@wide_float
def lower_acosh(rb, node, ins):
    # acosh x = log1p(t + sqrt(t) sqrt(t + 2)), t = x - 1: accurate near 1, no overflow, and
    # NaN below 1 (sqrt(t (t + 2)) would be real again below -1).
    (x,) = ins
    t = op1(rb, "Sub", x, scalar(rb, 1, x))
    root = op1(rb, "Mul", op1(rb, "Sqrt", t), op1(rb, "Sqrt", op1(rb, "Add", t, scalar(rb, 2, x))))
    return [log_twice(rb, x, log1p(rb, op1(rb, "Add", t, root)))]


@lowering("Atanh")
@wide_float
def lower_atanh(rb, node, ins):
    # atanh a = log1p(2a / (1 - a)) / 2 on a = |x| (odd): 1 - a is exact near 1; +-1 give +-inf.
    (x,) = ins
    a = absval(rb, x)
    u = op1(rb, "Div", op1(rb, "Mul", scalar(rb, 2, x), a), op1(rb, "Sub", scalar(rb, 1, x), a))
    r = op1(rb, "Mul", scalar(rb, 0.5, x), log1p(rb, u))
    return [odd(rb, x, r)]


# -- classification --------------------------------------------------------------------------------

def _comparable(rb, x):
    """x in a type the compare primitives take (float 8 formats are widened exactly to float32)."""
    return x if x.type.dtype in dt.NUMERIC else op1(rb, "Cast", x, to=dt.float32)


@lowering("IsNaN")
def lower_isnan(rb, node, ins):
    x = _comparable(rb, ins[0])
    return [op1(rb, "Not", op1(rb, "Equal", x, x))]


@lowering("IsInf")
def lower_isinf(rb, node, ins):
    x = _comparable(rb, ins[0])
    hits = [op1(rb, "Equal", x, scalar(rb, s * math.inf, x))
            for s, on in ((1, node.attrs["detect_positive"]), (-1, node.attrs["detect_negative"])) if on]
    if not hits:  # nothing to detect: all false
        return [op1(rb, "Greater", x, scalar(rb, math.inf, x))]
    return [hits[0] if len(hits) == 1 else lower_or(rb, node, hits)[0]]


# -- variadic and binary arithmetic ----------------------------------------------------------------

@lowering("Sum")
@wide_float
def lower_sum(rb, node, ins):
    return [chain(rb, "Add", ins) if len(ins) > 1 else op1(rb, "Identity", ins[0])]


@lowering("Mean")
@wide_float
def lower_mean(rb, node, ins):
    if len(ins) == 1:
        return [op1(rb, "Identity", ins[0])]
    total = chain(rb, "Add", ins)
    return [op1(rb, "Div", total, scalar(rb, len(ins), total))]


def _variadic_extreme(op):
    """Max/Min with one input is the identity; with more than two, a chain of the 2-input form."""

    def rule(rb, node, ins):
        if len(ins) == 2:
            return None  # the floor's own form
        return [chain(rb, op, ins) if len(ins) > 1 else op1(rb, "Identity", ins[0])]

    rule.__name__ = f"lower_variadic_{op.lower()}"
    return rule


lowering("Max")(_variadic_extreme("Max"))
lowering("Min")(_variadic_extreme("Min"))


@lowering("Mod")
def lower_mod(rb, node, ins):
    a, b = ins
    if a.type.dtype.is_int:
        return [_int_mod(rb, a, b, node.attrs["fmod"])]
    return [_float_mod(rb, a, b, node.attrs["fmod"], node.outputs[0].type.dtype)]


def _int_mod(rb, a, b, fmod):
    # Div truncates toward zero, so a - (a / b) * b has the sign of a (C's %). A zero divisor
    # gives 0, as NumPy does (and the division never sees it).
    zero = scalar(rb, 0, a)
    b_is_0 = op1(rb, "Equal", b, zero)
    safe_b = op1(rb, "Where", b_is_0, scalar(rb, 1, b), b)
    r = op1(rb, "Sub", a, op1(rb, "Mul", op1(rb, "Div", a, safe_b), safe_b))
    if not fmod and a.type.dtype.is_signed:
        r = _floored(rb, r, safe_b)
    return op1(rb, "Where", b_is_0, zero, r)


def _floored(rb, r, b):
    """Truncated remainder -> floored (sign of b): add b where r is nonzero and signs differ."""
    zero = scalar(rb, 0, r)
    differ = op1(rb, "Not", op1(rb, "Equal", op1(rb, "Less", r, zero), op1(rb, "Less", b, zero)))
    fix = op1(rb, "And", op1(rb, "Not", op1(rb, "Equal", r, zero)), differ)
    return op1(rb, "Where", fix, op1(rb, "Add", r, b), r)


#: Float remainders are computed in float64: there the product q * b of an integral quotient
#: and a divisor of a narrower type is exact while q < 2^(53 - mantissa bits of b) (always, for
#: float16; below 2^29 for float32), so a - q * b is the exact remainder. float64 itself (and
#: larger quotients) get a - q * b rounded once: off by up to half an ulp of a.
_WIDER = {dt.float16: dt.float64, dt.bfloat16: dt.float64, dt.float32: dt.float64}


def _float_mod(rb, a, b, fmod, out_dtype):
    wide = _WIDER.get(a.type.dtype)
    if wide is not None:
        a, b = op1(rb, "Cast", a, to=wide), op1(rb, "Cast", b, to=wide)
    zero = scalar(rb, 0, a)
    q = op1(rb, "Div", a, b)
    q = op1(rb, "Where", op1(rb, "Less", q, zero), neg(rb, op1(rb, "Floor", neg(rb, q))),
            op1(rb, "Floor", q))  # trunc(a / b)
    qb = op1(rb, "Where", op1(rb, "Equal", q, zero), zero, op1(rb, "Mul", q, b))  # 0 * inf is 0 here
    r = op1(rb, "Sub", a, qb)
    # The rounded quotient can be one off: bring r back to sign(a) and |r| < |b|.
    a_neg = op1(rb, "Less", a, zero)
    mag_b = absval(rb, b)
    step = op1(rb, "Where", a_neg, neg(rb, mag_b), mag_b)
    r_neg, r_pos = op1(rb, "Less", r, zero), op1(rb, "Greater", r, zero)
    wrong_sign = op1(rb, "Where", a_neg, r_pos, r_neg)
    r = op1(rb, "Where", wrong_sign, op1(rb, "Add", r, step), r)
    too_big = op1(rb, "Not", op1(rb, "Less", absval(rb, r), mag_b))
    too_big = op1(rb, "And", too_big, op1(rb, "Equal", r, r))  # not for NaN
    r = op1(rb, "Where", too_big, op1(rb, "Sub", r, step), r)
    if not fmod:
        r = _floored(rb, r, b)
    return r if wide is None else op1(rb, "Cast", r, to=out_dtype)


# -- logic and comparison --------------------------------------------------------------------------

@lowering("Or")
def lower_or(rb, node, ins):
    a, b = ins
    return [op1(rb, "Not", op1(rb, "And", op1(rb, "Not", a), op1(rb, "Not", b)))]


@lowering("Xor")
def lower_xor(rb, node, ins):
    a, b = ins
    return [op1(rb, "Not", op1(rb, "Equal", a, b))]


@lowering("LessOrEqual")
def lower_less_equal(rb, node, ins):
    a, b = ins  # not Not(Greater): NaN compares false both ways
    return lower_or(rb, node, [op1(rb, "Less", a, b), op1(rb, "Equal", a, b)])


@lowering("GreaterOrEqual")
def lower_greater_equal(rb, node, ins):
    a, b = ins
    return lower_or(rb, node, [op1(rb, "Greater", a, b), op1(rb, "Equal", a, b)])


# -- activations declared with the elementwise ops -------------------------------------------------

@lowering("Relu")
def lower_relu(rb, node, ins):
    (x,) = ins
    return [op1(rb, "Max", x, scalar(rb, 0, x))]


@lowering("Sigmoid")
@wide_float
def lower_sigmoid(rb, node, ins):
    return [sigmoid(rb, ins[0])]


def sigmoid(rb, x):
    """1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: e = e^-|x| never overflows, and tiny
    results keep their (subnormal) value instead of flushing to 0."""
    e = op1(rb, "Exp", neg(rb, absval(rb, x)))
    num = op1(rb, "Where", op1(rb, "Less", x, scalar(rb, 0, x)), e, scalar(rb, 1, x))
    return op1(rb, "Div", num, op1(rb, "Add", scalar(rb, 1, x), e))

