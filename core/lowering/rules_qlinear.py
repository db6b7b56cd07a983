"""Lowering rules for onnxruntime's quantized contrib ops (ops/qlinear.py, domain com.microsoft).

A QLinear op becomes what its declaration says it is: DequantizeLinear per quantized operand, the
float op (between transposes for channels_last, between reshapes for Softmax's old 2-D form),
QuantizeLinear; each of those lowers further by its own rule, in the reference's precisions.
QLinearGlobalAveragePool sums in int32 and requantizes once; QGemm accumulates exactly in int32
through MatMulInteger and requantizes as QLinearMatMul does.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops.qlinear import (
    DOMAIN,
    QLINEAR,
    channels_moved,
    float_attrs,
    global_pool_axes,
    output_dtype,
    softmax_2d_axis,
    to_channels_first,
    to_channels_last,
)
from ._build import cast, ints, op1
from .registry import lowering
from .rules_quant import centered_int, requantize, saturate_to


def _lower_qlinear(q):
    def rule(rb, node, ins):
        a = node.attrs
        n = len(ins)
        xs = [op1(rb, "DequantizeLinear", ins[i], ins[i + 1], *([ins[i + 2]] if ins[i + 2] is not None else []))
              for i in q.triples(n)]
        if any(x.type.shape is None for x in xs):
            return None
        moved = channels_moved(q, a)
        if moved:
            xs = [op1(rb, "Transpose", x, perm=to_channels_first(len(x.type.shape))) for x in xs]
        base = xs[0]
        flat_from = softmax_2d_axis(q, a, len(base.type.shape))
        fattrs = float_attrs(q, a)
        if flat_from is not None:
            xs = [op1(rb, "Reshape", x, ints(rb, [0] * flat_from + [-1])) for x in xs]
            fattrs["axis"] = -1
        y = rb.emit1(q.float_op, xs, fattrs)
        if flat_from is not None:
            y = op1(rb, "Reshape", y, op1(rb, "Shape", base))
        if moved:
            y = op1(rb, "Transpose", y, perm=to_channels_last(len(y.type.shape)))
        zp = ins[q.out + 1] if q.out + 1 < n else None
        out = output_dtype(q, [None if v is None else v.type.dtype for v in ins])
        qins = [y, ins[q.out]] + ([zp] if zp is not None else [])
        return [op1(rb, "QuantizeLinear", *qins, **({} if zp is not None else {"output_dtype": out}))]

    return rule


for _q in QLINEAR.values():
    lowering(_q.name, DOMAIN)(_lower_qlinear(_q))


@lowering("QLinearGlobalAveragePool", DOMAIN)
def lower_qlinear_global_average_pool(rb, node, ins):
    x, x_s, x_zp, y_s, y_zp = (list(ins) + [None] * 2)[:5]
    shape = x.type.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    axes = global_pool_axes(len(shape), node.attrs["channels_last"])
    count = int(np.prod([shape[a] for a in axes]))
    acc = centered_int(rb, x, None if x_zp is None else cast(rb, x_zp, dt.int32))
    acc = cast(rb, op1(rb, "ReduceSum", acc, ints(rb, axes), keepdims=1), dt.float32)
    f32 = dt.float32
    den = op1(rb, "Mul", cast(rb, y_s, f32), rb.constant(np.float32(count), name="count"))
    q = op1(rb, "Mul", acc, op1(rb, "Div", cast(rb, x_s, f32), den))
    return [saturate_to(rb, q, y_zp, node.outputs[0].type.dtype)]


@lowering("QGemm", DOMAIN)
def lower_qgemm(rb, node, ins):
    a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (list(ins) + [None] * 3)[:9]
    at = node.attrs
    if a.type.shape is None or b.type.shape is None:
        return None
    if at["transA"]:
        a = op1(rb, "Transpose", a, perm=[1, 0])
    if at["transB"]:
        b = op1(rb, "Transpose", b, perm=[1, 0])
    acc = rb.emit1("MatMulInteger", [a, b, a_zp, b_zp])
    if c is not None:
        acc = op1(rb, "Add", acc, c)
    f64 = dt.float64
    scale = op1(rb, "Mul", cast(rb, a_s, f64), cast(rb, b_s, f64))
    alpha = float(dt.float32.np.type(at["alpha"]))
    if alpha != 1.0:
        scale = op1(rb, "Mul", scale, rb.constant(dt.float64.np.type(alpha), name="alpha"))
    acc = cast(rb, acc, f64)
    if y_s is None:
        return [cast(rb, op1(rb, "Mul", acc, scale), dt.float32)]
    if y_zp is not None:
        return [requantize(rb, acc, scale, y_s, y_zp)]
    real = cast(rb, op1(rb, "Mul", acc, scale), dt.float32)
    return [saturate_to(rb, op1(rb, "Div", real, cast(rb, y_s, dt.float32)), None, node.inputs[0].type.dtype)]
