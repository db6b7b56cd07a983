"""Records for the floor (the 40 primitives every op lowers to), so that a backend implementing only
the floor can test every kernel it writes: broadcasting in both directions, 0-d, size-1 and empty
dims, negative axes, every integer width the op takes, and the special values (inf, NaN, -0.0,
halves) where kernels most often differ from NumPy. The conformance kit (`glow.testing.conformance`)
adds element-type variants a backend claims that no record here covers.

They live beside `records/`, not in it: those are the records of ops with lowering rules (each is
lowered and compared in tests/test_lowering.py), while the floor is where lowering ends."""

import numpy as np

from .op_records import Const, In, OpRecord

inf, nan = np.inf, np.nan


def i64(*values):
    return Const(np.asarray(values, dtype=np.int64).reshape(-1))


def f32(*values):
    return Const(np.asarray(values, dtype=np.float32))


UNARY = {"Exp": (-3, 3), "Log": (0.01, 10), "Sqrt": (0, 9), "Sin": (-7, 7), "Erf": (-3, 3),
         "Floor": (-5, 5), "Atan": (-9, 9)}
SPECIAL = [0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 1e-30, 88.0, -88.0, 1e20, -1e20, inf, -inf, nan]
SHAPES = [(2, 3), (), (1,), (4, 1, 5), (0, 3)]
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}

RECORDS = [OpRecord(op, [In(s, "float32", *r)]) for op, r in UNARY.items() for s in SHAPES]
RECORDS += [OpRecord(op, [In((3, 4), t, *r)], name=t, rtol=TOL[t][0], atol=TOL[t][1])
            for op, r in UNARY.items() for t in ("float64", "float16")]
RECORDS += [OpRecord(op, [f32(*SPECIAL)], name="special", rtol=1e-5, atol=0) for op in UNARY]

# -- binary arithmetic: broadcasting both ways, 0-d, empty, integers ----------------------------------
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
BROADCAST = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((), (2, 2)), ((2, 1, 3), (4, 1)),
             ((0, 3), (1, 3)), ((1,), ())]


def _nonzero(op, dtype="float32"):
    """Divisors away from zero (integer division by zero is undefined in ONNX)."""
    return {"low": 1, "high": 9} if op == "Div" else {}


RECORDS += [OpRecord(op, [In(a), In(b, **_nonzero(op))], name="x".join(map(str, a)) + "-" + "x".join(map(str, b)))
            for op in BINARY for a, b in BROADCAST]
RECORDS += [OpRecord(op, [In((3, 4), t, -9, 9), In((4,), t, **({"low": 1, "high": 9} if op == "Div" else
                                                              {"low": -9, "high": 9}))], name=t)
            for op in BINARY for t in ("int32", "int64", "int8", "float64", "float16")]
RECORDS += [OpRecord(op, [In((3, 4), "uint8", 0, 200), In((3, 4), "uint8", 1, 50)], name="uint8")
            for op in BINARY if op != "Sub"]
RECORDS += [OpRecord("Div", [In((8,), "int32", -20, 20), Const(np.array([3, -3, 7, -7, 2, -2, 5, -5], np.int32))],
                     name="int-truncates")]
RECORDS += [OpRecord(op, [f32(*SPECIAL), f32(*reversed(SPECIAL))], name="special", rtol=1e-5, atol=0)
            for op in ("Add", "Mul", "Max", "Min")]
RECORDS += [OpRecord(op, [In((2, 3)), In((3,)), In((1, 3))], name="variadic-3") for op in ("Max", "Min")]
RECORDS += [OpRecord("Pow", [In((2, 3), low=0.1, high=3), In((2, 3), low=-2, high=2)], name="float"),
            OpRecord("Pow", [In((2, 3)), Const(np.float32(2.0))], name="square"),
            OpRecord("Pow", [In((2, 3), low=0.1, high=3), Const(np.float32(0.5))], name="sqrt"),
            OpRecord("Pow", [In((3,), low=0.5, high=2), In((2, 3), "int64", -2, 3)], name="int-exponent"),
            OpRecord("Pow", [In((2, 3), "int32", -3, 3), In((2, 3), "int32", 0, 4)], name="int32"),
            OpRecord("Pow", [In((3, 4), "float64", 0.1, 3), In((3, 4), "float64", -2, 2)], name="float64",
                     rtol=1e-12, atol=1e-14)]

