"""Records for the reductions outside the floor (ReduceMean/L1/L2/SumSquare/LogSum/LogSumExp) and
ArgMax/ArgMin: axes as constants (negative, unsorted, size-1 dims), absent, empty (with and without
noop_with_empty_axes) and as a run-time input; keepdims; 0-d and empty inputs; 16/64-bit floats and
integers; ties and NaN for the arg reductions; large inputs for LogSumExp."""

import numpy as np

from ..op_records import Const, In, OpRecord

REDUCE_ALL = ["ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
REDUCE_INT = ["ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare"]  # floats only for the logs

I64 = "int64"
HALF_TOL = {"rtol": 2e-3, "atol": 2e-3}


def axes(*a):
    return Const(np.array(a, dtype=np.int64))


def _positive(op):
    """LogSum needs positive sums to stay finite; the others take the usual [-3, 3] range."""
    return {"low": 0.1, "high": 3.0} if op == "ReduceLogSum" else {}


RECORDS = []
for op in REDUCE_ALL:
    p = _positive(op)
    RECORDS += [
        OpRecord(op, [In((2, 3, 4), **p), axes(1)], name="axis1-keep"),
        OpRecord(op, [In((2, 3, 4), **p), axes(-1, 0)], {"keepdims": 0}, name="neg-unsorted-drop"),
        OpRecord(op, [In((2, 3, 4), **p)], {"keepdims": 0}, name="all-drop"),
        OpRecord(op, [In((2, 3, 4), **p)], name="all-keep"),
        OpRecord(op, [In((2, 3), **p), Const(np.zeros(0, np.int64))], name="empty-axes-all"),
        OpRecord(op, [In((2, 3), **p), Const(np.zeros(0, np.int64))], {"noop_with_empty_axes": 1},
                 name="empty-axes-noop"),
        OpRecord(op, [In((2, 3))], {"noop_with_empty_axes": 1}, name="absent-axes-noop"),
        OpRecord(op, [In((1, 3, 1), **p), axes(0, 2)], {"keepdims": 0}, name="unit-dims"),
        OpRecord(op, [In((), **p)], name="scalar"),
        OpRecord(op, [In((2, 0, 4)), axes(1)], name="empty-set"),
        OpRecord(op, [In((0, 3)), axes(1)], {"keepdims": 0}, name="empty-input"),
        OpRecord(op, [In((2, 3, 4), **p), In((1,), I64, 0, 2)], name="runtime-axes-keep"),
        OpRecord(op, [In((2, 3, 4), **p), In((1,), I64, -3, -1)], {"keepdims": 0},
                 name="runtime-axes-drop"),
        OpRecord(op, [In((3, 5), "float64", **p), axes(1)], name="float64"),
    ]
    RECORDS += [OpRecord(op, [In((4, 6), t, **p), axes(1)], name=t, **HALF_TOL)
                for t in ("float16", "bfloat16")]
for op in REDUCE_INT:
    RECORDS += [OpRecord(op, [In((3, 4), t, -9, 9), axes(0)], {"keepdims": 0}, name=t)
                for t in ("int32", "int64")]
    RECORDS += [OpRecord(op, [In((3, 4), "uint32", 0, 9), axes(-1)], name="uint32")]

RECORDS += [
    OpRecord("ReduceLogSumExp", [In((3, 4), low=60, high=100), axes(1)], name="no-overflow"),
    OpRecord("ReduceLogSumExp", [In((3, 4), low=-200, high=-100), axes(1)], name="no-underflow"),
    OpRecord("ReduceLogSumExp", [Const(np.array([[-np.inf, -np.inf], [1.0, np.inf], [np.nan, 0.0]],
                                                np.float32)), axes(1)], name="inf-nan"),
    OpRecord("ReduceMean", [In((2, 3), "int32", -9, 9)], {"keepdims": 0}, name="int-truncates"),
]
RECORDS += [OpRecord(op, [In(()), axes(0)], {"keepdims": 0}, name="scalar-axis")
            for op in ("ReduceMean", "ReduceL2", "ReduceLogSumExp")]

# -- ArgMax / ArgMin -------------------------------------------------------------------------------
TIES = Const(np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, -1, 5]], np.int32))
NANS = Const(np.array([[1.0, np.nan, 2.0, np.nan], [0.0, 4.0, 4.0, -1.0]], np.float32))
for op in ("ArgMax", "ArgMin"):
    RECORDS += [
        OpRecord(op, [In((3, 4))], name="axis0"),
        OpRecord(op, [In((3, 4))], {"axis": -1, "keepdims": 0}, name="last-axis-drop"),
        OpRecord(op, [In((2, 1, 3))], {"axis": 1}, name="unit-axis"),
        OpRecord(op, [In((5,))], {"keepdims": 0}, name="vector-to-scalar"),
        OpRecord(op, [In((0, 3))], {"axis": 1}, name="empty"),
        OpRecord(op, [In((4, 6), "int32", 0, 2)], {"axis": 1}, name="int-ties-first"),
        OpRecord(op, [In((4, 6), "int32", 0, 2)], {"axis": 1, "select_last_index": 1},
                 name="int-ties-last"),
        OpRecord(op, [TIES], {"axis": 1, "select_last_index": 1, "keepdims": 0}, name="const-ties-last"),
        OpRecord(op, [NANS], {"axis": 1}, name="nan-first"),
        OpRecord(op, [NANS], {"axis": 1, "select_last_index": 1}, name="nan-last"),
    ]
    RECORDS += [OpRecord(op, [In((3, 4), t, 0, 4)], {"axis": 1}, name=t)
                for t in ("float16", "bfloat16", "float64", "int64", "uint8", "int8", "int16", "uint16",
                          "uint64")]
