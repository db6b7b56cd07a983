"""Convolutions: Conv, ConvTranspose, ConvInteger, DeformConv.

Also the sliding-window geometry (kernel/stride/dilation/pads, auto_pad, output extents) that the
pooling ops in pool.py share. The references loop over kernel positions only, contracting channels
with a batched matmul per position, so they stay fast enough to run whole CNNs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as dt
from .registry import ACCUMULATES, EPILOGUE_PRODUCER, NN, QUANT, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


# -- window geometry (shared with pool.py) --------------------------------------------------------

def window_attrs(fail, nsp, kernel, strides, dilations, pads):
    """Validate and default the window attributes for `nsp` spatial dims.

    `fail(msg)` builds the exception to raise (ctx.error in shape rules, ValueError at run time).
    Returns (kernel, strides, dilations, pads) as lists; pads is [begin..., end...].
    """
    kernel = list(kernel)
    if len(kernel) != nsp:
        raise fail(f"kernel_shape {kernel} has {len(kernel)} entries, the input has {nsp} spatial dims")
    if any(k < 1 for k in kernel):
        raise fail(f"kernel_shape {kernel} must be positive")
    strides = list(strides) if strides else [1] * nsp
    dilations = list(dilations) if dilations else [1] * nsp
    pads = list(pads) if pads else [0] * (2 * nsp)
    for name, v, n in (("strides", strides, nsp), ("dilations", dilations, nsp), ("pads", pads, 2 * nsp)):
        if len(v) != n:
            raise fail(f"{name} {v} has {len(v)} entries, expected {n}")
    if any(s < 1 for s in strides):
        raise fail(f"strides {strides} must be positive")
    if any(d < 1 for d in dilations):
        raise fail(f"dilations {dilations} must be positive")
    if any(p < 0 for p in pads):
        raise fail(f"pads {pads} must be non-negative")
    return kernel, strides, dilations, pads


def out_extent(fail, n, k, s, d, pb, pe, auto_pad, ceil_mode=False):
    """Output length of a sliding window over one axis, and the (begin, end) pads it uses.

    n may be non-int (symbolic/unknown): the result is then None. With auto_pad the explicit pads are
    ignored; ceil_mode changes nothing there (ONNX's SAME/VALID formulas agree for both).
    """
    auto_pad = auto_pad or "NOTSET"  # some old exporters write an empty string
    if auto_pad not in AUTO_PADS:
        raise fail(f"auto_pad '{auto_pad}' is not one of {', '.join(AUTO_PADS)}")
    if not isinstance(n, int):
        return None, pb, pe
    ek = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-n // s)
        total = max(0, (out - 1) * s + ek - n)
        small = total // 2
        pb, pe = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
        return out, pb, pe
    if auto_pad == "VALID":
        pb = pe = 0
    span = n + pb + pe - ek
    if span < 0:
        raise fail(f"window of extent {ek} (kernel {k}, dilation {d}) is larger than the padded "
                   f"input extent {n + pb + pe}")
    if ceil_mode:
        out = -(-span // s) + 1
        if (out - 1) * s >= n + pb:  # the last window may not start in the end padding
            out -= 1
    else:
        out = span // s + 1
    return out, pb, pe


def out_extents(fail, in_dims, kernel, strides, dilations, pads, auto_pad, ceil_mode=False):
    """Per-axis `out_extent`: (out dims, begin pads, end pads)."""
    nsp = len(kernel)
    outs, pbs, pes = [], [], []
    for i in range(nsp):
        o, pb, pe = out_extent(fail, in_dims[i], kernel[i], strides[i], dilations[i], pads[i],
                               pads[nsp + i], auto_pad, ceil_mode)
        outs.append(o)
        pbs.append(pb)
        pes.append(pe)
    return outs, pbs, pes


def pad_for_windows(x, pb, out, kernel, strides, dilations, value=0):
    """Pad (or crop) the trailing spatial axes of x so every window of the output lies inside."""
    nsp = len(kernel)
    width = [(0, 0)] * (x.ndim - nsp)
    crop = [slice(None)] * (x.ndim - nsp)
    for i in range(nsp):
        need = (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
        end = need - x.shape[x.ndim - nsp + i] - pb[i]
        width.append((pb[i], max(end, 0)))
        crop.append(slice(0, need))
    if any(w != (0, 0) for w in width):
        x = np.pad(x, width, mode="constant", constant_values=value)
    return x[tuple(crop)]


def window_views(xp, kernel, strides, dilations, out):
    """Yield (kernel index, view) with view[..., o] = xp[..., o * stride + k * dilation]."""
    for kidx in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                   for k, d, s, o in zip(kidx, dilations, strides, out))
        yield kidx, xp[(Ellipsis, *sl)]


def compute_dtype(dtype):
    """Float type to accumulate in: float64 stays, narrower floats widen to float32."""
    return np.float64 if dtype == np.float64 else np.float32


def _static(dims):
    return dims is not None and all(isinstance(d, int) for d in dims)


# -- Conv ------------------------------------------------------------------------------------------

def _conv_check(ctx, x_i=0, w_i=1, transpose=False):
    """Common shape checks of Conv-like ops; returns (rank, nsp, kernel or None)."""
    x, w = ctx.input(x_i), ctx.input(w_i)
    r = x.rank if x.rank is not None else w.rank
    if r is None:
        return None, None, None
    if r < 3:
        raise ctx.error(f"input rank {r} is too small: expected (N, C, spatial...) with at least one "
                        "spatial axis")
    if x.rank is not None and w.rank is not None and x.rank != w.rank:
        raise ctx.error(f"input rank {x.rank} and weight rank {w.rank} differ")
    nsp = r - 2
    kernel = ctx.attrs.get("kernel_shape")
    wk = None if w.shape is None else w.shape[2:]
    if kernel:
        if len(kernel) != nsp:
            raise ctx.error(f"kernel_shape {list(kernel)} has {len(kernel)} entries, the input has {nsp} "
                            "spatial dims")
        if wk is not None and any(isinstance(a, int) and a != b for a, b in zip(wk, kernel)):
            raise ctx.error(f"kernel_shape {list(kernel)} does not match the weight shape {list(w.shape)}")
    elif _static(wk):
        kernel = wk
    g = ctx.attrs.get("group", 1)
    if g < 1:
        raise ctx.error(f"group {g} must be positive")
    if x.shape is not None and w.shape is not None:
        c, wc = x.shape[1], w.shape[0 if transpose else 1]
        if isinstance(c, int) and isinstance(wc, int):
            if transpose and c != wc:
                raise ctx.error(f"input has {c} channels but the weight expects {wc}")
            if not transpose and c != wc * g:
                raise ctx.error(f"input has {c} channels but the weight expects {wc} x group {g} = {wc * g}")
    if w.shape is not None and not transpose and isinstance(w.shape[0], int) and w.shape[0] % g:
        raise ctx.error(f"{w.shape[0]} output channels are not divisible by group {g}")
    if x.shape is not None and transpose and isinstance(x.shape[1], int) and x.shape[1] % g:
        raise ctx.error(f"{x.shape[1]} input channels are not divisible by group {g}")
    return r, nsp, (list(kernel) if kernel else None)


def _check_bias(ctx, i, m):
    if ctx.has(i) and ctx.shape(i) is not None:
        b = ctx.shape(i)
        if len(b) != 1 or (isinstance(b[0], int) and isinstance(m, int) and b[0] != m):
            raise ctx.error(f"bias shape {list(b)} should be [{m}] (one value per output channel)")


def _conv_infer_shape(ctx):
    r, nsp, kernel = _conv_check(ctx)
    if r is None:
        return None
    x, w = ctx.shape(0), ctx.shape(1)
    n = x[0] if x is not None else None
    m = w[0] if w is not None else None
    if kernel is None:
        return (n, m) + (None,) * nsp
    a = ctx.attrs
    kernel, s, d, p = window_attrs(ctx.error, nsp, kernel, a["strides"], a["dilations"], a["pads"])
    in_dims = x[2:] if x is not None else (None,) * nsp
    out, _, _ = out_extents(ctx.error, in_dims, kernel, s, d, p, a.get("auto_pad", "NOTSET"))
    return (n, m, *out)


def _conv_infer(ctx):
    shape = _conv_infer_shape(ctx)
    _check_bias(ctx, 2, ctx.shape(1)[0] if ctx.shape(1) is not None else None)
    return [dt.TensorType(shape, ctx.dtype(0))]


def conv_nd(x, w, group, strides, dilations, pads, auto_pad="NOTSET"):
    """Grouped N-D cross-correlation in x's (float) dtype: x (N, C, *in), w (M, C/group, *k)."""
    nsp = x.ndim - 2
    kernel = list(w.shape[2:])
    kernel, strides, dilations, pads = window_attrs(ValueError, nsp, kernel, strides, dilations, pads)
    out, pb, _ = out_extents(ValueError, list(x.shape[2:]), kernel, strides, dilations, pads, auto_pad)
    n, c = x.shape[:2]
    m = w.shape[0]
    if c != w.shape[1] * group or m % group:
        raise ValueError(f"input channels {c} / weight shape {list(w.shape)} do not fit group {group}")
    cg, mg, p = c // group, m // group, math.prod(out)
    xp = pad_for_windows(x, pb, out, kernel, strides, dilations)
    y = np.zeros((n, group, mg, p), dtype=x.dtype)
    wg = w.reshape(group, mg, cg, *kernel)
    for kidx, view in window_views(xp, kernel, strides, dilations, out):
        xs = view.reshape(n, group, cg, p)
        wk = wg[(slice(None), slice(None), slice(None), *kidx)]
        if cg == 1 and mg == 1:  # depthwise: a matmul per channel would be all overhead
            y += xs * wk
        else:
            y += wk @ xs
    return y.reshape(n, m, *out)


def _conv_ref(x, w, b=None, *, auto_pad, dilations, group, kernel_shape, pads, strides):
    if kernel_shape and list(kernel_shape) != list(w.shape[2:]):
        raise ValueError(f"kernel_shape {list(kernel_shape)} does not match the weight shape {list(w.shape)}")
    # float32 accumulates in float64: the oracle should not depend on BLAS's blocking, which
    # rounds identical output channels differently (visible when a model's logits are ~1e10).
    ct = np.float64 if x.dtype == np.float32 else compute_dtype(x.dtype)
    y = conv_nd(x.astype(ct, copy=False), w.astype(ct, copy=False), group, strides, dilations, pads,
                auto_pad)
    if b is not None:
        y += b.astype(ct).reshape((1, -1) + (1,) * (y.ndim - 2))
    return y.astype(x.dtype, copy=False)


_WINDOW_ATTRS = (Attr("auto_pad", "string", "NOTSET"), Attr("dilations", "ints", None),
                 Attr("group", "int", 1), Attr("kernel_shape", "ints", None), Attr("pads", "ints", None),
                 Attr("strides", "ints", None))

op("Conv", inputs=("X:T", "W:T", "B:T?"), outputs=("Y:T",), types={"T": FLT}, attrs=_WINDOW_ATTRS,
   infer=_conv_infer, reference=_conv_ref, groups={NN, EPILOGUE_PRODUCER, ACCUMULATES}, tier=Tier.KERNEL, onnx_since=1,
   doc="N-D grouped convolution (cross-correlation) with strides, dilations, pads or auto_pad, "
       "and an optional per-output-channel bias.")


# -- ConvInteger -----------------------------------------------------------------------------------

def _convinteger_infer(ctx):
    shape = _conv_infer_shape(ctx)
    for i, what in ((2, "x_zero_point"), (3, "w_zero_point")):
        if ctx.has(i) and ctx.shape(i) is not None and len(ctx.shape(i)) > 1:
            raise ctx.error(f"{what} must be a scalar or 1-D, got shape {list(ctx.shape(i))}")
    return [dt.TensorType(shape, dt.int32)]


def _convinteger_ref(x, w, x_zero_point=None, w_zero_point=None, *, auto_pad, dilations, group,
                     kernel_shape, pads, strides):
    # float64 holds every int8/uint8 product sum exactly; zero points shift before padding, so
    # padded positions contribute nothing, as in ONNX's definition.
    xf = x.astype(np.float64)
    wf = w.astype(np.float64)
    if x_zero_point is not None:
        xf -= np.asarray(x_zero_point, np.float64).reshape(-1)[0]
    if w_zero_point is not None:
        wz = np.asarray(w_zero_point, np.float64).reshape(-1)
        wf -= wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz[0]
    y = conv_nd(xf, wf, group, strides, dilations, pads, auto_pad)
    return np.rint(y).astype(np.int32)


I8 = frozenset({dt.int8, dt.uint8})
op("ConvInteger", inputs=("x:T1", "w:T2", "x_zero_point:T1?", "w_zero_point:T2?"), outputs=("y:T3",),
   types={"T1": I8, "T2": I8, "T3": frozenset({dt.int32})}, attrs=_WINDOW_ATTRS,
   infer=_convinteger_infer, reference=_convinteger_ref, groups={NN, QUANT}, tier=Tier.HIGH,
   onnx_since=10,
   doc="Integer convolution of (x - x_zero_point) and (w - w_zero_point), accumulated in int32.")


# -- ConvTranspose ---------------------------------------------------------------------------------

def transpose_geometry(fail, in_dims, kernel, a):
    """Output dims and begin pads of ConvTranspose (None dims where unknown)."""
    nsp = len(kernel)
    kernel, s, d, p = window_attrs(fail, nsp, kernel, a["strides"], a["dilations"], a["pads"])
    opad = list(a["output_padding"]) if a["output_padding"] else [0] * nsp
    if len(opad) != nsp:
        raise fail(f"output_padding {opad} has {len(opad)} entries, expected {nsp}")
    if any(o < 0 for o in opad):
        raise fail(f"output_padding {opad} must be non-negative")
    oshape = list(a["output_shape"]) if a["output_shape"] else None
    if oshape is not None and len(oshape) == nsp + 2:  # some exporters include N and C
        oshape = oshape[2:]
    if oshape is not None and len(oshape) != nsp:
        raise fail(f"output_shape {oshape} has {len(oshape)} entries, expected {nsp}")
    auto_pad = a["auto_pad"] or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise fail(f"auto_pad '{auto_pad}' is not one of {', '.join(AUTO_PADS)}")
    outs, pbs = [], []
    for i in range(nsp):
        n = in_dims[i]
        full = None if not isinstance(n, int) else s[i] * (n - 1) + opad[i] + (kernel[i] - 1) * d[i] + 1
        if oshape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # The output size is given; the pads follow from it.
            out = oshape[i] if oshape is not None else (n * s[i] if isinstance(n, int) else None)
            if full is None or out is None:
                outs.append(out)
                pbs.append(None)
                continue
            total = full - out
            small = total // 2
            pbs.append(small if auto_pad == "SAME_UPPER" else total - small)
            outs.append(out)
        else:
            pb, pe = (0, 0) if auto_pad == "VALID" else (p[i], p[nsp + i])
            out = None if full is None else full - pb - pe
            if out is not None and out < 1:
                raise fail(f"pads {p} leave no output along spatial axis {i}")
            outs.append(out)
            pbs.append(pb)
    return outs, pbs


def _convtranspose_infer(ctx):
    r, nsp, kernel = _conv_check(ctx, transpose=True)
    g = ctx.attrs["group"]
    w = ctx.shape(1)
    m = w[1] * g if w is not None and isinstance(w[1], int) else None
    _check_bias(ctx, 2, m)
    if r is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    x = ctx.shape(0)
    n = x[0] if x is not None else None
    if kernel is None:
        return [dt.TensorType((n, m) + (None,) * nsp, ctx.dtype(0))]
    in_dims = x[2:] if x is not None else (None,) * nsp
    out, _ = transpose_geometry(ctx.error, in_dims, kernel, ctx.attrs)
    return [dt.TensorType((n, m, *out), ctx.dtype(0))]


def _convtranspose_ref(x, w, b=None, **a):
    if a["kernel_shape"] and list(a["kernel_shape"]) != list(w.shape[2:]):
        raise ValueError(f"kernel_shape {list(a['kernel_shape'])} does not match the weight shape "
                         f"{list(w.shape)}")
    ct = compute_dtype(x.dtype)
    xc, wc = x.astype(ct, copy=False), w.astype(ct, copy=False)
    kernel = list(w.shape[2:])
    nsp = len(kernel)
    _, s, d, _ = window_attrs(ValueError, nsp, kernel, a["strides"], a["dilations"], a["pads"])
    out, pb = transpose_geometry(ValueError, list(x.shape[2:]), kernel, a)
    g = a["group"]
    n, c = x.shape[:2]
    if c != w.shape[0] or c % g:
        raise ValueError(f"input channels {c} / weight shape {list(w.shape)} do not fit group {g}")
    cg, mg = c // g, w.shape[1]
    in_sp = list(x.shape[2:])
    full = [s[i] * (in_sp[i] - 1) + (kernel[i] - 1) * d[i] + 1 for i in range(nsp)]
    # Scatter each kernel tap into a buffer covering both the full result and the requested window
    # (pads may be negative when output_shape asks for more than the full result).
    lo = [min(0, pb[i]) for i in range(nsp)]
    hi = [max(full[i], pb[i] + out[i]) for i in range(nsp)]
    buf = np.zeros((n, g, mg, *(h - lo_ for h, lo_ in zip(hi, lo))), dtype=ct)
    xs = xc.reshape(n, g, cg, math.prod(in_sp))
    wg = wc.reshape(g, cg, mg, *kernel)
    for kidx in itertools.product(*(range(k) for k in kernel)):
        wk = np.swapaxes(wg[(slice(None), slice(None), slice(None), *kidx)], 1, 2)  # (g, mg, cg)
        contrib = (wk @ xs).reshape(n, g, mg, *in_sp)
        sl = tuple(slice(kidx[i] * d[i] - lo[i], kidx[i] * d[i] - lo[i] + (in_sp[i] - 1) * s[i] + 1, s[i])
                   for i in range(nsp))
        buf[(Ellipsis, *sl)] += contrib
    crop = tuple(slice(pb[i] - lo[i], pb[i] - lo[i] + out[i]) for i in range(nsp))
    y = buf[(Ellipsis, *crop)].reshape(n, g * mg, *out)
    if b is not None:
        y = y + b.astype(ct).reshape((1, -1) + (1,) * nsp)
    return y.astype(x.dtype, copy=False)


op("ConvTranspose", inputs=("X:T", "W:T", "B:T?"), outputs=("Y:T",), types={"T": FLT},
   attrs=(*_WINDOW_ATTRS, Attr("output_padding", "ints", None), Attr("output_shape", "ints", None)),
   infer=_convtranspose_infer, reference=_convtranspose_ref, groups={NN, EPILOGUE_PRODUCER, ACCUMULATES},
   tier=Tier.KERNEL, onnx_since=1,
   doc="Transposed (fractionally strided) N-D convolution; the output size comes from pads and "
       "output_padding, or from output_shape / auto_pad (which then determine the pads).")


# -- DeformConv ------------------------------------------------------------------------------------

def _deform_infer(ctx):
    shape = _conv_infer_shape(ctx)  # DeformConv has no auto_pad; the default NOTSET applies
    m = ctx.shape(1)[0] if ctx.shape(1) is not None else None
    _check_bias(ctx, 3, m)
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    nsp = len(shape) - 2
    og = ctx.attrs["offset_group"]
    if og < 1:
        raise ctx.error(f"offset_group {og} must be positive")
    c = ctx.shape(0)[1] if ctx.shape(0) is not None else None
    if isinstance(c, int) and c % og:
        raise ctx.error(f"{c} input channels are not divisible by offset_group {og}")
    w = ctx.shape(1)
    kernel = ctx.attrs["kernel_shape"] or (w[2:] if w is not None else None)
    for i, what, per in ((2, "offset", nsp), (4, "mask", 1)):
        if not ctx.has(i) or ctx.shape(i) is None:
            continue
        t = ctx.shape(i)
        if len(t) != nsp + 2:
            raise ctx.error(f"{what} has rank {len(t)}, expected {nsp + 2}")
        if _static(kernel) and isinstance(t[1], int) and t[1] != og * math.prod(kernel) * per:
            raise ctx.error(f"{what} has {t[1]} channels, expected offset_group x kernel size"
                            f"{' x spatial rank' if per > 1 else ''} = {og * math.prod(kernel) * per}")
        for a, b in zip(t[2:], shape[2:]):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise ctx.error(f"{what} spatial shape {list(t[2:])} does not match the output "
                                f"{list(shape[2:])}")
    return [dt.TensorType(shape, ctx.dtype(0))]


def _deform_ref(x, w, offset, b=None, mask=None, *, dilations, group, kernel_shape, offset_group, pads,
                strides):
    ct = compute_dtype(x.dtype)
    xc, wc = x.astype(ct), w.astype(ct)
    kernel = list(w.shape[2:])
    nsp = len(kernel)
    kernel, s, d, p = window_attrs(ValueError, nsp, kernel, strides, dilations, pads)
    in_sp = list(x.shape[2:])
    out, pb, _ = out_extents(ValueError, in_sp, kernel, s, d, p, "NOTSET")
    n, c = x.shape[:2]
    m, og, kk, pp = w.shape[0], offset_group, math.prod(kernel), math.prod(out)
    cog = c // og
    off = offset.astype(ct).reshape(n, og, kk, nsp, pp)
    msk = np.ones((n, og, kk, pp), ct) if mask is None else mask.astype(ct).reshape(n, og, kk, pp)
    # Undeformed sampling positions, per spatial axis: (kk, pp).
    kpos = np.stack(np.meshgrid(*(np.arange(k) for k in kernel), indexing="ij"), 0).reshape(nsp, kk)
    opos = np.stack(np.meshgrid(*(np.arange(o) for o in out), indexing="ij"), 0).reshape(nsp, pp)
    pos = [(opos[i] * s[i] - pb[i])[None, :] + (kpos[i] * d[i])[:, None] + off[:, :, :, i, :]
           for i in range(nsp)]  # each (n, og, kk, pp)
    # N-linear interpolation; taps outside the input read zero.
    xg = xc.reshape(n, og, cog, math.prod(in_sp))
    cols = np.zeros((n, og, cog, kk * pp), ct)
    base = [np.floor(q) for q in pos]
    for corner in itertools.product((0, 1), repeat=nsp):
        weight = msk.copy()
        flat = np.zeros(msk.shape, np.int64)
        valid = np.ones(msk.shape, bool)
        for i in range(nsp):
            idx = base[i] + corner[i]
            weight *= 1 - np.abs(pos[i] - idx)
            valid &= (idx >= 0) & (idx < in_sp[i])
            flat = flat * in_sp[i] + np.clip(idx, 0, in_sp[i] - 1).astype(np.int64)
        weight = np.where(valid, weight, 0).reshape(n, og, 1, kk * pp)
        vals = np.take_along_axis(xg, flat.reshape(n, og, 1, kk * pp), axis=3)
        cols += vals * weight
    cg, mg = c // group, m // group
    cols = cols.reshape(n, group, cg * kk, pp)
    y = (wc.reshape(group, mg, cg * kk) @ cols).reshape(n, m, *out)
    if b is not None:
        y += b.astype(ct).reshape((1, -1) + (1,) * nsp)
    return y.astype(x.dtype, copy=False)


op("DeformConv", inputs=("X:T", "W:T", "offset:T", "B:T?", "mask:T?"), outputs=("Y:T",),
   types={"T": FLT},
   attrs=(Attr("dilations", "ints", None), Attr("group", "int", 1), Attr("kernel_shape", "ints", None),
          Attr("offset_group", "int", 1), Attr("pads", "ints", None), Attr("strides", "ints", None)),
   infer=_deform_infer, reference=_deform_ref, groups={NN, ACCUMULATES}, tier=Tier.HIGH, onnx_since=19,
   doc="Deformable convolution: each kernel tap samples the input (N-linearly) at a learned offset, "
       "optionally scaled by a mask.")
