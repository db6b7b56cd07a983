"""Records for index ops: negative and int32 indices, batch dims, indices smaller than data,
duplicate scatter targets with every reduction, and run-time axes for the scans."""

import numpy as np

from ..op_records import Const, In, OpRecord


def i64(values):
    return Const(np.asarray(values, dtype=np.int64))


RECORDS = [
    OpRecord("GatherElements", [In((3, 4)), In((2, 4), "int64", low=-3, high=2)], name="axis0"),
    OpRecord("GatherElements", [In((3, 4)), In((3, 6), "int32", low=-4, high=3)], {"axis": -1},
             name="axis-1-int32"),
    OpRecord("GatherElements", [In((2, 3, 4), "int64"), In((2, 1, 4), "int64", low=0, high=2)],
             {"axis": 1}, name="3d"),
    OpRecord("GatherElements", [In((5,), "bool"), In((7,), "int64", low=-5, high=4)], name="1d-bool"),
    OpRecord("GatherElements", [In((3, 4)), In((0, 4), "int64", low=0, high=2)], name="empty"),
    OpRecord("GatherND", [In((2, 3, 4)), i64([[1, 2], [0, -1], [-2, 0]])], name="pairs"),
    OpRecord("GatherND", [In((2, 3, 4), "int32"), i64([[[1], [0]], [[2], [2]]])], {"batch_dims": 1},
             name="batch1"),
    OpRecord("GatherND", [In((2, 3)), i64([[1, 2], [0, 0], [1, -3], [0, 1]])], name="elements"),
    OpRecord("GatherND", [In((2, 3, 2)), i64([[[0, 1]], [[2, 0]]])], {"batch_dims": 1}, name="batch1-k2"),
]

RECORDS += [
    OpRecord("OneHot", [In((2, 3), "int64", low=-6, high=6), i64(5), Const(np.asarray([0, 1], np.float32))],
             name="out-of-range"),
    OpRecord("OneHot", [In((4,), "float32", low=-3, high=3), Const(np.float32(4)), In((2,), "int32")],
             {"axis": 0}, name="float-axis0"),
    OpRecord("OneHot", [In((2, 2), "int32", low=0, high=3), i64([3]), Const(np.asarray([2.0, 7.5]))],
             {"axis": -2}, name="axis-2"),
    OpRecord("OneHot", [In((), "int64", low=0, high=3), i64(3), Const(np.asarray([False, True]))],
             name="scalar-bool"),
]

for op, rtol in (("CumSum", 1e-5), ("CumProd", 1e-4)):
    RECORDS += [
        OpRecord(op, [In((5,)), i64(0)], rtol=rtol, name="1d"),
        OpRecord(op, [In((7,), "int32"), i64(0)], {"exclusive": 1}, name="1d-int32-exclusive"),
        OpRecord(op, [In((3, 9)), i64(-1)], {"reverse": 1}, rtol=rtol, name="reverse"),
        OpRecord(op, [In((4, 3), "int64"), i64(0)], {"exclusive": 1, "reverse": 1}, name="exclusive-reverse"),
        OpRecord(op, [In((2, 3, 4), "float64"), i64(1)], rtol=rtol, name="3d-axis1"),
        OpRecord(op, [In((1,)), i64(0)], {"exclusive": 1}, name="one-exclusive"),
        OpRecord(op, [In((0, 3)), i64(0)], name="empty"),
        OpRecord(op, [In((3, 4)), In((), "int64", low=-2, high=1)], rtol=rtol, name="runtime-axis"),
        OpRecord(op, [In((6,), "int32"), In((), "int32", low=-1, high=0)], name="runtime-axis-1d"),
    ]

RECORDS += [
    OpRecord("ReverseSequence", [In((4, 3, 2)), In((3,), "int64", low=0, high=4)], name="time-major"),
    OpRecord("ReverseSequence", [In((3, 5), "int32"), In((3,), "int64", low=0, high=5)],
             {"batch_axis": 0, "time_axis": 1}, name="batch-major"),
    OpRecord("ReverseSequence", [In((2, 2, 0)), In((2,), "int64", low=1, high=2)], name="empty-inner"),
]

