"""Comparisons, boolean logic, bitwise integer ops and Where (the select primitive)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._shape import broadcast_shapes, same_as
from .elementwise import NUM, _broadcast_rule, broadcast_as
from .registry import BINARY, COMMUTATIVE, COMPARE, ELEMENTWISE, LOGICAL, UNARY, Attr, Tier, op

BOOL = frozenset({dt.bool_})
#: Bitwise ops take the 8- to 64-bit integers.
BITS = frozenset({dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64})


def _bool_ref(fn):
    return lambda a, b: np.asarray(fn(a, b), dtype=bool)


# -- comparisons -------------------------------------------------------------------------------------

def compare(name, fn, types=NUM, since=7, doc="", groups=()):
    return op(name, inputs=("A:T", "B:T"), outputs=("C:T1",), types={"T": types, "T1": BOOL},
              infer=broadcast_as(dt.bool_), reference=_bool_ref(fn),
              groups={ELEMENTWISE, BINARY, COMPARE, *groups}, tier=Tier.PRIMITIVE, onnx_since=since, doc=doc)


compare("Equal", lambda a, b: a == b, types=NUM | {dt.bool_, dt.string},
        doc="A == B, broadcasting (also on bools and strings).", groups={COMMUTATIVE})
compare("Less", np.less, doc="A < B, broadcasting.")
compare("Greater", np.greater, doc="A > B, broadcasting.")
compare("LessOrEqual", np.less_equal, since=12, doc="A <= B, broadcasting.")
compare("GreaterOrEqual", np.greater_equal, since=12, doc="A >= B, broadcasting.")


# -- boolean logic -----------------------------------------------------------------------------------

def _logic(name, fn, doc):
    return op(name, inputs=("A:T", "B:T"), outputs=("C:T1",), types={"T": BOOL, "T1": BOOL},
              infer=broadcast_as(dt.bool_), reference=_bool_ref(fn),
              groups={ELEMENTWISE, BINARY, LOGICAL, COMMUTATIVE}, tier=Tier.PRIMITIVE, onnx_since=7, doc=doc)


_logic("And", np.logical_and, "Logical A and B, broadcasting.")
_logic("Or", np.logical_or, "Logical A or B, broadcasting.")
_logic("Xor", np.logical_xor, "Logical A xor B, broadcasting.")

op("Not", inputs=("X:T",), outputs=("Y:T",), types={"T": BOOL}, infer=same_as(0),
   reference=lambda x: np.logical_not(x), groups={ELEMENTWISE, UNARY, LOGICAL}, tier=Tier.PRIMITIVE,
   onnx_since=1, doc="Logical not.")


# -- bitwise -----------------------------------------------------------------------------------------

def _bitwise(name, fn, doc):
    return op(name, inputs=("A:T", "B:T"), outputs=("C:T",), types={"T": BITS}, infer=_broadcast_rule,
              reference=lambda a, b: fn(a, b).astype(a.dtype, copy=False),
              groups={ELEMENTWISE, BINARY, LOGICAL, COMMUTATIVE}, tier=Tier.PRIMITIVE, onnx_since=18, doc=doc)


_bitwise("BitwiseAnd", np.bitwise_and, "Bitwise A & B, broadcasting.")
_bitwise("BitwiseOr", np.bitwise_or, "Bitwise A | B, broadcasting.")
_bitwise("BitwiseXor", np.bitwise_xor, "Bitwise A ^ B, broadcasting.")

op("BitwiseNot", inputs=("X:T",), outputs=("Y:T",), types={"T": BITS}, infer=same_as(0),
   reference=lambda x: np.invert(x), groups={ELEMENTWISE, UNARY, LOGICAL}, tier=Tier.PRIMITIVE,
   onnx_since=18, doc="Bitwise ~X.")


def _bitshift_infer(ctx):
    if ctx.attrs["direction"] not in ("LEFT", "RIGHT"):
        raise ctx.error(f"attribute direction must be 'LEFT' or 'RIGHT', got {ctx.attrs['direction']!r}")
    return _broadcast_rule(ctx)


def _bitshift_ref(x, y, direction):
    bits = x.dtype.itemsize * 8
    # Shift counts outside [0, bits) are defined by ONNX as "sign fill only" (-1 or 0); C and
    # most hardware would mask the count instead, so handle them apart from the real shifts.
    out_of_range = (y < 0) | (y >= bits)
    s = np.where(out_of_range, 0, y).astype(x.dtype)
    if direction == "LEFT":
        # Shift the unsigned view: bits pushed past the top are dropped, with no signed overflow.
        u = np.dtype(f"u{x.dtype.itemsize}")
        shifted = np.left_shift(x.view(u), s.view(u)).view(x.dtype)
        fill = np.zeros((), x.dtype)
    else:
        shifted = np.right_shift(x, s)  # arithmetic (sign-extending) for signed types
        fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else np.zeros((), x.dtype)
    return np.where(out_of_range, fill, shifted).astype(x.dtype, copy=False)


op("BitShift", inputs=("X:T", "Y:T"), outputs=("Z:T",), types={"T": BITS},
   attrs=(Attr("direction", "string"),), infer=_bitshift_infer, reference=_bitshift_ref,
   groups={ELEMENTWISE, BINARY, LOGICAL}, tier=Tier.PRIMITIVE, onnx_since=11,
   doc="X shifted LEFT or RIGHT (arithmetic for signed types) by Y bits, broadcasting; "
       "shifts by a negative or >= bit-width count give the sign fill (-1 or 0).")


# -- select ------------------------------------------------------------------------------------------

def _where_infer(ctx):
    shape = broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1), ctx.shape(2))
    return [dt.TensorType(shape, ctx.dtype(1))]


op("Where", inputs=("condition:B", "X:T", "Y:T"), outputs=("output:T",),
   types={"B": BOOL, "T": NUM | {dt.bool_, dt.string, dt.complex64, dt.complex128}},
   infer=_where_infer, reference=lambda c, x, y: np.where(c, x, y).astype(x.dtype, copy=False),
   groups={ELEMENTWISE}, tier=Tier.PRIMITIVE, onnx_since=9,
   doc="X where condition is true, else Y, broadcasting all three: the select primitive.")
