"""Records for onnxruntime's quantized contrib ops (com.microsoft): QLinearAdd / QLinearMul with
broadcasting, int8 and uint8, absent zero points; QLinearSigmoid, QLinearLeakyRelu; QLinearSoftmax
in its opset-13 and old 2-D forms; QLinearGlobalAveragePool and QLinearAveragePool, NCHW and
NHWC; QLinearConcat with a scale per input; QGemm quantized and float, transposed, per column."""

import numpy as np

from ..op_records import Const, In, OpRecord

MS = "com.microsoft"
U8 = dict(dtype="uint8", low=0, high=255)
I8 = dict(dtype="int8", low=-128, high=127)


def _s(v, dtype="float32"):
    return Const(np.asarray(v, dtype=dtype))


def _r(op, ins, attrs=None, name="", atol=1e-6):
    return OpRecord(op, ins, attrs or {}, name=name, domain=MS, atol=atol)


def _unary(op, name, shape=(2, 3, 4, 5), kind=U8, attrs=None, zps=True):
    dt, shift = kind["dtype"], 0 if kind["dtype"] == "uint8" else 128
    zp_in, zp_out = (_s(131 - shift, dt), _s(100 - shift, dt)) if zps else (None, None)
    # AveragePool: one quantization step, see below
    return _r(op, [In(shape, **kind), _s(0.05), zp_in, _s(0.02), zp_out], attrs, name,
              atol=1.0 if op == "QLinearAveragePool" else 1e-6)


RECORDS = [
    _r("QLinearAdd", [In((2, 3, 4), **U8), _s(0.03), _s(120, "uint8"), In((3, 1), **U8), _s(0.07),
                      _s(130, "uint8"), _s(0.05), _s(125, "uint8")], name="u8-broadcast"),
    _r("QLinearAdd", [In((5, 6), **I8), _s(0.03), None, In((6,), **I8), _s(0.07), None, _s(0.05), None],
       name="i8-no-zero-points"),
    _r("QLinearMul", [In((2, 3, 4), **U8), _s(0.03), _s(120, "uint8"), In((4,), **U8), _s(0.07),
                      _s(130, "uint8"), _s(0.5), _s(10, "uint8")], name="u8"),
    _r("QLinearMul", [In((3, 4), **I8), _s(0.02), _s(-5, "int8"), In((3, 4), **I8), _s(0.02),
                      _s(7, "int8"), _s(0.3), _s(0, "int8")], name="i8"),
    _unary("QLinearSigmoid", "u8"),
    _unary("QLinearSigmoid", "i8", kind=I8),
    _unary("QLinearLeakyRelu", "i8", kind=I8, attrs={"alpha": 0.2}),
    _unary("QLinearLeakyRelu", "u8-no-zero-points", attrs={"alpha": 0.1}, zps=False),
    _unary("QLinearSoftmax", "last", attrs={"axis": -1, "opset": 13}),
    _unary("QLinearSoftmax", "axis1", attrs={"axis": 1, "opset": 13}),
    _unary("QLinearSoftmax", "axis1-2d", attrs={"axis": 1, "opset": 11}),
    _unary("QLinearGlobalAveragePool", "nchw", (2, 6, 5, 7), attrs={"channels_last": 0}),
    _unary("QLinearGlobalAveragePool", "nhwc-i8", (2, 5, 7, 6), kind=I8, attrs={"channels_last": 1}),
    # AveragePool divides in float64 in its reference and multiplies by 1 / count in float32 once
    # lowered, and means of integers often sit on a rounding tie: one step apart now and then
    # (as from onnxruntime's own kernel, which sums in float32).
    _unary("QLinearAveragePool", "strided-padded", (1, 3, 9, 9),
           attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    _unary("QLinearAveragePool", "nhwc-count-pad", (1, 9, 9, 4),
           attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1, "channels_last": 1}),
    _r("QLinearConcat", [_s(0.04), _s(128, "uint8"), In((1, 2, 3), **U8), _s(0.02), _s(100, "uint8"),
                         In((1, 5, 3), **U8), _s(0.06), _s(140, "uint8")], {"axis": -2}, name="two-scales"),
]

_B = Const(np.arange(-60, 60, dtype=np.int8).reshape(8, 15)[:, :12].copy())  # [N=8, K=12]
RECORDS += [
    _r("QGemm", [In((5, 12), **U8), _s(0.02), _s(130, "uint8"), _B, _s(np.linspace(0.01, 0.03, 8)),
                 _s(np.zeros(8), "int8"), Const(np.arange(-400, 400, 100, dtype=np.int32)), _s(0.3),
                 _s(128, "uint8")], {"transB": 1}, name="transB-bias-per-column"),
    _r("QGemm", [In((12, 5), **U8), _s(0.02), _s(130, "uint8"), Const(np.ascontiguousarray(_B.value.T)),
                 _s(0.02), _s(0, "int8")], {"transA": 1, "alpha": 0.5}, name="transA-float-alpha"),
]
