"""GPU-shaped 2-D convolution: an implicit GEMM on the tiles of matmul_gpu.py.

Per image and group, the convolution is C[M, N] = A[M, K] x B[K, N] with M the group's output
channels, N the output pixels and K = input channels x kernel taps: A is the weight tensor as it
lies in memory, B the im2col matrix, never materialised: a work-group staging its 16 x 64 tile of
B computes each element's input pixel from (k, n) and loads it, or 0 in the padding. One
work-group of 16 x 16 work-items computes a 64 x 64 block of C in 4 x 4 register blocks, as the
tiled MatMul does; bias and the fused epilogue are applied at the store.
"""

from __future__ import annotations

from .conv import conv_bias
from .elementwise import apply_epilogue
from .matmul_gpu import TILE, WI, tile_loop_close, tile_loop_open, tile_prologue

R = TILE // WI


def render_conv_gpu(w, instr, params, g):
    x, wt = instr.inputs[:2]
    bias = conv_bias(instr)
    out = instr.outputs[0]
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = g.kernel, g.strides, g.dilations, g.pads
    (ih, iw), (oh, ow) = g.in_sp, g.out_sp
    m, n, k = g.cout_per_group, oh * ow, g.cin_per_group * kh * kw
    w.grid((-(-n // TILE) * WI, -(-m // TILE) * WI, g.n * g.group), (WI, WI, 1))
    y, px, pwt = w.arg(out, out=True), w.arg(x), w.arg(wt)
    pb = w.arg(bias) if bias is not None else None
    tile_prologue(w)
    w.line(f"const int z = {w.r.group_id(2)}, img = z / {g.group}, grp = z % {g.group};")
    w.line(f"const int xo = (img * {g.cin} + grp * {g.cin_per_group}) * {ih * iw};")
    w.line(f"const int wo = grp * {m * k};")
    tile_loop_open(w, k)
    w.line(f"As[ak][am] = (row0 + am < {m} && k0 + ak < {k}) ? {pwt}[wo + (row0 + am) * {k} + k0 + ak] : 0.0f;")
    w.line(f"const int bk = k0 + e / {TILE}, bn = col0 + e % {TILE};")
    # the im2col element (bk, bn): input channel and tap from bk, output pixel from bn
    w.line(f"const int ci = bk / {kh * kw}, tap = bk % {kh * kw};")
    w.line(f"const int iy = (bn / {ow}) * {sh} - {ph} + (tap / {kw}) * {dh};")
    w.line(f"const int ix = (bn % {ow}) * {sw} - {pw} + (tap % {kw}) * {dw};")
    w.line(f"const int ok = bk < {k} && bn < {n} && iy >= 0 && iy < {ih} && ix >= 0 && ix < {iw};")
    w.line(f"Bs[e / {TILE}][e % {TILE}] = ok ? {px}[xo + ci * {ih * iw} + iy * {iw} + ix] : 0.0f;")
    tile_loop_close(w)
    w.open(f"for (int i = 0; i < {R}; ++i)")
    w.line(f"const int row = row0 + ty + i * {WI};")
    w.line(f"if (row >= {m}) break;")
    w.line(f"const int co = grp * {m} + row;")
    w.open(f"for (int j = 0; j < {R}; ++j)")
    w.line(f"const int col = col0 + tx + j * {WI};")
    w.line(f"if (col >= {n}) break;")
    w.line(f"const int o = (img * {g.cout} + co) * {n} + col;")
    w.line(f"const float c = acc[i][j]{f' + {pb}[co]' if pb else ''};")
    v = apply_epilogue(w, instr, "c", out.type.dtype, "o")
    w.line(w.store(y, "o", out.type.dtype, v))
    w.close()
    w.close()
