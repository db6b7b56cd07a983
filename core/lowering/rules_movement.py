"""Lowering rules for movement ops outside the floor: re-views (Flatten, Squeeze, Unsqueeze) become
Reshape; Split, CenterCropPad and the non-constant Pad modes become Slice/Concat/Pad; Tile becomes
Reshape/Expand; DepthToSpace/SpaceToDepth become Reshape/Transpose; Col2Im becomes strided
placement with Pad and a sum of Adds.

Every rule needs the dims it moves to be static and its shape-like inputs to be known; it returns
None otherwise. The small builders at the top are shared with rules_index and rules_generator.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import ints, static_shape
from .registry import lowering

# -- small builders shared by the movement, index and generator rules ------------------------------


def known_ints(v) -> list[int] | None:
    """The value of a shape-like input as Python ints, when it is known at compile time."""
    if v is None or v.known is None:
        return None
    return [int(a) for a in np.asarray(v.known).reshape(-1)]


def reshape_to(rb, x, shape):
    """Reshape `x` to `shape` (ints; one unknown dim may be left as None, it becomes -1).
    Returns None when the target cannot be written as a constant shape."""
    shape = list(shape)
    unknown = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    if len(unknown) > 1 or (unknown and 0 in shape):
        return None  # Reshape's -1 cannot be combined with allowzero, nor infer two dims
    if unknown:
        shape[unknown[0]] = -1
    # allowzero: a 0 in the target is a real empty dim, not "copy the input's dim"
    return rb.emit1("Reshape", [x, ints(rb, shape)], {"allowzero": 1} if 0 in shape else None)


def slice_axis(rb, x, axis, start, end, step=1):
    return rb.emit1("Slice", [x, ints(rb, [start]), ints(rb, [end]), ints(rb, [axis]), ints(rb, [step])])


def pad_axis(rb, x, axis, begin, end, value=None):
    """Constant-mode Pad of one axis (negative amounts crop), with full constant pads."""
    rank = len(x.type.shape)
    pads = [0] * (2 * rank)
    pads[axis], pads[axis + rank] = begin, end
    return rb.emit1("Pad", [x, ints(rb, pads), value], {"mode": "constant"})


def concat(rb, parts, axis):
    return parts[0] if len(parts) == 1 else rb.emit1("Concat", parts, {"axis": axis})


def norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def take_along(rb, x, axis, idx):
    """x indexed along `axis` by the constant positions `idx`, as few Slices as possible: runs of
    consecutive positions (step +1 or -1) are one Slice each, a repeated position is one Slice
    broadcast with Expand. Pad's reflect/edge/wrap modes are exactly such index patterns."""
    d = x.type.shape[axis]
    idx = [int(i) for i in idx]
    if idx == list(range(d)):
        return x
    parts, i = [], 0
    while i < len(idx):
        step = idx[i + 1] - idx[i] if i + 1 < len(idx) and abs(idx[i + 1] - idx[i]) <= 1 else 1
        j = i + 1
        while j < len(idx) and idx[j] - idx[j - 1] == step:
            j += 1
        a, n = idx[i], j - i
        if step == 0:  # one element repeated n times
            one = slice_axis(rb, x, axis, a, a + 1)
            reps = [1] * len(x.type.shape)
            reps[axis] = n
            parts.append(rb.emit1("Expand", [one, ints(rb, reps)]))
        elif step == 1:
            parts.append(slice_axis(rb, x, axis, a, a + n))
        else:  # end -d-1 clamps to "before index 0", so the run may reach position 0
            end = a - n if a - n >= 0 else -d - 1
            parts.append(slice_axis(rb, x, axis, a, end, -1))
        i = j
    return concat(rb, parts, axis)


def out_shape(node, i=0):
    return static_shape(node.outputs[i])


# -- re-views -------------------------------------------------------------------------------------


def _reshape_like_output(rb, node, ins):
    """The output is the input's elements in the same order: one Reshape to the output type."""
    shape = node.outputs[0].type.shape
    if shape is None:
        return None
    y = reshape_to(rb, ins[0], shape)
    return None if y is None else [y]


lower_flatten = lowering("Flatten")(_reshape_like_output)
lower_unsqueeze = lowering("Unsqueeze")(_reshape_like_output)


@lowering("Squeeze")
def lower_squeeze(rb, node, ins):
    x, axes = (list(ins) + [None])[:2]
    shape, n = x.type.shape, None if axes is None else axes.type.shape
    if out_shape(node) is None and static_shape(x) is not None and n is not None and len(n) == 1:
        # Axes known only at run time, but only size-1 dims can be squeezed: if there are exactly
        # as many of them as axes, the axes are those dims whatever their values.
        if sum(d == 1 for d in shape) == n[0]:
            return [reshape_to(rb, x, [d for d in shape if d != 1])]
    return _reshape_like_output(rb, node, ins)


