"""Gather: out[a, i, b] = data[a, indices[i], b] (axis split into outer A, the indices, inner B).

Indices are data, so they are checked in the generated code: a negative index counts from the
back (as ONNX says) and anything still out of range is clamped into [0, dim - 1]. The reference
raises on such an index; the native code never reads outside `data`, whatever the input.
The inner block B is contiguous in both tensors: a vector copy.
"""

from __future__ import annotations

import numpy as np
from glow import dtypes as dt

from ..codegen import cpu_kernel
from ..irutil import I64, PTR
from .elementwise import call_split
from .ewops import Lanes, lanes_loop, storage_dtype

PARALLEL_MIN = 1 << 15


def _gather_supported(node) -> bool:
    return (storage_dtype(node.inputs[0].type.dtype) is not None
            and node.inputs[1].type.dtype in (dt.int32, dt.int64))


@cpu_kernel("Gather", supports=_gather_supported)
def emit_gather(cg, instr):
    data, idx, out = instr.inputs[0], instr.inputs[1], instr.outputs[0]
    shape = tuple(data.type.shape)
    axis = instr.attrs.get("axis", 0) % len(shape)
    A = int(np.prod(shape[:axis], dtype=np.int64))
    D = shape[axis]
    B = int(np.prod(shape[axis + 1:], dtype=np.int64))
    n_idx = int(np.prod(idx.type.shape, dtype=np.int64))
    mover = storage_dtype(data.type.dtype)
    kb = cg.function("Gather", [PTR, PTR, PTR, I64, I64])
    x, ind, y, tid, nth = kb.args
    b = kb.b
    S = Lanes(kb, 1)
    rows = A * n_idx
    lo = b.sdiv(b.mul(kb.i64(rows), tid), nth)
    hi = b.sdiv(b.mul(kb.i64(rows), b.add(tid, kb.i64(1))), nth)
    with kb.loop(lo, hi, name="row") as row:
        a, i = b.sdiv(row, kb.i64(n_idx)), b.srem(row, kb.i64(n_idx))
        k = S.load(ind, i, idx.type.dtype, False)
        k = b.sext(k, I64) if k.type != I64 else k
        k = b.select(b.icmp_signed("<", k, kb.i64(0)), b.add(k, kb.i64(D)), k)
        k = b.select(b.icmp_signed("<", k, kb.i64(0)), kb.i64(0), k)
        k = b.select(b.icmp_signed(">", k, kb.i64(D - 1)), kb.i64(D - 1), k)
        src = b.mul(b.add(b.mul(a, kb.i64(D)), k), kb.i64(B))
        dst = b.mul(row, kb.i64(B))
        lanes_loop(kb, 0, B, lambda L, j: L.store(L.load(x, b.add(src, j), mover, False), y,
                                                  b.add(dst, j), mover))
    kb.finish()
    if D == 0:
        return  # an empty axis with a non-empty output cannot be indexed; shape rules forbid it
    call_split(cg, kb.fn, [cg.ptr(data), cg.ptr(idx), cg.ptr(out)], rows * B < PARALLEL_MIN)


__all__ = ["emit_gather"]
