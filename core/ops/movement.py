"""Movement ops: re-view, join, split, crop, pad and rearrange tensors without arithmetic
(Concat, Split, Slice, Transpose, Squeeze, Unsqueeze, Flatten, Expand, Tile, Pad, DepthToSpace,
SpaceToDepth, CenterCropPad, Col2Im).

Shape rules read shape-like inputs (Slice starts/ends, Expand shape, Pad pads, ...) through
`ctx.value`; when such a value is not known at compile time the affected dims are None.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._movement_util import (
    ALL,
    I64,
    IND,
    STD,
    RefCtx,
    attr_input,
    div_dim,
    fold_small,
    merge_dim,
    mul_dim,
    norm_axes,
    prod_dims,
    value_len,
    zero_of,
)
from ._shape import broadcast_shapes, ints
from .registry import MOVEMENT, NN, VIEW, Attr, Tier, op

# -- Concat --------------------------------------------------------------------------------------

def _concat_infer(ctx):
    types = [ctx.input(i) for i in range(len(ctx.inputs))]
    shapes = [t.shape for t in types if t.shape is not None]
    if not shapes:
        return [dt.TensorType(None, ctx.dtype(0))]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise ctx.error(f"inputs have different ranks: {[list(s) for s in shapes]}")
    if rank == 0:
        raise ctx.error("cannot concatenate scalars")
    axis = ctx.axis(ctx.attrs["axis"], rank)
    out = []
    for d in range(rank):
        dims = [s[d] for s in shapes]
        if d == axis:
            known = len(shapes) == len(types) and all(isinstance(x, int) for x in dims)
            out.append(sum(dims) if known else None)
        else:
            m = dims[0]
            for x in dims[1:]:
                m = merge_dim(ctx, m, x, f"dims on axis {d}")
            out.append(m)
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


op("Concat", inputs=("inputs:T*",), outputs=("concat_result:T",), types={"T": ALL},
   attrs=(Attr("axis", "int"),), infer=_concat_infer,
   reference=lambda *xs, axis: np.concatenate(xs, axis=axis),
   groups={MOVEMENT}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="Joins tensors of equal rank along `axis` (negative counts from the back).")


# -- Split ---------------------------------------------------------------------------------------

def _split_sizes(dim, num):
    """Opset-18 `num_outputs` split: equal chunks of ceil(dim/num), the last one smaller."""
    chunk = -(-dim // num)
    sizes = [chunk] * (num - 1) + [dim - chunk * (num - 1)]
    return sizes if sizes[-1] >= 0 else None


def _split_infer(ctx):
    n = ctx.num_outputs
    shape = ctx.shape(0)
    num = ctx.attrs["num_outputs"]
    if ctx.has(1) and num is not None:
        raise ctx.error("give either the 'split' input or the 'num_outputs' attribute, not both")
    if not ctx.has(1) and num is None:
        raise ctx.error("needs the 'split' input or the 'num_outputs' attribute")
    if num is not None and num != n:
        raise ctx.error(f"num_outputs={num} but the node has {n} outputs")
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))] * n
    if len(shape) == 0:
        raise ctx.error("cannot split a scalar")
    axis = ctx.axis(ctx.attrs["axis"], len(shape))
    dim = shape[axis]
    sizes = [None] * n
    if ctx.has(1):
        split = ints(ctx.value(1))
        count = value_len(ctx, 1)
        if count is not None and count != n:
            raise ctx.error(f"'split' has {count} entries but the node has {n} outputs")
        if split is not None:
            if any(s < 0 for s in split):
                raise ctx.error(f"'split' sizes must be >= 0, got {split}")
            if isinstance(dim, int) and sum(split) != dim:
                raise ctx.error(f"'split' sizes {split} do not sum to the axis dim {dim}")
            sizes = split
    elif isinstance(dim, int):
        # An impossible equal split is left to run time (where it fails naming the node): ONNX
        # If-branches that are never taken (AffineGrid's 2-D branch on 3-D input) contain them.
        sizes = _split_sizes(dim, n) or [None] * n
    return [dt.TensorType(shape[:axis] + (s,) + shape[axis + 1:], ctx.dtype(0)) for s in sizes]


def _split_ref(x, split=None, axis=0, num_outputs=None):
    sizes = ([int(s) for s in np.asarray(split).reshape(-1)] if split is not None
             else _split_sizes(x.shape[axis], num_outputs))
    if sizes is None:
        raise ValueError(f"cannot split a dim of {x.shape[axis]} into {num_outputs} parts")
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"split sizes {sizes} do not fit axis {axis} of shape {list(x.shape)}")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _split_from_onnx(ic):
    inputs, attrs = list(ic.inputs), dict(ic.attrs)
    if "split" in attrs:  # opset < 13: sizes as an attribute
        inputs = [inputs[0], ic.const(np.asarray(attrs.pop("split"), dtype=np.int64))]
    if (len(inputs) < 2 or inputs[1] is None) and "num_outputs" not in attrs:
        attrs["num_outputs"] = ic.num_outputs  # before opset 18: equal parts, one per output
    return ic.emit("Split", inputs, attrs)


op("Split", inputs=("input:T", "split:I?"), outputs=("outputs:T*",), types={"T": ALL, "I": I64},
   attrs=(Attr("axis", "int", 0), Attr("num_outputs", "int", None)),
   infer=_split_infer, reference=_split_ref, from_onnx=_split_from_onnx,
   groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=1,
   doc="Splits a tensor along `axis` into parts of the given sizes, or into `num_outputs` "
       "near-equal parts (the last one smaller).")


# -- Slice ---------------------------------------------------------------------------------------

def slice_bounds(dim, start, end, step):
    """ONNX clamping of one axis' slice; returns (start, end, count). end == -1 means 'before 0'."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, end, max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, end, max(0, -(-(start - end) // -step))


