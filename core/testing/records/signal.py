"""Records for signal processing: DFT (real and complex input, forward, inverse, one-sided RFFT
and IRFFT with even and odd lengths, dft_length padding and truncation, every axis including a
negative and a run-time one, float16/float64), STFT (with and without window and frame_length,
complex input, run-time frame_step), the window generators (known and run-time sizes) and MelWeightMatrix."""

import numpy as np

from ... import dtypes as dt
from ..op_records import Const, In, OpRecord

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _i(v):
    return Const(np.asarray(v, np.int64))


def _dft(name, x, dtype="float32", n=None, axis=None, **attrs):
    tol = {"rtol": 5e-3, "atol": 5e-2} if dtype == "float16" else TOL
    return OpRecord("DFT", [In(x, dtype), n, axis], attrs, name=name, **tol)


RECORDS = [
    _dft("real-forward", (2, 8, 1), axis=_i(1)),
    _dft("complex-forward-default-axis", (3, 5, 2)),
    _dft("complex-inverse", (2, 6, 2), inverse=1),
    _dft("rfft-odd", (2, 9, 1), axis=_i(-2), onesided=1),
    _dft("rfft-even", (4, 8, 1), onesided=1),
    _dft("irfft-even", (2, 5, 2), inverse=1, onesided=1),
    _dft("irfft-odd-length", (2, 5, 2), n=_i(9), inverse=1, onesided=1),
    _dft("pad", (3, 5, 2), n=_i(8)),
    _dft("truncate", (3, 12, 1), n=_i(6)),
    _dft("axis0", (4, 3, 2), axis=_i(0)),
    _dft("axis-3d-middle", (4, 6, 3, 2), axis=_i(1), inverse=1),
    _dft("float64", (2, 7, 2), "float64"),
    _dft("float16", (2, 6, 1), "float16", axis=_i(1)),
    _dft("length-1", (3, 1, 2), axis=_i(1)),
    _dft("runtime-axis", (2, 4, 4, 2), axis=In((), "int64", 1, 1)),
    _dft("runtime-negative-axis", (3, 4, 4, 2), axis=In((), "int64", -2, -2)),
    _dft("runtime-axis-rfft", (2, 4, 6, 1), axis=In((), "int64", 2, 2), onesided=1),
    _dft("runtime-axis-irfft", (2, 4, 6, 2), axis=In((), "int64", 1, 1), inverse=1, onesided=1),
]

# -- STFT ------------------------------------------------------------------------------------------
RECORDS += [
    OpRecord("STFT", [In((2, 64, 1)), _i(8), None, _i(16)], name="frame-length", **TOL),
    OpRecord("STFT", [In((1, 40, 1)), _i(5), In((10,), low=0, high=1)], name="window", **TOL),
    OpRecord("STFT", [In((2, 32, 2)), _i(4), In((8,), low=0, high=1), _i(8)], {"onesided": 0},
             name="complex-two-sided", **TOL),
    OpRecord("STFT", [In((1, 20, 1), "float64"), _i(3), None, _i(7)], name="float64-odd", **TOL),
    OpRecord("STFT", [In((2, 16, 1)), _i(16)], name="whole-signal", **TOL),
    OpRecord("STFT", [In((1, 128, 1)), In((), "int64", 8, 8), In((16,), low=0, high=1)],
             name="runtime-step-window", **TOL),
    OpRecord("STFT", [In((2, 50, 2)), In((1,), "int64", 7, 7), None, _i(10)], {"onesided": 0},
             name="runtime-step-complex", **TOL),
]

# -- generators ------------------------------------------------------------------------------------
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    RECORDS += [
        OpRecord(op, [Const(np.asarray(10, np.int32))], name="periodic"),
        OpRecord(op, [Const(np.asarray(9, np.int64))], {"periodic": 0}, name="symmetric"),
        OpRecord(op, [Const(np.asarray(1, np.int64))], {"periodic": 0}, name="size-1"),
        OpRecord(op, [Const(np.asarray(0, np.int64))], name="empty"),
        OpRecord(op, [Const(np.asarray(6000, np.int64))], {"output_datatype": dt.float64},
                 name="large-float64"),
        OpRecord(op, [In((), "int64", 10, 10)], name="runtime-size", **TOL),
        OpRecord(op, [In((), "int32", 1, 1)], {"periodic": 0}, name="runtime-size-1", **TOL),
        OpRecord(op, [In((), "int64", 0, 0)], name="runtime-empty"),
        OpRecord(op, [In((), "int64", 1029, 1029)], {"periodic": 0, "output_datatype": dt.float64},
                 name="runtime-long-symmetric", **TOL),
        OpRecord(op, [In((), "int64", 12, 12)], {"output_datatype": dt.int32}, name="runtime-int32"),
    ]

RECORDS += [
    OpRecord("MelWeightMatrix", [Const(np.asarray(8, np.int32)), Const(np.asarray(16, np.int32)),
                                 Const(np.asarray(8192, np.int32)), Const(np.asarray(0.0, np.float32)),
                                 Const(np.asarray(4096.0, np.float32))], name="onnx-example"),
    OpRecord("MelWeightMatrix", [Const(np.asarray(20, np.int64)), Const(np.asarray(512, np.int64)),
                                 Const(np.asarray(16000, np.int64)), Const(np.asarray(20.0)),
                                 Const(np.asarray(8000.0))], {"output_datatype": dt.float64},
             name="float64"),
    OpRecord("MelWeightMatrix", [In((), "int64", 8, 8), In((), "int64", 16, 16), In((), "int64", 8192, 8192),
                                 In((), "float32", 0, 0), In((), "float32", 4096, 4096)],
             name="runtime-onnx-example"),
    OpRecord("MelWeightMatrix", [In((), "int32", 13, 13), In((), "int32", 400, 400), In((), "int32", 16000, 16000),
                                 In((), "float64", 125, 125), In((), "float64", 7600, 7600)],
             {"output_datatype": dt.float16}, name="runtime-float16", rtol=1e-3, atol=1e-3),
]
