"""Elementwise expressions in C: one rule per op, keyed by (domain, op name) (tinygrad's `code_for_op`).

A rule gets an `OpCtx` (argument C names, their element types, the result type, attributes) and
returns a C expression in the result's compute type. `render_expr` walks an IR `Expr` tree and
declares one temporary per node, so a value used twice is computed once and the kernel text reads
like the tree. Semantics follow the ops' NumPy references (core/ops/elementwise.py and friends):
NaN wins in Max/Min, integer division truncates and gives 0 for a zero divisor, Mod follows the
divisor's sign unless fmod=1, and 16-bit floats are rounded after every op as NumPy rounds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from .cstyle import NARROW_TYPES
from .helpers import narrow_cast


@dataclass
class OpCtx:
    w: object  # the KernelWriter (helpers, renderer)
    args: list  # C names (None for an absent optional input)
    types: list  # element type of each argument
    out: object  # element type of the result
    attrs: dict
    consts: list = None  # the value of each argument that is an immediate (else None)

    @property
    def r(self):
        return self.w.r

    @property
    def ct(self) -> str:
        """The result's compute type."""
        return self.r.compute(self.out)

    def m(self, fn: str, i: int = 0) -> str:
        """Math function `fn` spelled for argument i's compute type."""
        return self.r.math(fn, self.r.compute(self.types[i]))

    def lit(self, v, dtype=None) -> str:
        return self.r.literal(v, dtype or self.out)

    def is_float(self, i: int = 0) -> bool:
        return self.types[i].is_float


def _float_only(fn):
    fn.float_only = True
    return fn


def _nan_max(c, a, b, pick):
    """max (pick ">") or min (pick "<") of two values; NaN wins for floats, as in NumPy. One
    select over fmax/fmin: nested selects chained 64 deep make LLVM's optimiser crawl."""
    if c.out.is_float:
        fn = c.r.math("fmax" if pick == ">" else "fmin", c.ct)
        nan = " || ".join(f"({v}) != ({v})" for v in (a, b) if not _never_nan(c, v))
        return f"({nan} ? ({a}) + ({b}) : {fn}({a}, {b}))" if nan else f"{fn}({a}, {b})"
    return f"(({a}) {pick} ({b}) ? ({a}) : ({b}))"


def _never_nan(c, v: str) -> bool:
    """Whether argument `v` is an immediate that is not NaN (its NaN test would be constant)."""
    return any(v == a and k is not None and not np.isnan(np.asarray(k, np.float64)).any()
               for a, k in zip(c.args, c.consts or []))


def _variadic(c, pick):
    acc = c.args[0]
    for b in c.args[1:]:
        acc = _nan_max(c, acc, b, pick)
    return acc


def _div(c):
    a, b = c.args
    if c.out.is_float:
        return f"{a} / {b}"
    if c.out.is_signed:  # x / -1 overflows for the most negative x: negate instead (wraps)
        return f"(({b}) == 0 ? ({c.ct})0 : ({b}) == -1 ? ({c.ct})(-({a})) : ({c.ct})({a} / {b}))"
    return f"(({b}) == 0 ? ({c.ct})0 : ({c.ct})({a} / {b}))"


def _mod(c):
    a, b = c.args
    if c.out.is_float:
        r = f"{c.m('fmod')}({a}, {b})"
        if c.attrs.get("fmod"):
            return r
        return f"({r} != 0 && (({r} < 0) != ({b} < 0)) ? {r} + {b} : {r})"
    r = f"(({b}) == 0 ? ({c.ct})0 : ({c.ct})({a} % {b}))"
    if c.attrs.get("fmod") or not c.out.is_signed:
        return r
    return f"({r} != 0 && (({r} < 0) != ({b} < 0)) ? ({c.ct})({r} + {b}) : {r})"


def _pow(c):
    a, b = c.args
    k = c.consts[1] if c.consts else None
    if c.out.is_float and c.ct == "float" and k is not None and k.size == 1:
        v = float(np.asarray(k, np.float64).reshape(-1)[0])
        if v == 2.0:
            return f"({a}) * ({a})"
        if v > 0 and v != int(v):  # LRN's x^0.75: a helper the device can vectorise
            c.w.need("glow_powf")
            return f"glow_powf({a}, {c.lit(v)})"
    if c.out.is_float:
        if c.types[0] == dt.float64 or c.types[1] == dt.float64 or c.types[1].is_int:
            c.w.uses(dt.float64)  # NumPy computes float powers in float64
            return f"({c.ct}){c.r.math('pow', 'double')}((double){a}, (double){b})"
        return f"{c.m('pow')}({a}, ({c.ct}){b})"
    if c.types[1].is_float:  # integer base, float exponent: truncated float64 power
        c.w.uses(dt.float64)
        return f"({c.ct}){c.r.math('pow', 'double')}((double){a}, (double){b})"
    c.w.need("glow_ipow")
    ll = c.r.storage(dt.int64)
    return f"({c.ct})glow_ipow(({ll}){a}, ({ll}){b})"