def _slice_args(ctx, rank, starts, ends, axes, steps):
    if len(starts) != len(ends):
        raise ctx.error(f"starts has {len(starts)} entries but ends has {len(ends)}")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(axes) == len(steps) == len(starts):
        raise ctx.error("starts, ends, axes and steps must have the same length")
    if any(s == 0 for s in steps):
        raise ctx.error(f"steps must be non-zero, got {steps}")
    return norm_axes(ctx, axes, rank), steps


def _slice_infer(ctx):
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    starts, ends = ints(ctx.value(1)), ints(ctx.value(2))
    axes = ints(ctx.value(3)) if ctx.has(3) else None
    steps = ints(ctx.value(4)) if ctx.has(4) else None
    if (ctx.has(3) and axes is None) or (axes is None and value_len(ctx, 1) is None):
        return [dt.TensorType((None,) * len(shape), ctx.dtype(0))]  # which axes is unknown
    if axes is None:
        axes = list(range(value_len(ctx, 1)))
    out = list(shape)
    if starts is None or ends is None or (ctx.has(4) and steps is None):
        for a in norm_axes(ctx, axes, len(shape)):
            out[a] = None
        return [dt.TensorType(tuple(out), ctx.dtype(0))]
    axes, steps = _slice_args(ctx, len(shape), starts, ends, axes, steps)
    for a, s, e, st in zip(axes, starts, ends, steps):
        out[a] = slice_bounds(shape[a], s, e, st)[2] if isinstance(shape[a], int) else None
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _slice_ref(data, starts, ends, axes=None, steps=None):
    starts, ends = ints(starts), ints(ends)
    axes = None if axes is None else [a + data.ndim if a < 0 else a for a in ints(axes)]
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else ints(steps)
    index = [slice(None)] * data.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        s, e, _ = slice_bounds(data.shape[a], s, e, st)
        index[a] = slice(s, None if e < 0 else e, st)  # e == -1 (negative step): run to index 0
    return data[tuple(index)]


