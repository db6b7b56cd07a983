"""Lowering rules for resampling: Resize, Upsample, GridSample, AffineGrid.

Resize is separable: each resized axis is resampled on its own. When scales/sizes (and roi) are
known, the taps (input indices) and weights of every output position are computed here with the
op's own helpers (ops/resize.py) and become constants: nearest is one Gather per axis; linear and
cubic (antialiased or not) are one Gather of all T taps (an (out, T) index table), a Mul by the
(out, T) weights and a ReduceSum over the taps (or, where that table of samples would be too big,
one Gather per tap, accumulated). Results are computed in float32 (float64 for float64 and integer
data, as the reference, which then rounds integers half to even and saturates them). An axis with
a known scale of exactly 1 is left alone, so a dynamic batch dim is fine.

scales/sizes/roi given only at run time still lower when the output shape is declared (an ONNX
model's value_info): the coordinates and weights are then computed by graph ops that mirror the
reference's arithmetic step by step (float64; roi in its own type), so that every rounding
decision agrees; antialiasing takes the taps of the smallest scale the output size allows (the
extra taps weigh 0).

GridSample reads data-dependent positions: the sampling coordinates are computed from the grid
with elementwise ops (in float64, as the reference, so that floor/round decisions agree), and
each interpolation corner is one Gather from the input viewed as (N * spatial, C), weighted and
summed. AffineGrid is a MatMul of a constant base grid with the transposed thetas (the grid size
comes from the size input, or from the declared output shape when size is a run-time input).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as dt
from ..graph import Value
from ..ops.resize import UPSAMPLE_ATTRS, resize_geometry, resize_taps, source_coords
from ._build import ints, scalar
from .driver import MEMORY_BLOWUP_LIMIT
from .registry import lowering
from .rules_conv import HALF, chain, narrow, nbytes, op1, pad, reshape, static, strided, widen

F64 = dt.float64


def _known(v):
    """A constant input's value; an absent or empty one (opset 11-12 placeholder) counts as None."""
    if v is None or v.known is None or v.known.size == 0:
        return None
    return v.known


def _compute_type(dtype):
    if dtype in HALF or dtype == dt.float32:
        return dt.float32
    return F64


# -- Resize ----------------------------------------------------------------------------------------

@lowering("Resize")
def lower_resize(rb, node, ins):
    x, roi, scales, sizes = (list(ins) + [None] * 3)[:4]
    a = node.attrs
    shape = x.type.shape
    if shape is None:
        return None
    r = len(shape)
    ctm = a["coordinate_transformation_mode"]
    plan = _resize_plan(rb, node, x, scales, sizes)
    if plan is None:
        return None
    axes, out, scale = plan
    if not axes:  # every scale is 1
        return [op1(rb, "Identity", x)]
    rois = [(0.0, 1.0)] * r  # per axis (start, end): floats, or values of the roi input
    if ctm == "tf_crop_and_resize":
        rv = _known(roi)
        for i, ax in enumerate(axes):
            if rv is not None:  # numpy scalars: roi arithmetic stays in roi's own precision
                rois[ax] = (rv.reshape(-1)[i], rv.reshape(-1)[len(axes) + i])
            else:
                rois[ax] = tuple(reshape(rb, strided(rb, roi, [0], [j], [1], [1]), []) for j in (i, len(axes) + i))
    nearest = a["mode"] == "nearest"
    dtype = x.type.dtype
    data = x if nearest else narrow(rb, x, _compute_type(dtype))
    outside = []  # per resized axis of tf_crop_and_resize: where it samples outside the input
    out_bytes = math.prod(d if isinstance(d, int) else 1 for d in out) * dtype.itemsize
    limit = MEMORY_BLOWUP_LIMIT * max(nbytes(x), out_bytes)  # the driver's bound for this node
    for ax in axes:
        n_in, n_out = shape[ax], out[ax]
        known = not isinstance(scale[ax], Value) and not isinstance(rois[ax][0], Value)
        if known and n_out == n_in and math.isclose(scale[ax], 1.0) and rois[ax] == (0.0, 1.0):
            continue
        if n_in == 0 or n_out == 0:
            data = _empty_axis(rb, data, ax, n_out)
            continue
        if known:  # taps and weights are constants
            xs = source_coords(ctm, n_in, n_out, scale[ax], rois[ax])
            idx, w = resize_taps(xs, n_in, scale[ax], a)
            if ctm == "tf_crop_and_resize":
                outside.append(rb.constant((xs < 0) | (xs > n_in - 1), name="outside"))
        else:  # computed at run time from the scale / roi values
            xs = _source_coords_value(rb, ctm, n_in, n_out, scale[ax], rois[ax])
            idx, w = _taps_value(rb, xs, n_in, scale[ax], a)
            if ctm == "tf_crop_and_resize":
                outside.append(_beyond(rb, xs, 0, n_in - 1))
        if ctm == "tf_crop_and_resize":
            outside[-1] = reshape(rb, outside[-1], [n_out if i == ax else 1 for i in range(r)])
        if w is None:
            data = _nearest_axis(rb, data, ax, idx[:, 0] if isinstance(idx, np.ndarray) else idx)
        else:
            data = _weighted_axis(rb, data, ax, idx, w, limit)
    if outside:
        fill = scalar(rb, np.asarray(a["extrapolation_value"]).astype(data.type.dtype.np), data)
        data = op1(rb, "Where", chain(rb, "Or", outside), fill, data)
    return [data if nearest else _cast_back(rb, data, dtype)]


