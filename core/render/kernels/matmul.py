"""MatMul (NumPy semantics: batch dims broadcast, 1-D operands are vectors), in three shapes:

    naive      one work-item per output element, a dot product over K (any element type)
    cpu-vec    CPU devices with vector types (OpenCL on PoCL): each work-item computes a 4 x 16
               block of C in float16 vector registers, one `fma` per (row, k) with a broadcast A
               value against a 16-wide row of B (TOOLCHAIN.md: ~110 GFLOP/s vs ~1 naive)
    tiled      GPUs: 64 x 64 blocks of C per work-group, A and B tiles staged in local memory,
               each work-item accumulating a 4 x 4 register block

The variant is chosen from the device parameters and the shapes (matmul_variant). Every variant
applies the instruction's epilogue (bias, activation, residual) before its single store.
"""

from __future__ import annotations

import math

from ... import dtypes as dt
from ..indexing import broadcast_index
from ..registry import kernel_rule
from .elementwise import apply_epilogue


def matmul_dims(instr):
    """(batch shape, M, K, N, A batch shape, B batch shape) in NumPy's matmul semantics."""
    a, b = instr.inputs[0].type.shape, instr.inputs[1].type.shape
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    out = instr.outputs[0].type.shape
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = tuple(out[:len(out) - (len(a) > 1) - (len(b) > 1)])
    return batch, m, k, n, a2[:-2], b2[:-2]


def matmul_variant(instr, params, renderer) -> str:
    batch, m, k, n, _, _ = matmul_dims(instr)
    f32 = all(o.type.dtype == dt.float32 for o in (*instr.inputs[:2], instr.outputs[0]))
    if not f32 or m * n * k < 4096:
        return "naive"
    if params.cpu:
        return "cpu-vec" if renderer.has_vectors and n >= 16 else "naive"
    return "tiled"


def acc_type(r, dtype) -> str:
    return r.compute(dtype)


@kernel_rule("MatMul")
def render_matmul(w, instr, params):
    variant = matmul_variant(instr, params, w.r)
    if variant == "cpu-vec":
        from .matmul_cpu import render_matmul_cpu

        return render_matmul_cpu(w, instr, params)
    if variant == "tiled":
        from .matmul_gpu import render_matmul_tiled

        return render_matmul_tiled(w, instr, params)
    return render_matmul_naive(w, instr, params)


def batch_offsets(w, instr, bvar: str):
    """C expressions of A's and B's first element for output batch `bvar`."""
    batch, m, k, n, ab, bb = matmul_dims(instr)
    ao = broadcast_index(batch, ab, bvar) if ab else "0"
    bo = broadcast_index(batch, bb, bvar) if bb else "0"
    ao = "0" if ao == "0" else f"({ao}) * {m * k}"
    bo = "0" if bo == "0" else f"({bo}) * {k * n}"
    return ao, bo


def render_matmul_naive(w, instr, params):
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    batch, m, k, n, _, _ = matmul_dims(instr)
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    pa, pb = w.arg(a), w.arg(b)
    w.line(f"const int col = {i} % {n};" if n > 1 else "const int col = 0;")
    w.line(f"const int row = ({i} / {n}) % {m};" if m > 1 else "const int row = 0;")
    w.line(f"const int bat = {i} / {m * n};")
    ao, bo = batch_offsets(w, instr, "bat")
    dtype = out.type.dtype
    ct = acc_type(w.r, dtype)
    w.line(f"const int ao = {ao} + row * {k};")
    w.line(f"const int bo = {bo} + col;")
    w.line(f"{ct} acc = 0;")
    w.open(f"for (int kk = 0; kk < {k}; ++kk)")
    w.line(f"acc += {w.load(pa, 'ao + kk', a.type.dtype)} * {w.load(pb, f'bo + kk * {n}', b.type.dtype)};")
    w.close()
    v = apply_epilogue(w, instr, "acc", dtype, i)
    w.line(w.store(y, i, dtype, v))


def flops(instr) -> int:
    batch, m, k, n, _, _ = matmul_dims(instr)
    return 2 * math.prod(batch) * m * k * n