# Known (Const) indices are matched at compile time, run-time (In) ones in the graph: both are
# covered. ONNX leaves duplicate targets undefined for 'none'; glow (and NumPy) keep the last write.
_ROWS = [[1, 0, 2, 2], [0, -1, 1, 0]]
RECORDS += [
    OpRecord("ScatterElements", [In((3, 4)), i64(_ROWS), In((2, 4))], name="none"),
    OpRecord("ScatterElements", [In((3, 5), "int32"), i64([[4, -1], [0, 2]]), In((2, 2), "int32")],
             {"axis": 1}, name="axis1-partial"),
    OpRecord("Scatter", [In((3, 4)), i64(_ROWS), In((2, 4))], name="alias"),
    OpRecord("ScatterElements", [In((6,), "bool"), i64([5, 0, -3]), In((3,), "bool")], name="1d-bool"),
    OpRecord("ScatterElements", [In((3, 4)), In((0, 4), "int64", low=0, high=2), In((0, 4))], name="empty"),
]
RECORDS += [OpRecord("ScatterElements", [In((3, 4), dt), In((5, 3), "int64", low=-3, high=2), In((5, 3), dt)],
                     {"reduction": r}, name=f"{r}-{dt}")
            for r in ("add", "mul", "max", "min") for dt in ("float32", "int64")]
RECORDS += [
    OpRecord("ScatterElements", [In((2, 5)), In((2, 6), "int64", low=-5, high=4), In((2, 6))], {"axis": 1},
             name="none-runtime"),
    OpRecord("ScatterElements", [In((4, 2)), i64([[1, 0], [1, 1], [-3, 0]]), In((3, 2))],
             {"reduction": "add"}, name="add-known"),
    OpRecord("ScatterND", [In((4, 2)), In((3, 1), "int64", low=-4, high=3), In((3, 2))], name="none-runtime"),
    OpRecord("ScatterND", [In((3, 3), "int32"), In((4, 2), "int64", low=0, high=2), In((4,), "int32")],
             {"reduction": "add"}, name="add-runtime"),
]

RECORDS += [
    OpRecord("ScatterND", [In((4, 4, 4)), i64([[0], [2]]), In((2, 4, 4))], name="rows"),
    OpRecord("ScatterND", [In((3, 4)), i64([[0, 1], [2, -1], [1, 1]]), In((3,))], name="elements"),
    OpRecord("ScatterND", [In((2, 3), "int32"), i64([[[1], [0]], [[1], [1]]]), In((2, 2, 3), "int32")],
             {"reduction": "add"}, name="add-duplicates"),
    OpRecord("ScatterND", [In((4, 2)), i64([[3], [3], [0]]), In((3, 2))], {"reduction": "mul"}, name="mul"),
    OpRecord("ScatterND", [In((4, 2)), i64([[3], [3], [0]]), In((3, 2))], {"reduction": "max"}, name="max"),
    OpRecord("ScatterND", [In((4, 2), "int64"), i64([[1], [1]]), In((2, 2), "int64")], {"reduction": "min"},
             name="min"),
]

RECORDS += [
    OpRecord("TensorScatter", [In((2, 3, 8, 4)), In((2, 3, 2, 4)), i64([1, 6])], name="linear"),
    OpRecord("TensorScatter", [In((2, 5, 3)), In((2, 3, 3)), i64([4, 1])], {"mode": "circular", "axis": 1},
             name="circular"),
    OpRecord("TensorScatter", [In((3, 6), "int64"), In((3, 2), "int64")], {"axis": -1}, name="no-indices"),
    OpRecord("TensorScatter", [In((2, 4, 2)), In((2, 1, 2)), In((2,), "int64", low=0, high=3)],
             {"axis": 1}, name="runtime-indices"),
]

# TopK ties (few distinct ints) must go to the lower index in both directions.
RECORDS += [
    OpRecord("TopK", [In((3, 4)), i64([2])], num_outputs=2, name="largest"),
    OpRecord("TopK", [In((4, 6), "int32", low=0, high=2), i64([4])], {"largest": 0}, num_outputs=2,
             name="smallest-ties"),
    OpRecord("TopK", [In((5, 3), "int64", low=0, high=2), i64([5])], {"axis": 0}, num_outputs=2,
             name="axis0-ties-all"),
    OpRecord("TopK", [In((2, 7, 3), "float64"), i64([3])], {"axis": 1, "sorted": 0}, num_outputs=2,
             name="3d-axis1"),
    OpRecord("TopK", [In((3, 4), "uint64"), i64([0])], num_outputs=2, name="k0"),
    OpRecord("TopK", [In((6,)), i64([1])], {"largest": 0}, num_outputs=2, name="1d-min"),
]