def _resize_plan(rb, node, x, scales, sizes):
    """(resized axes, output dims, per-axis scale: a float, or a 0-d float64 value computed at
    run time), or None. scales/sizes known when lowering give everything (as the reference's
    resize_geometry); given only at run time, the output shape must be declared (the node's type)."""
    a = node.attrs
    shape = x.type.shape
    r = len(shape)
    axes = list(range(r)) if not a["axes"] else [ax % r for ax in a["axes"]]
    scales_v, sizes_v = _known(scales), _known(sizes)
    ctm, policy = a["coordinate_transformation_mode"], a["keep_aspect_ratio_policy"]
    if scales_v is not None or sizes_v is not None:
        if scales_v is not None and ctm != "tf_crop_and_resize":
            # A scale of exactly 1 leaves its axis alone, whatever its (e.g. dynamic batch) size.
            keep = [i for i, ax in enumerate(axes) if scales_v.reshape(-1)[i] != 1 or isinstance(shape[ax], int)]
            if not keep:
                return [], None, None
            axes, scales_v = [axes[i] for i in keep], scales_v.reshape(-1)[keep]
        if not static([shape[ax] for ax in axes]):
            return None
        out, scale, axes = resize_geometry(ValueError, shape, scales_v, sizes_v, axes, policy)
        return axes, out, scale
    out = node.outputs[0].type.shape
    if out is None or not static([out[ax] for ax in axes] + [shape[ax] for ax in axes]):
        return None
    scale = [1.0] * r
    if sizes is not None and policy == "stretch":  # scale = size / input, and size = output
        for ax in axes:
            scale[ax] = out[ax] / shape[ax] if shape[ax] else 1.0  # (an empty axis stays empty)
    elif sizes is not None:  # one scale for all axes: the smallest or largest size / input ratio
        ratios = op1(rb, "Div", op1(rb, "Cast", sizes, to=F64),
                     rb.constant(np.asarray([shape[ax] for ax in axes], np.float64), name="in_dims"))
        s = op1(rb, "ReduceMin" if policy == "not_larger" else "ReduceMax", ratios, keepdims=0)
        for ax in axes:
            scale[ax] = s
    else:
        sv = op1(rb, "Cast", scales, to=F64)
        for i, ax in enumerate(axes):
            scale[ax] = reshape(rb, strided(rb, sv, [0], [i], [1], [1]), [])
    return axes, list(out), scale


