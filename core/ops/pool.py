"""Pooling: AveragePool, MaxPool, LpPool, their Global forms, and MaxUnpool.

The window geometry (pads, auto_pad, ceil_mode, dilations) is shared with the convolutions in
conv.py. References loop over kernel positions and reduce strided views of the padded input.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import InputError
from ._shape import ints
from .conv import compute_dtype, out_extents, pad_for_windows, window_attrs, window_views
from .registry import POOL, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
I64 = frozenset({dt.int64})


def _spatial_rank(ctx, i=0):
    r = ctx.rank(i)
    if r is not None and r < 3:
        raise ctx.error(f"input rank {r} is too small: expected (N, C, spatial...) with at least one "
                        "spatial axis")
    return r


def _pool_shape(ctx):
    r = _spatial_rank(ctx)
    if r is None:
        return None
    x, a, nsp = ctx.shape(0), ctx.attrs, r - 2
    kernel, s, d, p = window_attrs(ctx.error, nsp, a["kernel_shape"], a["strides"], a.get("dilations"),
                                   a["pads"])
    out, _, _ = out_extents(ctx.error, x[2:], kernel, s, d, p, a["auto_pad"], a.get("ceil_mode", 0))
    return (x[0], x[1], *out)


def _pool_infer(ctx):
    return [dt.TensorType(_pool_shape(ctx), ctx.dtype(0))]


def _geometry(x, a):
    """Completed window attributes plus output dims and begin/end pads, for a concrete input."""
    nsp = x.ndim - 2
    if nsp < 1:
        raise ValueError(f"input rank {x.ndim} is too small for pooling")
    kernel, s, d, p = window_attrs(ValueError, nsp, a["kernel_shape"], a["strides"], a.get("dilations"),
                                   a["pads"])
    out, pb, pe = out_extents(ValueError, list(x.shape[2:]), kernel, s, d, p, a["auto_pad"],
                              a.get("ceil_mode", 0))
    return kernel, s, d, out, pb, pe


def _tap_counts(kernel, s, d, out, pb, lo, hi):
    """How many taps of each window fall in [lo[i], hi[i]) along every axis (outer product)."""
    cnt = np.ones((), np.int64)
    for i in range(len(kernel)):
        pos = np.arange(out[i])[:, None] * s[i] - pb[i] + np.arange(kernel[i])[None, :] * d[i]
        cnt = np.multiply.outer(cnt, ((pos >= lo[i]) & (pos < hi[i])).sum(1))
    return cnt


_POOL_ATTRS = (Attr("auto_pad", "string", "NOTSET"), Attr("ceil_mode", "int", 0),
               Attr("dilations", "ints", None), Attr("kernel_shape", "ints"), Attr("pads", "ints", None),
               Attr("strides", "ints", None))


# -- AveragePool -----------------------------------------------------------------------------------

def _avgpool_ref(x, **a):
    kernel, s, d, out, pb, pe = _geometry(x, a)
    ct = compute_dtype(x.dtype)
    xp = pad_for_windows(x.astype(ct, copy=False), pb, out, kernel, s, d, 0)
    acc = np.zeros(x.shape[:2] + tuple(out), ct)
    for _, view in window_views(xp, kernel, s, d, out):
        acc += view
    in_sp = x.shape[2:]
    if a["count_include_pad"]:
        # Padding counts, but not the extra room ceil_mode adds past the end pads.
        cnt = _tap_counts(kernel, s, d, out, pb, [-b for b in pb], [n + e for n, e in zip(in_sp, pe)])
    else:
        cnt = _tap_counts(kernel, s, d, out, pb, [0] * len(in_sp), in_sp)
    return (acc / cnt).astype(x.dtype, copy=False)


op("AveragePool", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT},
   attrs=(*_POOL_ATTRS, Attr("count_include_pad", "int", 0)), infer=_pool_infer,
   reference=_avgpool_ref, groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="Average over sliding windows; padding is counted in the divisor only with count_include_pad.")


# -- MaxPool ---------------------------------------------------------------------------------------

def _maxpool_infer(ctx):
    if ctx.attrs["storage_order"] not in (0, 1):
        raise ctx.error(f"storage_order must be 0 (row major) or 1 (column major), "
                        f"got {ctx.attrs['storage_order']}")
    shape = _pool_shape(ctx)
    return [dt.TensorType(shape, ctx.dtype(0)), dt.TensorType(shape, dt.int64)]


def _lowest(dtype):
    return -np.inf if np.dtype(dtype).kind == "f" or dtype.name == "bfloat16" else np.iinfo(dtype).min


def _maxpool_ref(x, **a):
    kernel, s, d, out, pb, _ = _geometry(x, a)
    xp = pad_for_windows(x, pb, out, kernel, s, d, _lowest(x.dtype))
    best, arg = None, np.zeros(x.shape[:2] + tuple(out), np.int64)
    for j, (_, view) in enumerate(window_views(xp, kernel, s, d, out)):
        if best is None:
            best = view.copy()
            continue
        better = view > best  # strict: the first maximum in window order wins ties
        best[better] = view[better]
        arg[better] = j
    # Indices: flat positions in the unpadded input, spatial part row- or column-major.
    taps = np.unravel_index(arg, kernel)
    in_sp = x.shape[2:]
    nsp = len(in_sp)
    if a["storage_order"]:
        strides = [math.prod(in_sp[:i]) for i in range(nsp)]
    else:
        strides = [math.prod(in_sp[i + 1:]) for i in range(nsp)]
    n, c = x.shape[:2]
    idx = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * math.prod(in_sp)
    idx = idx.reshape((n, c) + (1,) * nsp)
    for i in range(nsp):
        o = np.arange(out[i]).reshape((-1,) + (1,) * (nsp - 1 - i))
        idx = idx + (o * s[i] - pb[i] + taps[i] * d[i]) * strides[i]
    return best, idx.astype(np.int64)


op("MaxPool", inputs=("X:T",), outputs=("Y:T", "Indices:I?"),
   types={"T": FLT | {dt.int8, dt.uint8}, "I": I64},
   attrs=(*_POOL_ATTRS, Attr("storage_order", "int", 0)), infer=_maxpool_infer,
   reference=_maxpool_ref, groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="Maximum over sliding windows (padding never wins); optionally the flat input index of "
       "each maximum.")


# -- LpPool ----------------------------------------------------------------------------------------

def _check_p(ctx):
    if ctx.attrs["p"] < 1:
        raise ctx.error(f"p must be a positive integer, got {ctx.attrs['p']}")


def _lppool_infer(ctx):
    _check_p(ctx)
    return _pool_infer(ctx)


def _lppool_ref(x, **a):
    kernel, s, d, out, pb, _ = _geometry(x, a)
    ct, p = compute_dtype(x.dtype), a["p"]
    xp = pad_for_windows(np.abs(x.astype(ct)) ** p, pb, out, kernel, s, d, 0)
    acc = np.zeros(x.shape[:2] + tuple(out), ct)
    for _, view in window_views(xp, kernel, s, d, out):
        acc += view
    return (acc ** (1.0 / p)).astype(x.dtype, copy=False)


op("LpPool", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT},
   attrs=(*_POOL_ATTRS, Attr("p", "int", 2)), infer=_lppool_infer, reference=_lppool_ref,
   groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="The p-norm of each sliding window: (sum |x|^p)^(1/p).")


# -- Global pools ----------------------------------------------------------------------------------

def _global_infer(ctx):
    r = _spatial_rank(ctx)
    if "p" in ctx.attrs:
        _check_p(ctx)
    if r is None:
        return [ctx.input(0)]
    x = ctx.shape(0)
    return [dt.TensorType((x[0], x[1]) + (1,) * (r - 2), ctx.dtype(0))]


def _spatial_axes(x):
    if x.ndim < 3:
        raise ValueError(f"input rank {x.ndim} is too small for pooling")
    return tuple(range(2, x.ndim))


def _gap_ref(x):
    return x.mean(axis=_spatial_axes(x), keepdims=True, dtype=compute_dtype(x.dtype)).astype(x.dtype)


def _gmp_ref(x):
    # over no positions the maximum is -inf, as ReduceMax's over an empty set (ONNX, opset 18)
    return x.max(axis=_spatial_axes(x), keepdims=True, initial=-np.inf)


def _glp_ref(x, p):
    ct = compute_dtype(x.dtype)
    acc = (np.abs(x.astype(ct)) ** p).sum(axis=_spatial_axes(x), keepdims=True)
    return (acc ** (1.0 / p)).astype(x.dtype)


op("GlobalAveragePool", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT}, infer=_global_infer,
   reference=_gap_ref, groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="Mean over all spatial axes, which are kept with size 1.")
op("GlobalMaxPool", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT}, infer=_global_infer,
   reference=_gmp_ref, groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="Maximum over all spatial axes, which are kept with size 1.")
op("GlobalLpPool", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT}, attrs=(Attr("p", "int", 2),),
   infer=_global_infer, reference=_glp_ref, groups={POOL}, tier=Tier.KERNEL, onnx_since=1,
   doc="The p-norm over all spatial axes, which are kept with size 1.")


# -- MaxUnpool -------------------------------------------------------------------------------------

def _unpool_dims(fail, in_dims, a):
    nsp = len(in_dims)
    kernel, s, _, p = window_attrs(fail, nsp, a["kernel_shape"], a["strides"], None, a["pads"])
    out = []
    for i in range(nsp):
        n = in_dims[i]
        o = (n - 1) * s[i] + kernel[i] - p[i] - p[nsp + i] if isinstance(n, int) else None
        if o is not None and o < 1:
            raise fail(f"pads {p} leave no output along spatial axis {i}")
        out.append(o)
    return out


def _maxunpool_infer(ctx):
    r = _spatial_rank(ctx)
    xs, ishape = ctx.shape(0), ctx.shape(1)
    if xs is not None and ishape is not None:
        if len(xs) != len(ishape) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                         for a, b in zip(xs, ishape)):
            raise ctx.error(f"indices shape {list(ishape)} differs from the input shape {list(xs)}")
    if r is None:
        r = ctx.rank(1)
    if ctx.has(2):
        shape = ints(ctx.value(2))
        if shape is not None:
            if r is not None and len(shape) != r:
                raise ctx.error(f"output_shape {shape} has {len(shape)} entries, the input has rank {r}")
            if any(v < 0 for v in shape):
                raise ctx.error(f"output_shape {shape} has negative entries")
            return [dt.TensorType(tuple(shape), ctx.dtype(0))]
        return [dt.TensorType(None if r is None else (None,) * r, ctx.dtype(0))]
    if r is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if xs is None:
        xs = ishape if ishape is not None else (None,) * r
    out = _unpool_dims(ctx.error, xs[2:], ctx.attrs)
    return [dt.TensorType((xs[0], xs[1], *out), ctx.dtype(0))]


def _maxunpool_ref(x, i, output_shape=None, *, kernel_shape, pads, strides):
    if x.shape != i.shape:
        raise ValueError(f"indices shape {list(i.shape)} differs from the input shape {list(x.shape)}")
    shape = list(x.shape[:2]) + _unpool_dims(ValueError, list(x.shape[2:]),
                                             dict(kernel_shape=kernel_shape, pads=pads, strides=strides))
    y = np.zeros(math.prod(shape), x.dtype)
    flat = i.reshape(-1)
    bad = (flat < 0) | (flat >= y.size)
    if bad.any():  # bad input, worded as every backend words it (glow.ops.index)
        from .index import index_message

        raise InputError(f"{index_message(int(flat[bad][0]), y.size, negative=False)} "
                         f"(flat positions in the unpooled shape {shape})")
    y[flat] = x.reshape(-1)
    y = y.reshape(shape)
    if output_shape is None:
        return y
    # As in ONNX's reference and test data, indices address the inferred shape; output_shape only
    # pads (or crops) that result at the end of each axis.
    want = [int(v) for v in np.asarray(output_shape).reshape(-1)]
    if len(want) != y.ndim:
        raise ValueError(f"output_shape {want} has {len(want)} entries, the input has rank {y.ndim}")
    res = np.zeros(want, x.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(want, shape))
    res[common] = y[common]
    return res


op("MaxUnpool", inputs=("X:T1", "I:T2", "output_shape:T2?"), outputs=("output:T1",),
   types={"T1": FLT, "T2": I64},
   attrs=(Attr("kernel_shape", "ints"), Attr("pads", "ints", None), Attr("strides", "ints", None)),
   infer=_maxunpool_infer, reference=_maxunpool_ref, groups={POOL}, tier=Tier.HIGH, onnx_since=9,
   doc="Partial inverse of MaxPool: scatters X to the flat positions I in a zero tensor "
       "(then zero-extended to output_shape when given).")
