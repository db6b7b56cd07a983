"""Movement kernels: copy, Identity/Reshape, Transpose, Slice, Pad (constant), Concat.

Movement ops only move bytes, so they work on every element type with a plain storage size
(bfloat16 and the float8 types move as uint16/uint8). Transpose and Slice are *affine*: output
element i reads input element offset + sum(i_d * stride_d). The strides come from the op's own
NumPy reference run on a stride probe (an array whose strides are element counts and which owns
no memory: NumPy computes the view and never touches the data), so the kernel agrees with the
reference by construction, negative steps and clamping included.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.errors import BackendError
from glow.specialize import varying
from numpy.lib.stride_tricks import as_strided

from ..codegen import constant, cpu_kernel, value_input
from ..irutil import I1, I8, I64, PTR, VOID
from .elementwise import MOVE, PARALLEL_MIN, ZERO, Access, broadcast, collapse, emit_strided, strides_of
from .lanes import storage_dtype
from .transpose import emit_transpose, tile_axis

COPY_CHUNK = 1 << 16  # bytes per thread below which a copy stays on one thread


def _movable_out(node) -> bool:
    t = node.outputs[0].type
    return isinstance(t, dt.TensorType) and storage_dtype(t.dtype) is not None


def _movable(node) -> bool:
    ts = [v.type for v in node.outputs[:1]] + [node.inputs[0].type]
    return all(isinstance(t, dt.TensorType) and storage_dtype(t.dtype) is not None for t in ts)


# -- copies -------------------------------------------------------------------------------------

def emit_memcpy(cg, dst, src, nbytes: int):
    """Copy nbytes from operand src to operand dst, split across threads when large."""
    if nbytes == 0:
        return

    def make():
        kb = cg.function("copy", [PTR, PTR, I64, I64, I64])
        d, s, n, tid, nth = kb.args
        b = kb.b
        chunk = b.mul(b.sdiv(b.add(b.sdiv(b.add(n, b.sub(nth, kb.i64(1))), nth), kb.i64(63)), kb.i64(64)),
                      kb.i64(64))
        lo = b.mul(chunk, tid)
        lo = b.select(b.icmp_signed("<", lo, n), lo, n)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        memcpy = kb.intrinsic("llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
        b.call(memcpy, [kb.ptr(d, lo, I8), kb.ptr(s, lo, I8), b.sub(hi, lo), ir.Constant(I1, 0)])
        return kb.finish()

    fn = cg.shared("memcpy", make)
    args = [cg.ptr(dst), cg.ptr(src), cg.entry.i64(nbytes)]
    if nbytes < 2 * COPY_CHUNK:
        cg.call(fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, args + [cg.tid, cg.nth])


def emit_copy(cg, instr):
    dst, src = instr.outputs[0], instr.inputs[0]
    if dst.root is src.root and dst.offset == src.offset:
        return
    emit_memcpy(cg, dst, src, min(dst.nbytes, src.nbytes))


@cpu_kernel("Identity", supports=_movable)
@cpu_kernel("Reshape", supports=_movable)
def emit_same_bytes(cg, instr):
    emit_copy(cg, instr)


@cpu_kernel("Constant", supports=_movable_out)
def emit_constant(cg, instr):
    """A Constant node left in the graph: its value goes into the weights blob and is copied."""
    attrs = {k: v for k, v in instr.attrs.items() if not k.startswith("_") and v is not None}
    value = np.asarray(instr.op.reference(**attrs), dtype=instr.outputs[0].type.dtype.np)
    out = instr.outputs[0]
    src = cg.weight(value)

    def make():
        kb = cg.function("constant", [PTR, PTR, I64])
        memcpy = kb.intrinsic("llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
        kb.b.call(memcpy, [kb.args[0], kb.args[1], kb.args[2], ir.Constant(I1, 0)])
        return kb.finish()

    cg.call(cg.shared("constant", make), [cg.ptr(out), src, cg.entry.i64(value.nbytes)], single=True)


# -- affine movement ----------------------------------------------------------------------------

def _consts_ok(node) -> bool:
    """Every input but the data is a constant, or can become one when the runtime specialises
    the graph on input values."""
    return all(value_input(v) for v in node.inputs[1:])


def affine_map(op, attrs, in_shape, args) -> tuple[int, list[int]] | None:
    """(offset, strides) in elements of the view `op.reference` makes of a tensor, or None."""
    probe = as_strided(np.zeros(1, np.uint8), shape=tuple(in_shape), strides=tuple(strides_of(in_shape)))
    view = op.reference(probe, *args, **{k: v for k, v in attrs.items() if not k.startswith("_")})
    if not isinstance(view, np.ndarray) or view.base is None or view.itemsize != 1:
        return None
    base = probe.__array_interface__["data"][0]
    return view.__array_interface__["data"][0] - base, list(view.strides)


def _affine_supported(node) -> bool:
    return _movable(node) and _consts_ok(node)


@cpu_kernel("Transpose", supports=_affine_supported)
@cpu_kernel("Slice", supports=_affine_supported)
def emit_affine(cg, instr):
    out, src = instr.outputs[0], instr.inputs[0]
    args = [None if o is None else constant(o) for o in instr.inputs[1:]]
    m = affine_map(instr.op, instr.attrs, src.type.shape, args)
    if m is None:
        raise BackendError(f"{instr.opname} '{instr.name}' is not a strided view of its input")
    offset, strides = m
    shape = tuple(out.type.shape)
    mover = storage_dtype(out.type.dtype)
    dst = broadcast(out, shape, mover)
    # a transpose of the innermost axis: 8 x 8 register tiles, with the sizes in the code; a size that
    # varies between calls (a sequence length) keeps the general nest, whose one kernel serves them all
    if mover.itemsize == 4 and not any(varying(n) for n in shape):
        sizes, (so, si) = collapse(shape, [dst.strides, strides])
        axis = tile_axis(sizes, so, si)
        if axis is not None:
            return emit_transpose(cg, instr.opname, sizes, so, si, axis, cg.ptr(out, 0), cg.ptr(src, offset * 4),
                                  single=int(np.prod(shape)) < PARALLEL_MIN)
    emit_strided(cg, instr.opname, shape, [dst, Access(src, strides, offset, mover)],
                 lambda lanes, vals: vals[0], body_key=MOVE)


# -- Concat -------------------------------------------------------------------------------------

@cpu_kernel("Concat", supports=lambda node: all(storage_dtype(v.type.dtype) is not None
                                                  for v in node.inputs if v is not None))
def emit_concat(cg, instr):
    out = instr.outputs[0]
    shape = tuple(out.type.shape)
    axis = instr.attrs["axis"] % len(shape)
    ostrides = strides_of(shape)
    mover = storage_dtype(out.type.dtype)
    at = 0
    for src in instr.inputs:
        if src is None:
            continue
        part = tuple(src.type.shape)
        if 0 not in part:
            emit_strided(cg, "Concat", part, [Access(out, ostrides, at * ostrides[axis], mover),
                                             Access(src, strides_of(part), 0, mover)],
                         lambda lanes, vals: vals[0], body_key=MOVE)
        at += part[axis]


# -- Pad (constant mode; the other modes lower to Slice/Concat) ---------------------------------

def _pad_supported(node) -> bool:
    return _movable(node) and node.attrs.get("mode", "constant") == "constant" and all(
        value_input(v) for v in node.inputs[1:2] + node.inputs[3:])


def pad_widths(rank, pads, axes) -> list[tuple[int, int]]:
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (int(pads[i]), int(pads[i + len(axes)]))
    return widths


@cpu_kernel("Pad", supports=_pad_supported)
def emit_pad(cg, instr):
    """Fill the border with the constant and copy the kept input region into the rest. The border
    is cut into boxes (per axis, the part before and after the region, the axes before it
    restricted to the region), so no element is written twice: filling the whole output first
    wrote a padded convolution's input twice (VGG-19's 224 x 224 x 64 Pad: 0.48 ms, the copy alone
    0.29)."""
    out, src = instr.outputs[0], instr.inputs[0]
    value = instr.inputs[2] if len(instr.inputs) > 2 else None
    axes = constant(instr.inputs[3]) if len(instr.inputs) > 3 and instr.inputs[3] is not None else None
    widths = pad_widths(len(src.type.shape), constant(instr.inputs[1]).reshape(-1), axes)
    shape, in_shape = tuple(out.type.shape), tuple(src.type.shape)
    mover = storage_dtype(out.type.dtype)
    region = [d - max(-b, 0) - max(-e, 0) for d, (b, e) in zip(in_shape, widths)]
    ost, ist = strides_of(shape), strides_of(in_shape)
    begin = [max(b, 0) for b, _ in widths]

    def fill(box, offset):
        if value is not None and value.type.numel:
            acc = [Access(out, ost, offset, mover), Access(value, [0] * len(box), 0, mover)]
            emit_strided(cg, "Pad.fill", box, acc, lambda lanes, vals: vals[0], body_key=MOVE)
        else:
            emit_strided(cg, "Pad.fill", box, [Access(out, ost, offset, mover)],
                         lambda lanes, vals: lanes.const(mover, 0), body_key=ZERO)

    if 0 in region:
        fill(shape, 0)
        return
    for a in range(len(shape)):
        for start, stop in ((0, begin[a]), (begin[a] + region[a], shape[a])):
            if stop > start:
                box = tuple(region[i] if i < a else stop - start if i == a else shape[i] for i in range(len(shape)))
                offset = sum((begin[i] if i < a else start if i == a else 0) * ost[i] for i in range(len(shape)))
                fill(box, offset)
    out_off = sum(b * s for b, s in zip(begin, ost))
    in_off = sum(max(-b, 0) * s for (b, _), s in zip(widths, ist))
    emit_strided(cg, "Pad", tuple(region), [Access(out, ost, out_off, mover), Access(src, ist, in_off, mover)],
                 lambda lanes, vals: vals[0], body_key=MOVE)


__all__ = ["affine_map", "emit_copy", "emit_memcpy", "pad_widths"]