@lowering("Split")
def lower_split(rb, node, ins):
    x = ins[0]
    rank = x.type.rank
    if rank is None:
        return None
    axis = norm_axis(node.attrs["axis"], rank)
    sizes = [o.type.shape[axis] if o.type.shape is not None else None for o in node.outputs]
    if not all(isinstance(s, int) for s in sizes):
        return None
    starts = np.cumsum([0] + sizes)
    return [slice_axis(rb, x, axis, int(s), int(s) + n) for s, n in zip(starts, sizes)]


@lowering("Tile")
def lower_tile(rb, node, ins):
    # Interleave a size-1 axis before every repeated axis, broadcast it to the repeat count, and
    # merge each (repeat, dim) pair: [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] -> [r0*d0, r1*d1].
    x, reps = ins
    shape, reps, out = static_shape(x), known_ints(reps), out_shape(node)
    if reps is None and shape is not None and out is not None:  # repeats given at run time
        reps = [o // d if d else 1 for d, o in zip(shape, out)]
    if shape is None or reps is None:
        return None
    if all(r == 1 for r in reps):
        return [rb.emit1("Identity", [x])]
    split, grown = [], []
    for d, r in zip(shape, reps):
        split += [1, d] if r != 1 else [d]
        grown += [r, d] if r != 1 else [d]
    wide = rb.emit1("Expand", [reshape_to(rb, x, split), ints(rb, grown)])
    return [reshape_to(rb, wide, [d * r for d, r in zip(shape, reps)])]


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------------


@lowering("DepthToSpace")
def lower_depth_to_space(rb, node, ins):
    (x,) = ins
    shape = x.type.shape
    bs, mode = node.attrs["blocksize"], node.attrs["mode"]
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        return None
    n, c, h, w = shape
    c //= bs * bs
    if mode == "DCR":
        t = reshape_to(rb, x, [n, bs, bs, c, h, w])
        perm = [0, 3, 4, 1, 5, 2]
    else:
        t = reshape_to(rb, x, [n, c, bs, bs, h, w])
        perm = [0, 1, 4, 2, 5, 3]
    t = rb.emit1("Transpose", [t], {"perm": perm})
    return [reshape_to(rb, t, [n, c, h * bs, w * bs])]


@lowering("SpaceToDepth")
def lower_space_to_depth(rb, node, ins):
    (x,) = ins
    shape = x.type.shape
    bs, mode = node.attrs["blocksize"], node.attrs["mode"]
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        return None
    n, c, h, w = shape
    t = reshape_to(rb, x, [n, c, h // bs, bs, w // bs, bs])
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    t = rb.emit1("Transpose", [t], {"perm": perm})
    return [reshape_to(rb, t, [n, c * bs * bs, h // bs, w // bs])]


# -- crop and pad ---------------------------------------------------------------------------------


@lowering("CenterCropPad")
def lower_center_crop_pad(rb, node, ins):
    # Per axis: crop a centred window (start rounds down) or zero-pad (the odd element goes to the
    # end). All crops are one Slice, all pads one constant Pad.
    x, target = ins
    shape, target, out = x.type.shape, known_ints(target), out_shape(node)
    if shape is None or (target is None and out is None):
        return None
    rank = len(shape)
    axes = [norm_axis(a, rank) for a in (node.attrs["axes"] or range(rank))]
    if out is not None:  # the output type holds the target sizes even when `shape` is a run-time input
        target = [out[a] for a in axes]
    crop_axes, starts, ends, pads = [], [], [], [0] * (2 * rank)
    for a, t in zip(axes, target):
        d = shape[a]
        if not isinstance(d, int):
            return None
        if d > t:
            crop_axes.append(a)
            starts.append((d - t) // 2)
            ends.append((d - t) // 2 + t)
        elif d < t:
            pads[a], pads[a + rank] = (t - d) // 2, t - d - (t - d) // 2
    y = x
    if crop_axes:
        y = rb.emit1("Slice", [y, ints(rb, starts), ints(rb, ends), ints(rb, crop_axes)])
    if any(pads):
        y = rb.emit1("Pad", [y, ints(rb, pads)], {"mode": "constant"})
    return [y if y is not x else rb.emit1("Identity", [x])]


def pad_in_floor_form(node) -> bool:
    """The floor's Pad: constant mode with one pad amount per axis (no `axes` input). The pads are
    an int64 tensor, usually a constant; rules that shift by run-time amounts pass computed ones."""
    ins = list(node.inputs) + [None] * 4
    return node.attrs["mode"] == "constant" and ins[3] is None


def _pad_widths(pads, axes, rank):
    axes = list(range(rank)) if axes is None else [norm_axis(a, rank) for a in axes]
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    return widths


def _full_pads(rb, pads, axes, rank):
    """Pads for every axis from pads for the listed `axes`: constants when both are known, else
    computed by matching each listed axis against every axis (an (n, rank) comparison)."""
    pads_v, axes_v = known_ints(pads), known_ints(axes)
    if pads_v is not None and axes_v is not None:
        widths = _pad_widths(pads_v, axes_v, rank)
        return ints(rb, [b for b, _ in widths] + [e for _, e in widths])
    n = axes.type.shape[0] if axes.type.shape else None
    if not isinstance(n, int):
        return None
    a = axes if axes.type.dtype == dt.int64 else rb.emit1("Cast", [axes], {"to": dt.int64})
    a = reshape_to(rb, a, [1, n, 1])
    a = rb.emit1("Where", [rb.emit1("Less", [a, ints(rb, [0])]), rb.emit1("Add", [a, ints(rb, [rank])]), a])
    hot = rb.emit1("Equal", [a, rb.constant(np.arange(rank, dtype=np.int64).reshape(1, 1, rank), name="i")])
    picked = rb.emit1("Where", [hot, reshape_to(rb, pads, [2, n, 1]), ints(rb, [0])])  # (2, n, rank)
    full = rb.emit1("ReduceSum", [picked, ints(rb, [1])], {"keepdims": 0})
    return reshape_to(rb, full, [2 * rank])


@lowering("Pad")
def lower_pad(rb, node, ins):
    # Constant mode with an `axes` input becomes the floor form (pads for every axis). The other
    # modes crop negative pads first and then read the kept window along each axis at the
    # positions np.pad(arange(d), mode) gives, so every pad width behaves like the reference.
    x, pads, value, axes = (list(ins) + [None] * 4)[:4]
    rank = x.type.rank
    mode = node.attrs["mode"]
    if rank is None or (mode == "constant" and pad_in_floor_form(node)):
        return None
    if mode == "constant":
        full = _full_pads(rb, pads, axes, rank)
        return None if full is None else [rb.emit1("Pad", [x, full, value], {"mode": "constant"})]
    pads, axes_v = known_ints(pads), known_ints(axes)
    if pads is None or (axes is not None and axes_v is None):
        return None  # which elements are repeated depends on run-time values
    y = x
    for a, (b, e) in enumerate(_pad_widths(pads, axes_v, rank)):
        d = x.type.shape[a]
        if b == e == 0:
            continue
        if not isinstance(d, int):
            return None
        lo, hi = max(-b, 0), d - max(-e, 0)
        if hi <= lo and max(b, 0) + max(e, 0) > 0:
            return None  # nothing to reflect or repeat: the reference raises
        idx = lo + np.pad(np.arange(hi - lo), (max(b, 0), max(e, 0)), mode=mode)
        y = take_along(rb, y, a, idx)
    return [y if y is not x else rb.emit1("Identity", [x])]


# -- Col2Im ---------------------------------------------------------------------------------------


def _place_strided(rb, x, axis, stride, offset, size):
    """Spread `x` along `axis` to positions offset + i * stride of a zero tensor of length `size`:
    a trailing size-1 axis padded to `stride` and merged spreads the entries, a Pad shifts them."""
    shape = list(x.type.shape)
    n = shape[axis]
    if stride > 1:
        x = reshape_to(rb, x, shape[:axis + 1] + [1] + shape[axis + 1:])
        x = pad_axis(rb, x, axis + 1, 0, stride - 1)
        x = reshape_to(rb, x, shape[:axis] + [n * stride] + shape[axis + 1:])
    return pad_axis(rb, x, axis, offset, size - offset - n * stride)


@lowering("Col2Im")
def lower_col2im(rb, node, ins):
    # One spatial axis at a time (the sum over kernel offsets is separable): for kernel offset j
    # of axis i, the column entries land at j * dilation + block * stride of the padded image.
    x, image, block = ins
    image, block, shape = known_ints(image), known_ints(block), static_shape(x)
    if image is None or block is None or shape is None or x.type.dtype not in dt.NUMERIC:
        return None
    nsp = len(image)
    strides = node.attrs["strides"] or (1,) * nsp
    dils = node.attrs["dilations"] or (1,) * nsp
    pads = node.attrs["pads"] or (0,) * (2 * nsp)
    size = [image[i] + pads[i] + pads[i + nsp] for i in range(nsp)]
    nblocks = [(size[i] - dils[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nsp)]
    n, c = shape[0], shape[1] // int(np.prod(block))
    # (N, C, k0, n0, k1, n1, ...): each kernel axis next to its block-count axis
    t = reshape_to(rb, x, [n, c, *block, *nblocks])
    t = rb.emit1("Transpose", [t], {"perm": [0, 1] + [p for i in range(nsp) for p in (2 + i, 2 + nsp + i)]})
    for i in range(nsp):
        kaxis = 2 + i  # axes before it are already image axes
        total = None
        for j in range(block[i]):
            part = slice_axis(rb, t, kaxis, j, j + 1)
            pshape = list(part.type.shape)
            part = reshape_to(rb, part, pshape[:kaxis] + pshape[kaxis + 1:])
            part = _place_strided(rb, part, kaxis, strides[i], j * dils[i], size[i])
            total = part if total is None else rb.emit1("Add", [total, part])
        t = total
    crop = [(pads[i], pads[i] + image[i]) for i in range(nsp)]
    y = rb.emit1("Slice", [t, ints(rb, [s for s, _ in crop]), ints(rb, [e for _, e in crop]),
                           ints(rb, range(2, 2 + nsp))])
    return [y]
