"""Op generators: elementwise (unary, binary with broadcasting, variadic), comparisons, logic, casts."""

from __future__ import annotations

import math

import numpy as np

from .gen import BOOL, F16, F32, FLOATS, I32, I64, INF, INTS, broadcast, gen, onnx_type, out

# name: (input constraint, output mag from input mag, monotone, exact-preserving, min opset)
#   constraint: None, "pos" (>= 0.25), a float bound on |x|, or "exact" (discontinuous op)
UNARY = {
    "Abs": (None, lambda m: m, False, True, 1), "Neg": (None, lambda m: m, True, True, 1),
    "Relu": (None, lambda m: m, False, True, 1),
    "Exp": (8.0, math.exp, True, False, 1), "Log": ("pos", lambda m: max(1.4, math.log(max(m, 1.0))), True, False, 1),
    "Sqrt": ("pos", math.sqrt, True, False, 1), "Reciprocal": ("pos", lambda m: 4.0, True, False, 1),
    "Sigmoid": (None, lambda m: 1.0, True, False, 1), "Tanh": (None, lambda m: 1.0, True, False, 1),
    "Erf": (None, lambda m: 1.0, True, False, 1), "Sin": (100.0, lambda m: 1.0, False, False, 1),
    "Cos": (100.0, lambda m: 1.0, False, False, 1), "Softsign": (None, lambda m: 1.0, True, False, 1),
    "Floor": ("exact", lambda m: m + 1, False, True, 1), "Ceil": ("exact", lambda m: m + 1, False, True, 1),
    "Round": ("exact", lambda m: m + 1, False, True, 1), "Sign": ("exact", lambda m: 1.0, False, True, 1),
    "Softplus": (30.0, lambda m: m + 1, True, False, 1), "Selu": (None, lambda m: 1.06 * m + 1.8, True, False, 1),
    "HardSwish": (None, lambda m: m, False, False, 14), "Mish": (None, lambda m: m, False, False, 18),
    "Atan": (None, lambda m: 1.6, True, False, 1), "Sinh": (5.0, lambda m: math.sinh(m), True, False, 1),
    "Cosh": (5.0, lambda m: math.cosh(m), False, False, 1), "Tan": (1.2, lambda m: 2.6, True, False, 1),
    "Asin": (0.9, lambda m: 1.2, True, False, 1), "Acos": (0.9, lambda m: 2.7, False, False, 1),
    "Identity": (None, lambda m: m, True, True, 1),
}


def _unary_input(b, constraint, dtypes=FLOATS):
    if constraint == "pos":
        return b.positive(b.pick(dtypes, kind="pos"))
    if constraint == "exact":
        return b.pick(dtypes, exact=True)
    if isinstance(constraint, float):
        if constraint < 2:
            return b.pick(dtypes, bound=constraint, kind="unit")
        return b.bounded(b.pick(dtypes), constraint)
    return b.pick(dtypes)


def unary(b, op):
    constraint, magf, mono, keeps_exact, _ = UNARY[op]
    dtypes = FLOATS + INTS if op in ("Abs", "Neg", "Sign", "Relu", "Identity") else FLOATS
    x = _unary_input(b, constraint, dtypes)
    mag = magf(x.mag) if x.mag < INF else INF
    pos = op in ("Sqrt",) or (op in ("Identity", "Relu", "Abs") and x.pos)
    b.node(op, [x], [out(x.dtype, x.shape, mag, pos, keeps_exact and x.exact, mono and x.noisy)])
    return True


for _name, _spec in UNARY.items():
    gen(_name, opset=_spec[4])(unary)


@gen("LeakyRelu", "Elu", "Celu", "HardSigmoid", "ThresholdedRelu", "Shrink", "Gelu")
def unary_attr(b, op):
    if op == "Gelu" and b.opset < 20:
        return False
    exact = op in ("ThresholdedRelu", "Shrink")  # jumps at alpha / lambd: exact inputs only
    x = b.pick((F32,) if op == "Celu" else FLOATS, exact=exact)  # onnx's Celu is float32 only
    r = lambda lo, hi: float(np.float32(b.rng.uniform(lo, hi)))  # noqa: E731
    attrs, mag = {}, x.mag + 1
    if op == "LeakyRelu":
        attrs["alpha"] = r(0.01, 0.5) if b.chance(0.7) else None
    elif op in ("Elu", "Celu"):
        attrs["alpha"] = r(0.5, 2.0) if b.chance(0.7) else None
        mag = x.mag + 2
    elif op == "HardSigmoid":
        attrs.update(alpha=r(0.1, 0.5), beta=r(0.3, 0.7))
        mag = 1.0
    elif op == "ThresholdedRelu":
        attrs["alpha"] = r(-1, 1.5)
    elif op == "Shrink":
        attrs.update(lambd=r(0, 1), bias=r(-1, 1))
        mag = x.mag + 1
    elif op == "Gelu":
        attrs["approximate"] = b.choice(["none", "tanh", None])
    b.node(op, [x], [out(x.dtype, x.shape, mag)], **attrs)
    return True


def partner_shape(b, shape):
    """A random shape that broadcasts with `shape` (suffix of it, some dims 1, maybe extra rank)."""
    s = list(shape)
    if len(s) < 4 and b.chance(0.15):
        s = [b.randint(1, 3)] + s  # a new leading dim (only in front of the full shape)
    elif s and b.chance(0.4):
        s = s[b.randint(0, len(s)):]
    s = [1 if b.chance(0.3) else d for d in s]
    return tuple(s)


