"""Gather: out[a, i, b] = data[a, indices[i], b] (axis split into outer A, the indices, inner B).

Indices are data, so they are checked in the generated code: a negative index counts from the
back (as ONNX says) and anything still out of range is an error, as in the reference. A kernel
cannot raise, so it records the first bad index of a run in the module's error record
(`record_bad_index`), skips that access (zeros in its place: nothing outside `data` is read) and
goes on; the runtime reads the record after the run and raises the InputError
(`check_index_errors`). The inner block B is contiguous in both tensors: a vector copy.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.ops.index import NON_NEGATIVE, WRAPS, site_id

from ..abi import ERRORS
from ..codegen import cpu_kernel
from ..irutil import I64, PTR
from .elementwise import ZERO, Access, call_split, emit_strided, strides_of
from .lanes import Lanes, lanes_loop, storage_dtype

PARALLEL_MIN = 1 << 15



def record_bad_index(kb, site, kind: int, index, bound):
    """Emit: if no bad index was recorded in this run yet, record (kind, site, index, bound).
    Threads may meet bad indices at once: a compare-and-swap on the kind picks one writer."""
    try:
        rec = kb.module.get_global(ERRORS)
    except KeyError:
        rec = ir.GlobalVariable(kb.module, ir.ArrayType(I64, 4), ERRORS)
        rec.initializer = ir.Constant(ir.ArrayType(I64, 4), None)
        rec.align = 8  # external linkage: the runtime finds it by name, also in cached objects
    b = kb.b

    def slot(k):
        return b.gep(rec, [kb.i64(0), kb.i64(k)], inbounds=True)

    won = b.extract_value(b.cmpxchg(slot(0), kb.i64(0), kb.i64(kind), "monotonic", "monotonic"), 1)
    with b.if_then(won):
        for k, v in ((1, site), (2, index), (3, bound)):
            b.store(kb.i64(v) if isinstance(v, int) else v, slot(k), align=8)


def _gather_supported(node) -> bool:
    return (storage_dtype(node.inputs[0].type.dtype) is not None
            and node.inputs[1].type.dtype in (dt.int32, dt.int64))


@cpu_kernel("Gather", supports=_gather_supported)
def emit_gather(cg, instr):
    data, idx, out = instr.inputs[0], instr.inputs[1], instr.outputs[0]
    shape = tuple(data.type.shape)
    axis = instr.attrs.get("axis", 0) % len(shape)
    tied = _tied_table(cg, data, axis)
    if tied is not None:
        return _emit_gather_packed(cg, instr, *tied)
    A = int(np.prod(shape[:axis], dtype=np.int64))
    D = shape[axis]
    B = int(np.prod(shape[axis + 1:], dtype=np.int64))
    n_idx = int(np.prod(idx.type.shape, dtype=np.int64))
    mover = storage_dtype(data.type.dtype)
    # The index count (and so the rows) and the gathered axis's size are arguments: token ids of
    # another batch or sequence length use the same function, and so does a gather over rows
    # whose count is a batch times a sequence length. The row length stays a constant.
    kb = cg.function("Gather", [PTR, PTR, PTR, I64, I64, I64, I64, I64, I64])
    x, ind, y, site, rows_arg, n_idx_arg, d_arg, tid, nth = kb.args
    b = kb.b
    rows = A * n_idx
    lo = b.sdiv(b.mul(rows_arg, tid), nth)
    hi = b.sdiv(b.mul(rows_arg, b.add(tid, kb.i64(1))), nth)
    with kb.loop(lo, hi, name="row") as row:
        a, i = b.sdiv(row, n_idx_arg), b.srem(row, n_idx_arg)
        k, raw = table_row(kb, ind, i, idx.type.dtype, d_arg)
        dst = b.mul(row, kb.i64(B))
        n = 16 if B >= 16 else 1  # short rows (the index tables of lowered gathers): scalar copies
        # one unsigned compare: a still-negative k is huge
        with b.if_else(b.icmp_unsigned("<", k, d_arg), likely=True) as (ok, bad):
            with ok:
                src = b.mul(b.add(b.mul(a, d_arg), k), kb.i64(B))
                lanes_loop(kb, 0, B, lambda L, j: L.store(L.load(x, b.add(src, j), mover, False), y,
                                                          b.add(dst, j), mover), n)
            with bad:
                record_bad_index(kb, site, WRAPS, raw, d_arg)
                lanes_loop(kb, 0, B, lambda L, j: L.store(L.const(mover, 0), y, b.add(dst, j), mover), n)
    kb.finish()
    args = [cg.ptr(data), cg.ptr(idx), cg.ptr(out), kb.i64(site_id(instr.name)), kb.i64(rows), kb.i64(n_idx),
            kb.i64(D)]
    call_split(cg, kb.fn, args, rows * B < PARALLEL_MIN)


def table_row(kb, ind, i, dtype, size):
    """(row, raw id) of ids[i] in a table of `size` rows: the id widened to i64 and a negative one
    counted from the back; the caller checks 0 <= row < size (one unsigned compare) and reports
    `raw` when it is not."""
    b = kb.b
    k = Lanes(kb, 1).load(ind, i, dtype, False)
    raw = b.sext(k, I64) if k.type != I64 else k
    return b.select(b.icmp_signed("<", raw, kb.i64(0)), b.add(raw, size), raw), raw


def _tied_table(cg, data, axis):
    """(W, GemmShape, single) when `data` is a large constant that is the transpose of a
    constant W [H, V] (an embedding table tied to the LM head, as onnxruntime-genai's builder
    writes it: Gather(Transpose(lm_head.weight)), the Transpose folded to a view) gathered by
    rows: its rows are W's columns, read from the copy of W that MatMul packs into panels
    (matmul.packed_matmul_b), which the LM head's MatMul shares. Else a row-major copy of the
    table, as large as W, would be resident beside W's packed one (545 MB for Qwen2.5-0.5B)."""
    from glow.backends.cpu import shared_weights

    from ..codegen import weight_data
    from .matmul import MAX_PACKED_BYTES, matmul_shape

    if axis != 0 or data.root is not data or data.type.dtype != dt.float32 or len(data.type.shape) != 2:
        return None
    table = weight_data(data)
    if table is None or table.flags.c_contiguous or not table.T.flags.c_contiguous:
        return None
    w = table.T
    if not (cg._shares(w.nbytes) and shared_weights.immutable(w) and w.nbytes <= MAX_PACKED_BYTES):
        return None
    s, single = matmul_shape((1, w.shape[0]), w.shape, packed=True)
    return w, s, single