def _slice_from_onnx(ic):
    if ic.opset < 10:  # opset 1-9: starts/ends/axes were attributes
        if "starts" not in ic.attrs or "ends" not in ic.attrs:
            raise ic.error("needs 'starts' and 'ends' attributes")
        ins = [ic.inputs[0], attr_input(ic, "starts"), attr_input(ic, "ends"),
               attr_input(ic)]
        return ic.emit("Slice", ins)
    return ic.emit("Slice", ic.inputs, ic.attrs)


op("Slice", inputs=("data:T", "starts:Tind", "ends:Tind", "axes:Tind?", "steps:Tind?"),
   outputs=("output:T",), types={"T": ALL, "Tind": IND}, infer=_slice_infer, reference=_slice_ref,
   from_onnx=_slice_from_onnx, groups={MOVEMENT}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="Strided slice [starts, ends) along `axes`; out-of-range bounds are clamped and negative "
       "values count from the back.")


# -- Transpose / Squeeze / Unsqueeze / Flatten ---------------------------------------------------

def _perm(ctx, perm, rank):
    if perm is None:
        return list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {list(perm)} is not a permutation of {rank} axes")
    return list(perm)


def _transpose_infer(ctx):
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None if ctx.attrs["perm"] is None else (None,) * len(ctx.attrs["perm"]),
                              ctx.dtype(0))]
    perm = _perm(ctx, ctx.attrs["perm"], len(shape))
    return [dt.TensorType(tuple(shape[p] for p in perm), ctx.dtype(0))]


op("Transpose", inputs=("data:T",), outputs=("transposed:T",), types={"T": ALL},
   attrs=(Attr("perm", "ints", None),), infer=_transpose_infer,
   reference=lambda x, perm: np.transpose(x, perm),
   groups={MOVEMENT}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="Permutes the axes (output axis i is input axis perm[i]; default: reverse them).")


def _squeeze_infer(ctx):
    shape = ctx.shape(0)
    if not ctx.has(1):
        if shape is None or any(not isinstance(d, int) for d in shape):
            return [dt.TensorType(None, ctx.dtype(0))]  # which dims are 1 is not known
        return [dt.TensorType(tuple(d for d in shape if d != 1), ctx.dtype(0))]
    axes = ints(ctx.value(1))
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if axes is None:
        n = value_len(ctx, 1)
        return [dt.TensorType(None if n is None else (None,) * (len(shape) - n), ctx.dtype(0))]
    axes = norm_axes(ctx, axes, len(shape))
    for a in axes:
        if isinstance(shape[a], int) and shape[a] != 1:
            raise ctx.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [dt.TensorType(tuple(d for i, d in enumerate(shape) if i not in axes), ctx.dtype(0))]


def _squeeze_ref(data, axes=None):
    if axes is None:
        return np.squeeze(data)
    return np.squeeze(data, axis=tuple(a % data.ndim for a in ints(axes)))


def _axes_attr_adapter(name):
    def adapt(ic):
        if ic.opset < 13 and "axes" in ic.attrs:  # opset < 13: axes was an attribute
            return ic.emit(name, [ic.inputs[0], attr_input(ic)])
        return ic.emit(name, ic.inputs, ic.attrs)

    return adapt


op("Squeeze", inputs=("data:T", "axes:I?"), outputs=("squeezed:T",), types={"T": ALL, "I": I64},
   infer=_squeeze_infer, reference=_squeeze_ref, from_onnx=_axes_attr_adapter("Squeeze"),
   groups={MOVEMENT, VIEW}, tier=Tier.HIGH, onnx_since=1,
   doc="Removes size-1 axes (the listed ones, or all of them).")


