"""GPU-shaped MatMul: one work-group of 16 x 16 work-items computes a 64 x 64 block of C.

Per step of 16 along K, the work-group stages a 64 x 16 tile of A (transposed) and a 16 x 64 tile
of B in local memory, then each work-item accumulates a 4 x 4 register block from them. Rows and
columns a work-item owns are 16 apart, so neighbouring work-items read neighbouring local-memory
words (no bank conflicts) and write neighbouring columns of C (coalesced). Edges load zeros and
skip stores, so any M, N, K work. This is the kernel the CUDA backend runs; on PoCL the same text
(OpenCL dialect) checks its logic without a GPU.
"""

from __future__ import annotations

from .elementwise import apply_epilogue
from .matmul import batch_offsets, matmul_dims

TILE, TK, WI = 64, 16, 16  # C tile edge, K step, work-items per edge (4 x 4 block each)
R = TILE // WI


def render_matmul_tiled(w, instr, params):
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    batch, m, k, n, _, _ = matmul_dims(instr)
    nb = 1
    for d in batch:
        nb *= d
    w.grid((-(-n // TILE) * WI, -(-m // TILE) * WI, nb), (WI, WI, 1))
    y, pa, pb = w.arg(out, out=True), w.arg(a), w.arg(b)
    tile_prologue(w)
    w.line(f"const int bat = {w.r.group_id(2)};")
    ao, bo = batch_offsets(w, instr, "bat")
    w.line(f"const int ao = {ao}, bo = {bo};")
    tile_loop_open(w, k)
    w.line(f"As[ak][am] = (row0 + am < {m} && k0 + ak < {k}) ? {pa}[ao + (row0 + am) * {k} + k0 + ak] : 0.0f;")
    w.line(f"const int bk = e / {TILE}, bn = e % {TILE};")
    w.line(f"Bs[bk][bn] = (k0 + bk < {k} && col0 + bn < {n}) ? {pb}[bo + (k0 + bk) * {n} + col0 + bn] : 0.0f;")
    tile_loop_close(w)
    w.open(f"for (int i = 0; i < {R}; ++i)")
    w.line(f"const int row = row0 + ty + i * {WI};")
    w.line(f"if (row >= {m}) break;")
    w.open(f"for (int j = 0; j < {R}; ++j)")
    w.line(f"const int col = col0 + tx + j * {WI};")
    w.line(f"if (col >= {n}) break;")
    w.line(f"const int o = bat * {m * n} + row * {n} + col;")
    w.line("const float c = acc[i][j];")
    v = apply_epilogue(w, instr, "c", out.type.dtype, "o")
    w.line(w.store(y, "o", out.type.dtype, v))
    w.close()
    w.close()


# -- the tile machinery, shared with the implicit-GEMM convolution (conv_gpu.py) -------------------
def tile_prologue(w) -> None:
    """Local tiles, work-item and block coordinates, zeroed accumulators."""
    r, lq = w.r, w.r.local_qualifier
    w.line(f"{lq} float As[{TK}][{TILE}];")
    w.line(f"{lq} float Bs[{TK}][{TILE}];")
    w.line(f"const int tx = {r.local_id(0)}, ty = {r.local_id(1)}, t = ty * {WI} + tx;")
    w.line(f"const int col0 = {r.group_id(0)} * {TILE}, row0 = {r.group_id(1)} * {TILE};")
    w.line(f"float acc[{R}][{R}];")
    w.line(f"for (int i = 0; i < {R}; ++i) for (int j = 0; j < {R}; ++j) acc[i][j] = 0.0f;")


def tile_loop_open(w, k: int) -> None:
    """Open the loop over K steps and the staging loop; the caller fills As[ak][am] (A's element
    (row0 + am, k0 + ak)) and Bs from the staging index e, then calls tile_loop_close."""
    w.open(f"for (int k0 = 0; k0 < {k}; k0 += {TK})")
    w.open(f"for (int l = 0; l < {TILE * TK // (WI * WI)}; ++l)")
    w.line(f"const int e = t + l * {WI * WI};")
    w.line(f"const int am = e / {TK}, ak = e % {TK};")


def tile_loop_close(w) -> None:
    """Close the staging loop, multiply the staged tiles into the 4 x 4 register block, close."""
    r = w.r
    w.close()
    w.line(r.barrier)
    w.open(f"for (int kk = 0; kk < {TK}; ++kk)")
    w.line(f"float av[{R}], bv[{R}];")
    w.line(f"for (int i = 0; i < {R}; ++i) av[i] = As[kk][ty + i * {WI}];")
    w.line(f"for (int j = 0; j < {R}; ++j) bv[j] = Bs[kk][tx + j * {WI}];")
    w.line(f"for (int i = 0; i < {R}; ++i) for (int j = 0; j < {R}; ++j) acc[i][j] += av[i] * bv[j];")
    w.close()
    w.line(r.barrier)
    w.close()