def _nearest_axis(rb, data, ax, idx):
    if isinstance(idx, np.ndarray):
        if len(idx) == data.type.shape[ax] and (idx == np.arange(len(idx))).all():
            return data
        idx = rb.constant(idx.astype(np.int64), name="taps")
    return op1(rb, "Gather", data, idx, axis=ax)


def _weighted_axis(rb, data, ax, idx, w, limit):
    """Sum over T taps of data gathered at idx (out, T) times w (out, T), along axis ax; idx and w
    are constants (arrays) or run-time values."""
    r = len(data.type.shape)
    if isinstance(w, np.ndarray):
        used = np.abs(w).sum(0) != 0  # taps with weight 0 everywhere (filter edges) are dropped
        idx, w = idx[:, used], w[:, used]
        idx = rb.constant(idx.astype(np.int64), name="taps")
        w = rb.constant(w.astype(data.type.dtype.np), name="weights")
    else:
        w = narrow(rb, w, data.type.dtype)
    n_out, taps = w.type.shape
    trail = [1] * (r - ax - 1)
    if nbytes(data) // data.type.shape[ax] * n_out * taps <= limit // 2:
        # All taps in one Gather: (.., out, T, ..), weighted and summed over T.
        g = op1(rb, "Gather", data, idx, axis=ax)
        weighted = op1(rb, "Mul", g, reshape(rb, w, [n_out, taps, *trail]))
        return op1(rb, "ReduceSum", weighted, ints(rb, [ax + 1]), keepdims=0)

    # Too big at once (e.g. 8-bit data computed in float64): one Gather per tap, accumulated.
    def col(v, t):
        return reshape(rb, strided(rb, v, [1], [t], [1], [1]), [n_out])

    terms = [op1(rb, "Mul", op1(rb, "Gather", data, col(idx, t), axis=ax), reshape(rb, col(w, t), [n_out, *trail]))
             for t in range(taps)]
    return chain(rb, "Add", terms)


def _empty_axis(rb, data, ax, n_out):
    # Nothing to sample from or nothing to produce: an empty slice, padded with n_out zeros.
    empty = strided(rb, data, [ax], [0], [0], [1])
    end = [0] * len(data.type.shape)
    end[ax] = n_out
    return pad(rb, empty, [0] * len(end), end)


def _cast_back(rb, y, dtype):
    if not dtype.is_int:
        return narrow(rb, y, dtype)
    # Integers: round half to even and saturate, as the reference.
    info = np.iinfo(dtype.np)
    y = op1(rb, "Round", y)
    y = op1(rb, "Min", op1(rb, "Max", y, scalar(rb, info.min, y)), scalar(rb, info.max, y))
    return op1(rb, "Cast", y, to=dtype)


# Run-time coordinates: the reference's source_coords and resize_taps as graph ops, operation for
# operation in the same precisions (float64; roi arithmetic in roi's type), so that every floor,
# ceil and rounding decision agrees.