def _unsqueeze_infer(ctx):
    shape = ctx.shape(0)
    axes = ints(ctx.value(1))
    n = value_len(ctx, 1)
    if shape is None or n is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    rank = len(shape) + n
    if axes is None:
        return [dt.TensorType((None,) * rank, ctx.dtype(0))]
    axes = norm_axes(ctx, axes, rank)
    rest = iter(shape)
    return [dt.TensorType(tuple(1 if i in axes else next(rest) for i in range(rank)), ctx.dtype(0))]


def _unsqueeze_ref(data, axes):
    rank = data.ndim + np.asarray(axes).size
    return np.expand_dims(data, tuple(a % rank for a in ints(axes)))


op("Unsqueeze", inputs=("data:T", "axes:I"), outputs=("expanded:T",), types={"T": ALL, "I": I64},
   infer=_unsqueeze_infer, reference=_unsqueeze_ref, from_onnx=_axes_attr_adapter("Unsqueeze"),
   groups={MOVEMENT, VIEW}, tier=Tier.HIGH, onnx_since=1,
   doc="Inserts size-1 axes at the given positions of the output.")


def _flatten_infer(ctx):
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType((None, None), ctx.dtype(0))]
    r, axis = len(shape), ctx.attrs["axis"]
    if not -r <= axis <= r:
        raise ctx.error(f"axis {axis} out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return [dt.TensorType((prod_dims(shape[:axis]), prod_dims(shape[axis:])), ctx.dtype(0))]


def _flatten_ref(x, axis):
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(prod_dims(x.shape[:axis]), prod_dims(x.shape[axis:]))


op("Flatten", inputs=("input:T",), outputs=("output:T",), types={"T": ALL},
   attrs=(Attr("axis", "int", 1),), infer=_flatten_infer, reference=_flatten_ref,
   groups={MOVEMENT, VIEW}, tier=Tier.HIGH, onnx_since=1,
   doc="Reshapes to 2-D: the axes before `axis` become rows, the rest columns.")


# -- Expand / Tile -------------------------------------------------------------------------------

def _expand_infer(ctx):
    target = ints(ctx.value(1))
    shape = ctx.shape(0)
    if target is None:
        n = value_len(ctx, 1)
        if shape is None or n is None:
            return [dt.TensorType(None, ctx.dtype(0))]
        return [dt.TensorType((None,) * max(n, len(shape)), ctx.dtype(0))]
    if any(d < 0 for d in target):
        raise ctx.error(f"shape {target} has a negative dim")
    return [dt.TensorType(broadcast_shapes(ctx, shape, tuple(target)), ctx.dtype(0))]


def _expand_ref(x, shape):
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(ints(shape)))).copy()


op("Expand", inputs=("input:T", "shape:I"), outputs=("output:T",), types={"T": ALL, "I": I64},
   infer=_expand_infer, reference=_expand_ref, known_value=fold_small(_expand_infer, _expand_ref),
   groups={MOVEMENT}, tier=Tier.PRIMITIVE, onnx_since=8,
   doc="Broadcasts the input against `shape` (NumPy rules in both directions).")


def _tile_infer(ctx):
    shape, reps = ctx.shape(0), ints(ctx.value(1))
    n = value_len(ctx, 1)
    if shape is not None and n is not None and n != len(shape):
        raise ctx.error(f"repeats has {n} entries but the input has rank {len(shape)}")
    if shape is None:
        return [dt.TensorType(None if n is None else (None,) * n, ctx.dtype(0))]
    if reps is None:
        return [dt.TensorType((None,) * len(shape), ctx.dtype(0))]
    if any(r < 0 for r in reps):
        raise ctx.error(f"repeats must be >= 0, got {reps}")
    return [dt.TensorType(tuple(d * r if isinstance(d, int) else (0 if r == 0 else None)
                                for d, r in zip(shape, reps)), ctx.dtype(0))]


def _tile_ref(x, repeats):
    return np.tile(x, ints(repeats)) if x.ndim else x.copy()


