"""Sizes that differ between calls, rendered as kernel arguments instead of literals.

A graph with symbolic input dims (a batch, a sequence length) is compiled per input signature.
Were every size a literal of the kernel text, each new sequence length would make a new program
and a new build of the device compiler. Instead, before rendering such a signature, the dims of
the IR's operands that take a varying size (`glow.specialize.varying`) become `Size`s: ints that
stay `Size` through the arithmetic templates do on them (a stride, an extent minus one, a
product of dims) and that, formatted into kernel text while a kernel renders, become a marker.
`KernelWriter.finish` turns each distinct marked derivation into an int argument (`S0`, `S1`,
...) in order of first use, so two sequence lengths render the same text, build once, and launch
with their own values. A division by such a size goes through its magic multiplier (`div`).

Correct by construction: every signature renders its own kernels, so a template that picks a
variant by a size's value (a divisibility test, an unrolled count) renders different text for a
size that needs another variant, and the program cache is keyed by text. What `Size` misses
(a size computed through NumPy, or one in an instruction's attributes) stays a literal, which
costs a build, never a wrong result. Like the cpu backend's hint it goes by value: a static dim
of the same size is read at run time too.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import re

_RENDERING: contextvars.ContextVar[bool] = contextvars.ContextVar("glow_render_sizes", default=False)
_MARK = re.compile(r"@([SM])(-?\d+):([^@]*)@")


def _expr(v) -> str:
    return v.expr if isinstance(v, Size) else str(int(v))


def _short(expr: str) -> str:
    """`expr`, or a digest of it past 120 characters (a long chain of arithmetic: the digest is as
    deterministic, and the strings stay short)."""
    return expr if len(expr) <= 120 else "h" + hashlib.sha1(expr.encode()).hexdigest()[:16]


def _binary(op: str, fn):
    def method(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return Size(fn(int(self), int(o)), _short(f"({self.expr}{op}{_expr(o)})"))

    def reflected(self, o):
        if not isinstance(o, int):
            return NotImplemented
        return Size(fn(int(o), int(self)), _short(f"({_expr(o)}{op}{self.expr})"))

    return method, reflected


class Size(int):
    """An int that differs between calls of the graph (see the module docstring). `expr` says
    how it was derived from the symbolic dims (`batch*128`): markers of equal derivation share
    one argument, and two sizes equal only by chance keep their own, so the text is the same
    for every size whose kernels take the same path."""

    def __new__(cls, value: int, expr: str):
        self = int.__new__(cls, value)
        self.expr = expr
        return self

    def __format__(self, spec: str) -> str:
        if spec == "" and _RENDERING.get():
            return f"@S{int(self)}:{self.expr}@"
        return int.__format__(int(self), spec)

    def __str__(self) -> str:
        return self.__format__("")

    def __repr__(self) -> str:
        return f"Size({int(self)}, {self.expr!r})"

    def __reduce__(self):  # kernels travel to the OpenCL build helper
        return Size, (int(self), self.expr)

    # Arithmetic keeps the mark; comparisons and hashing are int's.
    __add__, __radd__ = _binary("+", lambda a, b: a + b)
    __sub__, __rsub__ = _binary("-", lambda a, b: a - b)
    __mul__, __rmul__ = _binary("*", lambda a, b: a * b)
    __floordiv__, __rfloordiv__ = _binary("/", lambda a, b: a // b)
    __mod__, __rmod__ = _binary("%", lambda a, b: a % b)

    def __neg__(self):
        return Size(-int(self), f"(-{self.expr})")

    def __pos__(self):
        return self


@contextlib.contextmanager
def rendering():
    """Format `Size`s as markers (while one kernel's text is written)."""
    token = _RENDERING.set(True)
    try:
        yield
    finally:
        _RENDERING.reset(token)


@contextlib.contextmanager
def varying_marked(fn):
    """While rendering: the dims of `fn`'s operands that take a varying size are `Size`s (in
    place; the IR is this compile's own). Their types are restored after, so the memory layout
    and everything past rendering see plain ints."""
    restore = _mark(fn)
    try:
        yield
    finally:
        for o, t in restore:
            object.__setattr__(o, "type", t)


def _mark(fn) -> list:
    from .. import dtypes as dt
    from ..specialize import varying_name

    seen, restore = set(), []
    derived = _products()
    for instr in fn.instrs:
        for o in (*instr.inputs, *instr.outputs):
            if o is None or id(o) in seen:
                continue
            seen.add(id(o))
            t = o.type
            if not isinstance(t, dt.TensorType) or not t.is_static:
                continue
            # A product of sizes is looked for in the leading dim only, where exporters put the
            # rows they flatten; elsewhere it would mostly meet static dims (a head size). A dim
            # name may hold any character: only word characters go into the markers.
            names = [re.sub(r"\W", "_", varying_name(d) or (derived.get(d, "") if k == 0 else ""))
                     for k, d in enumerate(t.shape)]
            if not any(names):
                continue
            marked_type = dt.TensorType(t.shape, t.dtype)
            # TensorType normalises dims to plain ints; the marked ones are set past that.
            object.__setattr__(marked_type, "shape", tuple(Size(d, n) if n else d for d, n in zip(t.shape, names)))
            restore.append((o, t))
            object.__setattr__(o, "type", marked_type)
    return restore


def _products() -> dict[int, str]:
    """Products of two varying sizes (batch x sequence rows, as exporters flatten them through
    Shape arithmetic), by value like the sizes themselves."""
    from ..specialize import varying_sizes

    sizes = sorted(varying_sizes().items())
    out: dict[int, str] = {}
    for k, (a, na) in enumerate(sizes):
        for b, nb in sizes[k:]:
            out.setdefault(a * b, f"{na}*{nb}")
    return out


def div(a: str, d) -> str:
    """C text of `a / d` for an index `a` in [0, 2**31). When `d` is a `Size`, a division by
    an argument would be a hardware divide per element (never vectorised): it is a multiply-high
    by a magic number passed beside it instead (`magic`)."""
    if isinstance(d, Size) and d > 0 and _RENDERING.get():
        return f"glow_udiv({a}, @M{int(d)}:{d.expr}@)"
    return f"{a} / {d}"


def mod(a: str, d) -> str:
    """C text of `a % d` for an index `a` in [0, 2**31) (see `div`)."""
    if isinstance(d, Size) and d > 0 and _RENDERING.get():
        return f"glow_umod({a}, {d}, @M{int(d)}:{d.expr}@)"
    return f"{a} % {d}"


def magic(d: int) -> tuple[int, int]:
    """(multiplier, shift) with a // d == umulhi(a, multiplier) >> shift for 0 <= a < 2**31
    (Granlund and Montgomery, 1994: 31-bit dividends, so the multiplier fits 32 bits); (0, 0)
    for d == 1, which glow_udiv passes through."""
    if d == 1:
        return 0, 0
    if not 1 < d < 1 << 31:
        raise ValueError(f"no magic number for divisor {d}")
    lg = (d - 1).bit_length()  # ceil(log2 d)
    return (1 << (31 + lg)) // d + 1, lg - 1


def unmark(text: str, declare) -> str:
    """`text` with each marked size replaced by an int argument, declared with `declare(name,
    value)` (once per name): one per distinct derivation, named in order of first use; a marked
    divisor by its magic multiplier and shift (two more arguments)."""
    names: dict[tuple, str] = {}

    def name(m):
        # Keyed by the value too: a derivation that names its size ambiguously (two dims whose
        # names sanitise alike) must never pass one size's value for the other.
        kind, value, key = m.group(1), int(m.group(2)), (m.group(3), m.group(2))
        base = names.setdefault(key, f"S{len(names)}")
        if kind == "S":
            return declare(base, value)
        mult, shift = magic(value)
        declare(base + "m", mult - (1 << 32) if mult >= 1 << 31 else mult)  # the uint's bits
        declare(base + "h", shift)
        return f"{base}m, {base}h"

    return _MARK.sub(name, text)
