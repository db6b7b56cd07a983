"""Elementwise kernels: fused expression trees, single elementwise ops, epilogues, Expand.

Every elementwise instruction becomes one loop nest over its output (Glow's operator stacking:
a fused chain is one loop, intermediates stay in registers). Inputs broadcast against the output
through strides (0 along broadcast dims); adjacent dims that step alike are merged, so most
loops are one or two deep. The innermost loop runs 16 lanes at a time with explicit vectors,
then a scalar tail; large loops split their outermost dimension across the threads.

The per-op code lives in the table of ewops.py ((domain, op name) -> a value-level emitter).
"""

from __future__ import annotations

import functools

import numpy as np
from glow import dtypes as dt
from glow.ir.instr import WEIGHT, Buffer, Expr
from glow.specialize import varying

from ..codegen import cpu_kernel, has_ltype
from ..irutil import I64, PTR, VEC
from . import ewops
from .lanes import Lanes, dtype_of_value, lanes_loop, storage_dtype

#: Loops with at least this many elements split across the threads.
PARALLEL_MIN = 1 << 15

#: An innermost loop of a nest shorter than this, or one that strides (no vector access), keeps its size
#: and strides as constants, as before: LLVM unrolls a short loop whole, and such loops
#: (ShuffleNet's channel shuffles, short rows) gain little from sharing code.
INNER_SHARED = 64


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


class Access:
    """How a loop reads or writes one operand: element strides in the loop's index space (0 along
    broadcast dims) and a first-element offset; `dtype` overrides the operand's element type."""

    __slots__ = ("operand", "strides", "offset", "dtype")

    def __init__(self, operand, strides, offset: int = 0, dtype=None):
        self.operand, self.strides, self.offset = operand, list(strides), int(offset)
        self.dtype = dtype or operand.type.dtype


def broadcast(o, shape, dtype=None) -> Access:
    return Access(o, broadcast_strides(o.type.shape, shape), 0, dtype)


def emit_loop(cg, name: str, out, ins: list, body, body_key=None):
    """out[i] = body(lanes, values) over out's shape, each input broadcast to it.

    body(lanes: Lanes, values: list) -> value of out's compute type; values[k] is input k at the
    current position (None for an absent input)."""
    shape = tuple(out.type.shape)
    accesses = [broadcast(out, shape)] + [None if o is None else broadcast(o, shape) for o in ins]
    emit_strided(cg, name, shape, accesses, body, body_key=body_key)


#: body_key of a body that stores what it reads (`lambda lanes, vals: vals[0]`) and of one that
#: stores zeros of the written type (`lambda lanes, vals: lanes.const(dtype, 0)`).
MOVE, ZERO = "move", "zero"


def emit_strided(cg, name: str, shape, accesses: list, body, *, single: bool | None = None, body_key=None):
    """The general loop nest: accesses[0] is written, the others (None: absent) are read.

    The kernel reads its loop sizes and strides from an int64 table in the weights (its last
    pointer argument), so its code depends only on the nest's depth, which innermost strides are
    0 or 1, the element types and the body: loops of one kind over other shapes (DenseNet's
    BatchNorm + Relu at every channel count, a transformer's at every sequence length) share a
    function. A size or stride read from the table costs one load per call, where as a constant
    it cost a compile per shape.

    `body_key` (hashable; None: none) names what `body` computes, wholly (MOVE, `expr_key`): with
    it a nest whose code would be the same as one built before is not built again."""
    present = [a for a in accesses if a is not None]
    sizes, strides = collapse(shape, [a.strides for a in present])
    numel = int(np.prod(shape, dtype=np.int64))
    depth = len(sizes)
    table = cg.weight(np.array(sizes + [x for st in strides for x in st], np.int64))
    # what the code below depends on, besides the body: see short_inner and inner_fixed
    short_inner = _short_inner(sizes)
    args = [cg.ptr(a.operand, a.offset * a.dtype.itemsize) for a in present] + [table]
    single = numel < PARALLEL_MIN if single is None else single
    args += [cg.entry.i64(0), cg.entry.i64(1)] if single else [cg.tid, cg.nth]
    make = functools.partial(_build_nest, cg, name, sizes, strides, accesses, body)
    if body_key is None:
        cg.call(make(), args, single=single)
    else:
        key = ("strided", body_key, depth, sizes[-1] if short_inner else None, tuple(st[-1] for st in strides),
               tuple(None if a is None else a.dtype for a in accesses))
        cg.call_memo(key, make, args, single=single)


def _short_inner(sizes) -> bool:
    """Whether a nest's innermost loop is short enough to compile with its size as a constant
    (LLVM unrolls it), unless that size is a sequence length or batch that varies between calls
    (glow.specialize.varying): then the size is read, and one kernel serves every length."""
    return len(sizes) > 1 and sizes[-1] < INNER_SHARED and not varying(sizes[-1])


