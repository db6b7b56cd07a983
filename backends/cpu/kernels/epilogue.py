"""Epilogues of GEMM-shaped kernels (MatMul, Gemm, Conv): the instruction's elementwise expression
applied to each finished tile in registers, before the store.

`plan(instr, rows, cols)` says whether the expression can run in registers: every tensor it reads
must be float32 and either the result's own shape (read at the same element), a row of `cols`
values (read at the column: a bias) or a scalar. The emitter then passes those tensors to its
kernel (`args`) and builds the tile's `Epilogue` inside the kernel (`builder`). When it cannot,
`fallback` runs the codegen's second, in-place elementwise pass once the kernel is done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from glow import dtypes as dt
from glow.ir.instr import Expr

from .gemm_emit import Epilogue, leaf_kind


@dataclass(frozen=True)
class EpiloguePlan:
    expr: object  # Expr or None
    leaves: tuple  # ((arg, operand, kind), ...)

    @property
    def key(self):
        """Hashable structure of the epilogue: kernels with equal keys are one function."""
        return (expr_key(self.expr), tuple((arg, kind) for arg, _, kind in self.leaves))

    def args(self, cg) -> list:
        """Pointers (in the entry) to the tensors the expression reads, in kernel-argument order."""
        return [cg.ptr(o) for _, o, _ in self.leaves]

    def builder(self, has_bias: bool):
        """`(kb, bias, extras) -> Epilogue` for emit_gemm / emit_conv."""
        def build(kb, bias, extras):
            leaves = {arg: (ptr, kind) for (arg, _, kind), ptr in zip(self.leaves, extras)}
            return Epilogue(bias if has_bias else None, expr=self.expr, leaves=leaves)
        return build


NONE = EpiloguePlan(None, ())


def plan(instr, rows: int, cols: int) -> EpiloguePlan | None:
    """How `instr`'s epilogue runs in a [rows, cols] tile kernel; None if it cannot."""
    e = instr.expr
    if e is None:
        return NONE
    from .elementwise import expr_supported

    if instr.outputs[0].type.dtype != dt.float32:
        return None
    e = typed_acc(e, instr.outputs[0].type)
    if not expr_supported(e):
        return None
    leaves = []
    for arg, o in operands(instr, e):
        kind = leaf_kind(o.type.shape, rows, cols) if o.type.dtype == dt.float32 else None
        if kind is None:
            return None
        leaves.append((arg, o, kind))
    return EpiloguePlan(e, tuple(leaves))


def operands(instr, e) -> list:
    """[(arg, instr's operand)] for each tensor the epilogue expression e reads, once each."""
    out, seen = [], set()
    for leaf in e.leaves():
        if leaf.arg is not None and leaf.arg != -1 and leaf.arg not in seen:
            seen.add(leaf.arg)
            out.append((leaf.arg, instr.inputs[leaf.arg]))
    return out


def alias_key(operands) -> tuple:
    """Which of a call's operands overlap: part of a shared kernel's key, since the codegen marks
    pointer parameters noalias from the first call's arguments."""
    from glow.ir.instr import overlaps

    ops = list(operands)
    return tuple((i, j) for i in range(len(ops)) for j in range(i + 1, len(ops))
                 if ops[i] is not None and ops[j] is not None and overlaps(ops[i], ops[j]))


def expr_key(e):
    if e is None:
        return None
    if e.op is None:
        if e.arg is not None:
            return ("arg", e.arg)
        v = np.asarray(e.value)
        return ("imm", str(v.dtype), v.tobytes())
    attrs = tuple(sorted((k, repr(v)) for k, v in e.attrs.items()))
    return (e.op.domain, e.op.name, attrs, tuple(expr_key(a) for a in e.args))


def typed_acc(e: Expr, t) -> Expr:
    """The expression with its accumulator leaf (-1) given the result's type."""
    if e.op is None:
        return Expr(t, arg=-1) if e.arg == -1 and e.type is None else e
    return Expr(e.type, e.op, tuple(None if a is None else typed_acc(a, t) for a in e.args), e.attrs)


def fallback(cg, instr):
    """The epilogue as the codegen's separate in-place pass (after every thread's tiles are done)."""
    from .elementwise import emit_epilogue

    emit_epilogue(cg, instr)
