"""CPU-shaped MatMul (OpenCL on CPU devices such as PoCL): register blocking in float16 vectors.

Each work-item owns ROWS (up to 16) rows x 16 columns of C, held in ROWS float16 registers. Per step along K
it loads one 16-wide row segment of B and, for each of its rows, broadcasts one A value and does
one vector fma: ROWS fmas per B load, all in registers. A CPU runs work-items one after another,
so GPU-style work-group tiling buys nothing there (TOOLCHAIN.md: ~1 GFLOP/s naive, 5-6 tiled,
110+ register-blocked on PoCL). Ragged edges: rows past M are read clamped and never stored;
the last 16 columns may be partial (a masked load path, taken by at most one work-item per row).
"""

from __future__ import annotations

import numpy as np

from .elementwise import apply_epilogue
from .matmul import batch_offsets, matmul_dims

ROWS, VEC = 16, 16


def rows_for(m: int) -> int:
    """Rows of C per work-item: ROWS (16 accumulators: PoCL on AVX-512 measured 120-190 GFLOP/s
    against 55-115 with 4 rows, fewer work-groups to schedule too), fewer for short matrices so
    clamped rows past M do not multiply the work (a row vector takes 1)."""
    r = 1
    while r < min(m, ROWS):
        r *= 2
    return r


def render_matmul_cpu(w, instr, params):
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    batch, m, k, n, _, _ = matmul_dims(instr)
    nb = 1
    for d in batch:
        nb *= d
    rows = rows_for(m)
    w.grid((-(-n // VEC), -(-m // rows), nb), (1, 1, 1))
    packed = _packable(b)
    y, pa = w.arg(out, out=True), w.arg(a)
    pb = w.weight((id(b.root), "panels16"), lambda: panels(np.asarray(b.root.data, np.float32))) if packed \
        else w.arg(b)
    r = w.r
    w.line(f"const int col = {r.global_id(0)} * {VEC}, row = {r.global_id(1)} * {rows}, bat = {r.global_id(2)};")
    ao, bo = batch_offsets(w, instr, "bat")
    w.line(f"const int ao = {ao}, bo = {bo};")
    for i in range(rows):
        w.line(f"const global float* a{i} = {pa} + ao + min(row + {i}, {m - 1}) * {k};")
        w.line(f"float16 c{i} = (float16)(0.0f);")
    fmas = " ".join(f"c{i} = fma((float16)(a{i}[kk]), bv, c{i});" for i in range(rows))
    full = n % VEC == 0
    if packed:  # one contiguous K x 16 panel per work-item, zero-padded past N: no ragged path
        w.line(f"const global float* bp = {pb} + (col / {VEC}) * {k * VEC};")
        w.open(f"for (int kk = 0; kk < {k}; ++kk)")
        w.line("const float16 bv = vload16(kk, bp);")
        w.line(fmas)
        w.close()
    else:
        w.line(f"const global float* bp = {pb} + bo + col;")
    if not full and not packed:
        w.open(f"if (col + {VEC} <= {n})")
    if not packed:
        w.open(f"for (int kk = 0; kk < {k}; ++kk)")
        w.line(f"const float16 bv = vload16(0, bp + kk * {n});")
        w.line(fmas)
        w.close()
    if not full and not packed:
        w.close("} else {")
        w._depth += 1
        w.open(f"for (int kk = 0; kk < {k}; ++kk)")
        w.line(f"float t[{VEC}];")
        w.line(f"for (int j = 0; j < {VEC}; ++j) t[j] = col + j < {n} ? bp[kk * {n} + j] : 0.0f;")
        w.line("const float16 bv = vload16(0, t);")
        w.line(fmas)
        w.close()
        w.close()
    plain = instr.expr is None
    for i in range(rows):
        w.open(f"if (row + {i} < {m})")
        w.line(f"global float* yr = {y} + bat * {m * n} + (row + {i}) * {n} + col;")
        if plain and full:
            w.line(f"vstore16(c{i}, 0, yr);")
        else:
            w.line(f"float t[{VEC}];")
            w.line(f"vstore16(c{i}, 0, t);")
            w.open(f"for (int j = 0; j < {VEC} && col + j < {n}; ++j)")
            w.line(f"const int o = bat * {m * n} + (row + {i}) * {n} + col + j;")
            v = apply_epilogue(w, instr, "t[j]", out.type.dtype, "o")
            w.line(f"yr[j] = {v};")
            w.close()
        w.close()


def _packable(b) -> bool:
    """A constant 2-D float32 B: packed at compile time into column panels."""
    data = getattr(b.root, "data", None)
    return (b.kind == "weight" and b is b.root and data is not None and len(b.type.shape) == 2
            and np.asarray(data).dtype == np.float32)


def panels(b: np.ndarray) -> np.ndarray:
    """B (K x N) as ceil(N / 16) panels of K x 16, zero-padded past N: a work-item's 16 columns
    are one contiguous stream (row-major B strides N floats between its k steps, which for a
    large N defeats the prefetcher and, at N a multiple of 1024, aliases in L1)."""
    k, n = b.shape
    nb = -(-n // VEC)
    if nb * VEC != n:
        b = np.pad(b, ((0, 0), (0, nb * VEC - n)))
    return np.ascontiguousarray(b.reshape(k, nb, VEC).transpose(1, 0, 2))