op("Tile", inputs=("input:T", "repeats:I"), outputs=("output:T",), types={"T": ALL, "I": I64},
   infer=_tile_infer, reference=_tile_ref, known_value=fold_small(_tile_infer, _tile_ref),
   groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=6,
   doc="Repeats the input `repeats[i]` times along each axis i.")


# -- Pad -----------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_widths(ctx, rank, pads, axes):
    """Per-axis (begin, end) pads; raises on a bad pads/axes combination."""
    axes = list(range(rank)) if axes is None else norm_axes(ctx, axes, rank)
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads has {len(pads)} entries, expected 2 x {len(axes)} axes")
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    return widths


def _pad_infer(ctx):
    mode = ctx.attrs["mode"]
    if mode not in PAD_MODES:
        raise ctx.error(f"unknown mode '{mode}' (expected one of {', '.join(PAD_MODES)})")
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    pads = ints(ctx.value(1))
    axes = ints(ctx.value(3)) if ctx.has(3) else None
    if pads is None or (ctx.has(3) and axes is None):
        return [dt.TensorType((None,) * len(shape), ctx.dtype(0))]
    out = []
    for d, (b, e) in zip(shape, _pad_widths(ctx, len(shape), pads, axes)):
        if isinstance(d, int):
            if d + b + e < 0 or -b > d or -e > d:
                raise ctx.error(f"pads ({b}, {e}) crop more than the dim {d}")
            out.append(d + b + e)
        else:
            out.append(d if b == e == 0 else None)
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _pad_ref(data, pads, constant_value=None, axes=None, mode="constant"):
    widths = _pad_widths(RefCtx, data.ndim, ints(pads), None if axes is None else ints(axes))
    # Negative pads crop; crop first, then pad (as onnxruntime does for reflect/wrap).
    crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(data.shape, widths))
    x = data[crop]
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        fill = (zero_of(data.dtype) if constant_value is None or np.asarray(constant_value).size == 0
                else np.asarray(constant_value).reshape(-1)[0])
        out = np.full(tuple(d + b + e for d, (b, e) in zip(x.shape, grow)), fill, dtype=data.dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, grow))] = x
        return out
    return np.pad(x, grow, mode=mode)


def _pad_from_onnx(ic):
    if ic.opset < 11:  # opset 2-10: pads and value were attributes
        pads = ic.attrs.get("pads", ic.attrs.get("paddings"))
        if pads is None:
            raise ic.error("needs a 'pads' attribute")
        x = ic.inputs[0]
        value = np.asarray(ic.attrs.get("value", 0.0)).astype(x.type.dtype.np)
        mode = ic.attrs.get("mode", b"constant")
        return ic.emit("Pad", [x, ic.const(np.asarray(pads, dtype=np.int64)), ic.const(value)],
                       {"mode": mode})
    return ic.emit("Pad", ic.inputs, ic.attrs)


op("Pad", inputs=("data:T", "pads:I", "constant_value:T?", "axes:Tind?"), outputs=("output:T",),
   types={"T": ALL, "I": I64, "Tind": IND}, attrs=(Attr("mode", "string", "constant"),),
   infer=_pad_infer, reference=_pad_ref, known_value=fold_small(_pad_infer, _pad_ref),
   from_onnx=_pad_from_onnx, groups={MOVEMENT}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="Pads (or, with negative pads, crops) each axis: constant fill, reflect, edge or wrap.")


# -- DepthToSpace / SpaceToDepth -----------------------------------------------------------------

def _block_check(ctx):
    bs, mode = ctx.attrs["blocksize"], ctx.attrs["mode"]
    if bs <= 0:
        raise ctx.error(f"blocksize must be positive, got {bs}")
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"mode must be DCR or CRD, got '{mode}'")
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 4:
        raise ctx.error(f"expects a 4-D input, got rank {len(shape)}")
    return bs, shape


