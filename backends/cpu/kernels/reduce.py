"""Reductions (ReduceSum/Max/Min/Prod over any axes) and the general MatMul (a sum of products).

The input's dims are labelled kept or reduced; size-1 dims are dropped and neighbours of the same
kind merged, so a reduction is a few loops. Two shapes of kernel:

* rows: the last input dim is kept. Each output row starts at the identity and every input row
  that reduces into it is combined in, 16 lanes at a time (reading memory in order).
* dots: the last input dim is reduced. Each output element keeps its accumulator in a register
  (a 16-lane vector along a contiguous dim, folded at the end).

Half-precision floats accumulate in float32 (as the reference does) and always use dots. Threads
split the output. The general MatMul (any element type, broadcast batches, 1-D operands) serves
whatever the fast GEMM kernel declines: C rows accumulate a[m, k] * B[k, :] (rows again).
"""

from __future__ import annotations

import math

import numpy as np
from glow import dtypes as dt

from ..codegen import constant, cpu_kernel, value_input
from ..irutil import F32, I64, PTR, VEC
from . import ewops
from .elementwise import broadcast_strides, call_split, strides_of
from .lanes import FLOATS, NUMERIC, Lanes, compute_type, lanes_loop

PARALLEL_MIN = 1 << 15  # input elements
HALVES = (dt.float16, dt.bfloat16)
_COMBINE = {"ReduceSum": "Add", "ReduceProd": "Mul", "ReduceMax": "Max", "ReduceMin": "Min"}


def identity(op: str, d):
    if op == "ReduceSum":
        return 0
    if op == "ReduceProd":
        return 1
    low = op == "ReduceMax"
    if d == dt.bool_:
        return not low
    if d in FLOATS:
        return -np.inf if low else np.inf
    info = np.iinfo(d.np)
    return info.min if low else info.max


def resolve_axes(instr, rank: int):
    """The reduced axes (sorted), or None when the op is the identity (noop_with_empty_axes)."""
    axes = instr.inputs[1] if len(instr.inputs) > 1 else None
    axes = [] if axes is None else [int(a) for a in constant(axes).reshape(-1)]
    if not axes:
        return None if instr.attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return sorted({a % rank for a in axes}) if rank else []


def _reduce_supported(node) -> bool:
    d = node.inputs[0].type.dtype
    axes_ok = len(node.inputs) < 2 or value_input(node.inputs[1])
    ok_types = NUMERIC + ((dt.bool_,) if node.op.name in ("ReduceMax", "ReduceMin") else ())
    return axes_ok and d in ok_types


class _Acc:
    """The accumulator's type and combine step for one reduction."""

    def __init__(self, op: str, d):
        self.op, self.d = op, d
        self.acc_d = dt.float32 if d in HALVES else d

    def to_acc(self, L, v):
        return L.b.fpext(v, L.t(F32)) if self.d == dt.float16 else v

    def from_acc(self, L, v):
        return L.b.fptrunc(v, L.t(compute_type(self.d))) if self.d == dt.float16 else v

    def init(self, L):
        return L.const(self.acc_d, identity(self.op, self.d))

    def combine(self, L, a, b):
        return ewops.emitter(_COMBINE[self.op])(L, [a, b], [self.acc_d] * 2, self.acc_d, {})

    def fold(self, L, v, n: int):
        """Lanes of a vector accumulator combined into a scalar."""
        from llvmlite import ir

        out = L.b.extract_element(v, ir.Constant(ir.IntType(32), 0))
        S = Lanes(L.kb, 1)
        for k in range(1, n):
            out = self.combine(S, out, L.b.extract_element(v, ir.Constant(ir.IntType(32), k)))
        return out


@cpu_kernel("ReduceSum", supports=_reduce_supported)
@cpu_kernel("ReduceProd", supports=_reduce_supported)
@cpu_kernel("ReduceMax", supports=_reduce_supported)
@cpu_kernel("ReduceMin", supports=_reduce_supported)
def emit_reduce(cg, instr):
    from .movement import emit_copy

    src, out = instr.inputs[0], instr.outputs[0]
    shape = tuple(src.type.shape)
    axes = resolve_axes(instr, len(shape))
    if axes is None:
        return emit_copy(cg, instr)
    d = src.type.dtype
    kept = [k for k in range(len(shape)) if k not in axes]
    kshape = [shape[k] for k in kept]
    ostride = dict(zip(kept, strides_of(kshape)))
    in_st = strides_of(shape)
    dims = _merged([(n, in_st[k], ostride.get(k, 0), k in axes) for k, n in enumerate(shape) if n != 1])
    acc = _Acc(instr.op.name, d)
    rows = bool(dims) and not dims[-1][3] and d not in HALVES and any(r for *_, r in dims)
    numel = int(np.prod(shape, dtype=np.int64))
    kept_dims = [(n, s, o) for n, s, o, r in dims if not r]
    red_dims = [(n, s) for n, s, o, r in dims if r]
    args = [cg.ptr(src), cg.ptr(out)]
    if rows:
        kb = cg.function(instr.op.name, [PTR, PTR, I64, I64])
        x, y, tid, nth = kb.args
        _rows(kb, acc, x, y, kept_dims, red_dims, tid, nth)
    else:
        # The output count is an argument and the outermost kept dim's size is in no offset, so
        # a normalisation over the last axis ([batch x sequence] rows) serves every length.
        kb = cg.function(instr.op.name, [PTR, PTR, I64, I64, I64])
        x, y, items, tid, nth = kb.args
        _dots(kb, acc, x, y, kept_dims, red_dims, items, tid, nth)
        args.append(cg.entry.i64(math.prod(n for n, *_ in kept_dims)))
    kb.finish()
    call_split(cg, kb.fn, args, numel < PARALLEL_MIN)


