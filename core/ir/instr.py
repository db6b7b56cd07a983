"""The instruction IR: a linear list of instructions over named memory buffers (Glow's low-level IR).

Not SSA and no control flow: one basic block. Every tensor lives in a `Buffer` of one kind:

    weight      a constant (read-only)               input    a graph input (read-only)
    output      a graph output (written, returned)   activation  an intermediate, placed in the arena

A `View` is a typed window onto a buffer at a byte offset: reshapes and contiguous slices are
views, not copies. Instructions name their operands with a mode, `in`, `out` or `inout` (an
output written over one of its own inputs). `alloc`/`dealloc` mark where an activation's lifetime
starts and ends; they allocate nothing themselves: the static planner (memory.py) gives each
activation an offset in one arena from those marks.

Kinds of instruction:
    alloc %a / dealloc %a          lifetime marks of activation %a
    copy @out %dst, @in %src       same bytes, same element type
    <Op> @out ..., @in ...         one op of the op table (its NumPy reference defines it),
                                   optionally with an elementwise `epilogue` expression tree
    fused @out %y, @in ...         an elementwise expression tree over its inputs
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as dt

WEIGHT, INPUT, OUTPUT, ACTIVATION = "weight", "input", "output", "activation"
KINDS = (WEIGHT, INPUT, OUTPUT, ACTIVATION)
ALIGNMENT = 64


class Buffer:
    """A named region of memory holding one tensor (or, when `boxed`, any value: see below).

    A buffer is *boxed* when its size is not known statically or its values are not plain bytes
    (dynamic shapes, strings, sequences, optionals): it is held by reference outside the arena.
    """

    __slots__ = ("name", "type", "kind", "data")

    def __init__(self, name: str, type, kind: str, data: np.ndarray | None = None):
        assert kind in KINDS, kind
        self.name, self.type, self.kind, self.data = name, type, kind, data

    @property
    def boxed(self) -> bool:
        t = self.type
        return (not isinstance(t, dt.TensorType) or not t.is_static or t.dtype == dt.string
                or t.numel == 0)

    @property
    def nbytes(self) -> int:
        return 0 if self.boxed else self.type.nbytes

    @property
    def root(self) -> Buffer:
        return self

    offset = 0

    def __repr__(self):
        return f"%{self.name}"


@dataclass(frozen=True, eq=False, slots=True)
class View:
    """`type`-shaped window onto `base` (always a Buffer) starting `offset` bytes in."""

    name: str
    base: Buffer
    type: dt.TensorType
    offset: int = 0

    @property
    def root(self) -> Buffer:
        return self.base

    @property
    def nbytes(self) -> int:
        return self.type.nbytes

    @property
    def boxed(self) -> bool:
        return False

    @property
    def kind(self) -> str:
        return self.base.kind

    def __repr__(self):
        return f"%{self.name}"


def byte_range(op) -> tuple[int, int]:
    """[start, end) of an operand within its root buffer."""
    return op.offset, op.offset + op.nbytes


def overlaps(a, b) -> bool:
    """Whether two operands may touch the same bytes."""
    if a.root is not b.root:
        return False
    if a.root.boxed:
        return True
    (s1, e1), (s2, e2) = byte_range(a), byte_range(b)
    return s1 < e2 and s2 < e1


@dataclass(frozen=True, slots=True)
class Expr:
    """An elementwise expression tree. A leaf reads operand `arg` of its instruction (-1: the
    kernel's own result, in an epilogue) or is an immediate `value`; an inner node applies `op`."""

    type: dt.TensorType
    op: object = None  # OpDef for inner nodes
    args: tuple = ()
    attrs: Mapping = field(default_factory=dict)
    arg: int | None = None
    value: np.ndarray | None = None

    def leaves(self):
        if self.op is None:
            yield self
        for a in self.args:
            yield from a.leaves()


@dataclass(frozen=True, eq=False, slots=True)
class Instr:
    kind: str  # "alloc" | "dealloc" | "copy" | "kernel" | "fused"
    name: str = ""
    outputs: tuple = ()  # operands written (Buffer | View | None for an absent output)
    inputs: tuple = ()  # operands read (Buffer | View | None for an absent optional input)
    op: object = None  # kernel: the OpDef
    attrs: Mapping = field(default_factory=dict)
    expr: Expr | None = None  # fused: the tree; kernel: the epilogue (or None)
    n_args: int | None = None  # kernel with epilogue: inputs[:n_args] are the op's own arguments

    def replace(self, **kw) -> Instr:
        return dataclasses.replace(self, **kw)

    @property
    def opname(self) -> str:
        return self.op.name if self.op is not None else self.kind

    def operands(self) -> list[tuple[str, object]]:
        """(mode, operand) pairs; an output that is also read by the instruction is `inout`."""
        ins = [v for v in self.inputs if v is not None]
        out = []
        for o in self.outputs:
            if o is None:
                continue
            same = any(i.root is o.root and i.offset == o.offset and i.type == o.type for i in ins)
            out.append(("inout" if same else "out", o))
        return out + [("in", v) for v in ins]

    def reads(self) -> list:
        return [v for v in self.inputs if v is not None]

    def writes(self) -> list:
        if self.kind in ("alloc", "dealloc"):
            return []
        return [v for v in self.outputs if v is not None]

    def touches(self) -> list:
        """Every operand, alloc/dealloc targets included."""
        return [v for v in self.outputs + self.inputs if v is not None]


@dataclass(frozen=True)
class IRFunction:
    name: str
    buffers: tuple  # every Buffer: weights, inputs, outputs, activations
    instrs: tuple
    inputs: tuple  # input Buffers, in graph input order
    outputs: tuple  # output Buffers, in graph output order
    meta: Mapping = field(default_factory=dict)

    def replace(self, **kw) -> IRFunction:
        return dataclasses.replace(self, **kw)

    def buffers_of(self, kind: str) -> list[Buffer]:
        return [b for b in self.buffers if b.kind == kind]

    def activations(self) -> list[Buffer]:
        """Activations placed in the arena (boxed ones live outside it)."""
        return [b for b in self.buffers if b.kind == ACTIVATION and not b.boxed]

    def __str__(self):
        from .printer import format_ir

        return format_ir(self)


def aligned(n: int, alignment: int = ALIGNMENT) -> int:
    return -(-n // alignment) * alignment
