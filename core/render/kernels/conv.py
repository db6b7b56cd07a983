"""Convolution (Conv, any number of spatial dims, groups, dilations, pads, auto_pad).

    direct     one work-item per output element: a loop over input channels of its group and
               the kernel window, skipping taps in the padding (any float type)
    cpu-vec    2-D float32 on CPU devices with vector types: each work-item computes up to 8
               output channels x 16 output columns in float16 registers (conv_cpu.py)
    cpu-co16   16 output channels x 8 pixels over packed constant weights (narrow images,
               1x1 convolutions; conv_cpu.py)
    gpu-tiled  GPUs: an implicit GEMM on 64 x 64 tiles in local memory (conv_gpu.py)

Bias and the fused epilogue are applied before the single store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ... import dtypes as dt
from ...ops.conv import out_extents, window_attrs
from ..indexing import coords, strides
from ..registry import kernel_rule
from .elementwise import apply_epilogue


@dataclass(frozen=True)
class ConvGeometry:
    n: int
    cin: int
    cout: int
    group: int
    in_sp: tuple
    out_sp: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads: tuple  # begin pads per spatial axis

    @property
    def cin_per_group(self) -> int:
        return self.cin // self.group

    @property
    def cout_per_group(self) -> int:
        return self.cout // self.group


def window_geometry(x_shape, kernel, attrs, ceil_mode=False):
    nsp = len(x_shape) - 2
    k, s, d, p = window_attrs(ValueError, nsp, kernel, attrs.get("strides"), attrs.get("dilations"),
                              attrs.get("pads"))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    out, pb, _ = out_extents(ValueError, list(x_shape[2:]), k, s, d, p, auto_pad, ceil_mode)
    return tuple(k), tuple(s), tuple(d), tuple(out), tuple(pb)


def conv_geometry(instr) -> ConvGeometry:
    x, wt = instr.inputs[0].type.shape, instr.inputs[1].type.shape
    k, s, d, out, pb = window_geometry(x, wt[2:], instr.attrs)
    return ConvGeometry(x[0], x[1], wt[0], instr.attrs.get("group", 1) or 1, tuple(x[2:]), out, k,
                        s, d, pb)


def _supports_conv(node, r):
    x = node.inputs[0].type
    return len(x.shape) >= 3 and (len(node.inputs) < 3 or node.inputs[2] is None
                                  or len(node.inputs[2].type.shape) == 1)


@kernel_rule("Conv", supports=_supports_conv)
def render_conv(w, instr, params):
    g = conv_geometry(instr)
    variant = conv_variant(instr, params, w.r, g)
    if variant == "cpu-co16":
        from .conv_cpu import render_conv_cpu_co

        return render_conv_cpu_co(w, instr, params, g)
    if variant == "cpu-vec":
        from .conv_cpu import render_conv_cpu

        return render_conv_cpu(w, instr, params, g)
    if variant == "gpu-tiled":
        from .conv_gpu import render_conv_gpu

        return render_conv_gpu(w, instr, params, g)
    return render_conv_direct(w, instr, params, g)


#: Output widths below this use cpu-co16 (narrow rows waste the lanes of 16-column blocks).
CO16_BELOW = 32


def conv_variant(instr, params, renderer, g: ConvGeometry) -> str:
    """direct | cpu-vec (16 output columns per work-item) | cpu-co16 (16 output channels per
    work-item over packed constant weights: narrow images and 1x1 convolutions) | gpu-tiled."""
    f32 = instr.outputs[0].type.dtype == dt.float32 and instr.inputs[0].type.dtype == dt.float32
    if not params.cpu:
        # Implicit GEMM over 64 x 64 tiles: worth it with a group's output channels filling a
        # good part of a tile's rows (depthwise and thin groups stay direct).
        tiled = f32 and len(g.kernel) == 2 and g.cout_per_group >= 16
        return "gpu-tiled" if tiled else "direct"
    if not (renderer.has_vectors and f32 and len(g.kernel) == 2):
        return "direct"
    wt = instr.inputs[1]
    packable = wt.kind == "weight" and wt is wt.root and wt.root.data is not None
    pointwise = g.kernel == (1, 1) and g.strides == (1, 1) and g.pads == (0, 0)
    if packable and g.cout_per_group % 16 == 0 and (g.out_sp[1] < CO16_BELOW or pointwise):
        return "cpu-co16"
    if g.out_sp[1] >= 8 or pointwise or g.cin_per_group == 1:  # depthwise: narrow rows still win
        return "cpu-vec"
    return "direct"


def tap_index(w, o: str, k: str, a: int, g: ConvGeometry) -> str:
    """Declare the input coordinate of output coordinate `o` at kernel tap `k` on axis `a`."""
    e = o if g.strides[a] == 1 else f"{o} * {g.strides[a]}"
    e += "" if g.pads[a] == 0 else f" - {g.pads[a]}"
    e += f" + {k}" if g.dilations[a] == 1 else f" + {k} * {g.dilations[a]}"
    w.line(f"const int ix{a} = {e};")
    return f"ix{a}"


def conv_bias(instr):
    """The bias operand, or None (inputs past `n_args` belong to the epilogue)."""
    nargs = instr.n_args if instr.n_args is not None else len(instr.inputs)
    return instr.inputs[2] if nargs > 2 else None


def render_conv_direct(w, instr, params, g: ConvGeometry):
    x, wt = instr.inputs[:2]
    bias = conv_bias(instr)
    out = instr.outputs[0]
    dtype = out.type.dtype
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    c = coords(w, i, out.type.shape, "c")
    nb, co, osp = c[0], c[1], c[2:]
    px, pw = w.arg(x), w.arg(wt)
    ct = w.r.compute(dtype)
    cg = g.cin_per_group
    grp = "0" if g.group == 1 else f"({co} / {g.cout_per_group})"
    w.line(f"{ct} acc = 0;")
    in_plane, k_plane = math.prod(g.in_sp), math.prod(g.kernel)
    w.line(f"const int xb = ({nb} * {g.cin} + {grp} * {cg}) * {in_plane};")
    w.line(f"const int wb = {co} * {cg * k_plane};")
    w.open(f"for (int ci = 0; ci < {cg}; ++ci)")
    for a, kd in enumerate(g.kernel):
        w.open(f"for (int k{a} = 0; k{a} < {kd}; ++k{a})")
        ix = tap_index(w, osp[a], f"k{a}", a, g)
        w.line(f"if ({ix} < 0 || {ix} >= {g.in_sp[a]}) continue;")
    xs, ks = strides(g.in_sp), strides(g.kernel)
    xo = " + ".join(f"ix{a} * {s}" if s != 1 else f"ix{a}" for a, s in enumerate(xs))
    ko = " + ".join(f"k{a} * {s}" if s != 1 else f"k{a}" for a, s in enumerate(ks))
    w.line(f"acc += {w.load(px, f'xb + ci * {in_plane} + {xo}', x.type.dtype)} * "
           f"{w.load(pw, f'wb + ci * {k_plane} + {ko}', wt.type.dtype)};")
    for _ in g.kernel:
        w.close()
    w.close()
    if bias is not None:
        w.line(f"acc += {w.load(w.arg(bias), co, bias.type.dtype)};")
    v = apply_epilogue(w, instr, "acc", dtype, i)
    w.line(w.store(y, i, dtype, v))
