"""Pooling kernels on NHWC data: max, average (both count_include_pad rules), global average.

Vectorised over channels (16 per zmm register; a masked last vector). Each output pixel clips
its window to the input, so padding is never materialised: a max ignores it, and an average
divides by the taps inside the input, or by those inside the padded extent with
count_include_pad (never past the end pads, which ceil_mode may overshoot).

NCHW pools (only when layout.py did not run) re-lay their data through scratch buffers.
GlobalAveragePool on NCHW data is a row mean over contiguous H*W and needs no re-layout.
"""

from __future__ import annotations

import llvmlite.ir as ir

from .. import layout
from ..codegen import cpu_kernel
from ..irutil import F32, I64, PTR, VEC, vec
from .conv import relayout, scratch
from .gemm_emit import load_vec, masked_store, runtime_lane_mask, split_range

PARALLEL_PIXELS = 4096  # output elements below which a pool runs on thread 0 alone
#: Channel vectors a pool kernel computes together (independent chains of window taps): 3 x 3
#: max pools of 64-192 channels on a Zen 5 core went from 0.87-1.12 ns an output element to
#: 0.48-0.56 (one chain per vector waited on each NaN-propagating maximum in turn).
CHAINS = 4


def _clip(kb, lo, hi, bound_lo, bound_hi):
    b = kb.b
    lo = b.select(b.icmp_signed("<", lo, bound_lo), bound_lo, lo)
    hi = b.select(b.icmp_signed(">", hi, bound_hi), bound_hi, hi)
    return lo, hi


def _vmax(kb, a, c):
    return kb.b.call(kb.intrinsic("llvm.maximum.v16f32", vec(), [vec(), vec()]), [a, c])