def _d2s_infer(ctx):
    bs, shape = _block_check(ctx)
    if shape is None:
        return [dt.TensorType((None,) * 4, ctx.dtype(0))]
    n, c, h, w = shape
    return [dt.TensorType((n, div_dim(ctx, c, bs * bs, "channels"), mul_dim(h, bs), mul_dim(w, bs)),
                          ctx.dtype(0))]


def _d2s_ref(x, blocksize, mode):
    b, c, h, w = x.shape
    bs = blocksize
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


def _s2d_infer(ctx):
    bs, shape = _block_check(ctx)
    if shape is None:
        return [dt.TensorType((None,) * 4, ctx.dtype(0))]
    n, c, h, w = shape
    out = (n, mul_dim(c, bs * bs), div_dim(ctx, h, bs, "height"), div_dim(ctx, w, bs, "width"))
    return [dt.TensorType(out, ctx.dtype(0))]


def _s2d_ref(x, blocksize, mode):
    b, c, h, w = x.shape
    bs = blocksize
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


_BLOCK_ATTRS = (Attr("blocksize", "int"), Attr("mode", "string", "DCR"))
op("DepthToSpace", inputs=("input:T",), outputs=("output:T",), types={"T": STD}, attrs=_BLOCK_ATTRS,
   infer=_d2s_infer, reference=_d2s_ref, groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=1,
   doc="Moves channel blocks into blocksize x blocksize spatial tiles (DCR or CRD order).")
op("SpaceToDepth", inputs=("input:T",), outputs=("output:T",), types={"T": STD}, attrs=_BLOCK_ATTRS,
   infer=_s2d_infer, reference=_s2d_ref, groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=1,
   doc="Moves blocksize x blocksize spatial tiles into channels (DCR or CRD order); the inverse "
       "of DepthToSpace.")


# -- CenterCropPad -------------------------------------------------------------------------------

def _ccp_axes(ctx, rank, axes, n):
    axes = list(range(rank)) if axes is None else norm_axes(ctx, axes, rank)
    if n is not None and n != len(axes):
        raise ctx.error(f"shape has {n} entries for {len(axes)} axes")
    return axes


