"""Elementwise kernels: fused expression trees, single elementwise ops, epilogues, Expand.

Every elementwise instruction becomes one loop nest over its output (Glow's operator stacking:
a fused chain is one loop, intermediates stay in registers). Inputs broadcast against the output
through strides (0 along broadcast dims); adjacent dims that step alike are merged, so most
loops are one or two deep. The innermost loop runs 16 lanes at a time with explicit vectors,
then a scalar tail; large loops split their outermost dimension across the threads.

The per-op code lives in ewops.py (a table from op name to a value-level emitter).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from glow import dtypes as dt
from glow.ir.instr import Expr

from ..codegen import cpu_kernel, has_ltype, ltype
from ..irutil import I1, I64, PTR, VEC
from . import ewops
from .ewops import Lanes

#: Loops with at least this many elements split across the threads.
PARALLEL_MIN = 1 << 15


# -- broadcasting loop nests --------------------------------------------------------------------

def strides_of(shape) -> list[int]:
    s, out = 1, []
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def broadcast_strides(in_shape, out_shape) -> list[int]:
    """Element strides of a (contiguous) input seen through the output's index space."""
    pad = len(out_shape) - len(in_shape)
    st = strides_of(in_shape)
    return [0 if k < pad or in_shape[k - pad] == 1 else st[k - pad] for k in range(len(out_shape))]


