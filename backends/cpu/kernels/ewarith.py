"""Elementwise arithmetic, comparisons, boolean and bitwise logic, Identity and Where, for the op
table in ewops.py. Integer division by zero gives 0 and shifts past the width give 0: generated
code never traps, whatever the data.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir
from glow import dtypes as dt

from ..codegen import has_ltype
from ..irutil import F64, I1
from . import cast
from .ewops import op
from .lanes import FLOATS, INTS, NUMERIC, SIGNED_INTS, UNSIGNED_INTS, compute_type, icmp, int_resize, is_float


def _fold(fn):
    def emit(L, args, ins, out, attrs):
        acc = args[0]
        for a in args[1:]:
            acc = fn(L, acc, a, ins[0])
        return acc

    return emit


def _add(L, a, b, d):
    return L.b.fadd(a, b) if is_float(d) else L.b.add(a, b)


def constant_value(v) -> float | None:
    """The number a float constant holds in every lane (None: not a constant, or lanes differ)."""
    if not isinstance(v, ir.Constant):
        return None
    lanes = v.constant if isinstance(v.type, ir.VectorType) else [v.constant]
    if not isinstance(lanes, list) or not lanes:
        return None
    lanes = [x.constant if isinstance(x, ir.Constant) else x for x in lanes]
    if any(not isinstance(x, float) for x in lanes) or len(set(map(repr, lanes))) != 1:
        return None
    return lanes[0]


def _plain_constant(v, zero_ok: bool) -> bool:
    """v is a constant whose lanes are one number, not NaN (and not a zero unless zero_ok)."""
    c = constant_value(v)
    return c is not None and not math.isnan(c) and (zero_ok or c != 0.0)


def _against_constant(L, a, b, pred):
    """max/min (pred ">" / "<") of a and b as the reference has it (numpy: a NaN wins, and of two
    equal values the second), where one operand is a constant c that is not NaN, in one select
    `c pred x ? c : x`: x86's maxps/minps with c first, one instruction, where the general form
    needs four (the NaN test). A NaN x fails the comparison and comes out; of equal values x
    comes out, which is the second operand, or equals c bit for bit when c is not a zero (c
    second: -0.0 and +0.0 compare equal, so a zero c in second place keeps the general form).
    None where neither operand qualifies."""
    for c, x in ((a, b), (b, a)):
        if _plain_constant(c, zero_ok=c is a):
            return L.b.select(L.b.fcmp_ordered(pred, c, x), c, x)
    return None


def maximum(L, a, b, d):
    """The larger of a and b (element type d); a NaN wins."""
    if is_float(d):
        return (_against_constant(L, a, b, ">")
                or L.b.select(L.b.fcmp_unordered("uno", a, a), a, L.b.select(L.b.fcmp_ordered(">", a, b), a, b)))
    return L.b.select(icmp(L, d, ">", a, b), a, b)


def minimum(L, a, b, d):
    """The smaller of a and b (element type d); a NaN wins."""
    if is_float(d):
        return (_against_constant(L, a, b, "<")
                or L.b.select(L.b.fcmp_unordered("uno", a, a), a, L.b.select(L.b.fcmp_ordered("<", a, b), a, b)))
    return L.b.select(icmp(L, d, "<", a, b), a, b)


op("Add")(lambda L, a, ins, out, at: _add(L, a[0], a[1], ins[0]))
op("Sub")(lambda L, a, ins, out, at: (L.b.fsub if is_float(out) else L.b.sub)(a[0], a[1]))
op("Mul")(lambda L, a, ins, out, at: (L.b.fmul if is_float(out) else L.b.mul)(a[0], a[1]))
op("Max")(_fold(maximum))
op("Min")(_fold(minimum))
op("Sum", FLOATS)(_fold(_add))


@op("Div")
def _div(L, args, ins, out, attrs):
    a, b = args
    if is_float(out):
        return L.b.fdiv(a, b)
    t = a.type.element if isinstance(a.type, ir.VectorType) else a.type
    zero, one = L.of(0, t), L.of(1, t)
    by_zero = L.b.icmp_unsigned("==", b, zero)
    if out in UNSIGNED_INTS:
        return L.b.select(by_zero, zero, L.b.udiv(a, L.b.select(by_zero, one, b)))
    minus_one = L.b.icmp_signed("==", b, L.of(-1, t))
    safe = L.b.select(L.b.or_(by_zero, minus_one), one, b)
    q = L.b.select(minus_one, L.b.sub(zero, a), L.b.sdiv(a, safe))  # INT_MIN / -1 wraps
    return L.b.select(by_zero, zero, q)


def _to_f64(L, v, d):
    if is_float(d):
        return L.b.fpext(v, L.t(F64)) if v.type != L.t(F64) else v
    return (L.b.sitofp if d in SIGNED_INTS else L.b.uitofp)(v, L.t(F64))


@op("Pow", FLOATS + (dt.int32, dt.int64) + INTS)
def _pow(L, args, ins, out, attrs):
    x, y = args
    quarters = _quarter_exponent(y, ins[1]) if is_float(ins[0]) and out != dt.float64 else None
    if quarters is not None:  # LRN's x ** 0.75, x ** 0.5, x ** 2, ...: vector code, no libm call
        return cast.cast(L, _pow_quarters(L, _to_f64(L, x, ins[0]), quarters), dt.float64, out)
    p = L.intrinsic("pow", [_to_f64(L, x, ins[0]), _to_f64(L, y, ins[1])])
    if is_float(out):
        return cast.cast(L, p, dt.float64, out)  # not fptrunc: double -> half is a libcall
    t = compute_type(out)
    trunc = L.b.fptosi(L.intrinsic("trunc", [p]), L.t(t))
    if ins[1] not in INTS:
        return trunc
    exact = _ipow(L, x, L.b.sext(y, L.t(t)) if y.type != x.type and ins[1] in SIGNED_INTS
                  else int_resize(L, y, ins[1], t))
    neg = L.b.icmp_signed("<", y, L.of(0, y.type.element if isinstance(y.type, ir.VectorType) else y.type)) \
        if ins[1] in SIGNED_INTS else L.of(0, I1)
    return L.b.select(neg, trunc, exact)


def _quarter_exponent(y, d) -> int | None:
    """4 * the exponent, when it is an immediate (the same constant in every lane) that is a
    multiple of 1/4 no larger than 4 in magnitude; else None (a run-time exponent)."""
    if not isinstance(y, ir.Constant) or not is_float(d):
        return None
    c = y.constant
    values = {float(v.constant if isinstance(v, ir.Constant) else v) for v in c} if isinstance(c, list) else {c}
    if len(values) != 1:
        return None
    q = 4 * float(values.pop())
    return int(q) if math.isfinite(q) and q == int(q) and abs(q) <= 16 else None


def _pow_quarters(L, x, quarters: int):
    """x ** (quarters / 4) for a float64 x (a float32 or narrower value, widened): x ** n by
    multiplication, the quarters by one or two square roots, a negative exponent by one division.
    Each step rounds in float64, so the result rounded to float32 is libm's pow but for a case in
    about 10^8 at a rounding tie. pow's special cases hold: a non-integer exponent reads -0 and
    -inf as +0 and +inf (sqrt would give -0 and NaN); x ** 0 is 1, NaN included."""
    if quarters == 0:
        return L.of(1.0, F64)
    k = abs(quarters)
    if k % 4:
        zero_or_minus_inf = L.b.or_(L.b.fcmp_ordered("==", x, L.of(0.0, F64)),
                                    L.b.fcmp_ordered("==", x, L.of(float("-inf"), F64)))
        x = L.b.select(zero_or_minus_inf, L.intrinsic("fabs", [x]), x)
    acc = None
    for _ in range(k // 4):
        acc = x if acc is None else L.b.fmul(acc, x)
    if k % 4:
        root = L.intrinsic("sqrt", [x])
        parts = ([root] if k % 4 >= 2 else []) + ([L.intrinsic("sqrt", [root])] if k % 2 else [])
        for part in parts:
            acc = part if acc is None else L.b.fmul(acc, part)
    return L.b.fdiv(L.of(1.0, F64), acc) if quarters < 0 else acc


def _ipow(L, x, y):
    """x ** y for y >= 0 by squaring, unrolled over the exponent's bits (wraps like NumPy)."""
    t = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    acc, base, e = L.of(1, t), x, y
    for _ in range(t.width):
        bit = L.b.icmp_unsigned("!=", L.b.and_(e, L.of(1, t)), L.of(0, t))
        acc = L.b.select(bit, L.b.mul(acc, base), acc)
        base = L.b.mul(base, base)
        e = L.b.lshr(e, L.of(1, t))
    return acc


