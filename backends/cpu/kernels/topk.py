"""TopK: the k best entries of every row along one axis, best first, and their int64 indices.

The input is seen as [outer, n, inner]: a row is `outer x inner` of them, its n entries `inner`
apart. Per row, a bounded binary heap of k entries lives in the output buffers themselves (the
worst kept entry at the root): the first k entries make the heap, every later entry that beats
the root replaces it and sinks (O(n log k)), then a heap sort puts the k kept entries in order,
best first, and the values are copied from the input by their indices, bit for bit (a NaN keeps
its payload). Threads split the rows.

The order is the reference's (a stable NumPy sort): by value, descending for `largest=1` and
ascending for `largest=0`, equal values by the lower index, -0.0 equal to 0.0, and every NaN
above every number (so first for `largest=1`, last for `largest=0`), NaNs equal to each other.
Each entry becomes one unsigned integer, (order key, index), whose integer order is that order
(`order_key`), so the heap compares integers: no float compares, no NaN cases.

k is the output's length along the axis, so K must be a constant and the shapes static: a K fed
at run time or a symbolic dim is left to specialisation (and on the primitive floor the node is
then lowered, as it has to be).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt

from ..codegen import cpu_kernel, has_ltype
from ..irutil import I64, PTR
from .elementwise import call_split
from .lanes import FLOATS, NUMERIC, SIGNED_INTS

PARALLEL_MIN = 1 << 14  # input elements: below this one thread does every row


def _topk_supported(node) -> bool:
    """Static shapes and a constant K: anything else is left to specialisation (`defers`), which
    is also what lets the primitive floor lower the node once its shapes are known (a node this
    accepts is not deferred, and the lowering needs static shapes)."""
    x, k = node.inputs[0], node.inputs[1]
    t = x.type
    return (t.dtype in NUMERIC and has_ltype(t.dtype) and t.is_static and len(t.shape) >= 1
            and k is not None and k.is_constant)


_INF_BITS = {dt.float32: 0x7F800000, dt.float64: 0x7FF0000000000000, dt.float16: 0x7C00,
             dt.bfloat16: 0x7F80}


def order_key(kb, d, raw, largest: bool):
    """An unsigned integer of raw's width whose order is the TopK order of the entries (smaller
    first): floats by value with -0.0 equal to 0.0 and every NaN one key above +inf, signed
    integers with the sign bit flipped; inverted for `largest`."""
    b = kb.b
    t = raw.type
    w = t.width
    sign = ir.Constant(t, 1 << (w - 1))
    ones = ir.Constant(t, (1 << w) - 1)
    if d in FLOATS:
        mag = b.and_(raw, ir.Constant(t, (1 << (w - 1)) - 1))
        raw = b.select(b.icmp_unsigned("==", mag, ir.Constant(t, 0)), ir.Constant(t, 0), raw)  # -0.0
        neg = b.icmp_unsigned("!=", b.and_(raw, sign), ir.Constant(t, 0))
        u = b.select(neg, b.xor(raw, ones), b.or_(raw, sign))
        u = b.select(b.icmp_unsigned(">", mag, ir.Constant(t, _INF_BITS[d])), ones, u)  # NaN
    elif d in SIGNED_INTS:
        u = b.xor(raw, sign)
    else:
        u = raw
    return b.xor(u, ones) if largest else u


def _while(kb, cond_fn, body_fn, name: str):
    """while cond_fn(): body_fn(); body_fn returns an i1 'go on' (False: break)."""
    b = kb.b
    head = kb.fn.append_basic_block(f"{name}.head")
    body = kb.fn.append_basic_block(f"{name}.body")
    done = kb.fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(cond_fn(), body, done)
    b.position_at_end(body)
    go_on = body_fn()
    b.cbranch(go_on, head, done)
    b.position_at_end(done)


def emit_topk_kernel(kb, d, largest: bool, packed: bool):
    """The body of TopK(x, values, indices, rows, n, k, inner, tid, nthreads).

    A heap entry is one unsigned integer, (key << 32 | index) when the key has at most 32 bits
    and n < 2**32 (`packed`: kept in the Indices slot alone), else (key << 64 | index) as an
    i128 (key in the Values slot, index in the Indices slot): an entry comes before another
    exactly when its integer is smaller, the lower index first among equal keys."""
    x, vals, idx, rows, n, k, inner, tid, nth = kb.args
    b = kb.b
    w = 8 * d.itemsize
    bits = ir.IntType(w)  # entries move as their bits: a NaN keeps its payload
    ent = I64 if packed else ir.IntType(128)
    shift = ir.Constant(ent, 32 if packed else 64)
    lo = b.sdiv(b.mul(rows, tid), nth)
    hi = b.sdiv(b.mul(rows, b.add(tid, kb.i64(1))), nth)
    pos = kb.var(I64)  # the hole while an entry sinks
    child = kb.var(I64)
    worse = kb.var(ent)

    with kb.loop(lo, hi, name="row") as r:
        o, c = b.sdiv(r, inner), b.srem(r, inner)
        xb = b.add(b.mul(b.mul(o, n), inner), c)
        yb = b.add(b.mul(b.mul(o, k), inner), c)

        def x_bits(i):
            return b.load(kb.ptr(x, b.add(xb, b.mul(i, inner)), bits), typ=bits, align=d.itemsize)

        def entry(i):
            key = b.zext(order_key(kb, d, x_bits(i), largest), ent)
            return b.or_(b.shl(key, shift), i if packed else b.zext(i, ent))

        def slot(p):  # element offset of heap slot p in both outputs
            return b.add(yb, b.mul(p, inner))

        def h_get(p):
            at = slot(p)
            i = b.load(kb.ptr(idx, at, I64), typ=I64, align=8)
            if packed:
                return i
            key = b.load(kb.ptr(vals, at, bits), typ=bits, align=d.itemsize)
            return b.or_(b.shl(b.zext(key, ent), shift), b.zext(i, ent))

        def h_set(p, e):
            at = slot(p)
            b.store(e if packed else b.trunc(e, I64), kb.ptr(idx, at, I64), align=8)
            if not packed:
                b.store(b.trunc(b.lshr(e, shift), bits), kb.ptr(vals, at, bits), align=d.itemsize)

        def sink(start, size):
            """The entry at slot `start` sinks below every worse child (the worst on top)."""
            e = h_get(start)
            b.store(start, pos)

            def more():
                b.store(b.add(b.mul(b.load(pos), kb.i64(2)), kb.i64(1)), child)
                return b.icmp_signed("<", b.load(child), size)

            def step():
                ch = b.load(child)
                b.store(h_get(ch), worse)
                right = b.add(ch, kb.i64(1))
                with b.if_then(b.icmp_signed("<", right, size)):
                    e2 = h_get(right)
                    with b.if_then(b.icmp_unsigned(">", e2, b.load(worse))):
                        b.store(e2, worse)
                        b.store(right, child)
                wv = b.load(worse)
                go = b.icmp_unsigned(">", wv, e)  # the worse child moves up over e
                with b.if_then(go):
                    h_set(b.load(pos), wv)
                    b.store(b.load(child), pos)
                return go

            _while(kb, more, step, "sink")
            h_set(b.load(pos), e)

        with b.if_then(b.icmp_signed(">", k, kb.i64(0))):
            with kb.loop(0, k, name="fill") as p:
                h_set(p, entry(p))
            half = b.sdiv(k, kb.i64(2))
            with kb.loop(0, half, name="heapify") as q:
                sink(b.sub(b.sub(half, kb.i64(1)), q), k)
            # Later entries have higher indices than any kept one: only a better key wins.
            root = kb.var(ent)
            b.store(h_get(kb.i64(0)), root)
            with kb.loop(k, n, name="scan") as i:
                e = entry(i)
                with b.if_then(b.icmp_unsigned("<", e, b.load(root)), likely=False):
                    h_set(kb.i64(0), e)
                    sink(kb.i64(0), k)
                    b.store(h_get(kb.i64(0)), root)
            # Heap sort: the worst goes last, then the next worst, ...: best first.
            with kb.loop(1, k, name="sort") as q:
                end = b.sub(k, q)
                top = h_get(kb.i64(0))
                h_set(kb.i64(0), h_get(end))
                h_set(end, top)
                sink(kb.i64(0), end)
            # The outputs: each entry's index, and its value's bits from the input.
            with kb.loop(0, k, name="out") as p:
                at = slot(p)
                e = b.load(kb.ptr(idx, at, I64), typ=I64, align=8)
                i = b.and_(e, kb.i64(0xFFFFFFFF)) if packed else e
                b.store(i, kb.ptr(idx, at, I64), align=8)
                b.store(x_bits(i), kb.ptr(vals, at, bits), align=d.itemsize)


@cpu_kernel("TopK", supports=_topk_supported)
def emit_topk(cg, instr):
    x, vals, idx = instr.inputs[0], instr.outputs[0], instr.outputs[1]
    shape = tuple(x.type.shape)
    axis = instr.attrs.get("axis", -1) % len(shape)
    n = shape[axis]
    k = tuple(vals.type.shape)[axis]
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    d = x.type.dtype
    largest = bool(instr.attrs.get("largest", 1))
    packed = d.itemsize <= 4 and n < 1 << 32
    kb = cg.function("TopK", [PTR, PTR, PTR, I64, I64, I64, I64, I64, I64])
    emit_topk_kernel(kb, d, largest, packed)
    kb.finish()
    e = cg.entry
    args = [cg.ptr(x), cg.ptr(vals), cg.ptr(idx), e.i64(outer * inner), e.i64(n), e.i64(k), e.i64(inner)]
    call_split(cg, kb.fn, args, outer * inner < 2 or outer * inner * n < PARALLEL_MIN)


__all__ = ["emit_topk"]