def collapse(shape, strides_per_operand) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every operand steps through contiguously."""
    dims = [(n, [s[k] for s in strides_per_operand]) for k, n in enumerate(shape) if n != 1]
    merged: list = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            if all(p == c * n for p, c in zip(pst, st)):
                merged[-1] = (pn * n, st)
                continue
        merged.append((n, st))
    if not merged:
        merged = [(1, [0] * len(strides_per_operand))]
    return [n for n, _ in merged], [[st[k] for _, st in merged] for k in range(len(strides_per_operand))]


def emit_loop(cg, name: str, out, ins: list, body, *, operands=None):
    """One kernel: out[i] = body(lanes, values) over out's shape, each input broadcast to it.

    body(lanes: Lanes, values: list) -> value of out's compute type; values[k] is input k at the
    current position (None for an absent input). `operands` overrides the pointer list passed
    (default: out and every input)."""
    shape = tuple(out.type.shape)
    present = [o for o in ins if o is not None]
    strides = [strides_of(shape)] + [broadcast_strides(o.type.shape, shape) for o in present]
    sizes, strides = collapse(shape, strides)
    numel = int(np.prod(shape, dtype=np.int64))
    parallel = numel >= PARALLEL_MIN
    kb = cg.function(name, [PTR] * (1 + len(present)) + [I64, I64])
    ptrs, (tid, nth) = kb.args[:1 + len(present)], kb.args[1 + len(present):]
    b = kb.b
    dtypes = [out.type.dtype] + [o.type.dtype for o in present]

    def element(lanes: Lanes, offsets):
        vals = [lanes.load(p, off, d, st[-1] == 0) for p, off, d, st in
                zip(ptrs[1:], offsets[1:], dtypes[1:], strides[1:])]
        it = iter(vals)
        full = [None if o is None else next(it) for o in ins]
        lanes.store(body(lanes, full), ptrs[0], offsets[0], dtypes[0])

    def inner(bases, lo, hi):
        contiguous = all(st[-1] in (0, 1) for st in strides)
        n_vec = b.sub(hi, b.srem(b.sub(hi, lo), kb.i64(VEC))) if contiguous else lo
        for step, stop in ((VEC, n_vec), (1, hi)) if contiguous else ((1, hi),):
            start = lo if step == VEC else n_vec
            with kb.loop(start, stop, step, name=f"v{step}") as i:
                offs = [b.add(base, b.mul(i, kb.i64(st[-1]))) for base, st in zip(bases, strides)]
                element(Lanes(kb, step), offs)

    def nest(depth, bases, lo=None, hi=None):
        last = depth == len(sizes) - 1
        lo = kb.i64(0) if lo is None else lo
        hi = kb.i64(sizes[depth]) if hi is None else hi
        if last:
            return inner(bases, lo, hi)
        with kb.loop(lo, hi, name=f"d{depth}") as i:
            nest(depth + 1, [b.add(base, b.mul(i, kb.i64(st[depth]))) for base, st in zip(bases, strides)])

    zero = [kb.i64(0)] * len(strides)
    if len(sizes) == 1:  # split the only dim in whole vectors
        n = kb.i64(sizes[0])
        chunk = b.mul(b.sdiv(b.add(b.sdiv(b.add(n, b.sub(nth, kb.i64(1))), nth), kb.i64(VEC - 1)),
                             kb.i64(VEC)), kb.i64(VEC))
        lo = b.mul(chunk, tid)
        lo = b.select(b.icmp_signed("<", lo, n), lo, n)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        nest(0, zero, lo, hi)
    else:
        n = kb.i64(sizes[0])
        lo, hi = b.sdiv(b.mul(n, tid), nth), b.sdiv(b.mul(n, b.add(tid, kb.i64(1))), nth)
        nest(0, zero, lo, hi)
    kb.finish()
    args = [cg.ptr(o) for o in (operands or [out, *present])]
    if parallel:
        cg.call(kb.fn, args + [cg.tid, cg.nth])
    else:
        cg.call(kb.fn, args + [kb.i64(0), kb.i64(1)], single=True)


# -- expression trees ---------------------------------------------------------------------------

def evaluate(lanes: Lanes, e: Expr, values: list, acc=None):
    """The value of an expression tree at the current position."""
    if e.op is None:
        if e.arg is None:
            return lanes.const(e.type.dtype, np.asarray(e.value).reshape(-1)[0])
        return acc if e.arg == -1 else values[e.arg]
    args = [None if a is None else evaluate(lanes, a, values, acc) for a in e.args]
    types = [None if a is None else a.type.dtype for a in e.args]
    return ewops.apply(lanes, e.op.name, args, types, e.type.dtype, e.attrs)


def expr_supported(e: Expr) -> bool:
    if e.op is None:
        return e.arg is not None or e.value is not None and has_ltype(e.type.dtype)
    return (ewops.supports(e.op.name, [None if a is None else a.type.dtype for a in e.args],
                           e.type.dtype, e.attrs) and all(a is None or expr_supported(a) for a in e.args))


def _op_expr(instr) -> Expr:
    """A single elementwise kernel instruction as an expression tree over its inputs."""
    n = len(instr.inputs) if instr.n_args is None else instr.n_args
    leaves = tuple(None if o is None else Expr(o.type, arg=k) for k, o in enumerate(instr.inputs[:n]))
    return Expr(instr.outputs[0].type, op=instr.op, args=leaves, attrs=dict(instr.attrs))


def _substitute_acc(e: Expr, acc: Expr) -> Expr:
    if e.op is None:
        return acc if e.arg == -1 else e
    return Expr(e.type, e.op, tuple(None if a is None else _substitute_acc(a, acc) for a in e.args),
                e.attrs)


def emit_expr(cg, instr, e: Expr, name: str):
    out = instr.outputs[0]
    emit_loop(cg, name, out, list(instr.inputs), lambda lanes, vals: evaluate(lanes, e, vals))


def emit_fused(cg, instr):
    emit_expr(cg, instr, instr.expr, "fused")


def emit_epilogue(cg, instr):
    """The epilogue of a kernel instruction as a second pass, in place over its output."""
    out = instr.outputs[0]
    ins = [out, *instr.inputs]
    shifted = _shift_args(instr.expr, 1)
    emit_loop(cg, "epilogue", out, ins, lambda lanes, vals: evaluate(lanes, shifted, vals))


def _shift_args(e: Expr, by: int) -> Expr:
    if e.op is None:
        if e.arg is None:
            return e
        return Expr(e.type, arg=0 if e.arg == -1 else e.arg + by)
    return Expr(e.type, e.op, tuple(None if a is None else _shift_args(a, by) for a in e.args), e.attrs)


def emit_elementwise_op(cg, instr):
    e = _op_expr(instr)
    if instr.expr is not None:
        e = _substitute_acc(instr.expr, e)
    emit_expr(cg, instr, e, instr.op.name)


def _node_supported(node) -> bool:
    if len(node.outputs) != 1 or not isinstance(node.outputs[0].type, dt.TensorType):
        return False
    types = [None if v is None else v.type.dtype for v in node.inputs]
    return ewops.supports(node.op.name, types, node.outputs[0].type.dtype, node.attrs)


for _name in ewops.OPS:
    cpu_kernel(_name, supports=_node_supported, epilogue=True)(emit_elementwise_op)


def _expand_supported(node) -> bool:
    return has_ltype(ewops.storage_dtype(node.inputs[0].type.dtype))


@cpu_kernel("Expand", supports=_expand_supported)
def emit_expand(cg, instr):
    """Broadcast copy (the shape input was used at compile time)."""
    out, src = instr.outputs[0], instr.inputs[0]
    mover = _as_bytes(out.type.dtype)
    emit_loop(cg, "Expand", _retyped(out, mover), [_retyped(src, mover)], lambda lanes, vals: vals[0])


def _as_bytes(d):
    return ewops.storage_dtype(d)


class _Retyped:
    """An operand seen with another element type of the same size (bytes are moved, not read)."""

    def __init__(self, o, dtype):
        self._o, self.type = o, o.type.with_dtype(dtype)

    def __getattr__(self, k):
        return getattr(self._o, k)


def _retyped(o, dtype):
    return o if o.type.dtype == dtype else _Retyped(o, dtype)


__all__ = ["emit_loop", "emit_fused", "emit_epilogue", "evaluate", "expr_supported", "I1", "ir"]