def emit_pool_nhwc(cg, kind: str, x_shape, out_shape, attrs, src, dst):
    """kind: "max" | "avg"; shapes NHWC; src/dst pointers in the entry."""
    n, h, w, c = x_shape
    _, ho, wo, _ = out_shape
    node = _Geo((n, c, h, w), attrs)
    k, s, _, pb, pe = layout.conv_geometry(node)
    include_pad = bool(attrs.get("count_include_pad", 0))
    kb = cg.function(f"{kind}pool", [PTR, PTR, I64, I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    src_, dst_, items, tid, nth = kb.args
    b = kb.b
    lo, hi = split_range(kb, items, tid, nth)
    nvec = -(-c // VEC)
    with kb.loop(lo, hi, name="p") as p:
        ni = b.sdiv(p, kb.i64(ho * wo))
        rem = b.srem(p, kb.i64(ho * wo))
        oy, ox = b.sdiv(rem, kb.i64(wo)), b.srem(rem, kb.i64(wo))
        y0 = b.sub(b.mul(oy, kb.i64(s[0])), kb.i64(pb[0]))
        x0 = b.sub(b.mul(ox, kb.i64(s[1])), kb.i64(pb[1]))
        ys, ye = _clip(kb, y0, b.add(y0, kb.i64(k[0])), kb.i64(0), kb.i64(h))
        xs, xe = _clip(kb, x0, b.add(x0, kb.i64(k[1])), kb.i64(0), kb.i64(w))
        scale = None
        if kind == "avg":
            if include_pad:
                cy0, cy1 = _clip(kb, y0, b.add(y0, kb.i64(k[0])), kb.i64(-pb[0]), kb.i64(h + pe[0]))
                cx0, cx1 = _clip(kb, x0, b.add(x0, kb.i64(k[1])), kb.i64(-pb[1]), kb.i64(w + pe[1]))
                cnt = b.mul(b.sub(cy1, cy0), b.sub(cx1, cx0))
            else:
                cnt = b.mul(b.sub(ye, ys), b.sub(xe, xs))
            scale = kb.splat(b.fdiv(kb.f32(1.0), b.sitofp(cnt, F32)))
        def vectors(cv, count: int):
            """`count` channel vectors from the cv-th, each its own accumulator: a max's chain of
            window taps is latency-bound (NaN-propagating maximum is three instructions), so
            several chains side by side run several times faster than one."""
            c0s = [b.mul(b.add(cv, kb.i64(j)), kb.i64(VEC)) for j in range(count)]
            masks = [None if c % VEC == 0 else runtime_lane_mask(kb, b.sub(kb.i64(c), c0)) for c0 in c0s]
            init = -float("inf") if kind == "max" else 0.0
            accs = [kb.var(vec(), ir.Constant(vec(), [init] * VEC)) for _ in range(count)]
            with kb.loop(ys, ye, name="y") as y:
                row = b.mul(b.add(b.mul(ni, kb.i64(h)), y), kb.i64(w))
                with kb.loop(xs, xe, name="x") as x:
                    at = b.mul(b.add(row, x), kb.i64(c))
                    for acc, c0, mask in zip(accs, c0s, masks):
                        v = load_vec(kb, kb.ptr(src_, b.add(at, c0)), mask)
                        cur = b.load(acc)
                        b.store(_vmax(kb, cur, v) if kind == "max" else b.fadd(cur, v), acc)
            for acc, c0, mask in zip(accs, c0s, masks):
                r = b.load(acc)
                if scale is not None:
                    r = b.fmul(r, scale)
                dptr = kb.ptr(dst_, b.add(b.mul(p, kb.i64(c)), c0))
                if mask is None:
                    b.store(r, dptr, align=4)
                else:
                    masked_store(kb, r, dptr, mask)

        group = min(CHAINS, nvec)
        whole = nvec // group * group
        with kb.loop(0, whole, step=group, name="cv") as cv:
            vectors(cv, group)
        if whole < nvec:
            vectors(kb.i64(whole), nvec - whole)
    kb.finish()
    _call(cg, kb.fn, [src, dst], n * ho * wo, n * ho * wo * c)


def _call(cg, fn, ptrs, items: int, work: int):
    """Call a pool kernel over `items` work items (an argument: the batch is in it, so a new
    batch size uses the same function); on thread 0 alone below PARALLEL_PIXELS elements."""
    ptrs = ptrs + [cg.entry.i64(items)]
    if work < PARALLEL_PIXELS:
        cg.call(fn, ptrs + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, ptrs + [cg.tid, cg.nth])


class _Geo:
    """What layout.conv_geometry reads, for an NCHW-shaped input and pool attributes."""

    def __init__(self, nchw, attrs):
        self.inputs = (_T(nchw),)
        self.attrs = attrs


class _T:
    def __init__(self, shape):
        self.type = self
        self.shape = shape


def emit_gap_nhwc(cg, x_shape, src, dst):
    n, h, w, c = x_shape
    kb = cg.function("gap", [PTR, PTR, I64, I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    src_, dst_, items, tid, nth = kb.args
    b = kb.b
    nvec = -(-c // VEC)
    lo, hi = split_range(kb, items, tid, nth)
    inv = ir.Constant(vec(), [1.0 / (h * w)] * VEC)
    with kb.loop(lo, hi, name="item") as item:
        ni, cv = b.sdiv(item, kb.i64(nvec)), b.srem(item, kb.i64(nvec))
        c0 = b.mul(cv, kb.i64(VEC))
        mask = None if c % VEC == 0 else runtime_lane_mask(kb, b.sub(kb.i64(c), c0))
        acc = kb.var(vec(), ir.Constant(vec(), [0.0] * VEC))
        base = b.add(b.mul(ni, kb.i64(h * w * c)), c0)
        with kb.loop(0, h * w, name="hw") as i:
            v = load_vec(kb, kb.ptr(src_, b.add(base, b.mul(i, kb.i64(c)))), mask)
            b.store(b.fadd(b.load(acc), v), acc)
        r = b.fmul(b.load(acc), inv)
        dptr = kb.ptr(dst_, b.add(b.mul(ni, kb.i64(c)), c0))
        if mask is None:
            b.store(r, dptr, align=4)
        else:
            masked_store(kb, r, dptr, mask)
    kb.finish()
    _call(cg, kb.fn, [src, dst], n * nvec, n * h * w * c)


def emit_gap_nchw(cg, x_shape, src, dst):
    """out[n, c] = mean of the contiguous h*w run: 16 partial sums, then a tree of adds."""
    n, c, h, w = x_shape
    hw = h * w
    kb = cg.function("gap_nchw", [PTR, PTR, I64, I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    src_, dst_, items, tid, nth = kb.args
    b = kb.b
    lo, hi = split_range(kb, items, tid, nth)
    full = hw // VEC
    with kb.loop(lo, hi, name="row") as row:
        base = b.mul(row, kb.i64(hw))
        acc = kb.var(vec(), ir.Constant(vec(), [0.0] * VEC))
        with kb.loop(0, full, name="v") as v:
            x = load_vec(kb, kb.ptr(src_, b.add(base, b.mul(v, kb.i64(VEC)))))
            b.store(b.fadd(b.load(acc), x), acc)
        if hw % VEC:
            mask = ir.Constant(ir.VectorType(ir.IntType(1), VEC), [1 if i < hw % VEC else 0 for i in range(VEC)])
            x = load_vec(kb, kb.ptr(src_, b.add(base, kb.i64(full * VEC))), mask)
            b.store(b.fadd(b.load(acc), x), acc)
        total = b.load(acc)
        width = VEC
        while width > 1:  # pairwise halving: a fixed, deterministic order
            width //= 2
            lo_half = b.shuffle_vector(total, total, ir.Constant(ir.VectorType(ir.IntType(32), width),
                                                                 list(range(width))))
            hi_half = b.shuffle_vector(total, total, ir.Constant(ir.VectorType(ir.IntType(32), width),
                                                                 list(range(width, 2 * width))))
            total = b.fadd(lo_half, hi_half)
        s = b.extract_element(total, ir.Constant(ir.IntType(32), 0))
        kb.store(b.fmul(s, kb.f32(1.0 / hw)), dst_, row)
    kb.finish()
    _call(cg, kb.fn, [src, dst], n * c, n * c * hw)


# -- registrations ---------------------------------------------------------------------------------

def _nhwc_pool_ok(node) -> bool:
    if not (layout.static_f32(node.inputs[0], 4) and layout.static_f32(node.outputs[0], 4)):
        return False
    if any(d != 1 for d in node.attrs.get("dilations") or ()):
        return False
    try:
        n, h, w, c = node.inputs[0].type.shape
        layout.conv_geometry(_Geo((n, c, h, w), node.attrs))
        return True
    except (ValueError, TypeError):
        return False


def _gap_ok(node) -> bool:
    return layout.static_f32(node.inputs[0], 4) and layout.static_f32(node.outputs[0], 4)


@cpu_kernel("MaxPoolNHWC", domain=layout.DOMAIN, supports=_nhwc_pool_ok)
def emit_maxpool_nhwc(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    emit_pool_nhwc(cg, "max", x.type.shape, y.type.shape, instr.attrs, cg.ptr(x), cg.ptr(y))


@cpu_kernel("AveragePoolNHWC", domain=layout.DOMAIN, supports=_nhwc_pool_ok)
def emit_avgpool_nhwc(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    emit_pool_nhwc(cg, "avg", x.type.shape, y.type.shape, instr.attrs, cg.ptr(x), cg.ptr(y))


@cpu_kernel("GlobalAveragePoolNHWC", domain=layout.DOMAIN, supports=_gap_ok)
def emit_gap_nhwc_op(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    emit_gap_nhwc(cg, x.type.shape, cg.ptr(x), cg.ptr(y))


def _nchw_pool(kind):
    def emit(cg, instr):
        x, y = instr.inputs[0], instr.outputs[0]
        n, c, h, w = layout.as_2d(x.type.shape)  # a 1-D pool: [N, C, L] is [N, C, 1, L]
        _, _, ho, wo = layout.as_2d(y.type.shape)
        a, o = scratch(cg, n * h * w * c * 4), scratch(cg, n * ho * wo * c * 4)
        relayout(cg, cg.ptr(x), a, (n, c, h, w), True)
        attrs = layout.attrs_2d(instr.attrs) if len(x.type.shape) == 3 else instr.attrs
        emit_pool_nhwc(cg, kind, (n, h, w, c), (n, ho, wo, c), attrs, a, o)
        relayout(cg, o, cg.ptr(y), (n, c, ho, wo), False)
    return emit


cpu_kernel("MaxPool", supports=layout.pool_ok)(_nchw_pool("max"))
cpu_kernel("AveragePool", supports=layout.pool_ok)(_nchw_pool("avg"))


@cpu_kernel("GlobalAveragePool", supports=layout.pool_ok)
def emit_gap_nchw_op(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    emit_gap_nchw(cg, x.type.shape, cg.ptr(x), cg.ptr(y))


__all__ = ["emit_pool_nhwc", "emit_gap_nhwc", "emit_gap_nchw"]
