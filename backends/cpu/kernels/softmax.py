"""Softmax and LogSoftmax along the last axis: three vector passes over each row.

    m = max(x);  e = exp(x - m) (stored), s = sum(e);  y = e / s   (LogSoftmax: (x - m) - log s)

exp and log are vmath's polynomials, so a row never leaves zmm registers for a libm call. Rows are
split across the threads. Other axes are lowered by the core (Transpose around the op, or the
floor's reductions). The row count and length are arguments, not constants: one function serves
every shape (a new sequence length of a transformer compiles no new Softmax or LayerNorm).
"""

from __future__ import annotations

import llvmlite.ir as ir
from glow import dtypes as dt

from ..codegen import cpu_kernel
from ..irutil import I64, PTR, VEC, KernelBuilder, vec
from . import vmath
from .gemm_emit import load_vec, masked_store, split_range

PARALLEL_ELEMENTS = 1 << 14
#: independent accumulators of a row's max and sum
CHAINS = 4


def row_vectors(kb: KernelBuilder, length, body):
    """body(offset in the row, mask or None) for every vector of a row of `length` (an i64
    value) floats: whole vectors, then the tail under a mask of its lanes."""
    row_chains(kb, length, 1, lambda off, mask, _: body(off, mask))


def row_chains(kb: KernelBuilder, length, chains: int, body):
    """As `row_vectors`, with body(offset, mask or None, j): blocks of `chains` whole vectors, the
    j-th of each going to accumulator j, then the rest to accumulator 0. Independent chains let a
    reduction run at the loads' pace rather than its one operation's latency."""
    b = kb.b
    start = kb.i64(0)
    if chains > 1:
        step = kb.i64(VEC * chains)
        blocks = b.udiv(length, step)
        with kb.loop(0, blocks, name="vb") as v:
            for j in range(chains):
                body(b.add(b.mul(v, step), kb.i64(j * VEC)), None, j)
        start = b.mul(blocks, kb.i64(chains))
    full = b.udiv(length, kb.i64(VEC))
    with kb.loop(start, full, name="v") as v:
        body(b.mul(v, kb.i64(VEC)), None, 0)
    rem = b.trunc(b.urem(length, kb.i64(VEC)), ir.IntType(32))
    with kb.if_then(b.icmp_unsigned("!=", rem, ir.Constant(ir.IntType(32), 0))):
        lanes = ir.Constant(ir.VectorType(ir.IntType(32), VEC), list(range(VEC)))
        body(b.mul(full, kb.i64(VEC)), b.icmp_unsigned("<", lanes, kb.splat(rem)), 0)


def hreduce(kb: KernelBuilder, v, combine):
    """Combine the 16 lanes of v pairwise (a fixed order); a scalar."""
    b = kb.b
    width = VEC
    while width > 1:
        width //= 2
        idx = ir.VectorType(ir.IntType(32), width)
        v = combine(b.shuffle_vector(v, v, ir.Constant(idx, list(range(width)))),
                    b.shuffle_vector(v, v, ir.Constant(idx, list(range(width, 2 * width)))))
    return b.extract_element(v, ir.Constant(ir.IntType(32), 0))


def vmaximum(kb, a, c):
    t = a.type
    name = f"llvm.maximum.v{t.count}f32" if isinstance(t, ir.VectorType) else "llvm.maximum.f32"
    return kb.b.call(kb.intrinsic(name, t, [t, t]), [a, c])


def store_vec(kb, value, ptr, mask):
    if mask is None:
        kb.b.store(value, ptr, align=4)
    else:
        masked_store(kb, value, ptr, mask)


def row_kernel(cg, name: str, nptr: int, body):
    """A kernel `(ptrs..., i64 rows, i64 length, i64 tid, i64 nth)` over rows of a run-time
    length: body(kb, ptrs, row_offset, length) emits one row."""
    kb = cg.function(name, [PTR] * nptr + [I64] * 4)
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    ptrs, (rows, length, tid, nth) = kb.args[:nptr], kb.args[nptr:]
    lo, hi = split_range(kb, rows, tid, nth)
    with kb.loop(lo, hi, name="row") as r:
        body(kb, ptrs, kb.b.mul(r, length), length)
    kb.finish()
    return kb.fn


