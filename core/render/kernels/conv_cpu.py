"""CPU-shaped 2-D convolution (OpenCL on CPU devices): register blocking in float16 vectors.

Each work-item computes CO_BLOCK output channels x 16 output columns of one output row, in
CO_BLOCK float16 registers. Per (input channel, kernel tap) it loads 16 input pixels once (one
vload16 when stride 1 and the 16 taps are inside the row; the even lanes of two loads for stride
2; a guarded gather at the edges) and does CO_BLOCK vector fmas with broadcast weights. A 1x1,
stride-1, unpadded convolution is a matmul over the flattened image: its "row" is the whole image,
so every work-item takes the fast path.
"""

from __future__ import annotations

import numpy as np

from .conv import conv_bias
from .elementwise import apply_epilogue

VEC = 16


def co_block(g) -> int:
    """Output channels per work-item: the largest of 8, 4, 2, 1 that divides the group's (a
    depthwise convolution takes 1: one channel x 16 columns, still one vector fma per tap)."""
    return next(cb for cb in (8, 4, 2, 1) if g.cout_per_group % cb == 0)


def render_conv_cpu(w, instr, params, g):
    x, wt = instr.inputs[:2]
    bias = conv_bias(instr)
    out = instr.outputs[0]
    pointwise = g.kernel == (1, 1) and g.strides == (1, 1) and g.pads == (0, 0)
    ih, iw = (1, g.in_sp[0] * g.in_sp[1]) if pointwise else g.in_sp
    oh, ow = (1, g.out_sp[0] * g.out_sp[1]) if pointwise else g.out_sp
    kh, kw = g.kernel
    sh, sw = (1, 1) if pointwise else g.strides
    dh, dw = g.dilations
    ph, pw = (0, 0) if pointwise else g.pads
    cb = co_block(g)
    rb = rows_per_item(g, oh, cb * g.cin_per_group * kh * kw)
    w.grid((-(-ow // VEC), -(-oh // rb), g.n * (g.cout // cb)), (1, 1, 1))
    y, px = w.arg(out, out=True), w.arg(x)
    # Constant weights are packed so a tap's cb output channels are adjacent: their loads sit at
    # constant offsets of one pointer (with the channel count a run-time size, the raw layout's
    # stride between output channels would cost an address register per channel).
    packed = wt.kind == "weight" and wt is wt.root and wt.root.data is not None
    pwt = (w.weight((id(wt.root), f"cb{cb}"), lambda: packed_cb(np.asarray(wt.root.data), cb))
           if packed else w.arg(wt))
    # Sizes are run-time arguments (one build per window, column stride and epilogue, whatever
    # the image or channel counts); the window, column stride and dilations stay constants.
    IH, IW, OH, OW = w.param("IH", ih), w.param("IW", iw), w.param("OH", oh), w.param("OW", ow)
    CIN, COUT, CG = w.param("CIN", g.cin), w.param("COUT", g.cout), few_channels(w, g)
    r = w.r
    w.line(f"const int ox = {r.global_id(0)} * {VEC}, z = {r.global_id(2)};")
    if rb > 1:  # a loop, even of one row, costs the common case (rb == 1) speed
        RB = w.param("RB", rb)
        w.open(f"for (int oy = {r.global_id(1)} * {RB}; oy < min({r.global_id(1)} * {RB} + {RB}, {OH}); ++oy)")
    else:
        w.open("")
        w.line(f"const int oy = {r.global_id(1)};")
    w.line(f"const int nb = z / ({COUT} / {cb}), co = (z % ({COUT} / {cb})) * {cb};")
    grp = "0" if g.group == 1 else f"(co / {w.param('KPG', g.cout_per_group)})"
    w.line(f"const global float* xb = {px} + (nb * {CIN} + {grp} * {CG}) * ({IH} * {IW});")
    w.line(f"const global float* wb = {pwt} + co * ({CG} * {kh * kw});")
    for j in range(cb):
        w.line(f"float16 c{j} = (float16)(0.0f);")
    w.line(f"const int ix0 = ox * {sw} - {w.param('PW', pw)};")
    w.open(f"for (int ci = 0; ci < {CG}; ++ci)")
    w.line(f"const global float* xc = xb + ci * ({IH} * {IW});")
    w.line(f"const global float* wc = wb + ci * {kh * kw * (cb if packed else 1)};")
    w.open(f"for (int ky = 0; ky < {kh}; ++ky)")
    w.line(f"const int iy = oy * {w.param('SH', sh)} - {w.param('PH', ph)} + ky * {dh};")
    if not pointwise:
        w.line(f"if ((uint)iy >= (uint){IH}) continue;")
    w.line(f"const global float* xr = xc + iy * {IW};")
    span = (VEC - 1) * sw
    need = span + 1 if sw == 1 else 32 if sw == 2 else None
    staged = need is not None and iw < need + (kw - 1) * dw
    if staged:
        # Rows too narrow for a 16-wide window: copy the row's window for all taps once, zero
        # padded, then every tap is an aligned-free vload16 from private memory.
        width = need + (kw - 1) * dw
        w.line(f"float row[{int(width)}];")  # an array size is a literal (never a marked size)
        w.line(f"for (int j = 0; j < {width}; ++j) {{ const int q = ix0 + j; "
               f"row[j] = (q >= 0 && q < {IW}) ? xr[q] : 0.0f; }}")
    w.open(f"for (int kx = 0; kx < {kw}; ++kx)")
    w.line(f"const int ix = ix0 + kx * {dw};")
    w.line("float16 xv;")
    fast = {1: "xv = vload16(0, xr + ix);",
            2: "xv = (float16)(vload16(0, xr + ix).even, vload16(0, xr + ix + 16).even);"}.get(sw)
    if staged:
        src = f"row + kx * {dw}"
        w.line("xv = vload16(0, " + src + ");" if sw == 1 else
               f"xv = (float16)(vload16(0, {src}).even, vload16(0, {src} + 16).even);")
    else:
        if fast is not None:
            w.line(f"if (ix >= 0 && ix + {need} <= {IW}) {{ {fast} }}")
            w.open("else")
        else:
            w.open("")
        # Edges: branch-free, every lane loads from a clamped column and the lanes outside the
        # row are zeroed (the compiler makes it a masked gather).
        w.line(f"const int16 q = ix + {sw} * (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);")
        w.line(f"const int16 qc = clamp(q, 0, {IW} - 1);")
        w.line("const float16 g = (float16)(" + ", ".join(f"xr[qc.s{j:x}]" for j in range(VEC)) + ");")
        w.line(f"xv = select((float16)(0.0f), g, (q >= 0) & (q < {IW}));")
        w.close()
    for j in range(cb):
        tap = f"(ky * {kw} + kx) * {cb} + {j}" if packed else f"{j} * {CG} * {kh * kw} + ky * {kw} + kx"
        w.line(f"c{j} = fma((float16)(wc[{tap}]), xv, c{j});")
    w.close()
    w.close()
    w.close()
    w.line(f"const int plane = {OH} * {OW};")
    full = ow % VEC == 0 and instr.expr is None and bias is None
    pb = w.arg(bias) if bias is not None else None
    for j in range(cb):
        w.open("")
        w.line(f"global float* yr = {y} + (nb * {COUT} + co + {j}) * plane + oy * {OW} + ox;")
        if full:
            w.line(f"vstore16(c{j}, 0, yr);")
        else:
            w.line(f"float t[{VEC}];")
            w.line(f"vstore16(c{j}, 0, t);")
            w.open(f"for (int j = 0; j < {VEC} && ox + j < {OW}; ++j)")
            acc = f"t[j] + {pb}[co + {j}]" if pb else "t[j]"
            w.line(f"const float s = {acc};")
            w.line(f"const int o = (nb * {COUT} + co + {j}) * plane + oy * {OW} + ox + j;")
            v = apply_epilogue(w, instr, "s", out.type.dtype, "o")
            w.line(f"yr[j] = {v};")
            w.close()
        w.close()
    w.close()


#: Input channels per group up to this stay a constant of the text (an RGB first layer): the
#: compiler unrolls their loop, which is worth one more build for such a layer.
FEW_CHANNELS = 4


def few_channels(w, g) -> str:
    """The input channels per group: a constant when few, else a run-time parameter."""
    cg = g.cin_per_group
    return str(cg) if cg <= FEW_CHANNELS else w.param("CG", cg)


def window_inside(g) -> bool:
    """Whether every output pixel's window lies inside the input (no padding at either end)."""
    return all(p == 0 and (o - 1) * s + (k - 1) * d < i for p, o, s, k, d, i in
               zip(g.pads, g.out_sp, g.strides, g.kernel, g.dilations, g.in_sp))


#: Fewer multiply-adds than this per work-item and row: a work-item takes several output rows,
#: since a CPU OpenCL device pays a fixed cost per work-group (about 0.3 us on PoCL).
MIN_ITEM_WORK = 256


def rows_per_item(g, oh: int, work_per_row: int) -> int:
    """Output rows per work-item: 1, or enough that a depthwise/thin convolution's work-item
    amortises the work-group cost (the image's rows in one work-item at most)."""
    if work_per_row >= MIN_ITEM_WORK:
        return 1
    return min(oh, -(-MIN_ITEM_WORK // work_per_row))


# -- small images: vectorise over output channels ---------------------------------------------------
PIX = 8  # output pixels per work-item (one float16 accumulator each)


def packed_cb(weights: np.ndarray, cb: int) -> np.ndarray:
    """(cout, cg, kh, kw) -> (cout / cb, cg, kh, kw, cb): a block's cb output channels per tap
    side by side (render_conv_cpu's layout; `wb + co * cg * kh * kw` still finds a block)."""
    co, cg, kh, kw = weights.shape
    return np.ascontiguousarray(weights.reshape(co // cb, cb, cg, kh, kw).transpose(0, 2, 3, 4, 1), np.float32)


def packed_co16(weights: np.ndarray) -> np.ndarray:
    """(cout, cg, kh, kw) -> (cout / 16, cg, kh, kw, 16): 16 output channels' taps side by side."""
    co, cg, kh, kw = weights.shape
    # One copy, C order (astype would keep the transposed order, and KernelWriter.weight copy it again).
    return np.ascontiguousarray(weights.reshape(co // VEC, VEC, cg, kh, kw).transpose(0, 2, 3, 4, 1), np.float32)


def render_conv_cpu_co(w, instr, params, g):
    """Each work-item: 16 output channels (one float16 of packed weights per tap) x PIX output
    pixels of the flattened image, for images too narrow for 16-column rows (7x7, 14x14) and
    for 1x1 convolutions (a matmul: the weight vector is reused across PIX pixels)."""
    x, wt = instr.inputs[:2]
    bias = conv_bias(instr)
    out = instr.outputs[0]
    kh, kw = g.kernel
    sh, sw = g.strides
    dh, dw = g.dilations
    ph, pw = g.pads
    plane = g.out_sp[0] * g.out_sp[1]
    pointwise = g.kernel == (1, 1) and g.strides == (1, 1) and g.pads == (0, 0)
    inside = window_inside(g)  # no tap can fall in padding: no bounds tests
    w.grid((-(-plane // PIX), g.cout // VEC, g.n), (1, 1, 1))
    y, px = w.arg(out, out=True), w.arg(x)
    pwt = w.weight((id(wt.root), "co16"), lambda: packed_co16(np.asarray(wt.root.data)))
    # Sizes, strides and pads are run-time arguments: one build per window and epilogue.
    IH, IW, OW = w.param("IH", g.in_sp[0]), w.param("IW", g.in_sp[1]), w.param("OW", g.out_sp[1])
    CIN, COUT, CG = w.param("CIN", g.cin), w.param("COUT", g.cout), few_channels(w, g)
    r = w.r
    w.line(f"const int qb = {r.global_id(0)} * {PIX}, co = {r.global_id(1)} * {VEC}, nb = {r.global_id(2)};")
    w.line(f"const int plane = {w.param('OH', g.out_sp[0])} * {OW};")
    grp = "0" if g.group == 1 else f"(co / {w.param('KPG', g.cout_per_group)})"
    w.line(f"const global float* xb = {px} + (nb * {CIN} + {grp} * {CG}) * ({IH} * {IW});")
    w.line(f"const global float* wb = {pwt} + (co / {VEC}) * ({CG} * {kh * kw * VEC});")
    if not pointwise:  # strides and pads place the window once, outside the loops
        SH, SW, PH, PW = (w.param(n, v) for n, v in zip(("SH", "SW", "PH", "PW"), (sh, sw, ph, pw)))
    for p in range(PIX):
        w.line(f"float16 c{p} = (float16)(0.0f);")
        w.line(f"const int q{p} = min(qb + {p}, plane - 1);")
        if not pointwise:  # r: the pixel's window origin as an offset into the input plane
            w.line(f"const int y{p} = (q{p} / {OW}) * {SH} - {PH}, x{p} = (q{p} % {OW}) * {SW} - {PW};")
            w.line(f"const int r{p} = y{p} * {IW} + x{p};")
    w.open(f"for (int ci = 0; ci < {CG}; ++ci)")
    w.line(f"const global float* xc = xb + ci * ({IH} * {IW});")
    if pointwise:
        w.line("const float16 wv = vload16(ci, wb);")
        for p in range(PIX):
            w.line(f"c{p} = fma((float16)(xc[q{p}]), wv, c{p});")
    else:
        # The tap's offset is computed once for the PIX pixels (sizes are not constants, so
        # the compiler cannot fold iy * IW + ix itself); unsigned compares test both bounds.
        w.open(f"for (int ky = 0; ky < {kh}; ++ky)")
        w.line(f"const int dy = ky * {dh}, ty = dy * {IW};")
        w.open(f"for (int kx = 0; kx < {kw}; ++kx)")
        w.line(f"const int dx = kx * {dw}, tap = ty + dx;")
        w.line(f"const float16 wv = vload16((ci * {kh} + ky) * {kw} + kx, wb);")
        for p in range(PIX):
            if inside:
                w.line(f"c{p} = fma((float16)(xc[r{p} + tap]), wv, c{p});")
                continue
            w.line(f"{{ const float v = ((uint)(y{p} + dy) < (uint){IH} && (uint)(x{p} + dx) < (uint){IW})"
                   f" ? xc[r{p} + tap] : 0.0f;")
            w.line(f"  c{p} = fma((float16)(v), wv, c{p}); }}")
        w.close()
        w.close()
    w.close()
    pb = w.arg(bias) if bias is not None else None
    for p in range(PIX):
        w.open(f"if (qb + {p} < plane)")
        w.line(f"float t[{VEC}];")
        w.line(f"vstore16(c{p}, 0, t);")
        w.open(f"for (int j = 0; j < {VEC}; ++j)")
        w.line(f"const int o = (nb * {COUT} + co + j) * plane + q{p};")
        w.line(f"const float s = {f't[j] + {pb}[co + j]' if pb else 't[j]'};")
        v = apply_epilogue(w, instr, "s", out.type.dtype, "o")
        w.line(f"{y}[o] = {v};")
        w.close()
        w.close()