def partner(b, x, dtypes=None, shape=None, **kw):
    """A value of x's dtype (or one of dtypes) whose shape broadcasts with x's (or with `shape`)."""
    target = x.shape if shape is None else shape
    def compatible(v):
        try:
            return int(np.prod(broadcast(v.shape, target))) <= 4096
        except ValueError:
            return False
    return b.pick(dtypes or (x.dtype,), pred=compatible, new_shape=lambda: partner_shape(b, target), **kw)


@gen("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod")
def binary(b, op):
    ints = op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Mod") and b.chance(0.25)
    dtypes = INTS if ints else FLOATS
    if op == "Mod" and not ints:
        return False  # float Mod (fmod=1) jumps at multiples of the divisor: ill-conditioned
    if op == "Pow":
        x = b.positive(b.bounded(b.pick(dtypes, kind="pos"), 10.0))
        y = b.bounded(partner(b, x, bound=3.0, kind="small"), 3.0)
        mag = max(x.mag ** 3, 64.0)
    elif op in ("Div", "Mod"):
        x = b.pick(dtypes, pos=ints, kind="pos" if ints else None, bound=1e4 if ints else None)
        y = partner(b, x, pos=True, kind="pos")
        y = b.positive(y) if not ints else y
        mag = x.mag / 0.25
    else:
        x = b.pick(dtypes, bound=1e4 if ints else None)
        y = partner(b, x, bound=1e4 if ints else None)
        mag = x.mag * y.mag if op == "Mul" else x.mag + y.mag
    exact = (ints and op != "Div") or (op in ("Max", "Min") and x.exact and y.exact)
    if op in ("Max", "Min"):
        mag = max(x.mag, y.mag)
    b.node(op, [x, y], [out(x.dtype, broadcast(x.shape, y.shape), mag, exact=exact)])
    return True


@gen("Sum", "Mean")
def variadic(b, op):
    x = b.pick(FLOATS)
    args = [x]
    for _ in range(b.randint(0, 2)):
        args.append(partner(b, x, shape=broadcast(*[a.shape for a in args])))
    shape = broadcast(*[a.shape for a in args])
    b.node(op, args, [out(x.dtype, shape, sum(a.mag for a in args))])
    return True


@gen("PRelu")
def prelu(b, op):
    x = b.pick(FLOATS, min_rank=1)
    s = [1 if b.chance(0.5) else d for d in x.shape[b.randint(0, x.rank):]]  # unidirectional
    slope = b.input(x.dtype, tuple(s), "small", pool=False)
    b.node(op, [x, slope], [out(x.dtype, x.shape, x.mag)])
    return True


@gen("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
def compare(b, op):
    x = b.pick(FLOATS + INTS, exact=True)  # one ulp flips a comparison: exact inputs only
    y = partner(b, x, exact=True, kind="small")
    b.node(op, [x, y], [out(BOOL, broadcast(x.shape, y.shape), 1.0, exact=True)])
    return True


@gen("And", "Or", "Xor", "Not")
def logic(b, op):
    x = b.pick((BOOL,))
    ins = [x] if op == "Not" else [x, partner(b, x)]
    b.node(op, ins, [out(BOOL, broadcast(*[v.shape for v in ins]), 1.0, exact=True)])
    return True


@gen("IsInf", "IsNaN", opset=10)
def isx(b, op):
    x = b.pick((F32,))
    b.node(op, [x], [out(BOOL, x.shape, 1.0, exact=True)])
    return True


@gen("Where")
def where(b, op):
    x = b.pick(FLOATS + INTS)
    y = partner(b, x)
    c = partner(b, x, dtypes=(BOOL,), shape=broadcast(x.shape, y.shape))
    shape = broadcast(c.shape, x.shape, y.shape)
    b.node(op, [c, x, y], [out(x.dtype, shape, max(x.mag, y.mag), exact=x.exact and y.exact)])
    return True


@gen("Clip")
def clip(b, op):
    x = b.pick(FLOATS + INTS)
    lo = float(b.rng.uniform(-2, 0.5))
    hi = lo + float(b.rng.uniform(0, 3))
    if x.dtype.kind in "iu":
        lo, hi = math.floor(lo), math.ceil(hi)
    ins = [x]
    if b.chance(0.8):
        ins.append(b.const(np.asarray(lo, x.dtype)) if b.chance(0.8) else "")
        if b.chance(0.8):
            ins.append(b.const(np.asarray(hi, x.dtype)))
    while ins and ins[-1] == "":
        ins.pop()
    b.node(op, ins, [out(x.dtype, x.shape, min(x.mag, 3.0) if len(ins) == 3 else x.mag, exact=x.exact)])
    return True


@gen("Cast", "CastLike")
def cast(b, op):
    if op == "CastLike" and b.opset < 15:
        return False
    src = b.pick(FLOATS + INTS + (BOOL,), bound=6e4)
    to = b.choice([F32, F16, I64, I32, BOOL] if b.fp16 else [F32, I64, I32, BOOL])
    if (to.kind in "ib" and src.dtype.kind == "f") and not src.exact:
        src = b.pick(FLOATS, exact=True, bound=6e4)  # truncation / != 0 jump: exact inputs only
    if to == src.dtype and b.chance(0.5):
        to = F32 if src.dtype != F32 else I64
    exact = src.exact and not (to == F32 and src.dtype == I64 and src.mag > 2 ** 24)
    mag = 1.0 if to == BOOL else src.mag + 1
    o = out(to, src.shape, mag, pos=src.pos and to != BOOL, exact=exact)
    if op == "Cast":
        b.node(op, [src], [o], to=onnx_type(to))
    else:
        like = b.const(np.zeros((1,), to))
        b.node(op, [src, like], [o])
    return True


__all__ = ["UNARY", "partner", "partner_shape", "F16", "I32", "I64"]
