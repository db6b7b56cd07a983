"""Records for casts and quantization: CastLike, QuantizeLinear / DequantizeLinear (per-tensor,
per-axis with negative axes, blocked with a partial last block, saturation, exact halves that
round to even, 2/4/8/16-bit integers, float 8/4 formats, float16/int32/e8m0 scales, 0-d and empty
data), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv."""

import ml_dtypes
import numpy as np

from ... import dtypes as dt
from ..op_records import Const, In, OpRecord

F8 = ml_dtypes.float8_e4m3fn


def _s(v, dtype="float32"):
    return Const(np.asarray(v, dtype=dtype))


# -- CastLike --------------------------------------------------------------------------------------
_LIKE = [("float32", "float16"), ("float16", "float32"), ("float32", "int32"), ("int64", "float32"),
         ("float32", "float8e4m3fn"), ("float32", "int4"), ("bool", "float32"), ("float64", "uint8")]
RECORDS = [OpRecord("CastLike", [In((2, 3), a, -20, 20), In((1,), b)], name=f"{a}-to-{b}")
           for a, b in _LIKE]
RECORDS += [
    OpRecord("CastLike", [In((), "float32"), In((2,), "int64")], name="0d"),
    OpRecord("CastLike", [In((0, 3), "float32"), In((), "float64")], name="empty"),
    OpRecord("CastLike", [In((8,), "float32", -1000, 1000), In((1,), "float8e5m2")],
             {"saturate": 0}, name="no-saturate"),
]

# -- QuantizeLinear --------------------------------------------------------------------------------
HALVES = Const(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 126.5, 127.5, -128.5, 3.49], np.float32))


def _q(name, x, scale, zp=None, **attrs):
    ins = [x, scale] + ([zp] if zp is not None else [])
    return OpRecord("QuantizeLinear", ins, attrs, name=name)


RECORDS += [
    _q("uint8-saturating", In((3, 4), low=-300, high=300), _s(2.0), _s(128, "uint8")),
    _q("no-zero-point", In((5,), low=-10, high=600), _s(1.5)),
    _q("halves-to-even-int8", HALVES, _s(1.0), _s(0, "int8")),
    _q("halves-to-even-uint8-zp", HALVES, _s(1.0), _s(3, "uint8")),
    _q("per-axis-1", In((2, 3, 4), low=-50, high=50), _s([0.5, 1.0, 2.0]), _s([0, 10, -10], "int8")),
    _q("per-axis-neg", In((2, 3, 4), low=-50, high=50), In((4,), low=0.5, high=2),
       _s([1, 2, 3, 4], "uint8"), axis=-1),
    _q("blocked-partial", In((2, 5, 3), low=-20, high=20), In((2, 3, 3), low=0.5, high=2),
       Const(np.arange(18).reshape(2, 3, 3).astype(np.int8) - 9), axis=1, block_size=2),
    _q("blocked-axis0", In((4, 3), low=-20, high=20), In((2, 3), low=0.5, high=2), axis=0,
       block_size=2),
    _q("int16", In((6,), low=-70000, high=70000), _s(1.5), _s(-7, "int16")),
    _q("uint16", In((6,), low=-1000, high=70000), _s(0.75), _s(300, "uint16")),
    _q("int4", In((3, 4), low=-20, high=20), _s(1.5), Const(np.array(1, ml_dtypes.int4))),
    _q("uint4", In((2, 4), low=-5, high=40), _s([2.0, 1.0]), Const(np.array([1, 2], ml_dtypes.uint4)),
       axis=0),
    _q("int2", In((6,), low=-5, high=5), _s(2.0), Const(np.array(0, ml_dtypes.int2))),
    _q("float8-saturate", In((8,), low=-900, high=900), _s(2.0), Const(np.zeros((), F8))),
    _q("float8-no-saturate", In((8,), low=-900, high=900), _s(1.0), Const(np.zeros((), F8)),
       saturate=0),
    _q("float8e5m2-output-dtype", In((2, 3), low=-100, high=100), _s(0.5),
       output_dtype=dt.float8e5m2),
    _q("float4e2m1", In((6,), low=-8, high=8), _s(1.0), Const(np.zeros((1,), ml_dtypes.float4_e2m1fn)),
       axis=0),
    _q("float16-x-scale", In((2, 3), "float16", -100, 100), _s(0.75, "float16"), _s(5, "uint8")),
    _q("bfloat16-x", In((4,), "bfloat16", -100, 100), _s(0.5, "bfloat16"), _s(-3, "int8")),
    _q("int32-x", In((5,), "int32", -500, 500), _s(4.0), _s(0, "int8")),
    _q("int32-scale", In((5,), low=-500, high=500), _s(3, "int32"), _s(0, "int8")),
    _q("precision-float32", In((5,), "float16", -100, 100), _s(0.3, "float16"), _s(0, "int8"),
       precision=dt.float32),
    _q("e8m0-scale", In((5,), low=-100, high=100), Const(np.array(2.0, ml_dtypes.float8_e8m0fnu)),
       _s(0, "int8")),
    _q("0d", In(()), _s(0.1), _s(10, "uint8")),
    _q("empty", In((0, 3)), _s([1.0, 2.0, 3.0]), _s([0, 0, 0], "int8")),
]

