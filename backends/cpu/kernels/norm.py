"""LayerNormalization over trailing axes: each row (the normalised axes, contiguous) in three
vector passes: the mean, the variance of the deviations (never negative), then
y = (x - mean) * (1 / sqrt(var + eps)) * scale + B, with scale and B read along the row.
And LRN on NHWC data (the layout transform's LRNNHWC), every pixel's channels in one pass.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt

from .. import layout
from ..codegen import cpu_kernel
from ..irutil import F32, I64, PTR, VEC, vec
from .ewops import emitter
from .gemm_emit import load_vec, masked_load, masked_store, split_range
from .lanes import Lanes
from .softmax import call_rows, hreduce, row_kernel, row_vectors, store_vec


def _f32(v) -> bool:
    t = None if v is None else v.type
    return isinstance(t, dt.TensorType) and t.is_static and t.dtype == dt.float32 and t.numel > 0


def _layer_norm_ok(node) -> bool:
    x = node.inputs[0]
    if not _f32(x) or node.attrs.get("stash_type", dt.float32) != dt.float32:
        return False
    if any(o is not None for o in node.outputs[1:]):
        return False  # Mean / InvStdDev requested: lowered
    shape = x.type.shape
    axis = node.attrs.get("axis", -1) % len(shape)
    row = 1
    for d in shape[axis:]:
        row *= d
    params = [v for v in node.inputs[1:3] if v is not None]
    return all(_f32(p) and p.type.numel == row for p in params)


@cpu_kernel("LayerNormalization", supports=_layer_norm_ok)
def emit_layer_norm(cg, instr):
    x, scale = instr.inputs[:2]
    bias = instr.inputs[2] if len(instr.inputs) > 2 else None
    y = instr.outputs[0]
    shape = x.type.shape
    axis = instr.attrs.get("axis", -1) % len(shape)
    L = 1
    for d in shape[axis:]:
        L *= d
    rows = x.type.numel // L
    eps = float(instr.attrs.get("epsilon", 1e-5))
    zero = ir.Constant(vec(), [0.0] * VEC)

    def row(kb, ptrs, base, length):
        src, dst, sc = ptrs[:3]
        bp = ptrs[3] if bias is not None else None
        b = kb.b

        def summed(value_of):
            acc = kb.var(vec(), zero)

            def step(off, mask):
                v = value_of(load_vec(kb, kb.ptr(src, b.add(base, off)), mask))
                if mask is not None:
                    v = b.select(mask, v, zero)
                b.store(b.fadd(b.load(acc), v), acc)

            row_vectors(kb, length, step)
            return hreduce(kb, b.load(acc), b.fadd)

        inv_n = b.fdiv(kb.f32(1.0), b.uitofp(length, F32))  # the length is an argument
        mean = kb.splat(b.fmul(summed(lambda v: v), inv_n))
        var = b.fmul(summed(lambda v: b.fmul(b.fsub(v, mean), b.fsub(v, mean))), inv_n)
        sqrt = kb.intrinsic("llvm.sqrt.f32", F32, [F32])
        inv = kb.splat(b.fdiv(kb.f32(1.0), b.call(sqrt, [b.fadd(var, kb.f32(eps))])))

        def out(off, mask):
            v = b.fmul(b.fsub(load_vec(kb, kb.ptr(src, b.add(base, off)), mask), mean), inv)
            v = b.fmul(v, load_vec(kb, kb.ptr(sc, off), mask))
            if bp is not None:
                v = b.fadd(v, load_vec(kb, kb.ptr(bp, off), mask))
            store_vec(kb, v, kb.ptr(dst, b.add(base, off)), mask)

        row_vectors(kb, length, out)

    ptrs = [cg.ptr(x), cg.ptr(y), cg.ptr(scale)] + ([cg.ptr(bias)] if bias is not None else [])
    fn = row_kernel(cg, "LayerNorm", len(ptrs), row)
    call_rows(cg, fn, ptrs, rows, L)


__all__ = ["emit_layer_norm"]


# -- LRN on NHWC data -------------------------------------------------------------------------------

def _lrn_ok(node) -> bool:
    return _f32(node.inputs[0]) and len(node.inputs[0].type.shape) == 4 and _f32(node.outputs[0])


@cpu_kernel("LRNNHWC", domain=layout.DOMAIN, supports=_lrn_ok)
def emit_lrn_nhwc(cg, instr):
    x, out = instr.inputs[0], instr.outputs[0]
    lrn_nhwc(cg, x.type.shape, instr.attrs, cg.ptr(x), cg.ptr(out))


@cpu_kernel("LRN", supports=_lrn_ok)
def emit_lrn_nchw(cg, instr):
    """An LRN left NCHW (the graph was not optimised, or no convolution is near): through NHWC
    scratch buffers, as a Conv left NCHW."""
    from .conv import relayout, scratch

    x, out = instr.inputs[0], instr.outputs[0]
    n, c, h, w = x.type.shape
    a, y = scratch(cg, x.type.nbytes), scratch(cg, x.type.nbytes)
    relayout(cg, cg.ptr(x), a, (n, c, h, w), True)
    lrn_nhwc(cg, (n, h, w, c), instr.attrs, a, y)
    relayout(cg, y, cg.ptr(out), (n, c, h, w), False)


def lrn_nhwc(cg, shape, a, x_ptr, y_ptr):
    """y = x / (bias + alpha / size * (sum of x^2 over the channels c - floor((size-1)/2) ..
    c + ceil((size-1)/2)))^beta, as the reference. A pixel's channels are contiguous: 16 at a
    time, each window tap one (masked) load of neighbouring channels, so the squares are never
    written out (lowered, LRN was a Pad, `size` Slices and their sums: 3.6 ms of ZFNet's 16 at
    bf16 on a Zen 5 core)."""
    n, h, w, c = shape
    size = int(a["size"])
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    kb = cg.function("LRN", [PTR, PTR, I64, I64])
    kb.fn.attributes.add("noinline")
    X, Y, tid, nth = kb.args
    b = kb.b
    L = Lanes(kb, VEC)
    lo, hi = split_range(kb, n * h * w, tid, nth)
    iota = ir.Constant(ir.VectorType(I64, VEC), list(range(VEC)))
    chunks = -(-c // VEC)
    with kb.loop(lo, hi, name="pixel") as p:
        row = b.mul(p, kb.i64(c))
        with kb.loop(0, chunks, name="chunk", unroll=False) as ch:
            c0 = b.mul(ch, kb.i64(VEC))
            lanes = b.add(kb.splat(c0), iota)
            acc = ir.Constant(vec(), [0.0] * VEC)
            for k in range(-before, after + 1):
                at = b.add(lanes, kb.splat(kb.i64(k)))
                inside = b.and_(b.icmp_signed(">=", at, kb.splat(kb.i64(0))),
                                b.icmp_signed("<", at, kb.splat(kb.i64(c))))
                v = masked_load(kb, kb.ptr(X, b.add(row, b.add(c0, kb.i64(k)))), inside)
                acc = kb.fma(v, v, acc)
            valid = b.icmp_signed("<", lanes, kb.splat(kb.i64(c)))
            xv = masked_load(kb, kb.ptr(X, b.add(row, c0)), valid)
            base = kb.fma(acc, kb.splat(kb.f32(a.get("alpha", 1e-4) / size)), kb.splat(kb.f32(a.get("bias", 1.0))))
            masked_store(kb, b.fdiv(xv, _power(kb, L, base, float(np.float32(a.get("beta", 0.75))))),
                         kb.ptr(Y, b.add(row, c0)), valid)
    kb.finish()
    args = [x_ptr, y_ptr]
    if n * h * w * c * size < 1 << 16:
        cg.call(kb.fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(kb.fn, args + [cg.tid, cg.nth])


def _power(kb, L, base, beta: float):
    """base ** beta (base >= bias > 0 in practice): the usual 0.75 and 0.5 from float32 square
    roots (a few ulp; the Pow emitter's quarter powers go through float64), else the Pow emitter."""
    sqrt = kb.intrinsic(f"llvm.sqrt.v{VEC}f32", vec(), [vec()])
    if beta in (0.5, 0.75):
        r = kb.b.call(sqrt, [base])
        return r if beta == 0.5 else kb.b.fmul(r, kb.b.call(sqrt, [r]))
    return emitter("Pow")(L, [base, ir.Constant(vec(), [beta] * VEC)], [dt.float32, dt.float32], dt.float32, {})
