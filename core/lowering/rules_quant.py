"""Lowering rules for casts and linear quantization: CastLike, BitCast, QuantizeLinear,
DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

The rules follow the op references in ops/quant.py and ops/conv.py step by step, in the same
precisions, so results agree bit for bit: integer zero points are subtracted exactly (int32, or
int64 for int32 data), accumulations are exact (int32 MatMul; float64 Conv, whose sums of 8-bit
products are exact integers), and requantization rounds once, half to even (the Round op's own
rule), before clamping to the output type's range.

Scales and zero points may be per-tensor, per-axis or blocked; `spread` lays them over the data so
every formula is a plain broadcasting elementwise op.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops import get_op
from ..ops.quant import division_type, int_range
from ._build import cast, const, ints, op1
from .registry import lowering

INT8S = frozenset({dt.int8, dt.uint8})



def reshape(rb, v, shape):
    return op1(rb, "Reshape", v, ints(rb, shape))


def clamp(rb, v, lo, hi):
    t = v.type.dtype
    return op1(rb, "Max", op1(rb, "Min", v, const(rb, hi, t)), const(rb, lo, t))


# -- scale / zero-point layout ---------------------------------------------------------------------

def spread(rb, p, x_shape, axis, block_size):
    """A scale or zero point laid over data of shape x_shape (as ops/quant.py's `_expand`):
    per-tensor becomes 0-d, per-axis a broadcastable column, blocked a Gather of repeated blocks.
    None when a needed dim is unknown."""
    pshape = p.type.shape
    if pshape is None or x_shape is None:
        return None
    rank = len(x_shape)
    if len(pshape) == 0 or (tuple(pshape) == (1,) and block_size == 0):
        return p if len(pshape) == 0 else reshape(rb, p, [])
    a = axis % rank
    if block_size > 0:
        d = x_shape[a]
        if not isinstance(d, int):
            return None
        idx = rb.constant(np.arange(d, dtype=np.int64) // block_size, name="blocks")
        return op1(rb, "Gather", p, idx, axis=a)
    return reshape(rb, p, [1] * a + [-1] + [1] * (rank - a - 1))


def row_param(rb, p, a_rank):
    """A per-row (1-D, length M) matmul parameter of a as an (M, 1) column (ops/quant `_row_param`)."""
    shape = p.type.shape
    if shape is None:
        return None
    if len(shape) == 1 and shape[0] != 1 and a_rank >= 2:
        return reshape(rb, p, [-1, 1])
    return p


def first_element(rb, p):
    """p.reshape(-1)[0] as a 0-d value (ConvInteger's x_zero_point)."""
    flat = reshape(rb, p, [-1])
    return op1(rb, "Gather", flat, rb.constant(np.asarray(0, np.int64), name="i"), axis=0)


def per_channel(rb, p, rank):
    """A per-output-channel parameter as a (M, 1, ...) column of `rank` dims, else a scalar."""
    shape = p.type.shape
    if shape is None:
        return None
    if len(shape) == 1 and shape[0] != 1:
        return reshape(rb, p, [-1] + [1] * (rank - 1))
    return reshape(rb, p, [])


# -- shared tails ----------------------------------------------------------------------------------

def saturate_to(rb, q, zero_point, out: dt.DType, saturate=1):
    """round(q) + zero_point, saturated to `out` (ops/quant `quantize`/`_requantize` tails).

    Integer outputs round half to even in q's precision, widen exactly to float32 (float64 stays)
    to add the zero point, and clamp. float32 holds every sum whose result is not clamped: a
    rounded |q| that is not exact in float32 is far outside every quantized range anyway.
    Float (8/4-bit) outputs add the zero point in float32 and let Cast saturate and round.
    """
    if out.is_int:
        wide = dt.float64 if q.type.dtype == dt.float64 else dt.float32
        r = cast(rb, op1(rb, "Round", q), wide)
        if zero_point is not None:
            r = op1(rb, "Add", r, cast(rb, zero_point, wide))
        lo, hi = int_range(out)
        return cast(rb, clamp(rb, r, lo, hi), out)
    r = cast(rb, q, dt.float32)
    if zero_point is not None:
        r = op1(rb, "Add", r, cast(rb, zero_point, dt.float32))
    return op1(rb, "Cast", r, to=out, saturate=saturate)


def requantize(rb, acc, scale, y_scale, y_zero_point):
    """(acc * scale) rounded to float32, divided by y_scale, saturated to y_zero_point's type
    (ops/quant `_requantize`): acc and scale are float64."""
    real = cast(rb, op1(rb, "Mul", acc, scale), dt.float32)
    q = op1(rb, "Div", real, cast(rb, y_scale, dt.float32))
    return saturate_to(rb, q, y_zero_point, y_zero_point.type.dtype)


def requantize_node(rb, acc, a_scale, b_scale, y_scale, y_zero_point):
    """The `Requantize` node (glow-internal, ops/quant) of an int32 acc with the scale
    a_scale x b_scale, for an int8/uint8 y: one elementwise op a backend may compute natively,
    lowered to `requantize`'s float64 formula elsewhere (its rule below). Scales of float16 or
    bfloat16 widen to float32 exactly. None where the op does not fit (then call `requantize`)."""
    if acc.type.dtype != dt.int32 or y_zero_point is None or y_zero_point.type.dtype not in INT8S:
        return None
    scales = [cast(rb, s, dt.float32) for s in (a_scale, b_scale, y_scale)]
    return rb.emit1(get_op("Requantize", "glow"), [acc, *scales, y_zero_point])


@lowering("Requantize", domain="glow")
def lower_requantize(rb, node, ins):
    acc, a_s, b_s, y_s, y_zp = ins
    f64 = dt.float64
    scale = op1(rb, "Mul", cast(rb, a_s, f64), cast(rb, b_s, f64))  # exact: two float32 significands
    return [requantize(rb, cast(rb, acc, f64), scale, y_s, y_zp)]


def centered_int(rb, x, zero_point):
    """x - zero_point exactly, in int32 (int64 for int32 data, whose difference may not fit)."""
    exact = dt.int64 if x.type.dtype in (dt.int32, dt.int64, dt.uint32) else dt.int32
    d = cast(rb, x, exact)
    return d if zero_point is None else op1(rb, "Sub", d, zero_point if zero_point.type.dtype == exact
                                            else cast(rb, zero_point, exact))


# -- casts -----------------------------------------------------------------------------------------

@lowering("CastLike")
def lower_cast_like(rb, node, ins):
    x, like = ins
    return [op1(rb, "Cast", x, to=like.type.dtype, saturate=node.attrs["saturate"],
                round_mode=node.attrs["round_mode"])]


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------------------

@lowering("QuantizeLinear")
def lower_quantize_linear(rb, node, ins):
    # y = saturate(round_half_even(x / scale) + zero_point), the division in the op's precision
    # (the `precision` attribute, else the scale's float type; int32 scales divide in float64).
    x, scale, zp = (list(ins) + [None, None])[:3]
    a = node.attrs
    shape = x.type.shape
    prec = dt.from_numpy(division_type(scale.type.dtype.np, a["precision"]))
    s = spread(rb, cast(rb, scale, prec), shape, a["axis"], a["block_size"])
    z = None
    if zp is not None:
        wide = dt.float64 if prec == dt.float64 else dt.float32
        z = spread(rb, cast(rb, zp, wide), shape, a["axis"], a["block_size"])
        if z is None:
            return None
    if s is None:
        return None
    q = op1(rb, "Div", cast(rb, x, prec), s)
    return [saturate_to(rb, q, z, node.outputs[0].type.dtype, a["saturate"])]


@lowering("DequantizeLinear")
def lower_dequantize_linear(rb, node, ins):
    # y = (x - zero_point) * scale: the difference is exact (integers in int32/int64, float 8/4
    # formats in float32), then rounded once to the output type and multiplied there.
    x, scale, zp = (list(ins) + [None, None])[:3]
    a = node.attrs
    out = node.outputs[0].type.dtype
    shape = x.type.shape
    if x.type.dtype.is_int:
        z = None if zp is None else spread(rb, centered_int(rb, zp, None), shape, a["axis"],
                                           a["block_size"])
        d = centered_int(rb, x, z)
    else:
        z = None if zp is None else spread(rb, cast(rb, zp, dt.float32), shape, a["axis"],
                                           a["block_size"])
        d = cast(rb, x, dt.float32)
        d = d if z is None else op1(rb, "Sub", d, z)
    s = spread(rb, cast(rb, cast(rb, scale, dt.float32), out), shape, a["axis"], a["block_size"])
    if s is None or (zp is not None and z is None):
        return None
    return [op1(rb, "Mul", cast(rb, d, out), s)]


@lowering("DynamicQuantizeLinear")
def lower_dynamic_quantize_linear(rb, node, ins):
    # The range [min(x, 0), max(x, 0)] maps onto uint8 0..255: scale = range / 255 and
    # zero_point = round(-min / scale). A zero range (x all zeros) keeps scale 0 and quantizes
    # with a stand-in scale of 1, giving the reference's zeros.
    (x,) = ins
    shape = x.type.shape
    if shape is None:
        return None
    f32 = dt.float32
    zero = const(rb, 0, f32)
    if 0 in shape:
        lo = hi = zero
    elif len(shape) == 0:
        lo = hi = x
    else:
        axes = ints(rb, range(len(shape)))
        lo = op1(rb, "ReduceMin", x, axes, keepdims=0)
        hi = op1(rb, "ReduceMax", x, axes, keepdims=0)
    lo, hi = op1(rb, "Min", lo, zero), op1(rb, "Max", hi, zero)
    scale = op1(rb, "Div", op1(rb, "Sub", hi, lo), const(rb, 255, f32))
    safe = op1(rb, "Where", op1(rb, "Equal", scale, zero), const(rb, 1, f32), scale)
    zp = clamp(rb, op1(rb, "Round", op1(rb, "Div", op1(rb, "Sub", zero, lo), safe)), 0, 255)
    y = clamp(rb, op1(rb, "Add", op1(rb, "Round", op1(rb, "Div", x, safe)), zp), 0, 255)
    return [cast(rb, y, dt.uint8), scale, cast(rb, zp, dt.uint8)]


# -- integer and quantized matmul ------------------------------------------------------------------

@lowering("MatMulInteger")
def lower_matmul_integer(rb, node, ins):
    # With a constant 2-D B and 8-bit A: float32 MatMuls over slices of K whose partial sums are
    # provably integers below 2^24 (f32_slices on B's columns), added in int32. Otherwise
    # (A - a_zero_point) @ (B - b_zero_point) in int32: 8-bit differences are exact, and int32
    # products wrap exactly as the reference's int64 sums cast to int32 do.
    a, b, azp, bzp = (list(ins) + [None, None])[:4]
    if a.type.shape is None:
        return None
    exact = _matmul_integer_f32(rb, a, b, azp, bzp)
    if exact is not None:
        return [exact]
    if azp is not None:
        azp = row_param(rb, cast(rb, azp, dt.int32), len(a.type.shape))
        if azp is None:
            return None
    ca = op1(rb, "Sub", cast(rb, a, dt.int32), azp) if azp is not None else cast(rb, a, dt.int32)
    cb = cast(rb, b, dt.int32)
    if bzp is not None:
        cb = op1(rb, "Sub", cb, cast(rb, bzp, dt.int32))
    return [op1(rb, "MatMul", ca, cb)]


def _matmul_integer_f32(rb, a, b, azp, bzp):
    """MatMulInteger as exact float32 MatMuls over K slices, or None where that is not proven:
    a constant 2-D B bounds each column's sums by its own values (f32_slices); a B known only at
    run time (attention's Q @ K^T) by the widths of both types, |a| * |b| per term."""
    xa = _x_bound(a, azp)
    if xa is None or len(a.type.shape) < 2 or b.type.shape is None or len(b.type.shape) < 2:
        return None
    k = b.type.shape[-2]
    f32 = dt.float32
    if b.known is not None and len(b.type.shape) == 2 and (bzp is None or bzp.known is not None) \
            and b.type.dtype in INT8S:
        cb = np.asarray(b.known, np.int64)
        if bzp is not None:
            cb = cb - np.asarray(bzp.known, np.int64)  # 0-d, or one per column
        slices = f32_slices(cb.T, xa, 1)  # per output column, summed over K
        if slices is None:
            return None
        parts_b = [rb.constant(np.ascontiguousarray(cb[lo:hi]).astype(np.float32), name="b") for lo, hi in slices]
    else:
        xb = _x_bound(b, bzp)
        if xb is None or not isinstance(k, int) or (bzp is not None and bzp.type.shape not in ((), (1,))):
            return None
        step = (F32_EXACT - 1) // (xa * xb)
        slices = [(lo, min(lo + step, k)) for lo in range(0, k, step)] or [(0, 0)]
        if len(slices) > MAX_F32_SLICES:
            return None
        cb = cast(rb, b, f32)
        if bzp is not None:
            cb = op1(rb, "Sub", cb, cast(rb, bzp, f32))
        parts_b = [cb if len(slices) == 1 else op1(rb, "Slice", cb, ints(rb, [lo]), ints(rb, [hi]), ints(rb, [-2]))
                   for lo, hi in slices]
    ca = cast(rb, a, f32)
    if azp is not None:
        ca = op1(rb, "Sub", ca, row_param(rb, cast(rb, azp, f32), len(a.type.shape)))
    out = None
    for (lo, hi), pb in zip(slices, parts_b):
        pa = ca if len(slices) == 1 else op1(rb, "Slice", ca, ints(rb, [lo]), ints(rb, [hi]), ints(rb, [-1]))
        y = cast(rb, op1(rb, "MatMul", pa, pb), dt.int32)
        out = y if out is None else op1(rb, "Add", out, y)
    return out


@lowering("QLinearMatMul")
def lower_qlinear_matmul(rb, node, ins):
    # Integer inputs accumulate exactly through MatMulInteger; float 8 inputs are centered and
    # multiplied in float64 (exact for 8-bit values). Then requantize as the reference does.
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins
    if a.type.shape is None:
        return None
    rank = len(a.type.shape)
    f64 = dt.float64
    row_scale = row_param(rb, cast(rb, a_s, f64), rank)
    if row_scale is None or a_zp.type.shape is None:
        return None
    if a.type.dtype in INT8S and b.type.dtype in INT8S:
        acc = rb.emit1("MatMulInteger", [a, b, a_zp, b_zp])
        y = requantize_node(rb, acc, row_param(rb, a_s, rank), b_s, y_s, y_zp)
        if y is not None:
            return [y]
        acc = cast(rb, acc, f64)
    else:
        ca = op1(rb, "Sub", cast(rb, a, f64), row_param(rb, cast(rb, a_zp, f64), rank))
        cb = op1(rb, "Sub", cast(rb, b, f64), cast(rb, b_zp, f64))
        acc = op1(rb, "MatMul", ca, cb)
    scale = op1(rb, "Mul", row_scale, cast(rb, b_s, f64))
    return [requantize(rb, acc, scale, y_s, y_zp)]


# -- integer and quantized convolution -------------------------------------------------------------

def _conv_attrs(node):
    return {k: node.attrs[k] for k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                       "strides")}


#: float32 holds every integer below this exactly.
F32_EXACT = 1 << 24
#: At most this many input-channel slices for an exact float32 ConvInteger (else float64).
MAX_F32_SLICES = 8


def _x_bound(x, xzp) -> int | None:
    """The largest |x - x_zero_point| an 8-bit x can have (None: not 8-bit, or a zero point
    known only at run time, bounded by the type's width)."""
    if x.type.dtype not in INT8S:
        return None
    lo, hi = int_range(x.type.dtype)
    if xzp is None:
        return max(-lo, hi)
    if xzp.known is None:
        return hi - lo
    z = np.asarray(xzp.known, np.int64).reshape(-1)  # per tensor, or per row of a MatMul's A
    return int(max((z - lo).max(), (hi - z).max()))


def f32_slices(cw: np.ndarray, x_bound: int, group: int) -> list[tuple[int, int]] | None:
    """Input-channel ranges [(lo, hi)] of a centered integer weight cw [M, C/group, k...] (a
    MatMul's B as [N, K]) such that every partial sum of a float32 convolution over one range is
    an integer below 2^24 in magnitude (for inputs |x| <= x_bound), so exact in any order; None
    if that needs more than MAX_F32_SLICES ranges, or any range for a grouped convolution (its
    channels are not split). This relies on Conv and MatMul computing sums of products (every
    glow kernel does; a Winograd or FFT convolution would round its transforms)."""
    per_channel = np.abs(cw.astype(np.int64)).reshape(cw.shape[0], cw.shape[1], -1).sum(axis=2)  # [M, C]
    limit = (F32_EXACT - 1) // max(x_bound, 1)
    slices, lo, run = [], 0, np.zeros(cw.shape[0], np.int64)
    for c in range(cw.shape[1]):
        if (run + per_channel[:, c]).max() > limit:
            if c == lo:
                return None  # one channel alone is too much
            slices.append((lo, c))
            lo, run = c, np.zeros_like(run)
        run = run + per_channel[:, c]
    slices.append((lo, cw.shape[1]))
    if len(slices) > MAX_F32_SLICES or (group != 1 and len(slices) > 1):
        return None
    return slices


def _conv_integer_f32(rb, node, x, xzp, cw: np.ndarray, slices):
    """ConvInteger as float32 Convs over input-channel slices, each exact (f32_slices), their
    results added in int32, which wraps as the reference's int64 sums cast to int32 do."""
    f32 = dt.float32
    cx = cast(rb, x, f32)  # 8-bit values, and their differences, are exact in float32
    if xzp is not None:
        cx = op1(rb, "Sub", cx, first_element(rb, cast(rb, xzp, f32)))
    out = None
    for lo, hi in slices:
        part = cx if (lo, hi) == (0, cw.shape[1]) else op1(rb, "Slice", cx, ints(rb, [lo]), ints(rb, [hi]),
                                                            ints(rb, [1]))
        w = rb.constant(np.ascontiguousarray(cw[:, lo:hi]).astype(np.float32), name="w")
        y = cast(rb, rb.emit1("Conv", [part, w], _conv_attrs(node)), dt.int32)
        out = y if out is None else op1(rb, "Add", out, y)
    return out


@lowering("ConvInteger")
def lower_conv_integer(rb, node, ins):
    # With a constant weight and 8-bit data, float32 Convs over input-channel slices whose every
    # partial sum is provably an integer below 2^24 (f32_slices): exact, and float32 speed.
    # Otherwise a float64 Conv of the centered inputs (lowered by Conv's own rule): every partial
    # sum of 8-bit products is an integer below 2^53, so it is exact and casts to int32 unchanged.
    # The zero points are subtracted before padding, so padding contributes 0, as ONNX defines.
    x, w, xzp, wzp = (list(ins) + [None, None])[:4]
    if w.type.shape is None:
        return None
    xb = _x_bound(x, xzp)
    if xb is not None and w.known is not None and w.type.dtype in INT8S and (wzp is None or wzp.known is not None):
        cw = np.asarray(w.known, np.int64)
        if wzp is not None:
            z = np.asarray(wzp.known, np.int64).reshape(-1)
            cw = cw - (z.reshape([-1] + [1] * (cw.ndim - 1)) if z.size > 1 else z[0])
        slices = f32_slices(cw, xb, node.attrs["group"])
        if slices is not None:
            return [_conv_integer_f32(rb, node, x, xzp, cw, slices)]
    f64 = dt.float64
    cx, cw = cast(rb, x, f64), cast(rb, w, f64)
    if xzp is not None:
        cx = op1(rb, "Sub", cx, first_element(rb, cast(rb, xzp, f64)))
    if wzp is not None:
        wz = per_channel(rb, cast(rb, wzp, f64), len(w.type.shape))
        if wz is None:
            return None
        cw = op1(rb, "Sub", cw, wz)
    y = rb.emit1("Conv", [cx, cw], _conv_attrs(node))
    return [cast(rb, y, dt.int32)]


def _bias_fits_int32(x, x_zp, w, w_zp, bias) -> bool:
    """Whether ConvInteger's sum plus a constant int32 bias provably stays within int32, so the
    bias is added in int32 (exactly, as the reference adds it in float64): |x - x_zp| at most
    `_x_bound`, times the largest sum of |w - w_zp| over an output channel's weights."""
    xb = _x_bound(x, x_zp)
    if xb is None or w.known is None or bias.known is None or (w_zp is not None and w_zp.known is None):
        return False
    cw = np.asarray(w.known, np.int64)
    if w_zp is not None:
        z = np.asarray(w_zp.known, np.int64).reshape(-1)
        cw = cw - (z.reshape([-1] + [1] * (cw.ndim - 1)) if z.size > 1 else z[0])
    acc_max = xb * int(np.abs(cw).reshape(cw.shape[0], -1).sum(axis=1).max(initial=0))
    return acc_max + int(np.abs(np.asarray(bias.known, np.int64)).max(initial=0)) < 2 ** 31


@lowering("QLinearConv")
def lower_qlinear_conv(rb, node, ins):
    # ConvInteger accumulates exactly; the int32 bias joins in float64 (no overflow), then the
    # (per output channel) scale x_scale * w_scale and requantization, as the reference.
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias = (list(ins) + [None])[:9]
    if x.type.shape is None:
        return None
    rank = len(x.type.shape)
    f64 = dt.float64
    acc = rb.emit1("ConvInteger", [x, w, x_zp, w_zp], _conv_attrs(node))
    ws32 = per_channel(rb, w_s, rank - 1)
    if ws32 is not None and (bias is None or _bias_fits_int32(x, x_zp, w, w_zp, bias)):
        acc32 = acc if bias is None else op1(rb, "Add", acc, reshape(rb, bias, [1, -1] + [1] * (rank - 2)))
        y = requantize_node(rb, acc32, x_s, ws32, y_s, y_zp)
        if y is not None:
            return [y]
    acc = cast(rb, acc, f64)
    if bias is not None:
        acc = op1(rb, "Add", acc, reshape(rb, cast(rb, bias, f64), [1, -1] + [1] * (rank - 2)))
    ws = per_channel(rb, cast(rb, w_s, f64), rank - 1)
    if ws is None:
        return None
    scale = op1(rb, "Mul", cast(rb, x_s, f64), ws)
    return [requantize(rb, acc, scale, y_s, y_zp)]


# -- BitCast ---------------------------------------------------------------------------------------
#: IEEE binary formats: (exponent bits, mantissa bits). Their bit patterns are decoded and encoded
#: with exact float64 arithmetic; the float 8/4 formats (other special values) have no rule.
IEEE = {dt.float16: (5, 10), dt.bfloat16: (8, 7), dt.float32: (8, 23), dt.float64: (11, 52)}
_SUB_BYTE = frozenset({dt.int4, dt.uint4, dt.int2, dt.uint2})


def _is_integral(t):
    return t.is_int or t == dt.bool_


@lowering("BitCast")
def lower_bit_cast(rb, node, ins):
    # Integers of one width reinterpret as a wrapping Cast (two's complement); sub-byte ones go
    # through int16, whose Cast wraps to the low bits. IEEE floats are decoded from / encoded to
    # their (sign, exponent, mantissa) fields. NaN payloads are not kept: a NaN encodes as the
    # quiet NaN, and every NaN pattern decodes to NaN.
    (x,) = ins
    src, to = x.type.dtype, node.attrs["to"]
    if _is_integral(src) and _is_integral(to):
        if src in _SUB_BYTE or to in _SUB_BYTE:
            return [cast(rb, cast(rb, x, dt.int16), to)]
        return [cast(rb, x, to)]
    if src in IEEE and to.is_int:
        return [_encode_ieee(rb, x, *IEEE[src], to)]
    if src.is_int and to in IEEE:
        return [_decode_ieee(rb, x, *IEEE[to], to)]
    return None


def _i64(rb, value):
    return const(rb, value, dt.int64)


def _f64(rb, value):
    return const(rb, value, dt.float64)


def _encode_ieee(rb, x, ebits, mbits, to):
    """The bit pattern of float x as integer type `to` (of x's width)."""
    width, bias = 1 + ebits + mbits, (1 << (ebits - 1)) - 1
    v = cast(rb, x, dt.float64)  # exact for every IEEE format
    zero, one = _f64(rb, 0), _f64(rb, 1)
    # Negative, or -0.0 (1 / -0.0 = -inf); NaN counts as positive.
    neg = op1(rb, "Less", op1(rb, "Where", op1(rb, "Equal", v, zero), op1(rb, "Div", one, v), v), zero)
    a = op1(rb, "Max", v, op1(rb, "Sub", zero, v))
    finite = op1(rb, "Less", a, _f64(rb, np.inf))  # NaN and inf: false
    tiny = op1(rb, "Less", a, _f64(rb, 2.0 ** (1 - bias)))  # zero or subnormal in the format
    normal = op1(rb, "And", finite, op1(rb, "Not", tiny))
    # Normal: a = (1 + m / 2^mbits) 2^e. The logarithm's estimate of e is corrected both ways.
    an = op1(rb, "Where", normal, a, one)
    e = op1(rb, "Floor", op1(rb, "Div", op1(rb, "Log", an), _f64(rb, np.log(2))))
    two = _f64(rb, 2)
    e = op1(rb, "Where", op1(rb, "Greater", op1(rb, "Pow", two, e), an), op1(rb, "Sub", e, one), e)
    e = op1(rb, "Where", op1(rb, "Greater", op1(rb, "Pow", two, op1(rb, "Add", e, one)), an), e,
            op1(rb, "Add", e, one))
    frac = op1(rb, "Sub", op1(rb, "Div", an, op1(rb, "Pow", two, e)), one)  # exact, in [0, 1)
    m = cast(rb, op1(rb, "Mul", frac, _f64(rb, 2.0 ** mbits)), dt.int64)
    field = cast(rb, op1(rb, "Add", e, _f64(rb, bias)), dt.int64)
    bits = op1(rb, "Add", op1(rb, "Mul", field, _i64(rb, 1 << mbits)), m)
    # Subnormal: a = m 2^(1 - bias - mbits), field 0 (zero included).
    # (two exact scalings: 2^(bias - 1 + mbits) itself overflows float64 for float64's format)
    sub = op1(rb, "Mul", op1(rb, "Where", tiny, a, zero), _f64(rb, 2.0 ** (bias - 1)))
    sub = cast(rb, op1(rb, "Mul", sub, _f64(rb, 2.0 ** mbits)), dt.int64)
    bits = op1(rb, "Where", tiny, sub, bits)
    top = ((1 << ebits) - 1) << mbits
    special = op1(rb, "Where", op1(rb, "Equal", a, a), _i64(rb, top), _i64(rb, top | 1 << (mbits - 1)))
    bits = op1(rb, "Where", op1(rb, "Not", finite), special, bits)  # inf, NaN
    if to.is_signed:  # a set sign bit makes the value negative: bits - 2^(width-1)
        return cast(rb, op1(rb, "Where", neg, op1(rb, "Add", bits, _i64(rb, -(1 << (width - 1)))), bits),
                    to)
    bits = cast(rb, bits, to)
    return op1(rb, "Where", neg, op1(rb, "Add", bits, const(rb, 1 << (width - 1), to)), bits)


def _decode_ieee(rb, x, ebits, mbits, to):
    """The float of type `to` whose bit pattern is integer x (of the same width)."""
    width, bias = 1 + ebits + mbits, (1 << (ebits - 1)) - 1
    b = cast(rb, x, dt.int64)  # sign-extends signed types; uint64 wraps, keeping the bits
    sign_bit = -(1 << 63) if width == 64 else 1 << (width - 1)
    neg = op1(rb, "Not", op1(rb, "Equal", op1(rb, "BitwiseAnd", b, _i64(rb, sign_bit)), _i64(rb, 0)))
    u = op1(rb, "BitwiseAnd", b, _i64(rb, (1 << (width - 1)) - 1))
    field = op1(rb, "BitShift", u, _i64(rb, mbits), direction="RIGHT")
    m = cast(rb, op1(rb, "BitwiseAnd", u, _i64(rb, (1 << mbits) - 1)), dt.float64)
    top = _i64(rb, (1 << ebits) - 1)
    special, sub = op1(rb, "Equal", field, top), op1(rb, "Equal", field, _i64(rb, 0))
    e = op1(rb, "Where", special, _i64(rb, 0), op1(rb, "Sub", field, _i64(rb, bias)))
    one = _f64(rb, 1)
    scale = op1(rb, "Pow", _f64(rb, 2), cast(rb, e, dt.float64))
    v = op1(rb, "Mul", op1(rb, "Add", one, op1(rb, "Mul", m, _f64(rb, 2.0 ** -mbits))), scale)
    v = op1(rb, "Where", sub, op1(rb, "Mul", m, _f64(rb, 2.0 ** (1 - bias - mbits))), v)
    inf_nan = op1(rb, "Where", op1(rb, "Equal", m, _f64(rb, 0)), _f64(rb, np.inf), _f64(rb, np.nan))
    v = op1(rb, "Where", special, inf_nan, v)
    v = op1(rb, "Where", neg, op1(rb, "Mul", v, _f64(rb, -1)), v)
    return cast(rb, v, to)