# -- DequantizeLinear ------------------------------------------------------------------------------


def _dq(name, x, scale, zp=None, **attrs):
    ins = [x, scale] + ([zp] if zp is not None else [])
    return OpRecord("DequantizeLinear", ins, attrs, name=name)


RECORDS += [
    _dq("uint8", In((3, 4), "uint8", 0, 255), _s(0.5), _s(128, "uint8")),
    _dq("int8-no-zp", In((5,), "int8", -128, 127), _s(0.25)),
    _dq("per-axis-neg", In((2, 3, 4), "int8", -128, 127), In((4,), low=0.1, high=2),
        _s([1, -2, 3, 0], "int8"), axis=-1),
    _dq("per-axis-1", In((2, 3), "uint8", 0, 255), _s([0.5, 1.0, 2.0]), _s([1, 2, 3], "uint8")),
    _dq("blocked-partial", In((2, 5), "int8", -128, 127), In((2, 3), low=0.1, high=2),
        Const(np.array([[1, 2, 3], [-1, -2, -3]], np.int8)), axis=1, block_size=2),
    _dq("int32", In((4,), "int32", -2 ** 31, 2 ** 31 - 1), _s(1e-3), _s(-2 ** 31 + 5, "int32")),
    _dq("int16", In((4,), "int16", -32768, 32767), _s(2.0), _s(-32768, "int16")),
    _dq("uint16", In((4,), "uint16", 0, 65535), _s(0.5), _s(65535, "uint16")),
    _dq("int4", In((5,), "int4", -8, 7), _s(2.0), Const(np.array([1], ml_dtypes.int4)), axis=0),
    _dq("uint2", In((4,), "uint2", 0, 3), _s(2.0), Const(np.array(1, ml_dtypes.uint2))),
    _dq("float8-zp", In((5,), "float8e4m3fn", -100, 100), _s(2.0), Const(np.array([0.5], F8)),
        axis=0),
    _dq("float8e5m2", In((5,), "float8e5m2", -100, 100), _s(1.5)),
    _dq("float4e2m1", In((5,), "float4e2m1", -6, 6), _s(0.5)),
    _dq("float16-scale", In((2, 3), "uint8", 0, 255), _s(0.01, "float16"), _s(7, "uint8")),
    _dq("output-dtype-float16", In((2, 3), "int8", -128, 127), _s(0.125),
        output_dtype=dt.float16),
    _dq("e8m0-scale", In((4,), "int8", -128, 127), Const(np.array(0.25, ml_dtypes.float8_e8m0fnu)),
        output_dtype=dt.float32),
    _dq("0d", In((), "uint8", 0, 255), _s(0.5), _s(3, "uint8")),
    _dq("empty", In((0, 2), "int8"), _s(0.5)),
]

# -- DynamicQuantizeLinear -------------------------------------------------------------------------
RECORDS += [OpRecord("DynamicQuantizeLinear", [x], name=name, num_outputs=3) for name, x in [
    ("mixed", In((6,), low=-3, high=5)),
    ("2d", In((3, 4), low=-10, high=2)),
    ("positive", In((2, 5), low=1, high=9)),
    ("negative", In((7,), low=-9, high=-1)),
    ("0d", In(())),
    ("zeros", Const(np.zeros((2, 3), np.float32))),
    ("empty", In((0, 4))),
]]

