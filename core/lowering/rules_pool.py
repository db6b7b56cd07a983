"""Lowering rules for pooling: MaxPool (with Indices), AveragePool, LpPool, the Global pools and
RoiAlign (with a fixed sampling_ratio).

A windowed reduction pads the input once (-inf, or the type's minimum, for max; 0 for sums) and
then reduces one spatial axis at a time: max and sum over a box are separable, so a k x k window
costs 2k strided Slices and binary ops instead of k^2. Windows that tile the input (stride ==
kernel, no dilation, e.g. 2x2/2, or a single window per axis) are a Reshape that splits every
axis into (out, kernel) and one ReduceMax/ReduceSum. Averages divide by a constant table of
per-window tap counts (or one number when all windows count the same). Global pools are plain
reductions over the spatial axes.

MaxPool's Indices output follows the same axis-by-axis reduction with Greater/Where, carrying the
flat offset of the winning tap; processing the last axis first keeps the reference's tie rule
(the first maximum in row-major window order wins).

16-bit float sums are computed in float32 and rounded once, as the references do.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..ops.conv import out_extents, window_attrs
from ._build import ints, scalar
from .registry import lowering
from .rules_conv import chain, narrow, op1, pad_windows, reshape, static, strided, widen


def _geometry(node, x):
    """(kernel, strides, dilations, out, begin pads, end pads), or None if the input shape is not
    known (the batch dim may be dynamic)."""
    shape = x.type.shape
    if shape is None or len(shape) < 3 or not static(shape[1:]):
        return None
    a = node.attrs
    nsp = len(shape) - 2
    kernel, s, d, p = window_attrs(ValueError, nsp, a["kernel_shape"], a["strides"], a.get("dilations"),
                                   a["pads"])
    out, pb, pe = out_extents(ValueError, list(shape[2:]), kernel, s, d, p, a["auto_pad"],
                              a.get("ceil_mode", 0))
    return kernel, s, d, out, pb, pe


def _lowest(dtype):
    return -np.inf if dtype.is_float else np.iinfo(dtype.np).min


def window_reduce(rb, x, geo, op, reduce_op, fill):
    """Reduce every window of x with the binary `op` (Max/Add) / `reduce_op` (ReduceMax/ReduceSum);
    positions outside the input read `fill`."""
    kernel, s, d, out, pb, _ = geo
    nsp = len(kernel)
    xp, origin = pad_windows(rb, x, kernel, s, d, out, pb, fill)
    axes = [2 + i for i in range(nsp)]
    if all(d[i] == 1 and (s[i] == kernel[i] or out[i] == 1) for i in range(nsp)):
        # Tiling windows (or a single window): split each axis into (out, kernel), reduce the
        # kernel axes.
        xc = strided(rb, xp, axes, origin, [out[i] * kernel[i] for i in range(nsp)], [1] * nsp)
        split = reshape(rb, xc, [0, 0] + [v for i in range(nsp) for v in (out[i], kernel[i])])
        return op1(rb, reduce_op, split, ints(rb, [3 + 2 * i for i in range(nsp)]), keepdims=0)
    v = xp
    for i in range(nsp):
        taps = [strided(rb, v, [2 + i], [origin[i] + j * d[i]], [out[i]], [s[i]]) for j in range(kernel[i])]
        v = chain(rb, op, taps)
    return v


def _tap_counts(geo, in_sp, lo, hi):
    """Per window, how many taps fall in [lo[i], hi[i]) along every axis: shaped like the output's
    spatial dims."""
    kernel, s, d, out, pb, _ = geo
    cnt = np.ones((), np.int64)
    for i in range(len(kernel)):
        pos = np.arange(out[i])[:, None] * s[i] - pb[i] + np.arange(kernel[i])[None, :] * d[i]
        cnt = np.multiply.outer(cnt, ((pos >= lo[i]) & (pos < hi[i])).sum(1))
    return cnt


def _divide_by_counts(rb, acc, counts):
    if counts.size and (counts == counts.flat[0]).all():
        return op1(rb, "Div", acc, scalar(rb, counts.flat[0], acc))
    return op1(rb, "Div", acc, rb.constant(counts.astype(acc.type.dtype.np), name="counts"))


def _abs_pow(rb, x, p):
    """|x|^p: x*x for p = 2, |x| for p = 1, else Pow of |x|."""
    if p == 2:
        return op1(rb, "Mul", x, x)
    a = op1(rb, "Max", x, op1(rb, "Sub", scalar(rb, 0, x), x))
    return a if p == 1 else op1(rb, "Pow", a, scalar(rb, p, x))


def _root(rb, acc, p):
    if p == 1:
        return acc
    if p == 2:
        return op1(rb, "Sqrt", acc)
    return op1(rb, "Pow", acc, scalar(rb, 1.0 / p, acc))


# -- windowed pools --------------------------------------------------------------------------------

@lowering("MaxPool")
def lower_maxpool(rb, node, ins):
    (x,) = ins
    geo = _geometry(node, x)
    if geo is None:
        return None
    if len(node.outputs) > 1:
        return _max_with_indices(rb, node, x, geo)
    planes = _volume_as_planes(rb, node, x, geo)
    if planes is not None:
        return [planes]
    # max is exact in every type: no widening
    return [window_reduce(rb, x, geo, "Max", "ReduceMax", _lowest(x.type.dtype))]


def _max_with_indices(rb, node, x, geo):
    # Reduce axis by axis, last first, with strict Greater (the first maximum wins) while carrying
    # the flat input offset of the winning tap; the window origins are added at the end.
    shape = x.type.shape
    if not static(shape):
        return None
    kernel, s, d, out, pb, _ = geo
    nsp, in_sp = len(kernel), list(shape[2:])
    if node.attrs["storage_order"]:  # column-major spatial offsets
        flat = [math.prod(in_sp[:i]) for i in range(nsp)]
    else:
        flat = [math.prod(in_sp[i + 1:]) for i in range(nsp)]
    xp, origin = pad_windows(rb, x, kernel, s, d, out, pb, _lowest(x.type.dtype))
    best, off = xp, 0  # off: a Python int while it is the same for every window

    def const(v):
        return rb.constant(np.asarray(v, np.int64), name="offset")

    for i in reversed(range(nsp)):
        cur_b = cur_o = None
        for j in range(kernel[i]):
            vb = strided(rb, best, [2 + i], [origin[i] + j * d[i]], [out[i]], [s[i]])
            step = j * d[i] * flat[i]
            if isinstance(off, int):
                vo = off + step
            else:
                vo = strided(rb, off, [2 + i], [origin[i] + j * d[i]], [out[i]], [s[i]])
                vo = op1(rb, "Add", vo, const(step)) if step else vo
            if cur_b is None:
                cur_b, cur_o = vb, vo
                continue
            better = op1(rb, "Greater", vb, cur_b)
            cur_b = op1(rb, "Where", better, vb, cur_b)
            cur_o = op1(rb, "Where", better, const(vo) if isinstance(vo, int) else vo,
                        const(cur_o) if isinstance(cur_o, int) else cur_o)
        best, off = cur_b, cur_o
    # Window origin o * s - pb per axis, plus (n * C + c) * prod(in) for the batch and channel.
    n, c = shape[:2]
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * math.prod(in_sp)
    base = base.reshape((n, c) + (1,) * nsp)
    for i in range(nsp):
        o = (np.arange(out[i]) * s[i] - pb[i]) * flat[i]
        base = base + o.reshape((-1,) + (1,) * (nsp - 1 - i))
    idx = op1(rb, "Add", const(base), const(off) if isinstance(off, int) else off)
    return [best, idx]


@lowering("AveragePool")
def lower_averagepool(rb, node, ins):
    x = ins[0]
    geo = _geometry(node, x)
    if geo is None:
        return None
    planes = _volume_as_planes(rb, node, x, geo)
    if planes is not None:
        return [planes]
    (xw,) = widen(rb, [x])
    acc = window_reduce(rb, xw, geo, "Add", "ReduceSum", 0)
    in_sp, pb, pe = list(x.type.shape[2:]), geo[4], geo[5]
    if node.attrs["count_include_pad"]:
        # Padding counts, but not the room ceil_mode adds past the end pads.
        counts = _tap_counts(geo, in_sp, [-b for b in pb], [n + e for n, e in zip(in_sp, pe)])
    else:
        counts = _tap_counts(geo, in_sp, [0] * len(in_sp), in_sp)
    return [narrow(rb, _divide_by_counts(rb, acc, counts), x.type.dtype)]



def _volume_as_planes(rb, node, x, geo):
    """A float32 3-D MaxPool or AveragePool as the 2-D pool of every depth plane ([N * D, C, H, W],
    channels last first, as the 3-D Conv's rule does), then the depth window over those: max and
    sum are separable, and so is an average's tap count (a product of per-axis counts), so an
    average is the sum of its depth taps' plane averages over the depth count. A backend with
    native 2-D pools then runs 3-D ones on them (the cpu backend's NHWC kernels). None: not that."""
    shape = x.type.shape
    if len(shape) != 5 or not static(shape) or x.type.dtype != dt.float32 or 0 in shape:
        return None
    kernel, s, d, out, pb, pe = geo
    n, c, depth, h, w = shape
    a = node.attrs
    attrs = {"kernel_shape": kernel[1:], "strides": s[1:], "pads": [pb[1], pb[2], pe[1], pe[2]],
             "ceil_mode": a.get("ceil_mode", 0)}
    if node.op.name == "MaxPool":
        attrs["dilations"] = d[1:]
    else:
        attrs["count_include_pad"] = a["count_include_pad"]
    planes = op1(rb, "Transpose", reshape(rb, op1(rb, "Transpose", x, perm=[0, 2, 3, 4, 1]), [n * depth, h, w, c]),
                 perm=[0, 3, 1, 2])
    y = rb.emit1(node.op.name, [planes], attrs)  # [N * D, C, Ho, Wo]
    if list(y.type.shape[2:]) != list(out[1:]):
        return None
    y = reshape(rb, op1(rb, "Transpose", y, perm=[0, 2, 3, 1]), [n, depth, out[1], out[2], c])
    fill = _lowest(x.type.dtype) if node.op.name == "MaxPool" else 0
    need = (out[0] - 1) * s[0] + (kernel[0] - 1) * d[0] + 1
    front = max(pb[0], 0)
    yp = y
    if front or need - pb[0] > depth:
        pads = ints(rb, [0, front, 0, 0, 0, 0, max(need - pb[0] - depth, 0), 0, 0, 0])
        yp = op1(rb, "Pad", y, pads, scalar(rb, fill, y))
    taps = [strided(rb, yp, [1], [front - pb[0] + t * d[0]], [out[0]], [s[0]]) for t in range(kernel[0])]
    v = chain(rb, "Max" if node.op.name == "MaxPool" else "Add", taps)
    if node.op.name == "AveragePool":
        lo, hi = ((-pb[0], depth + pe[0]) if a["count_include_pad"] else (0, depth))
        counts = _tap_counts(([kernel[0]], [s[0]], [d[0]], [out[0]], [pb[0]], None), [depth], [lo], [hi])
        v = _divide_by_counts(rb, v, counts.reshape(1, -1, 1, 1, 1))
    return op1(rb, "Transpose", v, perm=[0, 4, 1, 2, 3])

@lowering("LpPool")
def lower_lppool(rb, node, ins):
    x = ins[0]
    geo = _geometry(node, x)
    if geo is None:
        return None
    p = node.attrs["p"]
    (xw,) = widen(rb, [x])
    acc = window_reduce(rb, _abs_pow(rb, xw, p), geo, "Add", "ReduceSum", 0)
    return [narrow(rb, _root(rb, acc, p), x.type.dtype)]


# -- global pools ----------------------------------------------------------------------------------

def _spatial_axes(rb, x):
    return ints(rb, range(2, len(x.type.shape)))


@lowering("GlobalAveragePool")
def lower_global_averagepool(rb, node, ins):
    (x,) = ins
    shape = x.type.shape
    if shape is None or not static(shape[2:]):
        return None
    (xw,) = widen(rb, [x])
    acc = op1(rb, "ReduceSum", xw, _spatial_axes(rb, x), keepdims=1)
    return [narrow(rb, op1(rb, "Div", acc, scalar(rb, math.prod(shape[2:]), acc)), x.type.dtype)]


@lowering("GlobalMaxPool")
def lower_global_maxpool(rb, node, ins):
    (x,) = ins
    if x.type.shape is None:
        return None
    return [op1(rb, "ReduceMax", x, _spatial_axes(rb, x), keepdims=1)]


@lowering("GlobalLpPool")
def lower_global_lppool(rb, node, ins):
    (x,) = ins
    if x.type.shape is None:
        return None
    p = node.attrs["p"]
    (xw,) = widen(rb, [x])
    acc = op1(rb, "ReduceSum", _abs_pow(rb, xw, p), _spatial_axes(rb, x), keepdims=1)
    return [narrow(rb, _root(rb, acc, p), x.type.dtype)]



# -- RoiAlign --------------------------------------------------------------------------------------

@lowering("RoiAlign")
def lower_roi_align(rb, node, ins):
    # With a fixed sampling_ratio every bin takes sr x sr bilinear samples at positions computed
    # from the (run-time) rois with elementwise ops, in float64 as the reference, so that floor
    # decisions agree. Average: separable, as dense (bins x pixels) weight matrices per roi that
    # also pick the roi's image: one MatMul over (image, row), one over columns. Max: per sample
    # row, one Gather of input rows (N * H * W, C) at every (column sample, corner), then ReduceMax.
    # sampling_ratio 0 (adaptive: ceil(roi size / bins) samples) makes the sample count depend
    # on the data: no rule.
    x, rois, batch = ins
    a = node.attrs
    sr = a["sampling_ratio"]
    if sr < 1 or not static(x.type.shape) or not static(rois.type.shape):
        return None
    n, c, h, w = x.type.shape
    r = rois.type.shape[0]
    ph, pw = a["output_height"], a["output_width"]
    half = a["coordinate_transformation_mode"] == "half_pixel"
    f64 = dt.float64
    ct = dt.float64 if x.type.dtype == f64 else dt.float32
    rv = op1(rb, "Cast", rois, to=f64)

    def column(i):  # roi coordinate i, scaled and shifted: (R, 1, 1)
        v = reshape(rb, strided(rb, rv, [1], [i], [1], [1]), [r, 1, 1])
        v = op1(rb, "Mul", v, scalar(rb, a["spatial_scale"], v))
        return op1(rb, "Sub", v, scalar(rb, 0.5, v)) if half else v

    x1, y1, x2, y2 = (column(i) for i in range(4))
    taps = []
    for lo, hi, bins, size in ((y1, y2, ph, h), (x1, x2, pw, w)):
        extent = op1(rb, "Sub", hi, lo)
        if not half:  # the legacy mode forces malformed rois to 1x1
            extent = op1(rb, "Max", extent, scalar(rb, 1.0, extent))
        b = op1(rb, "Div", extent, scalar(rb, bins, extent))
        start = op1(rb, "Mul", rb.constant(np.arange(bins, dtype=np.float64)[:, None], name="bins"), b)
        step = op1(rb, "Div", op1(rb, "Mul", rb.constant((np.arange(sr) + 0.5)[None, :], name="samples"), b),
                   scalar(rb, sr, b))
        taps.append(_roi_taps(rb, op1(rb, "Add", op1(rb, "Add", lo, start), step), size))  # (R, bins, sr)
    if a["mode"] == "avg":
        y = _roi_average(rb, x, batch, taps, (n, c, h, w), r, ph, pw, ct)
        y = op1(rb, "Div", y, scalar(rb, sr * sr, y))
    else:
        y = _roi_max(rb, x, batch, taps, (n, c, h, w), r, ph, pw, sr, ct)
    return [narrow(rb, y, x.type.dtype)]


def _roi_taps(rb, pos, size):
    """RoiAlign's border rules (as the reference's _bilinear_taps): [(low, w_low), (high, w_high)];
    samples over a pixel outside the map weigh 0, the rest clamp to the border."""
    def f(v):
        return scalar(rb, v, pos)

    valid = op1(rb, "And", op1(rb, "Not", op1(rb, "Less", pos, f(-1.0))),
                op1(rb, "Not", op1(rb, "Greater", pos, f(size))))
    p = op1(rb, "Max", pos, f(0.0))
    low = op1(rb, "Floor", p)
    at_end = op1(rb, "Not", op1(rb, "Less", low, f(size - 1)))
    low = op1(rb, "Where", at_end, f(size - 1), low)
    high = op1(rb, "Where", at_end, f(size - 1), op1(rb, "Add", low, f(1.0)))
    frac = op1(rb, "Sub", op1(rb, "Where", at_end, low, p), low)
    w_low = op1(rb, "Where", valid, op1(rb, "Sub", f(1.0), frac), f(0.0))
    w_high = op1(rb, "Where", valid, frac, f(0.0))
    return [(low, w_low), (high, w_high)]


def _roi_matrix(rb, taps, size, r, bins, ct):
    """Dense (R, bins, size) weights: the sum of every sample's corner weights per pixel."""
    pixels = rb.constant(np.arange(size, dtype=np.float64), name="pixels")
    parts = []
    for idx, wt in taps:  # (R, bins, sr)
        hit = op1(rb, "Equal", reshape(rb, idx, [r, bins, -1, 1]), pixels)
        parts.append(op1(rb, "Where", hit, reshape(rb, wt, [r, bins, -1, 1]), scalar(rb, 0.0, wt)))
    m = op1(rb, "ReduceSum", op1(rb, "Add", *parts), ints(rb, [2]), keepdims=0)
    return narrow(rb, m, ct)


def _roi_average(rb, x, batch, taps, shape, r, ph, pw, ct):
    n, c, h, w = shape
    ay = _roi_matrix(rb, taps[0], h, r, ph, ct)  # (R, ph, H)
    ax = _roi_matrix(rb, taps[1], w, r, pw, ct)  # (R, pw, W)
    pick = op1(rb, "Cast", op1(rb, "Equal", reshape(rb, batch, [r, 1]), ints(rb, range(n))), to=ct)  # (R, N)
    ay = reshape(rb, op1(rb, "Mul", reshape(rb, ay, [r, ph, 1, h]), reshape(rb, pick, [r, 1, n, 1])),
                 [r, ph, n * h])
    xr = reshape(rb, op1(rb, "Transpose", narrow(rb, x, ct), perm=[0, 2, 1, 3]), [n * h, c * w])
    rows = reshape(rb, op1(rb, "MatMul", ay, xr), [r, ph, c, w])
    y = op1(rb, "MatMul", rows, op1(rb, "Transpose", reshape(rb, ax, [r, 1, pw, w]), perm=[0, 1, 3, 2]))
    return op1(rb, "Transpose", y, perm=[0, 2, 1, 3])  # (R, C, ph, pw)


def _roi_max(rb, x, batch, taps, shape, r, ph, pw, sr, ct):
    n, c, h, w = shape
    rows = reshape(rb, op1(rb, "Transpose", narrow(rb, x, ct), perm=[0, 2, 3, 1]), [n * h * w, c])
    first = op1(rb, "Mul", reshape(rb, batch, [r, 1, 1, 1, 1]), ints(rb, [h * w]))
    xs = [(reshape(rb, op1(rb, "Cast", i, to=dt.int64), [r, 1, pw, sr, 1]), reshape(rb, wt, [r, 1, pw, sr, 1]))
          for i, wt in taps[1]]
    x_idx = op1(rb, "Concat", *[i for i, _ in xs], axis=4)  # (R, 1, pw, sr, 2)
    x_wt = op1(rb, "Concat", *[wt for _, wt in xs], axis=4)
    acc = None
    for idx, wt in taps[0]:  # (R, ph, sr)
        for g in range(sr):
            yi = reshape(rb, op1(rb, "Cast", strided(rb, idx, [2], [g], [1], [1]), to=dt.int64), [r, ph, 1, 1, 1])
            wy = reshape(rb, strided(rb, wt, [2], [g], [1], [1]), [r, ph, 1, 1, 1])
            flat = op1(rb, "Add", op1(rb, "Add", first, op1(rb, "Mul", yi, ints(rb, [w]))), x_idx)
            weight = narrow(rb, op1(rb, "Mul", wy, x_wt), ct)  # (R, ph, pw, sr, 2)
            v = op1(rb, "Mul", op1(rb, "Gather", rows, flat, axis=0), reshape(rb, weight, [r, ph, pw, sr, 2, 1]))
            best = op1(rb, "ReduceMax", v, ints(rb, [3, 4]), keepdims=0)  # (R, ph, pw, C)
            acc = best if acc is None else op1(rb, "Max", acc, best)
    return op1(rb, "Transpose", acc, perm=[0, 3, 1, 2])