def _emit_gather_packed(cg, instr, w, s, single):
    """out[i, :] = W[:, ids[i]], W packed as panels [ceil(V/nr), H, nr]: column n of W is at
    panel n // nr, lane n % nr, one element every nr floats."""
    from .matmul import packed_matmul_b

    idx, out = instr.inputs[1], instr.outputs[0]
    H, V, nr = s.K, s.N, s.nr
    panels = packed_matmul_b(cg, w, s, single)
    n_idx = int(np.prod(idx.type.shape, dtype=np.int64))
    kb = cg.function("GatherPanels", [PTR, PTR, PTR, I64, I64, I64, I64])
    x, ind, y, site, rows, tid, nth = kb.args
    b = kb.b
    S = Lanes(kb, 1)
    lo = b.sdiv(b.mul(rows, tid), nth)
    hi = b.sdiv(b.mul(rows, b.add(tid, kb.i64(1))), nth)
    with kb.loop(lo, hi, name="row") as row:
        k, raw = table_row(kb, ind, row, idx.type.dtype, kb.i64(V))
        dst = b.mul(row, kb.i64(H))
        with b.if_else(b.icmp_unsigned("<", k, kb.i64(V)), likely=True) as (ok, bad):
            with ok:
                src = b.add(b.mul(b.udiv(k, kb.i64(nr)), kb.i64(H * nr)), b.urem(k, kb.i64(nr)))
                with kb.loop(0, H, name="h") as j:
                    S.store(S.load(x, b.add(src, b.mul(j, kb.i64(nr))), dt.float32, False), y,
                            b.add(dst, j), dt.float32)
            with bad:
                record_bad_index(kb, site, WRAPS, raw, kb.i64(V))
                lanes_loop(kb, 0, H, lambda L, j: L.store(L.const(dt.float32, 0), y, b.add(dst, j), dt.float32), 16)
    kb.finish()
    args = [panels, cg.ptr(idx), cg.ptr(out), kb.i64(site_id(instr.name)), kb.i64(n_idx)]
    call_split(cg, kb.fn, args, n_idx * H < PARALLEL_MIN)


__all__ = ["emit_gather"]


# -- MaxUnpool: a scatter ------------------------------------------------------------------------

def _unpooled_shape(x_shape, attrs) -> list[int]:
    k = list(attrs["kernel_shape"])
    n = len(k)
    s = list(attrs.get("strides") or [1] * n)
    p = list(attrs.get("pads") or [0] * (2 * n))
    return list(x_shape[:2]) + [(d - 1) * s[i] + k[i] - p[i] - p[n + i] for i, d in enumerate(x_shape[2:])]


@cpu_kernel("MaxUnpool", supports=lambda node: node.inputs[0].type.dtype in (dt.float32, dt.float64,
                                                                                dt.float16))
def emit_max_unpool(cg, instr):
    """out = 0, then out[I[k]] = X[k]; I indexes the unpooled shape (output_shape, when given, crops
    or pads it at the end of each axis, as the reference does: a cropped position is dropped). An
    index outside the unpooled shape is an error (recorded, as in Gather)."""
    x, idx, out = instr.inputs[0], instr.inputs[1], instr.outputs[0]
    shape, want = _unpooled_shape(x.type.shape, instr.attrs), list(out.type.shape)
    d = out.type.dtype
    emit_strided(cg, "MaxUnpool.zero", tuple(want), [Access(out, strides_of(want))],
                 lambda lanes, vals: lanes.const(d, 0), body_key=ZERO)
    kb = cg.function("MaxUnpool", [PTR, PTR, PTR, I64])
    px, pi, py, site = kb.args
    b = kb.b
    S = Lanes(kb, 1)
    n = int(np.prod(x.type.shape, dtype=np.int64))
    size = int(np.prod(shape, dtype=np.int64))
    wst = strides_of(want)
    with kb.loop(0, n, name="k") as k:
        f = S.load(pi, k, idx.type.dtype, False)
        inside = b.icmp_unsigned("<", f, kb.i64(size))  # negative: huge
        with b.if_then(b.not_(inside), likely=False):
            record_bad_index(kb, site, NON_NEGATIVE, f, size)
        off, rest = kb.i64(0), f
        for dim in reversed(range(len(shape))):
            c = b.srem(rest, kb.i64(shape[dim]))
            rest = b.sdiv(rest, kb.i64(shape[dim]))
            inside = b.and_(inside, b.icmp_signed("<", c, kb.i64(want[dim])))
            off = b.add(off, b.mul(c, kb.i64(wst[dim])))
        with b.if_then(inside):
            S.store(S.load(px, k, d, False), py, off, d)
    kb.finish()
    cg.call(kb.fn, [cg.ptr(x), cg.ptr(idx), cg.ptr(out), kb.i64(site_id(instr.name))], single=True)
