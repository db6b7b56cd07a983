"""CPU-shaped 2-D MaxPool / AveragePool (OpenCL on CPU devices): 16 output columns per work-item.

A work-item owns 16 output columns of one or more output rows of one (image, channel) plane.
Per kernel row it stages the input row's window once in private memory, padded with the value
padding reads as (the lowest value for MaxPool, 0 for AveragePool) and with a 0/1 mask of which
columns are inside the image; every kernel tap is then one vector load (stride 1), the even
lanes of two (stride 2) or a private gather, and one vector max or add. The one-element-per-
work-item kernel (pool.py) spent its time on index arithmetic and bounds checks: about 30 ns per
output of a 3x3 window on PoCL.

Semantics are those of pool.py: padding reads as the lowest value and never wins a max, the first
tap starts the maximum and only a strictly greater value replaces it (NaN handling included);
AveragePool's divisor counts the taps inside the image, or with count_include_pad also the
declared pads (never the extra room of ceil_mode).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from .conv_cpu import MIN_ITEM_WORK

VEC = 16


def cpu_pool_ok(instr, params, renderer) -> bool:
    x, out = instr.inputs[0], instr.outputs[0]
    return (params.cpu and renderer.has_vectors and len(x.type.shape) == 4
            and all(o is None for o in instr.outputs[1:])  # MaxPool's Indices: pool.py
            and x.type.dtype == dt.float32 and out.type.dtype == dt.float32)


def render_pool_cpu(w, instr, geo, kind: str, end_pads=(0, 0)):
    """kind: "max" or "avg"; geo as pool.py's (k, s, d, out spatial, begin pads, in spatial)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow), (ph, pw), (ih, iw) = geo
    include = kind == "avg" and bool(instr.attrs.get("count_include_pad", 0))
    x, out = instr.inputs[0], instr.outputs[0]
    planes = x.type.shape[0] * x.type.shape[1]
    rb = min(oh, -(-MIN_ITEM_WORK // (kh * kw * VEC)))  # rows per work-item, as conv_cpu.py
    w.grid((-(-ow // VEC), -(-oh // rb), planes), (1, 1, 1))
    y, px = w.arg(out, out=True), w.arg(x)
    r = w.r
    pad = r.literal(-np.inf, dt.float32) if kind == "max" else "0.0f"
    width = (VEC - 1) * sw + (kw - 1) * dw + 1 + (VEC if sw == 2 else 0)  # stride 2 reads 32 lanes
    w.line(f"const int ox = {r.global_id(0)} * {VEC}, pl = {r.global_id(2)};")
    w.line(f"const global float* xp = {px} + pl * {ih * iw};")
    w.line(f"const int ix0 = ox * {sw} - {pw};")
    w.open(f"for (int oy = {r.global_id(1)} * {rb}; oy < min({r.global_id(1)} * {rb} + {rb}, {oh}); ++oy)")
    if kind == "max":
        w.line("float16 acc = (float16)(0.0f);")
    else:
        w.line("float16 acc = (float16)(0.0f), cnt = (float16)(0.0f);")
    w.open(f"for (int ky = 0; ky < {kh}; ++ky)")
    w.line(f"const int iy = oy * {sh} - {ph} + ky * {dh};")
    w.line(f"const int rowin = iy >= 0 && iy < {ih};")
    w.line(f"const global float* xr = xp + iy * {iw};")
    w.line(f"float row[{int(width)}], msk[{int(width)}];")  # array sizes are literals (.sizes)
    lo, hi = (-ph, ih + end_pads[0]) if include else (0, ih)
    w.line(f"const int rowcount = iy >= {lo} && iy < {hi};")
    w.open(f"for (int j = 0; j < {width}; ++j)")
    w.line("const int q = ix0 + j;")
    w.line(f"const int inside = rowin && q >= 0 && q < {iw};")
    w.line(f"row[j] = inside ? xr[q] : {pad};")
    if kind == "avg":
        if include:
            w.line(f"msk[j] = (rowcount && q >= {-pw} && q < {iw + end_pads[1]}) ? 1.0f : 0.0f;")
        else:
            w.line("msk[j] = inside ? 1.0f : 0.0f;")
    w.close()
    w.open(f"for (int kx = 0; kx < {kw}; ++kx)")
    w.line(f"const int b = kx * {dw};")
    w.line(f"const float16 v = {_lanes('row', 'b', sw)};")
    if kind == "max":
        w.line("acc = (ky == 0 && kx == 0) ? v : select(acc, v, v > acc);")
    else:
        w.line("acc += v;")
        w.line(f"cnt += {_lanes('msk', 'b', sw)};")
    w.close()
    w.close()
    res = "acc" if kind == "max" else "acc / cnt"
    w.line(f"float t[{VEC}];")
    w.line(f"vstore16({res}, 0, t);")
    w.line(f"global float* yr = {y} + pl * {oh * ow} + oy * {ow} + ox;")
    w.line(f"for (int j = 0; j < {VEC} && ox + j < {ow}; ++j) yr[j] = t[j];")
    w.close()


def _lanes(buf: str, base: str, stride: int) -> str:
    """16 lanes buf[base + j * stride] of a private array as a float16."""
    if stride == 1:
        return f"vload16(0, {buf} + {base})"
    if stride == 2:
        return f"(float16)(vload16(0, {buf} + {base}).even, vload16(0, {buf} + {base} + 16).even)"
    return "(float16)(" + ", ".join(f"{buf}[{base} + {j * stride}]" for j in range(VEC)) + ")"
