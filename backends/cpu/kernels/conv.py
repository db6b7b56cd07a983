"""Conv kernels: ConvNHWC (what layout.py makes of every eligible Conv) and Conv itself.

ConvNHWC reads an already padded NHWC input (a depthwise one pads implicitly: its `pads`), packs
its constant weights at compile time and runs the implicit-GEMM (or depthwise) kernel of
conv_emit.py with the bias and the instruction's epilogue applied in registers. A Conv that
reaches code generation in NCHW (the graph was not optimised, so layout.py never ran) goes the
same way through module-private scratch buffers: its input is re-laid out (and padded) to NHWC,
convolved, and laid back out to NCHW.
"""

from __future__ import annotations

from dataclasses import replace

import llvmlite.ir as ir
import numpy as np

from .. import jit, layout
from ..codegen import cpu_kernel, weight_data
from ..irutil import F32, I8, I64, PTR
from . import epilogue as ep
from .conv_emit import ConvGeometry, code_key, emit_bf16_input, emit_conv, pack_conv_weights, packed_conv_size
from .gemm_emit import choose_tile, split_range

#: Convolutions below this many FLOPs are one chunk (splitting costs more than the work).
PARALLEL_FLOPS = 1 << 18


def _args(instr):
    n = len(instr.inputs) if instr.n_args is None else instr.n_args
    return list(instr.inputs[:n]) + [None] * (3 - n)


def _nhwc_ok(node) -> bool:
    x, w, b = (list(node.inputs) + [None])[:3]
    a = node.attrs
    return (layout.static_f32(x, 4) and layout.static_f32(w, 4) and w.is_constant
            and (b is None or layout.static_f32(b))
            and (not any(a.get("pads") or ()) or layout.depthwise(node))
            and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
            and len(node.outputs) == 1 and layout.static_f32(node.outputs[0], 4))