def _source_coords_value(rb, ctm, n_in, n_out, scale, roi):
    """Source coordinates (float64, (n_out,)) of a resized axis; scale a float or 0-d value."""
    y = rb.constant(np.arange(n_out, dtype=np.float64), name="positions")
    s = scale if isinstance(scale, Value) else _f(rb, scale, y)
    width = op1(rb, "Mul", s, _f(rb, n_in, y))  # the fractional output length the scale asks for
    zeros = _f(rb, np.zeros(n_out), y)
    shifted = op1(rb, "Div", op1(rb, "Add", y, _f(rb, 0.5, y)), s)  # (y + 0.5) / scale
    if ctm == "half_pixel":
        return op1(rb, "Sub", shifted, _f(rb, 0.5, y))
    if ctm == "half_pixel_symmetric":
        offset = op1(rb, "Sub", _f(rb, 1, y), op1(rb, "Div", _f(rb, n_out, y), width))
        offset = op1(rb, "Mul", _f(rb, n_in / 2, y), offset)
        return op1(rb, "Sub", op1(rb, "Add", offset, shifted), _f(rb, 0.5, y))
    if ctm == "pytorch_half_pixel":
        return op1(rb, "Where", op1(rb, "Greater", width, _f(rb, 1, y)), op1(rb, "Sub", shifted, _f(rb, 0.5, y)), zeros)
    if ctm == "align_corners":
        ratio = op1(rb, "Div", op1(rb, "Mul", y, _f(rb, n_in - 1, y)), op1(rb, "Sub", width, _f(rb, 1, y)))
        return op1(rb, "Where", op1(rb, "Equal", width, _f(rb, 1, y)), zeros, ratio)
    if ctm == "asymmetric":
        return op1(rb, "Div", y, s)
    if ctm == "tf_half_pixel_for_nn":
        return shifted
    start, end = (v if isinstance(v, Value) else rb.constant(v, name="roi") for v in roi)
    span = op1(rb, "Sub", end, start)
    shift = op1(rb, "Mul", start, _f(rb, n_in - 1, start))
    full = op1(rb, "Div", op1(rb, "Mul", op1(rb, "Mul", y, op1(rb, "Cast", span, to=F64)), _f(rb, n_in - 1, y)),
               op1(rb, "Sub", width, _f(rb, 1, y)))
    full = op1(rb, "Add", full, op1(rb, "Cast", shift, to=F64))
    middle = op1(rb, "Add", op1(rb, "Div", op1(rb, "Mul", span, _f(rb, n_in - 1, span)), _f(rb, 2, span)), shift)
    middle = op1(rb, "Add", zeros, op1(rb, "Cast", middle, to=F64))
    return op1(rb, "Where", op1(rb, "Equal", width, _f(rb, 1, y)), middle, full)


def _taps_value(rb, xs, n_in, scale, a):
    """(int64 indices, float64 weights or None for nearest) from run-time coordinates xs."""
    mode = a["mode"]
    if mode == "nearest":
        # Coordinates within 1e-9 of an integer count as that integer (as the reference).
        rx = op1(rb, "Round", xs)
        diff = op1(rb, "Sub", xs, rx)
        near = op1(rb, "Less", op1(rb, "Max", diff, op1(rb, "Sub", _f(rb, 0, xs), diff)), _f(rb, 1e-9, xs))
        xs = op1(rb, "Where", near, rx, xs)
        nm = a["nearest_mode"]
        if nm == "round_prefer_floor":
            v = op1(rb, "Ceil", op1(rb, "Sub", xs, _f(rb, 0.5, xs)))
        elif nm == "round_prefer_ceil":
            v = op1(rb, "Floor", op1(rb, "Add", xs, _f(rb, 0.5, xs)))
        else:
            v = op1(rb, "Floor" if nm == "floor" else "Ceil", xs)
        return _clip_index(rb, v, n_in), None
    n_out, support = xs.type.shape[0], 1 if mode == "linear" else 2
    base = op1(rb, "Sub", op1(rb, "Ceil", xs), _f(rb, 1, xs))  # the fraction r lies in (0, 1]
    r = reshape(rb, op1(rb, "Sub", xs, base), [n_out, 1])
    s, start = None, 1 - support
    if a["antialias"]:
        # The filter widens by 1 / s, s = min(scale, 1). For a run-time scale, take the taps of
        # its smallest value the output size allows: the extra taps fall outside the filter and
        # weigh 0, as every tap past the support does.
        if isinstance(scale, Value):
            s = op1(rb, "Min", scale, _f(rb, 1, scale))
            s_lo = min(max((n_out - 0.5) / n_in, 1e-6), 1.0)
        else:
            s = s_lo = min(scale, 1.0)
        start = int(math.floor(-support / s_lo)) + 1
    offs = rb.constant(np.arange(start, 2 - start, dtype=np.float64), name="offsets")
    t = op1(rb, "Sub", offs, r)
    if s is not None:
        t = op1(rb, "Mul", t, s if isinstance(s, Value) else _f(rb, s, t))
    at = op1(rb, "Max", t, op1(rb, "Sub", _f(rb, 0, t), t))
    if mode == "linear":
        w = op1(rb, "Max", op1(rb, "Min", op1(rb, "Sub", _f(rb, 1, t), at), _f(rb, 1, t)), _f(rb, 0, t))
    else:
        w = _keys(rb, at, a["cubic_coeff_a"])
    if s is not None:
        w = op1(rb, "Div", w, op1(rb, "ReduceSum", w, ints(rb, [1]), keepdims=1))
    idx = op1(rb, "Add", reshape(rb, base, [n_out, 1]), offs)
    if a["exclude_outside"]:
        w = op1(rb, "Where", _beyond(rb, idx, 0, n_in - 1), _f(rb, 0, w), w)  # integer-valued idx
        total = op1(rb, "ReduceSum", w, ints(rb, [1]), keepdims=1)
        w = op1(rb, "Div", w, op1(rb, "Where", op1(rb, "Equal", total, _f(rb, 0, w)), _f(rb, 1, w), total))
    return _clip_index(rb, idx, n_in), w