# -- compare, logic, select --------------------------------------------------------------------------
RECORDS += [OpRecord(op, [In(a, "int32", -2, 2), In(b, "int32", -2, 2)], name="int32-" + "x".join(map(str, a)))
            for op in ("Equal", "Less", "Greater") for a, b in (((2, 3), (3,)), ((), (4,)), ((0, 2), (1, 2)))]
RECORDS += [OpRecord(op, [In((3, 4)), In((3, 4))], name="float32") for op in ("Equal", "Less", "Greater")]
RECORDS += [OpRecord(op, [f32(0.0, -0.0, nan, inf, -inf, 1.0), f32(-0.0, 0.0, nan, inf, 1.0, nan)],
                     name="special") for op in ("Equal", "Less", "Greater")]
RECORDS += [OpRecord("Equal", [In((2, 3), "bool"), In((3,), "bool")], name="bool"),
            OpRecord("Equal", [In((5,), "int64", -1, 1), In((5,), "int64", -1, 1)], name="int64")]
RECORDS += [OpRecord("And", [In((2, 3), "bool"), In((3,), "bool")], name="broadcast"),
            OpRecord("And", [In((), "bool"), In((0, 2), "bool")], name="empty"),
            OpRecord("Not", [In((2, 3), "bool")], name="2d"),
            OpRecord("Not", [In((), "bool")], name="scalar")]
RECORDS += [OpRecord("Where", [In((2, 3), "bool"), In((2, 3)), In((2, 3))], name="same-shape"),
            OpRecord("Where", [In((3,), "bool"), In((2, 1)), In(())], name="broadcast-all"),
            OpRecord("Where", [In((2, 2), "bool"), In((2, 2), "int64", -9, 9), In((1,), "int64")], name="int64"),
            OpRecord("Where", [In((0, 2), "bool"), In((2,)), In((1, 2))], name="empty")]