def geometry(x_nhwc_shape, w_shape, out_nhwc_shape, attrs) -> ConvGeometry:
    """The geometry of a ConvNHWC; its `pads` (a depthwise one's: layout.depthwise) are implicit:
    hp and wp are then the padded sizes the kernel reads as if the border were there."""
    n, h, w, c = x_nhwc_shape
    _, ho, wo, m = out_nhwc_shape
    kh, kw = w_shape[2:]
    s = attrs.get("strides") or (1, 1)
    d = attrs.get("dilations") or (1, 1)
    pt, pl, pb, pr = attrs.get("pads") or (0, 0, 0, 0)
    groups = attrs.get("group", 1) or 1
    mr, nv = choose_tile(m // groups)
    g = ConvGeometry(n, h + pt + pb, w + pl + pr, c, ho, wo, m, kh, kw, s[0], s[1], d[0], d[1], groups, mr, nv,
                     pads=(pt, pl, pb, pr))
    return with_precision(g)


def with_precision(g: ConvGeometry) -> ConvGeometry:
    """`g` with bfloat16 operands where the compile asked for them (jit.bf16); never depthwise
    (it vectorises over channels, not k: float32)."""
    return g if g.depthwise or not jit.bf16() else replace(g, bf16=True)


def run_conv(cg, instr, g: ConvGeometry, x_ptr, out_ptr, plan):
    """Call the conv kernel for geometry g (weights from instr's W, bias from its B)."""
    _, w, bias = _args(instr)
    wd = weight_data(w)
    wd = wd.reshape(*wd.shape[:2], g.kh, g.kw)  # a 1-D conv's [M, C/group, k] is [M, C/group, 1, k]
    if g.depthwise:
        wp = cg.weight(pack_conv_weights(wd, g))
    else:  # packed straight into the weights blob
        wp = cg.weight_out((packed_conv_size(g),), np.float32, lambda window: pack_conv_weights(wd, g, out=window))
    kplan = plan if plan is not None else ep.NONE
    # Kernels take every tensor as an argument and read their geometry from the packed weights:
    # convolutions of one code class (conv_emit.code_key) share a function.
    operands = [x_ptr_operand(instr), instr.outputs[0], bias, *(o for _, o, _ in kplan.leaves)]
    key = ("conv", code_key(g), bias is not None, kplan.key, ep.alias_key(operands))
    fn = cg.shared(key, lambda: emit_conv(lambda types: cg.function(instr.op.name, types), g,
                                          kplan.builder(bias is not None), len(kplan.leaves)))
    bp = cg.ptr(bias) if bias is not None else ir.Constant(PTR, None)
    if g.bf16:  # the input rounded once into the staging buffer, which the kernel then reads
        pixels = g.n * g.hp * g.wp
        stage = cg.staging(pixels * g.units[0] * 4)
        rnd = cg.shared(("conv-bf16-input", g.cin, g.groups),
                        lambda: emit_bf16_input(lambda types: cg.function("RoundInput", types), g))
        args = [x_ptr, stage, cg.entry.i64(pixels)]
        if pixels * g.cin < PARALLEL_FLOPS // 64:  # as few elements as a small convolution's FLOPs
            cg.call(rnd, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
        else:
            cg.call(rnd, args + [cg.tid, cg.nth])
        x_ptr = stage
    args = [x_ptr, wp, out_ptr, bp, *kplan.args(cg)]
    if g.flops < PARALLEL_FLOPS:
        cg.call(fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, args + [cg.tid, cg.nth])


def x_ptr_operand(instr):
    return _args(instr)[0]


@cpu_kernel("ConvNHWC", domain=layout.DOMAIN, supports=_nhwc_ok, epilogue=True)
def emit_conv_nhwc(cg, instr):
    x, w, _ = _args(instr)
    out = instr.outputs[0]
    g = geometry(x.type.shape, w.type.shape, out.type.shape, instr.attrs)
    plan = ep.plan(instr, g.n * g.ho * g.wo, g.cout)
    run_conv(cg, instr, g, cg.ptr(x), cg.ptr(out), plan)
    if plan is None:
        ep.fallback(cg, instr)


# -- NCHW operands through scratch -----------------------------------------------------------------

def scratch(cg, nbytes: int, fill: int = 0):
    """A 64-byte aligned module global of nbytes (one per call), every byte `fill` at start."""
    t = ir.ArrayType(I8, max(int(nbytes), 1))
    name = f"scratch.{len([g for g in cg.module.global_values if g.name.startswith('scratch.')])}"
    gv = ir.GlobalVariable(cg.module, t, name)
    gv.initializer = ir.Constant(t, bytearray([fill]) * t.count if fill else None)
    gv.linkage = "internal"
    gv.align = 64
    return gv


def relayout(cg, src, dst, nchw_shape, to_nhwc: bool, pads=(0, 0, 0, 0), etype=F32):
    """Copy NCHW -> NHWC (into a buffer padded by pads = (top, left, bottom, right), whose border
    is left as it is) or NHWC -> NCHW (unpadded), elements of LLVM type etype. Split over
    (n, row) across the threads."""
    n, c, h, w = nchw_shape
    pt, pl, pb, pr = pads
    hp, wp = h + pt + pb, w + pl + pr
    al = 1 if etype == I8 else 4
    kb = cg.function("relayout", [PTR, PTR, I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    s, d, tid, nth = kb.args
    b = kb.b
    lo, hi = split_range(kb, n * h, tid, nth)
    with kb.loop(lo, hi, name="row") as row:
        ni = b.sdiv(row, kb.i64(h))
        y = b.srem(row, kb.i64(h))
        if to_nhwc:
            base = b.mul(b.add(b.mul(ni, kb.i64(hp)), b.add(y, kb.i64(pt))), kb.i64(wp))
            with kb.loop(0, w, name="x") as x:
                o = b.mul(b.add(base, b.add(x, kb.i64(pl))), kb.i64(c))
                i = b.add(b.mul(b.mul(ni, kb.i64(c)), kb.i64(h * w)), b.add(b.mul(y, kb.i64(w)), x))
                with kb.loop(0, c, name="c") as ch:
                    kb.store(kb.load(s, b.add(i, b.mul(ch, kb.i64(h * w))), etype, al), d, b.add(o, ch), etype, al)
        else:
            with kb.loop(0, c, name="c") as ch:
                o = b.add(b.mul(b.add(b.mul(ni, kb.i64(c)), ch), kb.i64(h * w)), b.mul(y, kb.i64(w)))
                i = b.add(b.mul(row, kb.i64(w * c)), ch)
                with kb.loop(0, w, name="x") as x:
                    kb.store(kb.load(s, b.add(i, b.mul(x, kb.i64(c))), etype, al), d, b.add(o, x), etype, al)
    kb.finish()
    cg.call(kb.fn, [src, dst, cg.tid, cg.nth])


def _nchw_ok(node) -> bool:
    return (layout.conv_ok(node) and len(node.outputs) == 1
            and layout.static_f32(node.outputs[0], len(node.inputs[0].type.shape)))


@cpu_kernel("Conv", supports=_nchw_ok)
def emit_conv_nchw(cg, instr):
    x, w, _ = _args(instr)
    out = instr.outputs[0]
    k, s, d, pb, pe = layout.conv_geometry(InstrShapes(instr))
    n, c, h, wd = layout.as_2d(x.type.shape)  # a 1-D conv: [N, C, L] is [N, C, 1, L]
    _, m, ho, wo = layout.as_2d(out.type.shape)
    pads = (pb[0], pb[1], pe[0], pe[1])
    groups = instr.attrs.get("group", 1) or 1
    g = with_precision(ConvGeometry(n, h + pb[0] + pe[0], wd + pb[1] + pe[1], c, ho, wo, m, k[0], k[1], s[0], s[1],
                                    d[0], d[1], groups, *choose_tile(m // groups)))
    a = scratch(cg, g.n * g.hp * g.wp * g.cin * 4)
    o = scratch(cg, g.n * g.ho * g.wo * g.cout * 4)
    relayout(cg, cg.ptr(x), a, (n, c, h, wd), True, pads)
    run_conv(cg, instr, g, a, o, ep.NONE)
    relayout(cg, o, cg.ptr(out), (n, m, ho, wo), False)  # the calls of one instruction run in order


class InstrShapes:
    """What layout.conv_geometry reads of a node, from an instruction."""

    def __init__(self, instr):
        self.inputs = _args(instr)
        self.attrs = instr.attrs


__all__ = ["emit_conv_nhwc", "emit_conv_nchw", "scratch", "relayout", "geometry", "InstrShapes"]