def _beyond(rb, v, lo, hi):
    """v < lo or v > hi."""
    return op1(rb, "Or", op1(rb, "Less", v, _f(rb, lo, v)), op1(rb, "Greater", v, _f(rb, hi, v)))


def _clip_index(rb, v, n):
    return op1(rb, "Cast", op1(rb, "Min", op1(rb, "Max", v, _f(rb, 0, v)), _f(rb, n - 1, v)), to=dt.int64)


@lowering("Upsample")
def lower_upsample(rb, node, ins):
    # Upsample is Resize with the legacy coordinate mapping (output i reads input i / scale).
    x, scales = ins
    return [rb.emit1("Resize", [x, None, scales], dict(UPSAMPLE_ATTRS, mode=node.attrs["mode"]))]


# -- AffineGrid ------------------------------------------------------------------------------------

@lowering("AffineGrid")
def lower_affine_grid(rb, node, ins):
    theta, size = ins
    size_v, out = _known(size), node.outputs[0].type.shape
    if size_v is not None:
        sp = [int(v) for v in size_v.reshape(-1)][2:]
    elif out is not None and static(out[1:]):  # size given at run time: the declared grid shape
        sp = list(out[1:-1])
    else:
        return None
    nsp = len(sp)
    lines = []
    for n in sp:
        if n <= 1 and node.attrs["align_corners"]:
            lines.append(np.full(n, -1.0))  # as ONNX's function body and reference
        elif node.attrs["align_corners"]:
            lines.append(np.linspace(-1.0, 1.0, n))
        else:
            lines.append((2 * np.arange(n) + 1) / n - 1)
    mesh = np.meshgrid(*lines, indexing="ij")
    base = np.stack([*reversed(mesh), np.ones(tuple(sp))], -1).reshape(-1, nsp + 1)  # (x, y[, z], 1)
    (th,) = widen(rb, [theta])
    base_c = rb.constant(base.astype(th.type.dtype.np), name="base_grid")
    grid = op1(rb, "MatMul", base_c, op1(rb, "Transpose", th, perm=[0, 2, 1]))  # (N, P, nsp)
    return [narrow(rb, reshape(rb, grid, [0, *sp, nsp]), theta.type.dtype)]


# -- GridSample ------------------------------------------------------------------------------------

def _f(rb, v, like):
    return scalar(rb, v, like)


