"""Elementwise kernels: fused expression trees, single elementwise ops, copies, epilogues.

One work-item per output element. Each operand is read at its broadcast index (computed from
the flat output index with merged dims, see indexing.py); the tree is evaluated in registers and
stored once, so a fused chain costs one pass over memory.
"""

from __future__ import annotations

from ...ir.instr import Expr
from ..cstyle import HALF_TYPES
from ..expr import render_expr
from ..indexing import broadcast_index


def instr_expr(instr) -> Expr:
    """The expression a fused instruction carries, or a one-node tree for an elementwise kernel."""
    if instr.kind == "fused":
        return instr.expr
    leaves = tuple(None if o is None else _scalar_constant(o) or Expr(o.type, arg=k)
                   for k, o in enumerate(instr.inputs))
    return Expr(instr.outputs[0].type, op=instr.op, args=leaves, attrs=dict(instr.attrs))


def _scalar_constant(operand) -> Expr | None:
    """A one-element weight as an immediate (as fusion makes them): no load, and rules may
    specialise on its value (x ** 0.75)."""
    data = getattr(operand.root, "data", None)
    if operand.kind == "weight" and operand is operand.root and data is not None and data.size == 1 \
            and data.dtype != object:
        return Expr(operand.type, value=data)
    return None


def operand_loader(w, instr, out_shape, flat: str):
    """`leaf(k)` for render_expr: loads operand k once, at its broadcast index."""
    loaded: dict[int, str] = {}

    def leaf(k: int) -> str:
        if k not in loaded:
            o = instr.inputs[k]
            p = w.arg(o)
            idx = broadcast_index(out_shape, o.type.shape, flat)
            name = f"a{k}"
            w.line(f"const {w.r.compute(o.type.dtype)} {name} = {w.load(p, idx, o.type.dtype)};")
            loaded[k] = name
        return loaded[k]

    return leaf


def render_elementwise(w, instr, params) -> None:
    out = instr.outputs[0]
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    v = render_expr(w, instr_expr(instr), operand_loader(w, instr, out.type.shape, i))
    w.line(w.store(y, i, out.type.dtype, v))


def render_copy(w, instr, params) -> None:
    """Same bytes, same element type: a storage-type copy, no conversion."""
    (dst,), (src,) = instr.outputs, instr.inputs
    y, x = w.arg(dst, out=True), w.arg(src)
    i = w.flat_index(dst.type.numel, params.flat_local)
    w.line(f"{y}[{i}] = {x}[{i}];")


def apply_epilogue(w, instr, acc: str, acc_dtype, flat: str) -> str:
    """The kernel's result `acc` after its elementwise epilogue (if any), for output element
    `flat`; returns the C name of the value to store."""
    if instr.expr is None:
        return acc
    if acc_dtype in HALF_TYPES:  # the op's own result is rounded to its type before the epilogue
        w.line(f"const float r0 = {w.round_half(acc, acc_dtype)};")
        acc = "r0"
    leaf = operand_loader(w, instr, instr.outputs[0].type.shape, flat)
    return render_expr(w, instr.expr, leaf, acc=(acc, acc_dtype))
