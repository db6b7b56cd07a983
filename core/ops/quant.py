"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the quantized
kernels QLinearMatMul, QLinearConv, MatMulInteger.

Scales and zero points are per-tensor (a scalar or one-element vector), per-axis (1-D along
`axis`) or blocked (the input's rank, `axis` shrunk by `block_size`); `_expand` spreads them
over the input so every formula below is plain elementwise NumPy.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ._shape import broadcast_shapes
from .cast import cast_array
from .registry import ELEMENTWISE, MATMUL, NN, QUANT, Attr, Tier, op

SUB_BYTE_INTS = (dt.int4, dt.uint4, dt.int2, dt.uint2)
F8 = frozenset({dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz})
Q_INTS = frozenset({dt.int8, dt.uint8, dt.int16, dt.uint16, *SUB_BYTE_INTS})
#: What QuantizeLinear can produce and DequantizeLinear can read (int32 only as DQ input).
Q_TYPES = Q_INTS | F8 | {dt.float4e2m1}
SCALE_FLOATS = frozenset({dt.float32, dt.float16, dt.bfloat16})
INT8S = frozenset({dt.int8, dt.uint8})
F32 = frozenset({dt.float32})
I32 = frozenset({dt.int32})

_INT_RANGE = {dt.int2: (-2, 1), dt.uint2: (0, 3), dt.int4: (-8, 7), dt.uint4: (0, 15)}


def int_range(t: dt.DType) -> tuple[int, int]:
    if t in _INT_RANGE:
        return _INT_RANGE[t]
    info = np.iinfo(t.np)
    return int(info.min), int(info.max)


def _drop_unset_dtypes(ic):
    """ONNX spells 'not given' for output_dtype/precision as 0; glow leaves the attribute out."""
    attrs = {k: v for k, v in ic.attrs.items()
             if not (k in ("output_dtype", "precision") and v == 0)}
    return ic.emit(ic.opdef.name, ic.inputs, attrs)


# -- scale/zero-point layout ---------------------------------------------------------------------
def _check_layout(ctx, i, what):
    """Shape-check scale-like input i against input 0 (per-tensor, per-axis or blocked)."""
    xs, ps = ctx.shape(0), ctx.shape(i)
    axis, block = ctx.attrs["axis"], ctx.attrs["block_size"]
    if block < 0:
        raise ctx.error(f"block_size must be positive, got {block}")
    if ps is None or xs is None:
        return
    if block == 0:
        if _per_tensor(ps):
            return
        if len(ps) != 1:
            raise ctx.error(f"{what} must be a scalar or 1-D (or give block_size), got shape {list(ps)}")
        a = ctx.axis(axis, len(xs))
        if isinstance(ps[0], int) and isinstance(xs[a], int) and ps[0] != xs[a]:
            raise ctx.error(f"{what} has {ps[0]} entries but axis {axis} of the input has {xs[a]}")
        return
    if len(ps) != len(xs):
        raise ctx.error(f"blocked {what} must have the input's rank {len(xs)}, got shape {list(ps)}")
    a = ctx.axis(axis, len(xs))
    for k, (d, p) in enumerate(zip(xs, ps)):
        if not (isinstance(d, int) and isinstance(p, int)):
            continue
        want = math.ceil(d / block) if k == a else d
        if p != want:
            raise ctx.error(f"blocked {what} shape {list(ps)} does not fit input shape {list(xs)} with "
                            f"axis {axis} and block_size {block}")


def _expand(p, x_shape, axis, block_size):
    """Spread a scale or zero point over an input of shape x_shape."""
    p = np.asarray(p)
    rank = len(x_shape)
    if p.ndim == 0 or (p.ndim == 1 and p.size == 1 and block_size == 0):
        return p.reshape(())
    axis = axis % rank
    if block_size > 0:
        return np.repeat(p, block_size, axis=axis).take(np.arange(x_shape[axis]), axis=axis)
    return p.reshape([1] * axis + [-1] + [1] * (rank - axis - 1))


def _per_tensor(shape):
    return shape is not None and (len(shape) == 0 or tuple(shape) == (1,))


def _zero_point_same_shape(ctx, s, z):
    if _per_tensor(ctx.shape(s)) and _per_tensor(ctx.shape(z)):
        return  # a scalar and a one-element vector both mean per-tensor
    if ctx.shape(s) is not None and ctx.shape(z) is not None:
        if len(ctx.shape(s)) != len(ctx.shape(z)) or any(
                isinstance(a, int) and isinstance(b, int) and a != b
                for a, b in zip(ctx.shape(s), ctx.shape(z))):
            raise ctx.error(f"scale shape {list(ctx.shape(s))} and zero point shape "
                            f"{list(ctx.shape(z))} differ")


# -- QuantizeLinear ------------------------------------------------------------------------------
def _q_out_type(attrs, zp_dtype):
    return attrs["output_dtype"] or zp_dtype or dt.uint8


def _quantize_infer(ctx):
    out = ctx.attrs["output_dtype"]
    zp = ctx.dtype(2) if ctx.has(2) else None
    if out is not None and zp is not None and out != zp:
        raise ctx.error(f"output_dtype {out.name} differs from the zero point's type {zp.name}")
    out = _q_out_type(ctx.attrs, zp)
    if out not in Q_TYPES:
        raise ctx.error(f"cannot quantize to {out.name}")
    prec = ctx.attrs["precision"]
    if prec is not None and prec not in SCALE_FLOATS | {dt.float64}:
        raise ctx.error(f"precision must be a float type, got {prec.name}")
    _check_layout(ctx, 1, "y_scale")
    if ctx.has(2):
        _check_layout(ctx, 2, "y_zero_point")
        _zero_point_same_shape(ctx, 1, 2)
    return [dt.TensorType(ctx.shape(0), out)]


def division_type(scale_dtype, precision):
    t = precision or dt.from_numpy(scale_dtype)
    # int32 and e8m0 scales have no sensible arithmetic of their own
    return t.np if t in SCALE_FLOATS | {dt.float64} else np.dtype(np.float64 if t == dt.int32
                                                                   else np.float32)


def quantize(x, scale, zero_point, out: dt.DType, saturate=True, axis=1, block_size=0,
             precision=None):
    """saturate(round_half_even(x / scale) + zero_point) as element type `out`."""
    prec = division_type(scale.dtype, precision)
    s = _expand(scale, x.shape, axis, block_size).astype(prec)
    q = x.astype(prec) / s
    zp = 0.0 if zero_point is None else _expand(zero_point, x.shape, axis, block_size)
    if out.is_int:
        lo, hi = int_range(out)
        zp = np.asarray(zp).astype(np.float64)
        return np.clip(np.rint(q).astype(np.float64) + zp, lo, hi).astype(out.np)
    zp = np.asarray(zp).astype(np.float32)
    return cast_array(q.astype(np.float32) + zp, out, saturate)


op("QuantizeLinear", inputs=("x:T1", "y_scale:T2", "y_zero_point:T3?"), outputs=("y:T3",),
   types={"T1": frozenset({dt.float32, dt.float16, dt.bfloat16, dt.int32}),
          "T2": SCALE_FLOATS | {dt.int32, dt.float8e8m0}, "T3": Q_TYPES},
   attrs=(Attr("axis", "int", 1), Attr("block_size", "int", 0), Attr("saturate", "int", 1),
          Attr("output_dtype", "dtype", None), Attr("precision", "dtype", None)),
   infer=_quantize_infer,
   reference=lambda x, s, z=None, *, axis, block_size, saturate, output_dtype, precision: quantize(
       x, s, z, _q_out_type({"output_dtype": output_dtype}, None if z is None else dt.from_numpy(z.dtype)),
       bool(saturate), axis, block_size, precision),
   groups={QUANT}, tier=Tier.HIGH, onnx_since=10, from_onnx=_drop_unset_dtypes,
   doc="Quantizes x to y = saturate(round(x / y_scale) + y_zero_point), per tensor, axis or block.")


# -- DequantizeLinear ----------------------------------------------------------------------------
def _dq_out_type(ctx_attrs, scale_dtype):
    return ctx_attrs["output_dtype"] or scale_dtype


def _dequantize_infer(ctx):
    out = _dq_out_type(ctx.attrs, ctx.dtype(1))
    if out not in SCALE_FLOATS:
        hint = " (give output_dtype)" if ctx.attrs["output_dtype"] is None else ""
        raise ctx.error(f"cannot dequantize to {out.name}{hint}")
    _check_layout(ctx, 1, "x_scale")
    if ctx.has(2):
        _check_layout(ctx, 2, "x_zero_point")
        _zero_point_same_shape(ctx, 1, 2)
    return [dt.TensorType(ctx.shape(0), out)]


def dequantize(x, scale, zero_point, out: dt.DType, axis=1, block_size=0):
    """(x - zero_point) * scale in element type `out`; the subtraction is exact."""
    exact = np.int64 if dt.from_numpy(x.dtype).is_int else np.float32
    d = x.astype(exact)
    if zero_point is not None:
        d = d - _expand(zero_point, x.shape, axis, block_size).astype(exact)
    s = _expand(scale, x.shape, axis, block_size).astype(np.float32).astype(out.np)
    return (d.astype(out.np) * s).astype(out.np)


op("DequantizeLinear", inputs=("x:T1", "x_scale:T2", "x_zero_point:T1?"), outputs=("y:T3",),
   types={"T1": Q_TYPES | {dt.int32}, "T2": SCALE_FLOATS | {dt.float8e8m0}, "T3": SCALE_FLOATS},
   attrs=(Attr("axis", "int", 1), Attr("block_size", "int", 0), Attr("output_dtype", "dtype", None)),
   infer=_dequantize_infer,
   reference=lambda x, s, z=None, *, axis, block_size, output_dtype: dequantize(
       x, s, z, output_dtype or dt.from_numpy(s.dtype), axis, block_size),
   groups={QUANT}, tier=Tier.HIGH, onnx_since=10, from_onnx=_drop_unset_dtypes,
   doc="Dequantizes x to y = (x - x_zero_point) * x_scale, per tensor, axis or block.")


# -- DynamicQuantizeLinear -----------------------------------------------------------------------
def _dynamic_quantize(x):
    lo = min(0.0, float(np.min(x))) if x.size else 0.0
    hi = max(0.0, float(np.max(x))) if x.size else 0.0
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    if scale == 0:  # all zeros: any scale works; keep it finite and the zero point at 0
        return (np.zeros(x.shape, np.uint8), np.asarray(scale, np.float32), np.asarray(0, np.uint8))
    zp = np.clip(np.rint(np.float32(-lo) / scale), 0, 255)
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)