# -- MatMulInteger ---------------------------------------------------------------------------------
U8, I8 = ("uint8", 0, 255), ("int8", -128, 127)
RECORDS += [
    OpRecord("MatMulInteger", [In((4, 3), *U8), In((3, 2), *U8), _s(12, "uint8"), _s([0], "uint8")],
             name="uint8-scalar-zps"),
    OpRecord("MatMulInteger", [In((4, 3), *I8), In((3, 5), *U8), _s([1, -2, 3, 0], "int8"),
                               _s([1, 2, 3, 4, 5], "uint8")], name="per-row-per-column-zps"),
    OpRecord("MatMulInteger", [In((2, 3, 8), *U8), In((8, 4), *I8)], name="batched-no-zps"),
    OpRecord("MatMulInteger", [In((6,), *I8), In((2, 6, 3), *I8), _s(-1, "int8")], name="1d-a"),
    OpRecord("MatMulInteger", [In((3, 4), *U8), In((4,), *U8), None, _s(7, "uint8")], name="1d-b"),
    # Sums past 2^24 (int8 data near its top, odd weights): float32 MatMuls over slices of K must
    # each stay exact (rules_quant.f32_slices), with a constant B and with B known at run time.
    OpRecord("MatMulInteger", [In((3, 1200), "int8", 120, 127), Const(np.full((1200, 4), -127, np.int8))],
             name="f32-slices-constant-b"),
    OpRecord("MatMulInteger", [In((3, 1200), "int8", 120, 127), In((1200, 2), "int8", -128, -120)],
             name="f32-slices-runtime-b"),
]

# -- QLinearMatMul ---------------------------------------------------------------------------------


def _qmm(name, a, b, t, scale_t="float32", a_s=0.02, b_s=0.03, y_s=0.05, a_zp=3, b_zp=-2, y_zp=5):
    np_t = F8 if t == "float8e4m3fn" else t
    zp = (lambda v: Const(np.asarray(abs(v) if t == "uint8" else v, np_t)))
    lo, hi = (0, 255) if t == "uint8" else (-128, 127) if t == "int8" else (-8, 8)
    return OpRecord("QLinearMatMul", [In(a, t, lo, hi), _s(a_s, scale_t), zp(a_zp), In(b, t, lo, hi),
                                      _s(b_s, scale_t), zp(b_zp), _s(y_s, scale_t), zp(y_zp)],
                    name=name)


RECORDS += [
    _qmm("uint8-2d", (2, 4), (4, 3), "uint8"),
    _qmm("int8-3d", (2, 2, 4), (2, 4, 3), "int8"),
    _qmm("int8-float16-scales", (3, 5), (5, 2), "int8", "float16"),
    _qmm("uint8-saturating", (2, 8), (8, 3), "uint8", y_s=0.001),
    _qmm("float8", (2, 4), (4, 3), "float8e4m3fn", y_s=0.5, a_zp=0, b_zp=0, y_zp=0),
    OpRecord("QLinearMatMul", [In((3, 4), *U8), _s([0.1, 0.2, 0.3]), _s([1, 2, 3], "uint8"),
                               In((4, 2), *I8), _s([0.05, 0.07]), _s([0, -1], "int8"), _s(0.2),
                               _s(-4, "int8")], name="per-row-per-column"),
]

# -- ConvInteger / QLinearConv ---------------------------------------------------------------------
RECORDS += [
    OpRecord("ConvInteger", [In((1, 1, 3, 3), *U8), In((1, 1, 2, 2), *U8), _s(1, "uint8")],
             name="no-padding"),
    OpRecord("ConvInteger", [In((1, 1, 3, 3), *U8), In((2, 1, 2, 2), *U8), _s(1, "uint8"),
                             _s([1, 2], "uint8")], {"pads": [1, 1, 1, 1]}, name="padding-per-channel"),
    OpRecord("ConvInteger", [In((2, 4, 5, 5), *I8), In((4, 2, 3, 3), *I8), _s([3], "int8"),
                             _s(-1, "int8")], {"group": 2, "strides": [2, 1]}, name="group-stride"),
    OpRecord("ConvInteger", [In((1, 2, 7), *U8), In((3, 2, 3), *I8)],
             {"auto_pad": "SAME_UPPER", "dilations": [2]}, name="1d-same-dilated"),
    # Constant weights: exact float32 Convs over input-channel slices (sums here pass 2^24), or
    # float64 where more than MAX_F32_SLICES slices would be needed.
    OpRecord("ConvInteger", [In((1, 128, 5, 5), "int8", 120, 127), Const(np.full((2, 128, 3, 3), -127, np.int8))],
             name="f32-two-slices"),
    OpRecord("ConvInteger", [In((1, 8, 5, 5), *U8), Const(np.arange(-36, 36, dtype=np.int8).reshape(2, 4, 3, 3)),
                             _s(128, "uint8"), _s(1, "int8")], {"group": 2, "pads": [1, 1, 1, 1]},
             name="f32-grouped-zero-points"),
    OpRecord("ConvInteger", [In((1, 1200, 3, 3), "int8", 120, 127), Const(np.full((1, 1200, 3, 3), 127, np.int8))],
             name="f64-too-many-slices"),
]
RECORDS += [
    OpRecord("QLinearConv", [In((1, 1, 7, 7), *U8), _s(0.0039), _s(0, "uint8"), In((1, 1, 1, 1), *U8),
                             _s([0.0787]), _s([113], "uint8"), _s(0.0157), _s(131, "uint8")],
             name="1x1"),
    OpRecord("QLinearConv", [In((2, 3, 5, 5), *I8), _s(0.05), _s(-3, "int8"), In((4, 3, 3, 3), *I8),
                             _s([0.01, 0.02, 0.03, 0.04]), _s([0, 0, 0, 0], "int8"), _s(0.5),
                             _s(2, "int8"), Const(np.array([100, -200, 300, 0], np.int32))],
             {"pads": [1, 1, 1, 1]}, name="per-channel-bias"),
    OpRecord("QLinearConv", [In((1, 4, 6, 6), *U8), _s(0.02), _s(128, "uint8"), In((4, 1, 3, 3), *U8),
                             _s(0.03), _s(120, "uint8"), _s(0.1), _s(10, "uint8")],
             {"group": 4, "strides": [2, 2], "auto_pad": "SAME_LOWER"}, name="depthwise"),
]