def call_rows(cg, fn, ptrs, rows: int, length: int):
    sizes = [cg.entry.i64(rows), cg.entry.i64(length)]
    if rows * length < PARALLEL_ELEMENTS:
        cg.call(fn, ptrs + sizes + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, ptrs + sizes + [cg.tid, cg.nth])


def _fold(values, combine):
    """values[0] combined with each next one, pairwise as a tree (a fixed order)."""
    while len(values) > 1:
        values = [combine(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _last_axis_f32(node) -> bool:
    x, y = node.inputs[0], node.outputs[0]
    t = x.type
    if not (isinstance(t, dt.TensorType) and t.is_static and t.dtype == dt.float32 and t.numel > 0
            and len(t.shape) >= 1 and y.type == t):
        return False
    return node.attrs.get("axis", -1) % len(t.shape) == len(t.shape) - 1


def _emit(cg, instr, log: bool):
    x, y = instr.inputs[0], instr.outputs[0]
    L = x.type.shape[-1]
    rows = x.type.numel // L
    neg_inf = ir.Constant(vec(), [-float("inf")] * VEC)

    def row(kb, ptrs, base, length):
        src, dst = ptrs
        b = kb.b
        m = [kb.var(vec(), neg_inf) for _ in range(CHAINS)]

        def find_max(off, mask, j):
            v = load_vec(kb, kb.ptr(src, b.add(base, off)), mask)
            if mask is not None:
                v = b.select(mask, v, neg_inf)
            b.store(vmaximum(kb, b.load(m[j]), v), m[j])

        row_chains(kb, length, CHAINS, find_max)
        mx = kb.splat(hreduce(kb, _fold([b.load(a) for a in m], lambda p, q: vmaximum(kb, p, q)),
                              lambda p, q: vmaximum(kb, p, q)))
        s = [kb.var(vec(), ir.Constant(vec(), [0.0] * VEC)) for _ in range(CHAINS)]

        def exp_sum(off, mask, j):
            p = kb.ptr(src, b.add(base, off))
            shifted = b.fsub(load_vec(kb, p, mask), mx)
            e = vmath.emit_unary(kb, "Exp", shifted)
            if mask is not None:
                e = b.select(mask, e, ir.Constant(vec(), [0.0] * VEC))
            b.store(b.fadd(b.load(s[j]), e), s[j])
            store_vec(kb, shifted if log else e, kb.ptr(dst, b.add(base, off)), mask)

        row_chains(kb, length, CHAINS, exp_sum)
        total = hreduce(kb, _fold([b.load(a) for a in s], b.fadd), b.fadd)
        if log:
            k = kb.splat(vmath.emit_unary(kb, "Log", total))
        else:  # one division per row, then products (a vector division per vector was 3x slower)
            k = kb.splat(b.fdiv(kb.f32(1.0), total))

        def finish(off, mask):
            p = kb.ptr(dst, b.add(base, off))
            v = load_vec(kb, p, mask)
            store_vec(kb, b.fsub(v, k) if log else b.fmul(v, k), p, mask)

        row_vectors(kb, length, finish)

    fn = row_kernel(cg, instr.op.name, 2, row)
    call_rows(cg, fn, [cg.ptr(x), cg.ptr(y)], rows, L)


@cpu_kernel("Softmax", supports=_last_axis_f32)
def emit_softmax(cg, instr):
    _emit(cg, instr, log=False)


@cpu_kernel("LogSoftmax", supports=_last_axis_f32)
def emit_log_softmax(cg, instr):
    _emit(cg, instr, log=True)


__all__ = ["emit_softmax", "emit_log_softmax", "row_vectors", "row_chains", "hreduce", "row_kernel", "call_rows"]