def _build_nest(cg, name, sizes, strides, accesses, body):
    present = [a for a in accesses if a is not None]
    depth = len(sizes)
    kb = cg.function(name, [PTR] * (len(present) + 1) + [I64, I64])
    ptrs, geo, (tid, nth) = kb.args[:len(present)], kb.args[len(present)], kb.args[len(present) + 1:]
    b = kb.b
    # A whole op collapsed to one contiguous loop reads its size even when short: its size is
    # what a new batch changes (a [batch, seq] mask's cast), and a lone vector loop loses nothing.
    # A long strided innermost loop keeps its strides but reads its size (a transformer's K
    # transposed over every sequence length).
    short_inner = _short_inner(sizes)
    inner_fixed = short_inner or any(st[-1] not in (0, 1) for st in strides)
    size_of = [kb.i64(sizes[d]) if d == depth - 1 and short_inner else kb.load(geo, d, I64, align=8)
               for d in range(depth)]
    stride_of = [[kb.i64(st[d]) if d == depth - 1 and (inner_fixed or st[d] in (0, 1)) else
                  kb.load(geo, depth * (1 + k) + d, I64, align=8) for d in range(depth)]
                 for k, st in enumerate(strides)]

    def element(lanes: Lanes, offsets):
        vals = [lanes.load(p, off, a.dtype, st[-1] == 0) for p, off, a, st in
                zip(ptrs[1:], offsets[1:], present[1:], strides[1:])]
        it = iter(vals)
        full = [None if a is None else next(it) for a in accesses[1:]]
        lanes.store(body(lanes, full), ptrs[0], offsets[0], present[0].dtype)

    def inner(bases, lo, hi):
        def step(lanes, i):
            element(lanes, [b.add(base, b.mul(i, st[-1])) for base, st in zip(bases, stride_of)])

        if all(st[-1] in (0, 1) for st in strides):
            lanes_loop(kb, lo, hi, step)
        else:
            with kb.loop(lo, hi, name="i") as i:
                step(Lanes(kb, 1), i)

    def nest(d, bases, lo=None, hi=None):
        lo = kb.i64(0) if lo is None else lo
        hi = size_of[d] if hi is None else hi
        if d == depth - 1:
            return inner(bases, lo, hi)
        with kb.loop(lo, hi, name=f"d{d}", unroll=False) as i:
            nest(d + 1, [b.add(base, b.mul(i, st[d])) for base, st in zip(bases, stride_of)])

    bases = [kb.i64(0) for a in present]  # offsets go into the pointers: kernels dedupe
    n = size_of[0]
    if depth == 1:  # split the only dim in whole vectors
        chunk = b.mul(b.sdiv(b.add(b.sdiv(b.add(n, b.sub(nth, kb.i64(1))), nth), kb.i64(VEC - 1)),
                             kb.i64(VEC)), kb.i64(VEC))
        lo = b.mul(chunk, tid)
        lo = b.select(b.icmp_signed("<", lo, n), lo, n)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
    else:
        lo, hi = b.sdiv(b.mul(n, tid), nth), b.sdiv(b.mul(n, b.add(tid, kb.i64(1))), nth)
    nest(0, bases, lo, hi)
    return kb.finish()


def call_split(cg, fn, args, single: bool):
    """Call a kernel taking (..., tid, nthreads): on every thread, or on thread 0 alone."""
    if single:
        cg.call(fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, args + [cg.tid, cg.nth])


# -- expression trees ---------------------------------------------------------------------------

def evaluate(lanes: Lanes, e: Expr, values: list, acc=None, acc_dtype=None):
    """The value of an expression tree at the current position (`acc`: the kernel's own result,
    the leaf arg -1 of an epilogue, whose element type is `acc_dtype`, by default its LLVM type's)."""
    if acc is not None and acc_dtype is None:
        acc_dtype = dtype_of_value(acc)

    def dtype(a):
        return acc_dtype if a.type is None else a.type.dtype

    def ev(e):
        if e.op is None:
            if e.arg is None:
                return lanes.const(e.type.dtype, np.asarray(e.value).reshape(-1)[0])
            return acc if e.arg == -1 else values[e.arg]
        args = [None if a is None else ev(a) for a in e.args]
        types = [None if a is None else dtype(a) for a in e.args]
        return ewops.apply(lanes, e.op, args, types, e.type.dtype, e.attrs)

    return ev(e)


def expr_key(e: Expr):
    """A hashable name of all that `evaluate` reads of a tree (ops, attributes, element types,
    leaves and immediates): two trees with equal keys emit the same code."""
    if e.op is None:
        if e.arg is None:
            return ("imm", e.type.dtype, _hashable(np.asarray(e.value).reshape(-1)[:1]))
        return ("arg", e.arg, None if e.type is None else e.type.dtype)
    return (e.op.domain, e.op.name, e.type.dtype, _hashable(dict(e.attrs)),
            tuple(None if a is None else expr_key(a) for a in e.args))