def _sign(c):
    (x,) = c.args
    s = f"(({x}) > 0) - (({x}) < 0)"
    if c.out.is_float:
        return f"(({x}) != ({x}) ? ({x}) : ({c.ct})({s}))"
    if not c.out.is_signed:
        return f"({c.ct})(({x}) > 0)"
    return f"({c.ct})({s})"


def _abs(c):
    (x,) = c.args
    if c.out.is_float:
        return f"{c.m('fabs')}({x})"
    if not c.out.is_signed:
        return x
    return f"({c.ct})(({x}) < 0 ? -({x}) : ({x}))"


def _cast(c):
    (x,) = c.args
    if c.types[0] == c.out:
        return x
    if c.out in NARROW_TYPES:  # rounded to the format here (saturate, round_mode), stored exactly
        mode = c.attrs.get("round_mode", "up")
        return narrow_cast(c.w, x, c.types[0], c.out, bool(c.attrs.get("saturate", 1)),
                           mode.decode() if isinstance(mode, bytes) else mode)
    if c.out == dt.bool_:
        return f"({c.ct})(({x}) != 0)"
    # Out-of-range float -> int is undefined in C; NumPy on the same host does a plain C cast too.
    return f"({c.ct})({x})"


def _shift(c):
    a, b = c.args
    bits = c.out.itemsize * 8
    bad = f"(({b}) < 0 || ({b}) >= {bits})" if c.out.is_signed else f"(({b}) >= {bits})"
    if c.attrs.get("direction") == "LEFT":  # shift the unsigned bits: no signed overflow
        u = c.r.storage({1: dt.uint8, 2: dt.uint16, 4: dt.uint32, 8: dt.uint64}[c.out.itemsize])
        return f"({bad} ? ({c.ct})0 : ({c.ct})(({u})({a}) << ({b})))"
    fill = f"(({a}) < 0 ? ({c.ct})-1 : ({c.ct})0)" if c.out.is_signed else f"({c.ct})0"
    return f"({bad} ? {fill} : ({c.ct})(({a}) >> ({b})))"


def _isinf(c):
    (x,) = c.args
    pos, neg = c.attrs.get("detect_positive", 1), c.attrs.get("detect_negative", 1)
    sign = {(1, 1): "1", (1, 0): f"({x}) > 0", (0, 1): f"({x}) < 0", (0, 0): "0"}[(pos, neg)]
    return f"({c.ct})(isinf({x}) && {sign})"


def _clip(c):
    x, lo, hi = (c.args + [None, None])[:3]
    y = x
    if lo is not None:
        y = _nan_max(c, y, lo, ">")
    if hi is not None:
        y = _nan_max(c, y, hi, "<")
    return y


def _fast(c) -> bool:
    """float32 math on a CPU-kind device: the vectorisable helpers of fastmath.py."""
    p = c.w.params
    return p is not None and p.cpu and c.ct == "float" and c.types[0] == dt.float32


def _unary(fn, onnx_op=None):
    from .fastmath import DEPENDS, FAST_UNARY

    def rule(c):
        helper = FAST_UNARY.get(onnx_op)
        if helper and _fast(c):
            for h in (helper, *DEPENDS.get(helper, ())):
                c.w.need(h)
            return f"{helper}({c.args[0]})"
        return f"{c.m(fn)}({c.args[0]})"
    return _float_only(rule)


def _sigmoid(c):
    a, one = c.args[0], c.lit(1)
    if _fast(c):  # 1 / (1 + e^-x): e^-x overflows to inf for x < -88, giving 0 as it should
        c.w.need("glow_expf")
        return f"{one} / ({one} + glow_expf(-{a}))"
    e = c.m("exp")
    return f"({a} >= 0 ? {one} / ({one} + {e}(-{a})) : {e}({a}) / ({one} + {e}({a})))"


def rule_table(rules: dict, domain: str = "") -> dict:
    """{op name: rule} as {(domain, op name): rule}; raises for a name the op table does not declare."""
    from ..ops import get_op

    for name in rules:
        get_op(name, domain)
    return {(domain, name): rule for name, rule in rules.items()}