def _merged(dims):
    """Adjacent (size, in stride, out stride, reduced) dims that step as one, merged."""
    out: list = []
    for n, s, o, r in dims:
        if out and out[-1][3] == r and out[-1][1] == n * s and out[-1][2] == n * o:
            out[-1] = (out[-1][0] * n, s, o, r)
        else:
            out.append((n, s, o, r))
    return out


def _split_outer(kb, n, tid, nth):
    b = kb.b
    n = kb.i64(n) if isinstance(n, int) else n
    return b.sdiv(b.mul(n, tid), nth), b.sdiv(b.mul(n, b.add(tid, kb.i64(1))), nth)


def _offsets(kb, index, dims, which: int):
    """Decompose a flat index over `dims` (sizes first) into the offset sum of field `which`.
    The index is below the dims' product, so the outermost coordinate needs no remainder (and
    its size is not in the code)."""
    b, off, rest = kb.b, kb.i64(0), index
    for k, dim in enumerate(reversed(dims)):
        outermost = k == len(dims) - 1
        coord = rest if outermost else b.srem(rest, kb.i64(dim[0]))
        off = b.add(off, b.mul(coord, kb.i64(dim[which])))
        if not outermost:
            rest = b.sdiv(rest, kb.i64(dim[0]))
    return off


def _nest(kb, dims, base, body, depth=0):
    """Loops over `dims` [(size, stride)], calling body(offset) innermost."""
    if depth == len(dims):
        return body(base)
    n, s = dims[depth][:2]
    with kb.loop(0, n, name=f"r{depth}") as i:
        _nest(kb, dims, kb.b.add(base, kb.b.mul(i, kb.i64(s))), body, depth + 1)