def _hashable(v):
    """`v` as a hashable value that tells apart what == would not (-0.0 from 0.0, NaN from NaN)."""
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (float, np.floating)):
        return ("float", type(v).__name__, float(v).hex())
    if isinstance(v, dict):
        return ("dict", tuple(sorted((str(k), _hashable(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_hashable(x) for x in v))
    try:
        hash(v)
    except TypeError:
        return ("repr", type(v).__name__, repr(v))
    return (type(v).__name__, v)


def expr_supported(e: Expr) -> bool:
    if e.op is None:
        return e.arg is not None or e.value is not None and has_ltype(e.type.dtype)
    return (ewops.supports(e.op, [None if a is None else a.type.dtype for a in e.args],
                           e.type.dtype, e.attrs) and all(a is None or expr_supported(a) for a in e.args))


def _op_expr(instr) -> Expr:
    """A single elementwise kernel instruction as an expression tree over its inputs. Pow's
    exponent, when it is one constant, is an immediate (as in a fused body), so the emitter sees
    its value (x ** 0.75 is two square roots, not a libm pow per lane)."""
    n = len(instr.inputs) if instr.n_args is None else instr.n_args

    def leaf(k, o):
        if (instr.op.name == "Pow" and k == 1 and isinstance(o, Buffer) and o.kind == WEIGHT
                and o.data is not None and o.data.size == 1):
            return Expr(o.type, value=o.data)
        return Expr(o.type, arg=k)

    leaves = tuple(None if o is None else leaf(k, o) for k, o in enumerate(instr.inputs[:n]))
    return Expr(instr.outputs[0].type, op=instr.op, args=leaves, attrs=dict(instr.attrs))


def _substitute_acc(e: Expr, acc: Expr) -> Expr:
    if e.op is None:
        return acc if e.arg == -1 else e
    return Expr(e.type, e.op, tuple(None if a is None else _substitute_acc(a, acc) for a in e.args),
                e.attrs)


def emit_expr(cg, instr, e: Expr, name: str):
    out = instr.outputs[0]
    emit_loop(cg, name, out, list(instr.inputs), lambda lanes, vals: evaluate(lanes, e, vals), expr_key(e))


def emit_fused(cg, instr):
    emit_expr(cg, instr, instr.expr, "fused")


def emit_epilogue(cg, instr):
    """The epilogue of a kernel instruction as a second pass, in place over its output. Only the
    operands the expression reads are passed (the kernel's own arguments have other shapes)."""
    out = instr.outputs[0]
    used = sorted({leaf.arg for leaf in instr.expr.leaves() if leaf.arg is not None and leaf.arg >= 0})
    where = {-1: 0, **{a: k + 1 for k, a in enumerate(used)}}
    e = _renumber(instr.expr, where, out.type)
    emit_loop(cg, "epilogue", out, [out] + [instr.inputs[a] for a in used],
              lambda lanes, vals: evaluate(lanes, e, vals), expr_key(e))


def _renumber(e: Expr, where: dict, acc_type) -> Expr:
    if e.op is None:
        if e.arg is None:
            return e
        return Expr(acc_type if e.arg == -1 else e.type, arg=where[e.arg])
    return Expr(e.type, e.op, tuple(None if a is None else _renumber(a, where, acc_type) for a in e.args),
                e.attrs)


def emit_elementwise_op(cg, instr):
    e = _op_expr(instr)
    if instr.expr is not None:
        e = _substitute_acc(instr.expr, e)
    emit_expr(cg, instr, e, instr.op.name)


def emits(node) -> bool:
    """Whether the expression emitter computes `node` (ewops' table, its op, types and attributes):
    the predicate of the elementwise kernels below and of what the backend's fusions may put in a
    fused body or an epilogue (anything else would reach `ewops.apply` without code)."""
    if len(node.outputs) != 1 or not isinstance(node.outputs[0].type, dt.TensorType):
        return False
    types = [None if v is None else v.type.dtype for v in node.inputs]
    return ewops.supports(node.op, types, node.outputs[0].type.dtype, node.attrs)


for _domain, _name in ewops.table():
    cpu_kernel(_name, domain=_domain, supports=emits, epilogue=True)(emit_elementwise_op)


def _expand_supported(node) -> bool:
    return has_ltype(storage_dtype(node.inputs[0].type.dtype))


@cpu_kernel("Expand", supports=_expand_supported)
def emit_expand(cg, instr):
    """Broadcast copy (the shape input was used at compile time); bytes move as plain ints."""
    out, src = instr.outputs[0], instr.inputs[0]
    mover = storage_dtype(out.type.dtype)
    shape = tuple(out.type.shape)
    emit_strided(cg, "Expand", shape, [broadcast(out, shape, mover), broadcast(src, shape, mover)],
                 lambda lanes, vals: vals[0], body_key=MOVE)


__all__ = ["Access", "broadcast", "call_split", "emit_epilogue", "emit_fused", "emit_loop", "emit_strided",
           "emits", "evaluate", "expr_supported"]
