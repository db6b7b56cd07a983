"""Records for generator ops and Trilu: folded (small) and computed (large) outputs, empty and 0-d
shapes, every diagonal offset sign, and a run-time k."""

import numpy as np

from ..op_records import Const, In, OpRecord


def i64(values):
    return Const(np.asarray(values, dtype=np.int64))


RECORDS = [
    OpRecord("ConstantOfShape", [i64([2, 3])], {"value": np.asarray([1.5], np.float32)}, name="float"),
    OpRecord("ConstantOfShape", [i64([4, 0])], {"value": np.asarray([7], np.int32)}, name="empty-int32"),
    OpRecord("ConstantOfShape", [i64(np.zeros(0))], name="scalar-default"),
    OpRecord("ConstantOfShape", [i64([100, 90])], {"value": np.asarray([True])}, name="large-bool"),
    OpRecord("EyeLike", [In((3, 4))], {"k": 1}, name="k1"),
    OpRecord("EyeLike", [In((4, 2), "int32")], {"k": -2, "dtype": "float64"}, name="k-2-dtype"),
    OpRecord("EyeLike", [In((80, 90))], {"k": -3}, name="large"),
    OpRecord("EyeLike", [In((0, 3), "int64")], name="empty"),
    OpRecord("Range", [Const(np.float32(1)), Const(np.float32(-4)), Const(np.float32(-1.5))], name="float"),
    OpRecord("Range", [Const(np.int32(0)), Const(np.int32(10000)), Const(np.int32(3))], name="large-int32"),
    OpRecord("Range", [i64(5), i64(2), i64(1)], name="empty"),
    OpRecord("Size", [In((2, 3))], name="2d"),
    OpRecord("Size", [In((0, 4), "bool")], name="empty"),
]

TRILU_SHAPES = [(4, 5), (2, 3, 3), (3, 1), (1, 4), (0, 3)]
RECORDS += [OpRecord("Trilu", [In(s)], {"upper": u},
                     name=f"{'upper' if u else 'lower'}-{'x'.join(map(str, s))}")
            for u in (1, 0) for s in TRILU_SHAPES]
RECORDS += [OpRecord("Trilu", [In((4, 5), "int32"), i64(k)], {"upper": u}, name=f"k{k}-{u}")
            for k in (-2, 3, 9, -9) for u in (1, 0)]
RECORDS += [OpRecord("Trilu", [In((3, 4)), In((), "int64", low=-3, high=3)], {"upper": u},
                     name=f"runtime-k-{u}") for u in (1, 0)]
RECORDS += [OpRecord("Trilu", [In((3, 3), "bool")], name="bool")]