#: (domain, op name) -> rule. Ops absent here are not rendered natively (the core lowers them).
CODE_FOR_OP = rule_table({
    "Add": lambda c: f"{c.args[0]} + {c.args[1]}",
    "Sub": lambda c: f"{c.args[0]} - {c.args[1]}",
    "Mul": lambda c: f"{c.args[0]} * {c.args[1]}",
    "Div": _div,
    "Mod": _mod,
    "Pow": _pow,
    "Max": lambda c: _variadic(c, ">"),
    "Min": lambda c: _variadic(c, "<"),
    "Sum": lambda c: " + ".join(c.args),
    "Neg": lambda c: f"-{c.args[0]}",
    "Abs": _abs,
    "Sign": _sign,
    "Reciprocal": _float_only(lambda c: f"{c.lit(1)} / {c.args[0]}"),
    "Exp": _unary("exp", "Exp"), "Log": _unary("log", "Log"), "Sqrt": _unary("sqrt"),
    "Sin": _unary("sin"), "Cos": _unary("cos"), "Tan": _unary("tan"),
    "Atan": _unary("atan"), "Tanh": _unary("tanh", "Tanh"), "Erf": _unary("erf", "Erf"),
    "Floor": _unary("floor"), "Ceil": _unary("ceil"), "Round": _unary("rint"),
    "Sigmoid": _float_only(_sigmoid),
    "Relu": lambda c: f"({c.args[0]} < 0 ? {c.lit(0)} : {c.args[0]})",
    "LeakyRelu": _float_only(lambda c: f"({c.args[0]} < 0 ? {c.lit(c.attrs['alpha'])} * {c.args[0]} : {c.args[0]})"),
    "Clip": _clip,
    "Equal": lambda c: f"{c.args[0]} == {c.args[1]}",
    "Less": lambda c: f"{c.args[0]} < {c.args[1]}",
    "LessOrEqual": lambda c: f"{c.args[0]} <= {c.args[1]}",
    "Greater": lambda c: f"{c.args[0]} > {c.args[1]}",
    "GreaterOrEqual": lambda c: f"{c.args[0]} >= {c.args[1]}",
    "And": lambda c: f"{c.args[0]} && {c.args[1]}",
    "Or": lambda c: f"{c.args[0]} || {c.args[1]}",
    "Xor": lambda c: f"({c.args[0]} != 0) != ({c.args[1]} != 0)",
    "Not": lambda c: f"!{c.args[0]}",
    "BitwiseAnd": lambda c: f"{c.args[0]} & {c.args[1]}",
    "BitwiseOr": lambda c: f"{c.args[0]} | {c.args[1]}",
    "BitwiseXor": lambda c: f"{c.args[0]} ^ {c.args[1]}",
    "BitwiseNot": lambda c: f"~{c.args[0]}",
    "BitShift": _shift,
    "IsNaN": lambda c: f"({c.ct})(isnan({c.args[0]}) != 0)",
    "IsInf": _isinf,
    "Where": lambda c: f"{c.args[0]} ? {c.args[1]} : {c.args[2]}",
    "Cast": _cast,
    "Identity": lambda c: c.args[0],
})


def renderable(op, in_types, out_type) -> bool:
    """Whether `CODE_FOR_OP` renders this op (an OpDef) for these element types."""
    rule = CODE_FOR_OP.get((op.domain, op.name))
    if rule is None:
        return False
    if getattr(rule, "float_only", False) and not all(t.is_float for t in [out_type, *in_types]):
        return False
    return True


def render_expr(w, expr, leaf, acc: tuple | None = None) -> str:
    """Declare temporaries computing `expr`; return the C name of its value (compute type).

    `leaf(arg_index)` gives the C expression of operand `arg_index` (already in compute type);
    `acc` = (C name, dtype) of the kernel's own result, for epilogue leaves with arg == -1.
    """
    names: dict[int, str] = {}

    def visit(e):
        if e is None:
            return None, None
        if id(e) in names:
            return names[id(e)], e.type.dtype
        if e.op is None:
            if e.arg == -1:
                return acc
            if e.arg is not None:
                return leaf(e.arg), e.type.dtype
            v = e.value.reshape(-1)[0] if e.value.size else 0
            return w.r.literal(v, e.type.dtype), e.type.dtype
        vals = [visit(a) for a in e.args]
        out = e.type.dtype
        consts = [None if a is None or a.op is not None or a.arg is not None else a.value for a in e.args]
        ctx = OpCtx(w, [v[0] for v in vals], [v[1] for v in vals], out, dict(e.attrs), consts)
        for _, t in vals:
            if t is not None:
                w.uses(t)
        code = CODE_FOR_OP[(e.op.domain, e.op.name)](ctx)
        name = f"t{len(names)}"
        w.line(f"const {w.r.compute(out)} {name} = {w.round_half(code, out)};")
        names[id(e)] = name
        return name, out

    return visit(expr)[0]