def _trunc(rb, v):
    """Round toward zero: floor of |v| with v's sign."""
    neg = op1(rb, "Less", v, _f(rb, 0, v))
    flo = op1(rb, "Floor", v)
    up = op1(rb, "Sub", _f(rb, 0, v), op1(rb, "Floor", op1(rb, "Sub", _f(rb, 0, v), v)))
    return op1(rb, "Where", neg, up, flo)


def _reflect(rb, c, lo, hi):
    """Fold coordinates into [lo, hi] by mirroring at the borders, repeatedly (the reference's)."""
    span = hi - lo
    if span <= 0:
        return op1(rb, "Add", op1(rb, "Mul", c, _f(rb, 0, c)), _f(rb, lo, c))
    below = op1(rb, "Less", c, _f(rb, lo, c))
    above = op1(rb, "Greater", c, _f(rb, hi, c))
    dx = op1(rb, "Where", below, op1(rb, "Sub", _f(rb, lo, c), c), op1(rb, "Sub", c, _f(rb, hi, c)))
    n = op1(rb, "Floor", op1(rb, "Div", dx, _f(rb, span, c)))  # dx >= 0 wherever it is used
    rem = op1(rb, "Sub", dx, op1(rb, "Mul", n, _f(rb, span, c)))
    half = op1(rb, "Mul", n, _f(rb, 0.5, c))
    even = op1(rb, "Equal", op1(rb, "Floor", half), half)
    from_lo = op1(rb, "Add", _f(rb, lo, c), rem)
    from_hi = op1(rb, "Sub", _f(rb, hi, c), rem)
    return op1(rb, "Where", below, op1(rb, "Where", even, from_lo, from_hi),
               op1(rb, "Where", above, op1(rb, "Where", even, from_hi, from_lo), c))


def _keys(rb, t, a=-0.75):
    """Keys' cubic kernel with coefficient a at 0 <= t <= 2 (as the reference's _keys of |t|)."""
    near = op1(rb, "Add", op1(rb, "Mul", op1(rb, "Mul", op1(rb, "Sub", op1(rb, "Mul", t, _f(rb, a + 2, t)),
                                                              _f(rb, a + 3, t)), t), t), _f(rb, 1, t))
    far = op1(rb, "Sub", op1(rb, "Mul", op1(rb, "Add", op1(rb, "Mul", op1(rb, "Sub", op1(rb, "Mul", t, _f(rb, a, t)),
                                                                        _f(rb, 5 * a, t)), t),
                                        _f(rb, 8 * a, t)), t), _f(rb, 4 * a, t))
    far = op1(rb, "Where", op1(rb, "Less", t, _f(rb, 2, t)), far, _f(rb, 0, t))
    return op1(rb, "Where", op1(rb, "Greater", t, _f(rb, 1, t)), far, near)


