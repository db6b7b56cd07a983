"""LayerNormalization over trailing axes: each row (the normalised axes, contiguous) in three
vector passes: the mean, the variance of the deviations (never negative), then
y = (x - mean) * (1 / sqrt(var + eps)) * scale + B, with scale and B read along the row.
"""

from __future__ import annotations

import llvmlite.ir as ir
from glow import dtypes as dt

from ..codegen import cpu_kernel
from ..irutil import F32, VEC, vec
from .gemm_emit import load_vec
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