# -- BitCast ---------------------------------------------------------------------------------------
EDGES = [0.0, -0.0, 1.0, -2.5, 0.1, np.inf, -np.inf, np.nan]  # NaN: the canonical quiet NaN


def _edges(t):
    info = ml_dtypes.finfo(t)
    extra = [float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal),
             -3 * float(info.smallest_subnormal), float(info.tiny) * 0.75]
    return Const(np.array(EDGES + extra, t))


def _bc(name, x, to):
    return OpRecord("BitCast", [x], {"to": dt.from_name(to)}, name=name)


RECORDS += [
    _bc("float32-int32-edges", _edges(np.float32), "int32"),
    _bc("float32-uint32-random", In((3, 4), low=-1e6, high=1e6), "uint32"),
    _bc("float64-int64-edges", _edges(np.float64), "int64"),
    _bc("float64-uint64-random", In((5,), "float64", -1e300, 1e300), "uint64"),
    _bc("float16-int16-edges", _edges(np.float16), "int16"),
    _bc("bfloat16-uint16-edges", _edges(ml_dtypes.bfloat16), "uint16"),
    _bc("int32-float32", In((2, 6), "int32", -2 ** 31, 2 ** 31 - 1), "float32"),
    _bc("uint32-float32-0d", In((), "uint32", 0, 2 ** 32 - 1), "float32"),
    _bc("int64-float64", In((8,), "int64", -2 ** 63, 2 ** 63 - 1), "float64"),
    _bc("uint64-float64", In((8,), "uint64", 0, 2 ** 63 - 1), "float64"),
    _bc("int16-float16", In((4, 4), "int16", -32768, 32767), "float16"),
    _bc("uint16-bfloat16", In((16,), "uint16", 0, 65535), "bfloat16"),
    _bc("int8-uint8", In((2, 3), "int8", -128, 127), "uint8"),
    _bc("uint32-int32", In((5,), "uint32", 0, 2 ** 32 - 1), "int32"),
    _bc("bool-uint8", In((4,), "bool"), "uint8"),
    _bc("int4-uint4", In((6,), "int4", -8, 7), "uint4"),
    _bc("uint2-int2", In((6,), "uint2", 0, 3), "int2"),
    _bc("empty", In((0, 2)), "int32"),
]


# -- Requantize (glow-internal: QLinearConv's and QLinearMatMul's last step) -------------------------
def _rq(name, acc, a_s, b_s, y_s, zp, lo=-(2 ** 20), hi=2 ** 20):
    return OpRecord("Requantize", [In(acc, "int32", lo, hi), _s(a_s), _s(b_s), _s(y_s), Const(zp)],
                    name=name, domain="glow", rtol=0, atol=0)


RECORDS += [
    _rq("uint8-per-channel", (2, 3, 4, 5), 0.02, np.asarray([0.003, 0.0007, 0.011], np.float32).reshape(3, 1, 1),
        0.05, np.uint8(128)),
    _rq("int8-per-row", (3, 17), np.asarray([[0.01], [0.2], [0.003]], np.float32), 0.004, 0.03, np.int8(-5)),
    _rq("uint8-saturating-extremes", (40,), 0.5, 0.25, 1e-3, np.uint8(3), -(2 ** 31), 2 ** 31 - 1),
    _rq("int8-ties", (33,), 0.25, 1.0, 0.5, np.int8(0), -600, 600),
    _rq("empty", (0, 4), 0.1, 0.1, 0.1, np.uint8(0)),
]