def _rows(kb, acc, x, y, kept, red, tid, nth):
    """Last dim kept: out[o, j] = combine over reduced offsets r of in[o_in + r + j]."""
    b = kb.b
    L_n, L_in, L_out = kept[-1]
    outer = kept[:-1]
    n_outer = int(np.prod([n for n, *_ in outer], dtype=np.int64))
    d = acc.d
    if n_outer > 1:
        lo, hi = _split_outer(kb, n_outer, tid, nth)
        j_lo, j_hi = kb.i64(0), kb.i64(L_n)
    else:
        lo, hi = kb.i64(0), kb.i64(1)
        j_lo, j_hi = _split_outer(kb, -(-L_n // VEC), tid, nth)
        j_lo = b.mul(j_lo, kb.i64(VEC))
        j_hi = b.mul(j_hi, kb.i64(VEC))
        j_hi = b.select(b.icmp_signed("<", j_hi, kb.i64(L_n)), j_hi, kb.i64(L_n))

    def lanes(fn):
        lanes_loop(kb, j_lo, j_hi, fn)

    with kb.loop(lo, hi, name="o") as o:
        in_base = _offsets(kb, o, [(n, s) for n, s, _ in outer], 1)
        out_base = _offsets(kb, o, [(n, s, t) for n, s, t in outer], 2)
        lanes(lambda L, j: L.store(acc.init(L), y, b.add(out_base, j), d))

        def combine_row(r):
            def step(L, j):
                at = b.add(out_base, j)
                v = L.load(x, b.add(b.add(in_base, r), b.mul(j, kb.i64(L_in))), d, False)
                L.store(acc.combine(L, L.load(y, at, d, False), v), y, at, d)

            lanes(step)

        _nest(kb, red, kb.i64(0), combine_row)


def _dots(kb, acc, x, y, kept, red, items, tid, nth):
    """Each output element accumulates in a register over the reduced dims (`items` of them:
    the product of the kept dims, an argument)."""
    b = kb.b
    lo, hi = _split_outer(kb, items, tid, nth)
    d = acc.d
    inner_n, inner_s = red[-1] if red else (1, 0)
    outer_red = red[:-1]
    S = Lanes(kb, 1)
    with kb.loop(lo, hi, name="o") as o:
        in_base = _offsets(kb, o, [(n, s) for n, s, _ in kept], 1)
        out_at = _offsets(kb, o, [(n, s, t) for n, s, t in kept], 2)
        slot = kb.var(S.t(compute_type(acc.acc_d)), acc.init(S))
        vec_ok = inner_s == 1 and inner_n >= VEC

        def inner(r):
            base = b.add(in_base, r)
            if vec_ok:
                V = Lanes(kb, VEC)
                vslot = kb.var(V.t(compute_type(acc.acc_d)), acc.init(V))
                with kb.loop(0, inner_n - inner_n % VEC, VEC, name="kv") as k:
                    v = acc.to_acc(V, V.load(x, b.add(base, k), d, False))
                    b.store(acc.combine(V, b.load(vslot), v), vslot)
                b.store(acc.combine(S, b.load(slot), acc.fold(V, b.load(vslot), VEC)), slot)
                start = inner_n - inner_n % VEC
            else:
                start = 0
            with kb.loop(start, inner_n, name="k") as k:
                v = acc.to_acc(S, S.load(x, b.add(base, b.mul(k, kb.i64(inner_s))), d, False))
                b.store(acc.combine(S, b.load(slot), v), slot)

        _nest(kb, outer_red, kb.i64(0), inner)
        S.store(acc.from_acc(S, b.load(slot)), y, out_at, d)


# -- MatMul (general) ---------------------------------------------------------------------------

MATMUL_TYPES = (dt.float32, dt.float64, dt.int32, dt.int64, dt.uint32, dt.uint64)


@cpu_kernel("MatMul", priority=-10, supports=lambda node: node.inputs[0].type.dtype in MATMUL_TYPES
            + HALVES)
def emit_matmul(cg, instr):
    """C[b, m, :] = sum_k A[b, m, k] * B[b, k, :], batches broadcast, 1-D operands promoted."""
    a, bm, out = instr.inputs[0], instr.inputs[1], instr.outputs[0]
    ash, bsh = list(a.type.shape), list(bm.type.shape)
    a2 = [1] + ash if len(ash) == 1 else ash
    b2 = bsh + [1] if len(bsh) == 1 else bsh
    M, K, N = a2[-2], a2[-1], b2[-1]
    batch = list(np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))
    a_bst = broadcast_strides(a2[:-2], batch) if batch else []
    b_bst = broadcast_strides(b2[:-2], batch) if batch else []
    d = out.type.dtype
    n_rows = int(np.prod(batch, dtype=np.int64)) * M
    kb = cg.function("MatMul", [PTR, PTR, PTR, I64, I64])
    A, B, C, tid, nth = kb.args
    b = kb.b
    bdims = [(n, sa * M * K, sb * K * N) for n, sa, sb in zip(batch, a_bst, b_bst)]
    lo, hi = _split_outer(kb, n_rows, tid, nth)
    S = Lanes(kb, 1)
    half = d in HALVES
    with kb.loop(lo, hi, name="row") as row:
        bi, m = b.sdiv(row, kb.i64(M)), b.srem(row, kb.i64(M))
        a_row = b.add(_offsets(kb, bi, bdims, 1), b.mul(m, kb.i64(K)))
        b_mat = _offsets(kb, bi, bdims, 2)
        c_row = b.mul(row, kb.i64(N))
        if half:  # one float32 dot per output element
            with kb.loop(0, N, name="n") as n:
                slot = kb.var(F32, ir_zero())
                with kb.loop(0, K, name="k") as k:
                    av = _f32(S, S.load(A, b.add(a_row, k), d, False), d)
                    bv = _f32(S, S.load(B, b.add(b_mat, b.add(b.mul(k, kb.i64(N)), n)), d, False), d)
                    b.store(b.fadd(b.load(slot), b.fmul(av, bv)), slot)
                r = b.load(slot)
                S.store(b.fptrunc(r, compute_type(d)) if d == dt.float16 else r, C, b.add(c_row, n), d)
        else:
            _row_products(kb, d, A, B, C, a_row, b_mat, c_row, K, N)
    kb.finish()
    call_split(cg, kb.fn, [cg.ptr(a), cg.ptr(bm), cg.ptr(out)], n_rows * N * K < (1 << 16))


def ir_zero():
    from llvmlite import ir

    return ir.Constant(F32, 0.0)


def _f32(L, v, d):
    return L.b.fpext(v, F32) if d == dt.float16 else v


def _row_products(kb, d, A, B, C, a_row, b_mat, c_row, K, N):
    b = kb.b
    is_f = d in FLOATS

    def lanes(fn):
        lanes_loop(kb, 0, N, fn)

    lanes(lambda L, n: L.store(L.const(d, 0), C, b.add(c_row, n), d))
    with kb.loop(0, K, name="k") as k:
        S = Lanes(kb, 1)
        av = S.load(A, b.add(a_row, k), d, False)
        brow = b.add(b_mat, b.mul(k, kb.i64(N)))

        def step(L, n):
            at = b.add(c_row, n)
            prod = (b.fmul if is_f else b.mul)(L.splat(av), L.load(B, b.add(brow, n), d, False))
            L.store((b.fadd if is_f else b.add)(L.load(C, at, d, False), prod), C, at, d)

        lanes_loop(step)


__all__ = ["emit_matmul", "emit_reduce", "identity", "resolve_axes"]