def _axis_taps(rb, gi, n, a):
    """[(int64 index, float64 weight)] of one spatial axis of size n, grid coordinates gi."""
    align, mode, padding = a["align_corners"], a["mode"], a["padding_mode"]
    if align:
        c = op1(rb, "Mul", op1(rb, "Div", op1(rb, "Add", gi, _f(rb, 1, gi)), _f(rb, 2, gi)), _f(rb, n - 1, gi))
    else:
        c = op1(rb, "Div", op1(rb, "Sub", op1(rb, "Mul", op1(rb, "Add", gi, _f(rb, 1, gi)), _f(rb, n, gi)),
                               _f(rb, 1, gi)), _f(rb, 2, gi))
    if mode == "nearest":
        c = op1(rb, "Round", c)
    c = op1(rb, "Cast", c, to=F64)  # the reference computes the coordinate in the grid's type
    lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
    if padding == "border":
        clipped = op1(rb, "Min", op1(rb, "Max", c, _f(rb, 0, c)), _f(rb, n - 1, c))
        out = op1(rb, "Or", op1(rb, "Less", c, _f(rb, lo, c)), op1(rb, "Greater", c, _f(rb, hi, c)))
        c = op1(rb, "Where", out, clipped, c)
    elif padding == "reflection":
        c = _reflect(rb, c, lo, hi)
    one = _f(rb, 1, c)
    if mode == "nearest":
        taps = [(_trunc(rb, c), one)]
    else:
        f = op1(rb, "Floor", c)
        t = op1(rb, "Sub", c, f)
        if mode == "linear":
            taps = [(f, op1(rb, "Sub", one, t)), (op1(rb, "Add", f, one), t)]
        else:
            # taps f-1 .. f+2 at distances t+1, t, 1-t, 2-t
            dist = [op1(rb, "Add", t, one), t, op1(rb, "Sub", one, t), op1(rb, "Sub", _f(rb, 2, c), t)]
            taps = [(op1(rb, "Add", f, _f(rb, k, c)) if k else f, _keys(rb, s))
                    for k, s in zip((-1, 0, 1, 2), dist)]
    fixed = []
    for j, w in taps:
        if padding == "zeros":
            inside = op1(rb, "And", op1(rb, "Not", op1(rb, "Less", j, _f(rb, 0, j))),
                         op1(rb, "Not", op1(rb, "Greater", j, _f(rb, n - 1, j))))
            w = op1(rb, "Where", inside, w, _f(rb, 0, w))
        elif padding == "reflection":
            j = _trunc(rb, _reflect(rb, j, lo, hi))
        j = op1(rb, "Min", op1(rb, "Max", j, _f(rb, 0, j)), _f(rb, n - 1, j))
        fixed.append((op1(rb, "Cast", j, to=dt.int64), w))
    return fixed


@lowering("GridSample")
def lower_grid_sample(rb, node, ins):
    x, grid = ins
    xs, gs = x.type.shape, grid.type.shape
    if not static(xs) or not static(gs):
        return None
    n, c, dims = xs[0], xs[1], list(xs[2:])
    nsp, out_sp = len(dims), list(gs[1:-1])
    ct = _compute_type(x.type.dtype)
    (grid,) = widen(rb, [grid])  # the reference computes coordinates in float32 or float64
    # per axis: the grid's coordinate for it (the grid lists the innermost axis first)
    taps = []
    for i in range(nsp):
        gi = reshape(rb, strided(rb, grid, [nsp + 1], [nsp - 1 - i], [1], [1]), [n, *out_sp])
        taps.append([(j, narrow(rb, w, ct)) for j, w in _axis_taps(rb, gi, dims[i], node.attrs)])
    # The input as rows (N * spatial, C); a corner's row is n * prod(dims) + its flat position.
    rows = op1(rb, "Transpose", x, perm=[0, *range(2, nsp + 2), 1])
    rows = reshape(rb, narrow(rb, rows, ct), [n * math.prod(dims), c])
    batch = rb.constant((np.arange(n, dtype=np.int64) * math.prod(dims)).reshape((n,) + (1,) * len(out_sp)),
                        name="rows")
    flat = [math.prod(dims[i + 1:]) for i in range(nsp)]
    acc = None
    for combo in itertools.product(*taps):
        idx = chain(rb, "Add", [batch] + [op1(rb, "Mul", j, rb.constant(np.int64(f), name="stride"))
                                          if f != 1 else j for (j, _), f in zip(combo, flat)])
        term = op1(rb, "Gather", rows, idx, axis=0)  # (N, *out, C)
        weights = [w for _, w in combo if w.type.shape]  # nearest without zeros padding: all 1
        if weights:
            term = op1(rb, "Mul", term, reshape(rb, chain(rb, "Mul", weights), [n, *out_sp, 1]))
        acc = term if acc is None else op1(rb, "Add", acc, term)
    y = op1(rb, "Transpose", acc, perm=[0, nsp + 1, *range(1, nsp + 1)])
    return [_to_type(rb, y, x.type.dtype)]


def _to_type(rb, y, dtype):
    # The reference casts its float64 result with astype: integers truncate toward zero.
    return narrow(rb, y, dtype)
