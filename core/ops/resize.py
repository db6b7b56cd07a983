"""Resampling: Resize (and the deprecated Upsample, imported as Resize), GridSample, AffineGrid.

Resize is separable: every resized axis is resampled on its own with a small table of taps (input
indices) and weights per output position, computed once per axis and applied with one gather.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as dt
from ._shape import ints
from .registry import NN, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
ANY = dt.NUMERIC | {dt.string, dt.bool_, dt.complex64, dt.complex128}

MODES = ("nearest", "linear", "cubic")
# tf_half_pixel_for_nn only existed in opset 11-12; still accepted so those models import as-is.
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")
POLICIES = ("stretch", "not_larger", "not_smaller")
NEAREST = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _check_choice(fail, name, value, allowed):
    if value not in allowed:
        raise fail(f"{name} '{value}' is not one of {', '.join(allowed)}")


def _given(arr):
    """An optional 1-D input counts as absent when missing or empty (opset 11-12 spelling)."""
    return arr is not None and np.asarray(arr).size > 0


def resize_geometry(fail, in_shape, scales, sizes, axes, policy):
    """Output dims and per-axis scale factors; in_shape dims may be unknown (None/str)."""
    r = len(in_shape)
    axes = list(range(r)) if not axes else [a + r if a < 0 else a for a in axes]
    if any(not 0 <= a < r for a in axes):
        raise fail(f"axes {axes} out of range for rank {r}")
    if len(set(axes)) != len(axes):
        raise fail(f"axes {axes} has duplicates")
    out, scale = list(in_shape), [1.0] * r
    if scales is not None:
        scales = [float(s) for s in np.asarray(scales, np.float64).reshape(-1)]
        if len(scales) != len(axes):
            raise fail(f"scales has {len(scales)} values, expected {len(axes)} (one per resized axis)")
        if any(not 0 < s < math.inf for s in scales):  # NaN and inf fail too (inf has no dim)
            raise fail(f"scales {scales} must be positive and finite")
        for a, s in zip(axes, scales):
            scale[a] = s
            out[a] = int(math.floor(in_shape[a] * s)) if isinstance(in_shape[a], int) else None
        return out, scale, axes
    sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if len(sizes) != len(axes):
        raise fail(f"sizes has {len(sizes)} values, expected {len(axes)} (one per resized axis)")
    if any(v < 0 for v in sizes):
        raise fail(f"sizes {sizes} must be non-negative")
    # An empty input axis has no scale (size / 0): it is filled, never sampled, so 1.0 stands in
    # (as for sizes known only at run time in the lowering), and it says nothing about the aspect
    # ratio (any scale keeps it empty), so the policies take the other axes' ratios, as
    # onnxruntime's shape inference does; with every resized axis empty the scale is 1.
    if policy == "stretch":
        for a, v in zip(axes, sizes):
            out[a] = v
            d = in_shape[a]
            scale[a] = (v / d if d else 1.0) if isinstance(d, int) else None
        return out, scale, axes
    if not all(isinstance(in_shape[a], int) for a in axes):
        for a in axes:
            out[a], scale[a] = None, None
        return out, scale, axes
    ratios = [v / in_shape[a] for a, v in zip(axes, sizes) if in_shape[a] > 0]
    s = 1.0 if not ratios else min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        scale[a] = s
        out[a] = int(s * in_shape[a] + 0.5)  # round half up
    return out, scale, axes


def _keys(t, a):
    """Keys' cubic convolution kernel with coefficient a."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def source_coords(ctm, n_in, n_out, scale, roi):
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in  # the fractional output length the scale asks for
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (y + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if width > 1 else np.zeros(n_out)
    if ctm == "align_corners":
        return y * (n_in - 1) / (width - 1) if width != 1 else np.zeros(n_out)
    if ctm == "asymmetric":
        return y / scale
    if ctm == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    # roi arithmetic stays in roi's own precision, as in ONNX's reference; this decides which side
    # of an integer a coordinate lands on when nearest rounding uses floor or ceil.
    start, end = roi
    shift = start * (n_in - 1)
    if width == 1:
        return np.full(n_out, (end - start) * (n_in - 1) / 2 + shift)
    return y * (end - start) * (n_in - 1) / (width - 1) + shift


def resize_taps(x, n_in, scale, a):
    """Input indices (n_out, T) and weights (n_out, T) or None (nearest) for source coords x."""
    mode = a["mode"]
    if mode == "nearest":
        # Coordinates a rounding error away from an integer count as that integer, so that floor and
        # ceil do not jump a whole pixel on float noise (ONNX's reference and ORT agree on that).
        x = np.where(np.abs(x - np.rint(x)) < 1e-9, np.rint(x), x)
        return np.clip(NEAREST[a["nearest_mode"]](x).astype(np.int64), 0, n_in - 1)[:, None], None
    # Taps sit around base = ceil(x) - 1, so the fraction r lies in (0, 1], as in ONNX's definition.
    base = np.ceil(x) - 1
    r = (x - base)[:, None]
    s = min(scale, 1.0) if a["antialias"] else 1.0  # antialias widens the filter when downsampling
    support = 1 if mode == "linear" else 2
    start = int(math.floor(-support / s)) + 1
    offs = np.arange(start, 2 - start)[None, :]
    t = (offs - r) * s
    w = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else _keys(t, a["cubic_coeff_a"])
    if a["antialias"]:
        w = w / w.sum(1, keepdims=True)
    idx = base.astype(np.int64)[:, None] + offs
    if a["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1), w


def _cast_back(y, dtype):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)


def resize(x, roi, scales, sizes, a):
    """Resize x per the (completed) Resize attributes `a`; see the Resize op."""
    mode, ctm = a["mode"], a["coordinate_transformation_mode"]
    for name, value, allowed in (("mode", mode, MODES), ("coordinate_transformation_mode", ctm, COORD_MODES),
                                 ("nearest_mode", a["nearest_mode"], tuple(NEAREST)),
                                 ("keep_aspect_ratio_policy", a["keep_aspect_ratio_policy"], POLICIES)):
        _check_choice(ValueError, name, value, allowed)
    if _given(scales) == _given(sizes):
        raise ValueError("exactly one of scales and sizes must be given")
    out, scale, axes = resize_geometry(ValueError, x.shape, scales if _given(scales) else None,
                             sizes if _given(sizes) else None, a["axes"], a["keep_aspect_ratio_policy"])
    r = x.ndim
    rois = [(0.0, 1.0)] * r  # per axis (start, end), in the roi input's float type
    if ctm == "tf_crop_and_resize":
        if not _given(roi):
            raise ValueError("coordinate_transformation_mode tf_crop_and_resize needs roi")
        rv = np.asarray(roi).reshape(-1)
        if rv.size != 2 * len(axes):
            raise ValueError(f"roi has {rv.size} values, expected {2 * len(axes)}")
        for i, ax in enumerate(axes):
            rois[ax] = (rv[i], rv[len(axes) + i])
    if mode != "nearest" and x.dtype.kind not in "fiu" and x.dtype.name != "bfloat16":
        raise ValueError(f"mode '{mode}' needs numeric data, got {x.dtype}")
    data = x if mode == "nearest" else x.astype(np.float64)
    outside = np.zeros((1,) * r, bool)
    for ax in axes:
        n_in = x.shape[ax]
        if out[ax] == n_in and math.isclose(scale[ax], 1.0) and rois[ax] == (0.0, 1.0):
            continue
        if n_in == 0 or out[ax] == 0:  # nothing to sample from, or nothing to produce
            data = np.zeros(data.shape[:ax] + (out[ax],) + data.shape[ax + 1:], data.dtype)
            continue
        xs = source_coords(ctm, n_in, out[ax], scale[ax], rois[ax])
        if ctm == "tf_crop_and_resize":
            shape = [1] * r
            shape[ax] = out[ax]
            outside = outside | ((xs < 0) | (xs > n_in - 1)).reshape(shape)
        idx, w = resize_taps(xs, n_in, scale[ax], a)
        g = np.take(data, idx if w is not None else idx[:, 0], axis=ax)
        if w is not None:
            wshape = (1,) * ax + w.shape + (1,) * (r - ax - 1)
            data = (g * w.reshape(wshape)).sum(axis=ax + 1)
        else:
            data = g
    if outside.any():
        data = np.where(outside, np.asarray(a["extrapolation_value"]).astype(data.dtype), data)
    return data if mode == "nearest" else _cast_back(data, x.dtype)


def _resize_infer(ctx):
    a = ctx.attrs
    for name, allowed in (("mode", MODES), ("coordinate_transformation_mode", COORD_MODES),
                          ("nearest_mode", tuple(NEAREST)), ("keep_aspect_ratio_policy", POLICIES)):
        _check_choice(ctx.error, name, a[name], allowed)
    if a["mode"] != "nearest" and not (ctx.dtype(0).is_float or ctx.dtype(0).is_int):
        raise ctx.error(f"mode '{a['mode']}' needs numeric data, got {ctx.dtype(0)}")

    def present(i):
        if not ctx.has(i):
            return False
        v = ctx.value(i)
        if v is not None:
            return v.size > 0
        s = ctx.shape(i)
        return s is None or len(s) != 1 or s[0] != 0

    has_scales, has_sizes = present(2), present(3)
    if has_scales and has_sizes and ctx.value(2) is None and ctx.shape(2) is None:
        has_scales = False  # an opset-11 placeholder of unknown shape next to real sizes
    if has_scales == has_sizes:
        raise ctx.error("exactly one of scales and sizes must be given")
    if a["coordinate_transformation_mode"] == "tf_crop_and_resize" and not present(1):
        raise ctx.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input")
    r = ctx.rank(0)
    if r is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    i = 2 if has_scales else 3
    s = ctx.shape(i)
    if s is not None and len(s) != 1:
        raise ctx.error(f"{'scales' if has_scales else 'sizes'} must be 1-D, got shape {list(s)}")
    n = len(a["axes"]) if a["axes"] else r
    if s is not None and isinstance(s[0], int) and s[0] != n:
        raise ctx.error(f"{'scales' if has_scales else 'sizes'} has {s[0]} values, expected {n}")
    v = ctx.value(i)
    if v is None:
        axes = [ctx.axis(x, r) for x in a["axes"]] if a["axes"] else range(r)
        shape = [None if d in axes else ctx.shape(0)[d] for d in range(r)]
        return [dt.TensorType(tuple(shape), ctx.dtype(0))]
    out, _, _ = resize_geometry(ctx.error, ctx.shape(0), v if has_scales else None, None if has_scales else v,
                      a["axes"], a["keep_aspect_ratio_policy"])
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _resize_ref(x, roi=None, scales=None, sizes=None, **a):
    return resize(x, roi, scales, sizes, a)


def _nonempty(v):
    """Drop an opset 11-12 placeholder input (an empty tensor standing for 'not given')."""
    if v is None:
        return None
    if v.known is not None and v.known.size == 0:
        return None
    t = v.type
    if isinstance(t, dt.TensorType) and t.is_static and t.numel == 0:
        return None
    return v


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _legacy_resize(ic, x, scales, mode):
    # Resize-10 and Upsample map output index i to input i / scale and round down.
    mode = {"bilinear": "linear"}.get(mode, mode)
    return ic.emit("Resize", [x, None, scales],
                   dict(mode=mode, coordinate_transformation_mode="asymmetric", nearest_mode="floor"))


def _resize_from_onnx(ic):
    ins = list(ic.inputs) + [None] * 4
    if ic.opset < 11:
        return _legacy_resize(ic, ins[0], ins[1], _text(ic.attrs.get("mode", "nearest")))
    return ic.emit("Resize", [ins[0], _nonempty(ins[1]), _nonempty(ins[2]), _nonempty(ins[3])], ic.attrs)


op("Resize", inputs=("X:T1", "roi:T2?", "scales:T3?", "sizes:I?"), outputs=("Y:T1",),
   types={"T1": ANY, "T2": FLT, "T3": FLT, "I": frozenset({dt.int64})},
   attrs=(Attr("antialias", "int", 0), Attr("axes", "ints", None),
          Attr("coordinate_transformation_mode", "string", "half_pixel"),
          Attr("cubic_coeff_a", "float", -0.75), Attr("exclude_outside", "int", 0),
          Attr("extrapolation_value", "float", 0.0), Attr("keep_aspect_ratio_policy", "string", "stretch"),
          Attr("mode", "string", "nearest"), Attr("nearest_mode", "string", "round_prefer_floor")),
   infer=_resize_infer, reference=_resize_ref, groups={NN}, tier=Tier.KERNEL, onnx_since=10,
   from_onnx=_resize_from_onnx,
   doc="Resample along some axes by scales or to sizes with nearest, (anti-aliased) N-linear or "
       "N-cubic interpolation, under a choice of coordinate transformation.")


# -- Upsample (deprecated) -------------------------------------------------------------------------

UPSAMPLE_ATTRS = dict(antialias=0, axes=None, coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75,
               exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
               nearest_mode="floor")


def _upsample_infer(ctx):
    mode = ctx.attrs["mode"]
    _check_choice(ctx.error, "mode", mode, ("nearest", "linear"))
    r, v = ctx.rank(0), ctx.value(1)
    if r is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if v is None:
        return [dt.TensorType((None,) * r, ctx.dtype(0))]
    if any(s < 1 for s in np.asarray(v).reshape(-1)):
        raise ctx.error(f"scales {list(np.asarray(v).reshape(-1))} must be >= 1")
    out, _, _ = resize_geometry(ctx.error, ctx.shape(0), v, None, None, "stretch")
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _upsample_from_onnx(ic):
    x = ic.inputs[0]
    if "scales" in ic.attrs:  # opset 7: scales was an attribute
        scales = ic.const(np.asarray(ic.attrs["scales"], np.float32))
    elif len(ic.inputs) > 1 and ic.inputs[1] is not None:
        scales = ic.inputs[1]
    else:
        raise ic.error("needs scales (an attribute before opset 9, an input since)")
    return _legacy_resize(ic, x, scales, _text(ic.attrs.get("mode", "nearest")))


op("Upsample", inputs=("X:T", "scales:F"), outputs=("Y:T",),
   types={"T": ANY, "F": frozenset({dt.float32})}, attrs=(Attr("mode", "string", "nearest"),),
   infer=_upsample_infer,
   reference=lambda x, scales, mode: resize(x, None, scales, None, dict(UPSAMPLE_ATTRS, mode=mode)),
   groups={NN}, tier=Tier.HIGH, onnx_since=7, from_onnx=_upsample_from_onnx,
   doc="Deprecated upsampling by scales (output index i reads input i / scale); imported as Resize.")


# -- GridSample ------------------------------------------------------------------------------------

def _gridsample_infer(ctx):
    a = ctx.attrs
    _check_choice(ctx.error, "mode", a["mode"], MODES)
    _check_choice(ctx.error, "padding_mode", a["padding_mode"], ("zeros", "border", "reflection"))
    x, g = ctx.shape(0), ctx.shape(1)
    r = len(x) if x is not None else (len(g) if g is not None else None)
    if r is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if r < 3:
        raise ctx.error(f"input rank {r} is too small: expected (N, C, spatial...)")
    if x is not None and g is not None:
        if len(g) != r:
            raise ctx.error(f"grid rank {len(g)} differs from the input rank {r}")
        if isinstance(g[-1], int) and g[-1] != r - 2:
            raise ctx.error(f"grid's last dim is {g[-1]}, expected the number of spatial axes {r - 2}")
        if isinstance(g[0], int) and isinstance(x[0], int) and g[0] != x[0]:
            raise ctx.error(f"grid batch {g[0]} differs from the input batch {x[0]}")
    n = x[0] if x is not None else g[0]
    c = x[1] if x is not None else None
    sp = tuple(g[1:-1]) if g is not None else (None,) * (r - 2)
    return [dt.TensorType((n, c, *sp), ctx.dtype(0))]


def _reflect(c, lo, hi):
    """Fold coordinates into [lo, hi] by mirroring at the borders, repeatedly."""
    span = hi - lo
    if span <= 0:
        return np.full_like(c, lo)
    below, above = c < lo, c > hi
    dx = np.where(below, lo - c, c - hi)
    n = np.trunc(dx / span)
    rem = dx - n * span
    even = n % 2 == 0
    return np.where(below, np.where(even, lo + rem, hi - rem),
                    np.where(above, np.where(even, hi - rem, lo + rem), c))


def _gridsample_ref(x, grid, *, align_corners, mode, padding_mode):
    nsp = x.ndim - 2
    if grid.ndim != x.ndim or grid.shape[-1] != nsp or grid.shape[0] != x.shape[0]:
        raise ValueError(f"grid shape {list(grid.shape)} does not fit input shape {list(x.shape)}")
    dims = x.shape[2:]
    gd = grid if grid.dtype in (np.float32, np.float64) else grid.astype(np.float32)
    taps_per_axis = []
    for i in range(nsp):
        n = dims[i]
        gi = gd[..., nsp - 1 - i]  # grid lists coordinates innermost axis first
        c = (gi + 1) / 2 * (n - 1) if align_corners else ((gi + 1) * n - 1) / 2
        if mode == "nearest":
            c = np.rint(c)
        c = c.astype(np.float64)
        lo, hi = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
        if padding_mode == "border":
            c = np.where((c < lo) | (c > hi), np.clip(c, 0, n - 1), c)
        elif padding_mode == "reflection":
            c = _reflect(c, lo, hi)
        if mode == "nearest":
            idx, w = [np.trunc(c)], [np.ones_like(c)]
        else:
            f = np.floor(c)
            t = c - f
            if mode == "linear":
                idx, w = [f, f + 1], [1 - t, t]
            else:
                idx = [f - 1, f, f + 1, f + 2]
                w = [_keys(t + 1, -0.75), _keys(t, -0.75), _keys(1 - t, -0.75), _keys(2 - t, -0.75)]
        fixed = []
        for j, wj in zip(idx, w):
            if padding_mode == "zeros":
                wj = np.where((j >= 0) & (j <= n - 1), wj, 0.0)
            elif padding_mode == "reflection":
                j = np.trunc(_reflect(j, lo, hi))
            fixed.append((np.clip(j, 0, n - 1).astype(np.int64), wj))
        taps_per_axis.append(fixed)
    xt = np.moveaxis(x, 1, -1).astype(np.float64)  # (N, *dims, C)
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    y = np.zeros(grid.shape[:-1] + (x.shape[1],))
    for combo in itertools.product(*taps_per_axis):
        weight = math.prod(wj for _, wj in combo)
        y = y + xt[(batch, *(j for j, _ in combo))] * weight[..., None]
    return np.moveaxis(y, -1, 1).astype(x.dtype)


def _gridsample_from_onnx(ic):
    attrs = dict(ic.attrs)
    if "mode" in attrs:  # opset 16 spelled the modes bilinear / bicubic
        mode = _text(attrs["mode"])
        attrs["mode"] = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return ic.emit("GridSample", ic.inputs, attrs)


op("GridSample", inputs=("X:T1", "grid:T2"), outputs=("Y:T1",),
   types={"T1": dt.NUMERIC, "T2": FLT},
   attrs=(Attr("align_corners", "int", 0), Attr("mode", "string", "linear"),
          Attr("padding_mode", "string", "zeros")),
   infer=_gridsample_infer, reference=_gridsample_ref, groups={NN}, tier=Tier.HIGH, onnx_since=16,
   from_onnx=_gridsample_from_onnx,
   doc="Sample X at the normalized positions of grid ([-1, 1] spans the input) with nearest, "
       "N-linear or N-cubic interpolation and zeros/border/reflection padding.")


# -- AffineGrid ------------------------------------------------------------------------------------

def _affine_infer(ctx):
    th = ctx.shape(0)
    size = ints(ctx.value(1))
    if th is not None and (len(th) != 3 or (isinstance(th[1], int) and isinstance(th[2], int)
                                             and th[2] != th[1] + 1)):
        raise ctx.error(f"theta shape {list(th)} should be (N, 2, 3) or (N, 3, 4)")
    if size is not None:
        if len(size) not in (4, 5):
            raise ctx.error(f"size {size} should be (N, C, H, W) or (N, C, D, H, W)")
        if th is not None and isinstance(th[1], int) and th[1] != len(size) - 2:
            raise ctx.error(f"theta shape {list(th)} does not fit the {len(size) - 2}-D size {size}")
        if any(v < 0 for v in size):
            raise ctx.error(f"size {size} has negative entries")
        return [dt.TensorType((size[0], *size[2:], len(size) - 2), ctx.dtype(0))]
    s = ctx.shape(1)
    nsp = s[0] - 2 if s is not None and len(s) == 1 and isinstance(s[0], int) else None
    if nsp is None and th is not None and isinstance(th[1], int):
        nsp = th[1]
    if nsp is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    return [dt.TensorType((th[0] if th is not None else None,) + (None,) * nsp + (nsp,), ctx.dtype(0))]


def _affine_ref(theta, size, *, align_corners):
    size = [int(v) for v in np.asarray(size).reshape(-1)]
    sp = size[2:]
    nsp = len(sp)
    if nsp not in (2, 3) or theta.shape[1:] != (nsp, nsp + 1):
        raise ValueError(f"theta shape {list(theta.shape)} does not fit size {size}")
    lines = []
    for n in sp:
        if n <= 1 and align_corners:
            lines.append(np.full(n, -1.0))  # ONNX's function body and reference start at -1
        elif align_corners:
            lines.append(np.linspace(-1.0, 1.0, n))
        else:
            lines.append((2 * np.arange(n) + 1) / n - 1)
    mesh = np.meshgrid(*lines, indexing="ij")
    base = np.stack([*reversed(mesh), np.ones(tuple(sp))], -1).reshape(-1, nsp + 1)  # (x, y[, z], 1)
    grid = np.einsum("pk,njk->npj", base, theta.astype(np.float64))
    return grid.reshape(theta.shape[0], *sp, nsp).astype(theta.dtype)


op("AffineGrid", inputs=("theta:T1", "size:T2"), outputs=("grid:T1",),
   types={"T1": FLT, "T2": frozenset({dt.int64})}, attrs=(Attr("align_corners", "int", 0),),
   infer=_affine_infer, reference=_affine_ref, groups={NN}, tier=Tier.HIGH, onnx_since=20,
   doc="The sampling grid (for GridSample) of a batch of 2-D or 3-D affine transforms over a "
       "normalized [-1, 1] output canvas of the given size.")