# -- bitwise -----------------------------------------------------------------------------------------
RECORDS += [OpRecord(op, [In((3, 4), t, -100, 100), In((4,), t, -100, 100)], name=t)
            for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor") for t in ("int32", "uint8", "int64")]
RECORDS += [OpRecord("BitwiseNot", [In((3, 4), t, -100, 100)], name=t) for t in ("int32", "uint8", "int64", "int8")]
RECORDS += [OpRecord("BitShift", [In((3, 4), t, 0, 100), In((4,), t, 0, 7)], {"direction": d}, name=f"{d.lower()}-{t}")
            for d in ("LEFT", "RIGHT") for t in ("uint8", "uint32", "uint64")]

# -- types and constants -------------------------------------------------------------------------------
CASTS = [("float32", "int32", (-9, 9)), ("float32", "float16", (-9, 9)), ("float32", "float64", (-9, 9)),
         ("float32", "bool", (-1, 1)), ("int64", "float32", (-99, 99)), ("int32", "int64", (-99, 99)),
         ("bool", "float32", (0, 1)), ("float64", "float32", (-9, 9)), ("int32", "uint8", (0, 200)),
         ("float16", "float32", (-9, 9)), ("uint8", "int32", (0, 255))]
RECORDS += [OpRecord("Cast", [In((2, 3), src, *r)], {"to": dst}, name=f"{src}-to-{dst}") for src, dst, r in CASTS]
RECORDS += [OpRecord("Cast", [f32(-2.5, -1.5, -0.5, 0.5, 1.5, 2.7, -2.7)], {"to": "int32"}, name="truncates"),
            OpRecord("Cast", [In((0, 2))], {"to": "int64"}, name="empty")]
RECORDS += [OpRecord("Constant", [], {"value": np.arange(6, dtype=np.float32).reshape(2, 3)}, name="tensor"),
            OpRecord("Constant", [], {"value_int": 7}, name="int"),
            OpRecord("Constant", [], {"value_floats": [1.0, 2.5]}, name="floats")]

# -- movement ----------------------------------------------------------------------------------------
RECORDS += [OpRecord("Identity", [In((2, 3))], name="2d"),
            OpRecord("Identity", [In((), "int64")], name="scalar-int64"),
            OpRecord("Identity", [In((0, 4), "bool")], name="empty-bool")]
RECORDS += [OpRecord("Reshape", [In((2, 3, 4)), i64(4, -1)], name="infer"),
            OpRecord("Reshape", [In((2, 3, 4)), i64(0, 12)], name="copy-dim"),
            OpRecord("Reshape", [In((6,), "int32"), i64(3, 1, 2)], name="int32"),
            OpRecord("Reshape", [In((1, 1)), Const(np.zeros(0, np.int64))], name="to-scalar"),
            OpRecord("Reshape", [In((0, 3)), i64(3, 0)], {"allowzero": 1}, name="allowzero")]
RECORDS += [OpRecord("Transpose", [In((2, 3))], name="default"),
            OpRecord("Transpose", [In((2, 3, 4))], {"perm": [2, 0, 1]}, name="3d"),
            OpRecord("Transpose", [In((1, 2, 3, 4), "int64")], {"perm": [0, 3, 1, 2]}, name="nchw-int64"),
            OpRecord("Transpose", [In((2, 0, 3))], {"perm": [1, 2, 0]}, name="empty"),
            OpRecord("Transpose", [In(())], {"perm": []}, name="scalar")]
RECORDS += [OpRecord("Expand", [In((3, 1)), i64(2, 3, 4)], name="new-dims"),
            OpRecord("Expand", [In((2, 3)), i64(1, 1)], name="shape-smaller"),
            OpRecord("Expand", [In((), "int64"), i64(2, 2)], name="scalar"),
            OpRecord("Expand", [In((1, 3), "bool"), i64(0, 3)], name="to-empty")]
RECORDS += [OpRecord("Slice", [In((5, 6)), i64(1, 0), i64(4, 6)], name="basic"),
            OpRecord("Slice", [In((5, 6)), i64(-1), i64(-6), i64(1), i64(-2)], name="negative-step"),
            OpRecord("Slice", [In((4, 5, 6)), i64(0, 2), i64(100, -1), i64(2, 0), i64(3, 1)], name="clamped-axes"),
            OpRecord("Slice", [In((5,), "int64"), i64(3), i64(3)], name="empty-result"),
            OpRecord("Slice", [In((6,)), i64(-100), i64(100), i64(0), i64(4)], name="step-beyond")]
RECORDS += [OpRecord("Pad", [In((2, 3)), i64(1, 0, 2, 1)], name="zeros"),
            OpRecord("Pad", [In((2, 3)), i64(1, 1, 1, 1), Const(np.float32(-2.5))], name="value"),
            OpRecord("Pad", [In((3, 4)), i64(-1, 1, 0, -2)], name="negative-crops"),
            OpRecord("Pad", [In((2, 3, 4), "int32"), i64(1, 2, 0, 1), Const(np.int32(7)), i64(-1, 0)],
                     name="axes-int32"),
            OpRecord("Pad", [In((0, 2)), i64(1, 0, 1, 0)], name="from-empty")]
RECORDS += [OpRecord("Concat", [In((2, 3)), In((1, 3))], {"axis": 0}, name="axis0"),
            OpRecord("Concat", [In((2, 1)), In((2, 3)), In((2, 2))], {"axis": -1}, name="three-negative-axis"),
            OpRecord("Concat", [In((2, 0)), In((2, 3), "float32")], {"axis": 1}, name="with-empty"),
            OpRecord("Concat", [In((4,), "int64")], {"axis": 0}, name="single"),
            OpRecord("Concat", [In((1, 2), "bool"), In((1, 2), "bool")], {"axis": 0}, name="bool")]
RECORDS += [OpRecord("Gather", [In((5, 3)), i64(0, 4, -1, 2)], name="axis0-negative-index"),
            OpRecord("Gather", [In((2, 5, 3)), Const(np.array([[1, 0], [4, -2]], np.int64))], {"axis": 1},
                     name="2d-indices"),
            OpRecord("Gather", [In((4, 3), "int32"), Const(np.array(2, np.int64))], name="scalar-index"),
            OpRecord("Gather", [In((3, 4)), Const(np.array([3, -4], np.int32))], {"axis": -1}, name="int32-indices"),
            OpRecord("Gather", [In((3, 2)), Const(np.zeros((0,), np.int64))], name="no-indices"),
            OpRecord("Gather", [In((6,)), In((2, 2), "int64", 0, 5)], name="runtime-indices")]

# -- reductions --------------------------------------------------------------------------------------
for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
    lo, hi = (0.5, 1.5) if op == "ReduceProd" else (-3, 3)
    RECORDS += [OpRecord(op, [In((2, 3, 4), low=lo, high=hi), i64(1)], name="axis1"),
                OpRecord(op, [In((2, 3, 4), low=lo, high=hi), i64(-1, 0)], {"keepdims": 0}, name="two-axes-drop"),
                OpRecord(op, [In((2, 3, 4), low=lo, high=hi)], name="all"),
                OpRecord(op, [In((3, 1, 2), low=lo, high=hi), Const(np.zeros(0, np.int64))],
                         {"noop_with_empty_axes": 1}, name="noop"),
                OpRecord(op, [In((), low=lo, high=hi)], {"keepdims": 0}, name="scalar"),
                OpRecord(op, [In((4, 5), "int32", -4, 4), i64(0)], name="int32"),
                OpRecord(op, [In((3, 4), "float64", lo, hi), i64(1)], name="float64", rtol=1e-12, atol=1e-14)]
RECORDS += [OpRecord("ReduceSum", [In((2, 0, 3)), i64(1)], name="empty-axis"),
            OpRecord("ReduceProd", [In((0, 3)), i64(0)], {"keepdims": 0}, name="empty-axis"),
            OpRecord("ReduceSum", [In((64, 33), "float16", -1, 1), i64(0)], name="float16", rtol=5e-3, atol=5e-3),
            OpRecord("ReduceMax", [f32(1.0, nan, -inf, 3.0)], {"keepdims": 0}, name="nan"),
            OpRecord("ReduceMax", [In((3, 4), "bool"), i64(1)], name="bool"),
            OpRecord("ReduceMin", [In((3, 4), "int64", -99, 99), i64(0)], name="int64")]

# -- contraction -------------------------------------------------------------------------------------
MM = dict(rtol=1e-4, atol=1e-5)
RECORDS += [OpRecord("MatMul", [In((3, 4)), In((4, 5))], name="2d", **MM),
            OpRecord("MatMul", [In((2, 3, 4)), In((2, 4, 5))], name="batched", **MM),
            OpRecord("MatMul", [In((2, 1, 3, 4)), In((5, 4, 2))], name="batch-broadcast", **MM),
            OpRecord("MatMul", [In((4,)), In((4, 3))], name="vector-matrix", **MM),
            OpRecord("MatMul", [In((2, 3, 4)), In((4,))], name="matrix-vector", **MM),
            OpRecord("MatMul", [In((6,)), In((6,))], name="dot", **MM),
            OpRecord("MatMul", [In((1, 1)), In((1, 1))], name="1x1", **MM),
            OpRecord("MatMul", [In((3, 0)), In((0, 2))], name="empty-k", **MM),
            OpRecord("MatMul", [In((17, 70)), In((70, 33))], name="odd-sizes", **MM),
            OpRecord("MatMul", [In((3, 4), "int32", -9, 9), In((4, 2), "int32", -9, 9)], name="int32"),
            OpRecord("MatMul", [In((3, 4), "int64", -9, 9), In((4, 2), "int64", -9, 9)], name="int64"),
            OpRecord("MatMul", [In((3, 4), "float64"), In((4, 5), "float64")], name="float64", rtol=1e-12, atol=1e-12),
            OpRecord("MatMul", [In((8, 16), "float16", -1, 1), In((16, 4), "float16", -1, 1)], name="float16",
                     rtol=5e-3, atol=5e-3)]
