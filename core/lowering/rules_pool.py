"""Lowering rules for pooling: MaxPool (with Indices), AveragePool, LpPool and the Global pools.

A windowed reduction pads the input once (-inf, or the type's minimum, for max; 0 for sums) and
then reduces one spatial axis at a time: max and sum over a box are separable, so a k x k window
costs 2k strided Slices and binary ops instead of k^2. Windows that tile the input (stride ==
kernel, no dilation, e.g. 2x2/2) are a Reshape that splits every axis into (out, kernel) and one
ReduceMax/ReduceSum. Averages divide by a constant table of per-window tap counts (or one
number when all windows count the same). Global pools are plain reductions over the spatial axes.

MaxPool's Indices output follows the same axis-by-axis reduction with Greater/Where, carrying the
flat offset of the winning tap; processing the last axis first keeps the reference's tie rule
(the first maximum in row-major window order wins).

16-bit float sums are computed in float32 and rounded once, as the references do.
"""

from __future__ import annotations

import math

import numpy as np

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
    if all(d[i] == 1 and s[i] == kernel[i] for i in range(nsp)):
        # Tiling windows: split each axis into (out, kernel) and reduce the kernel axes.
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
    (xw,) = widen(rb, [x])
    acc = window_reduce(rb, xw, geo, "Add", "ReduceSum", 0)
    in_sp, pb, pe = list(x.type.shape[2:]), geo[4], geo[5]
    if node.attrs["count_include_pad"]:
        # Padding counts, but not the room ceil_mode adds past the end pads.
        counts = _tap_counts(geo, in_sp, [-b for b in pb], [n + e for n, e in zip(in_sp, pe)])
    else:
        counts = _tap_counts(geo, in_sp, [0] * len(in_sp), in_sp)
    return [narrow(rb, _divide_by_counts(rb, acc, counts), x.type.dtype)]


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