op("DynamicQuantizeLinear", inputs=("x:T1",), outputs=("y:T2", "y_scale:T1", "y_zero_point:T2"),
   types={"T1": F32, "T2": frozenset({dt.uint8})},
   infer=lambda ctx: [dt.TensorType(ctx.shape(0), dt.uint8), dt.TensorType((), dt.float32),
                      dt.TensorType((), dt.uint8)],
   reference=_dynamic_quantize, groups={QUANT}, tier=Tier.HIGH, onnx_since=11,
   doc="Quantizes x to uint8 with a scale and zero point chosen from x's range (which includes 0).")


# -- integer matmul ------------------------------------------------------------------------------
def _matmul_shape(ctx, a, b):
    """numpy.matmul's output shape for shapes a and b (None where unknown)."""
    if a is None or b is None:
        return None
    if len(a) == 0 or len(b) == 0:
        raise ctx.error("matmul inputs must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    k1, k2 = a2[-1], b2[-2]
    if isinstance(k1, int) and isinstance(k2, int) and k1 != k2:
        raise ctx.error(f"matmul inner dimensions differ: {list(a)} @ {list(b)}")
    from ._shape import broadcast_shapes

    batch = broadcast_shapes(ctx, a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _row_param(p, a):
    """A per-row (1-D, length M) parameter of a as a column, else as given."""
    p = np.asarray(p)
    return p.reshape(-1, 1) if p.ndim == 1 and p.size > 1 and a.ndim >= 2 else p


def _centered(x, zp, row=False):
    """x - zero_point, exactly: int64 for integers, float64 for float 8."""
    exact = np.int64 if dt.from_numpy(x.dtype).is_int else np.float64
    if zp is None:
        return x.astype(exact)
    zp = _row_param(zp, x) if row else np.asarray(zp)
    return x.astype(exact) - zp.astype(exact)


def _requantize(acc, scale, y_scale, y_zp):
    """Round acc * scale / y_scale to y_zp's type, adding y_zp (float math in float32)."""
    out = dt.from_numpy(y_zp.dtype)
    real = (acc.astype(np.float64) * scale.astype(np.float64)).astype(np.float32)
    q = real / y_scale.astype(np.float32)
    if out.is_int:
        lo, hi = int_range(out)
        return np.clip(np.rint(q).astype(np.float64) + y_zp.astype(np.float64), lo, hi).astype(out.np)
    return cast_array(q + y_zp.astype(np.float32), out, True)


def _requantize_op(acc, a_scale, b_scale, y_scale, y_zero_point):
    return _requantize(acc, np.asarray(a_scale, np.float64) * np.asarray(b_scale, np.float64),
                       np.asarray(y_scale), np.asarray(y_zero_point))


def _requantize_infer(ctx):
    shapes = [ctx.shape(i) for i in range(5)]
    return [dt.TensorType(broadcast_shapes(ctx, *shapes), ctx.dtype(4))]


# glow-internal (no ONNX spelling): the requantisation step of QLinearConv and QLinearMatMul as
# one elementwise op, so a backend can compute it natively (the cpu backend does most of it in
# float32, exactly); it lowers to the float64 formula everywhere else (rules_quant).
op("Requantize", domain="glow",
   inputs=("acc:I", "a_scale:S", "b_scale:S", "y_scale:S", "y_zero_point:T"), outputs=("y:T",),
   types={"I": I32, "S": F32, "T": INT8S}, infer=_requantize_infer, reference=_requantize_op,
   groups={QUANT, ELEMENTWISE}, tier=Tier.KERNEL,
   doc="y = saturate(round(float32(acc * a_scale * b_scale) / y_scale) + y_zero_point), the scale "
       "product and acc * scale in float64 (exact, then one rounding to float32), broadcasting.")


def _qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    acc = np.matmul(_centered(a, a_zp, row=True), _centered(b, b_zp))
    scale = _row_param(a_scale, a).astype(np.float64) * np.asarray(b_scale, np.float64)
    return _requantize(acc, scale, np.asarray(y_scale), np.asarray(y_zp))


def _qlinear_matmul_infer(ctx):
    return [dt.TensorType(_matmul_shape(ctx, ctx.shape(0), ctx.shape(3)), ctx.dtype(7))]


Q8 = INT8S | F8
op("QLinearMatMul",
   inputs=("a:T1", "a_scale:TS", "a_zero_point:T1", "b:T2", "b_scale:TS", "b_zero_point:T2",
           "y_scale:TS", "y_zero_point:T3"),
   outputs=("y:T3",), types={"T1": Q8, "T2": Q8, "T3": Q8, "TS": SCALE_FLOATS},
   infer=_qlinear_matmul_infer, reference=_qlinear_matmul, groups={QUANT, MATMUL}, tier=Tier.HIGH,
   onnx_since=10, doc="Matrix product of quantized a and b, requantized with y_scale/y_zero_point.")


def _matmul_integer(a, b, a_zp=None, b_zp=None):
    return np.matmul(_centered(a, a_zp, row=True), _centered(b, b_zp)).astype(np.int32)


op("MatMulInteger", inputs=("A:T1", "B:T2", "a_zero_point:T1?", "b_zero_point:T2?"),
   outputs=("Y:T3",), types={"T1": INT8S, "T2": INT8S, "T3": I32},
   infer=lambda ctx: [dt.TensorType(_matmul_shape(ctx, ctx.shape(0), ctx.shape(1)), dt.int32)],
   reference=_matmul_integer, groups={QUANT, MATMUL}, tier=Tier.HIGH, onnx_since=10,
   doc="Integer matrix product (A - a_zero_point) @ (B - b_zero_point) accumulated in int32.")


# -- QLinearConv ---------------------------------------------------------------------------------
def _conv_geometry(attrs, in_spatial, kernel):
    """(out dims, pads begin+end) for one conv; dims may be None (unknown)."""
    nd = len(kernel)
    strides = attrs["strides"] or (1,) * nd
    dil = attrs["dilations"] or (1,) * nd
    pads = list(attrs["pads"] or (0,) * (2 * nd))
    auto = attrs["auto_pad"]
    out = []
    for i in range(nd):
        d, k, s, r = in_spatial[i], kernel[i], strides[i], dil[i]
        if not isinstance(d, int) or not isinstance(k, int):
            out.append(None)
            continue
        span = r * (k - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-d // s)
            total = max(0, (o - 1) * s + span - d)
            small = total // 2
            pads[i], pads[i + nd] = (small, total - small) if auto == "SAME_UPPER" else (total - small,
                                                                                          small)
        elif auto == "VALID":
            pads[i] = pads[i + nd] = 0
        out.append((d + pads[i] + pads[i + nd] - span) // s + 1)
    return out, pads, strides, dil


def _qlinear_conv_infer(ctx):
    xs, ws = ctx.shape(0), ctx.shape(3)
    if ctx.attrs["auto_pad"] not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.error(f"unknown auto_pad {ctx.attrs['auto_pad']!r}")
    if xs is None or ws is None:
        return [dt.TensorType(None, ctx.dtype(7))]
    if len(xs) < 3 or len(ws) != len(xs):
        raise ctx.error(f"x {list(xs)} and w {list(ws)} must be (N, C, spatial...) of the same rank")
    nd = len(xs) - 2
    kernel = tuple(ctx.attrs["kernel_shape"] or ws[2:])
    for name in ("strides", "dilations"):
        if ctx.attrs[name] is not None and len(ctx.attrs[name]) != nd:
            raise ctx.error(f"{name} needs {nd} entries, got {list(ctx.attrs[name])}")
    if ctx.attrs["pads"] is not None and len(ctx.attrs["pads"]) != 2 * nd:
        raise ctx.error(f"pads needs {2 * nd} entries, got {list(ctx.attrs['pads'])}")
    g = ctx.attrs["group"]
    c, cw = xs[1], ws[1]
    if isinstance(c, int) and isinstance(cw, int) and c != cw * g:
        raise ctx.error(f"x has {c} channels but w expects {cw} x group {g}")
    out, *_ = _conv_geometry(ctx.attrs, xs[2:], kernel)
    if any(isinstance(o, int) and o <= 0 for o in out):
        raise ctx.error(f"kernel {list(kernel)} does not fit input {list(xs)}")
    return [dt.TensorType((xs[0], ws[0], *out), ctx.dtype(7))]


def _per_channel(p, rank):
    p = np.asarray(p)
    return p.reshape([-1] + [1] * (rank - 1)) if p.ndim == 1 and p.size > 1 else p.reshape(())


def _conv_int(x, w, pads, strides, dil, group):
    """Grouped N-d convolution of integer tensors (cross-correlation, as ONNX Conv), int64 sums."""
    nd = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    ks = w.shape[2:]
    out = [(x.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    n, m = x.shape[0], w.shape[0]
    cg, mg = x.shape[1] // group, m // group
    y = np.zeros((n, m, *out), dtype=np.int64)
    for g in range(group):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg]
        for k in np.ndindex(*ks):
            window = tuple(slice(k[i] * dil[i], k[i] * dil[i] + strides[i] * (out[i] - 1) + 1, strides[i])
                           for i in range(nd))
            patch = xg[(slice(None), slice(None), *window)]
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wg[(slice(None), slice(None),
                                                                                 *k)])
    return y


def _qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B=None, *, auto_pad, dilations,
                  group, kernel_shape, pads, strides):
    attrs = {"auto_pad": auto_pad, "dilations": dilations, "pads": pads, "strides": strides}
    _, pads_, strides_, dil = _conv_geometry(attrs, x.shape[2:], kernel_shape or w.shape[2:])
    xc = x.astype(np.int64) - np.asarray(x_zp).astype(np.int64)
    wc = w.astype(np.int64) - _per_channel(w_zp, w.ndim).astype(np.int64)
    acc = _conv_int(xc, wc, pads_, strides_, dil, group)
    if B is not None:
        acc = acc + B.astype(np.int64).reshape([1, -1] + [1] * (x.ndim - 2))
    scale = np.asarray(x_scale, np.float64) * _per_channel(w_scale, x.ndim - 1).astype(np.float64)
    return _requantize(acc, scale, np.asarray(y_scale), np.asarray(y_zp))


op("QLinearConv",
   inputs=("x:T1", "x_scale:F", "x_zero_point:T1", "w:T2", "w_scale:F", "w_zero_point:T2",
           "y_scale:F", "y_zero_point:T3", "B:T4?"),
   outputs=("y:T3",), types={"T1": INT8S, "T2": INT8S, "T3": INT8S, "T4": I32, "F": F32},
   attrs=(Attr("auto_pad", "string", "NOTSET"), Attr("dilations", "ints", None),
          Attr("group", "int", 1), Attr("kernel_shape", "ints", None), Attr("pads", "ints", None),
          Attr("strides", "ints", None)),
   infer=_qlinear_conv_infer, reference=_qlinear_conv, groups={QUANT, NN}, tier=Tier.HIGH,
   onnx_since=10, doc="Convolution of quantized x and w (optional int32 bias), requantized to y.")