def _ccp_infer(ctx):
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    target = ints(ctx.value(1))
    axes = _ccp_axes(ctx, len(shape), ctx.attrs["axes"], value_len(ctx, 1))
    out = list(shape)
    for i, a in enumerate(axes):
        out[a] = None if target is None else target[i]
        if out[a] is not None and out[a] < 0:
            raise ctx.error(f"target shape {target} has a negative dim")
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _ccp_ref(x, shape, axes=None):
    target = ints(shape)
    axes = _ccp_axes(RefCtx, x.ndim, axes, len(target))
    out_shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, t in zip(axes, target):
        d = x.shape[a]
        out_shape[a] = t
        if d >= t:  # crop: window start rounds down
            src[a] = slice((d - t) // 2, (d - t) // 2 + t)
        else:  # pad: the odd pixel goes to the end
            dst[a] = slice((t - d) // 2, (t - d) // 2 + d)
    out = np.full(out_shape, zero_of(x.dtype), dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


op("CenterCropPad", inputs=("input_data:T", "shape:Tind"), outputs=("output_data:T",),
   types={"T": STD, "Tind": IND}, attrs=(Attr("axes", "ints", None),),
   infer=_ccp_infer, reference=_ccp_ref, known_value=fold_small(_ccp_infer, _ccp_ref),
   groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=18,
   doc="Center-crops or zero-pads the given axes to the target shape.")


# -- Col2Im --------------------------------------------------------------------------------------

def _col2im_params(ctx, nsp, attrs):
    strides = attrs["strides"] or (1,) * nsp
    dils = attrs["dilations"] or (1,) * nsp
    pads = attrs["pads"] or (0,) * (2 * nsp)
    if len(strides) != nsp or len(dils) != nsp or len(pads) != 2 * nsp:
        raise ctx.error(f"strides/dilations need {nsp} entries and pads {2 * nsp}")
    if min(strides) <= 0 or min(dils) <= 0 or min(pads) < 0:
        raise ctx.error("strides and dilations must be positive and pads >= 0")
    return strides, dils, pads


def _col2im_blocks(ctx, image, block, strides, dils, pads):
    """Sliding-block count per spatial axis."""
    nsp = len(image)
    out = []
    for i in range(nsp):
        span = dils[i] * (block[i] - 1) + 1
        n = (image[i] + pads[i] + pads[i + nsp] - span) // strides[i] + 1
        if n <= 0 or block[i] <= 0:
            raise ctx.error(f"block {list(block)} does not fit image {list(image)} on axis {i}")
        out.append(n)
    return out


def _col2im_infer(ctx):
    image, block = ints(ctx.value(1)), ints(ctx.value(2))
    nsp = value_len(ctx, 1)
    nb = value_len(ctx, 2)
    if nsp is not None and nb is not None and nsp != nb:
        raise ctx.error(f"image_shape has {nsp} entries but block_shape has {nb}")
    nsp = nsp if nsp is not None else nb
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 3:
        raise ctx.error(f"expects a 3-D input (N, C*prod(block), L), got rank {len(shape)}")
    n, cb, length = shape if shape is not None else (None, None, None)
    c = None
    if block is not None:
        k = prod_dims(block)
        c = div_dim(ctx, cb, k, "input dim 1") if k else None
        if image is not None:
            strides, dils, pads = _col2im_params(ctx, len(image), ctx.attrs)
            want = prod_dims(_col2im_blocks(ctx, image, block, strides, dils, pads))
            if isinstance(length, int) and length != want:
                raise ctx.error(f"input has {length} blocks, the image and block shapes give {want}")
    spatial = tuple(image) if image is not None else (None,) * nsp if nsp is not None else None
    if spatial is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    return [dt.TensorType((n, c) + spatial, ctx.dtype(0))]


def _col2im_ref(x, image_shape, block_shape, strides=None, pads=None, dilations=None):
    image, block = ints(image_shape), ints(block_shape)
    strides, dils, pads = _col2im_params(RefCtx, len(image), {"strides": strides, "pads": pads,
                                                            "dilations": dilations})
    nblocks = _col2im_blocks(RefCtx, image, block, strides, dils, pads)
    if x.shape[1] % prod_dims(block) or x.shape[2] != prod_dims(nblocks):
        raise ValueError(f"input shape {list(x.shape)} does not match block {block} and "
                         f"{prod_dims(nblocks)} sliding positions over image {image}")
    n, c = x.shape[0], x.shape[1] // prod_dims(block)
    cols = x.reshape((n, c, *block, *nblocks))
    nsp = len(image)
    padded = np.zeros((n, c, *(image[i] + pads[i] + pads[i + nsp] for i in range(nsp))), x.dtype)
    for k in np.ndindex(*block):  # each kernel offset adds one strided sub-grid of the image
        where = tuple(slice(k[i] * dils[i], k[i] * dils[i] + strides[i] * (nblocks[i] - 1) + 1,
                            strides[i]) for i in range(nsp))
        padded[(slice(None), slice(None), *where)] += cols[(slice(None), slice(None), *k)]
    return padded[(slice(None), slice(None),
                   *(slice(pads[i], pads[i] + image[i]) for i in range(nsp)))].copy()


op("Col2Im", inputs=("input:T", "image_shape:I", "block_shape:I"), outputs=("output:T",),
   types={"T": dt.NUMERIC | {dt.complex64, dt.complex128}, "I": I64},
   attrs=(Attr("strides", "ints", None), Attr("pads", "ints", None), Attr("dilations", "ints", None)),
   infer=_col2im_infer, reference=_col2im_ref, groups={MOVEMENT, NN}, tier=Tier.HIGH,
   onnx_since=18,
   doc="Sums column blocks (N, C*prod(block), L) back into an N-D image; the inverse of im2col.")