def _cmp(fpred, ipred):
    def emit(L, args, ins, out, attrs):
        a, b = args
        d = ins[0]
        if is_float(d):
            return L.b.fcmp_ordered(fpred, a, b)
        if d == dt.bool_:
            return L.b.icmp_unsigned(ipred, a, b)
        return icmp(L, d, ipred, a, b)

    return emit


for _n, _f, _i in (("Equal", "==", "=="), ("Less", "<", "<"), ("Greater", ">", ">"),
                   ("LessOrEqual", "<=", "<="), ("GreaterOrEqual", ">=", ">=")):
    op(_n, NUMERIC + (dt.bool_,))(_cmp(_f, _i))

op("And", (dt.bool_,))(lambda L, a, ins, out, at: L.b.and_(a[0], a[1]))
op("Or", (dt.bool_,))(lambda L, a, ins, out, at: L.b.or_(a[0], a[1]))
op("Xor", (dt.bool_,))(lambda L, a, ins, out, at: L.b.xor(a[0], a[1]))
op("Not", (dt.bool_,))(lambda L, a, ins, out, at: L.b.xor(a[0], L.of(1, I1)))
op("BitwiseAnd", INTS)(lambda L, a, ins, out, at: L.b.and_(a[0], a[1]))
op("BitwiseOr", INTS)(lambda L, a, ins, out, at: L.b.or_(a[0], a[1]))
op("BitwiseXor", INTS)(lambda L, a, ins, out, at: L.b.xor(a[0], a[1]))
op("BitwiseNot", INTS)(lambda L, a, ins, out, at: L.b.xor(a[0], L.of(-1, compute_type(out))))
op("Identity", tuple(d for d in dt.ALL if has_ltype(d)))(lambda L, a, ins, out, at: a[0])


@op("BitShift", INTS)
def _bitshift(L, args, ins, out, attrs):
    x, y = args
    t = compute_type(out)
    big = L.b.icmp_unsigned(">=", y, L.of(t.width, t))
    if attrs["direction"] == "LEFT":
        return L.b.select(big, L.of(0, t), L.b.shl(x, L.b.select(big, L.of(0, t), y)))
    if out in SIGNED_INTS:
        return L.b.ashr(x, L.b.select(big, L.of(t.width - 1, t), y))
    return L.b.select(big, L.of(0, t), L.b.lshr(x, L.b.select(big, L.of(0, t), y)))


@op("Where", tuple(d for d in dt.ALL if has_ltype(d)))
def _where(L, args, ins, out, attrs):
    return L.b.select(*args)
