"""Records for elementwise ops: edge shapes (size-1 dims, scalars, broadcasting, empty tensors),
every element type an op takes, and the special values (inf, NaN, halves, domain ends) where
an expansion is most likely to go wrong."""

import numpy as np

from ... import dtypes as dt
from ..op_records import Const, In, OpRecord

inf, nan = np.inf, np.nan

UNARY_FLOAT = ["Relu", "Neg", "Abs", "Reciprocal", "Ceil", "Round", "Cos", "Tan", "Sigmoid", "Tanh",
               "Sinh", "Cosh", "Asinh", "IsNaN", "IsInf", "Sign"]
SHAPES = [(2, 3), (1,), (), (4, 1, 5), (0, 3)]
#: op -> input range where it is defined (default: -3 .. 3)
DOMAIN = {"Asin": (-1, 1), "Acos": (-1, 1), "Atanh": (-1, 1), "Acosh": (1, 20)}
SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 1e-30, -1e-30, 1e-6, -1e-6, 3e4, -3e4,
           88.5, -88.5, 1e20, -1e20, inf, -inf, nan]
#: relative tolerance per element type of multi-step formulas
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-3, "bfloat16": 1e-2}


def _in(op, shape, dtype="float32"):
    lo, hi = DOMAIN.get(op, (-3, 3))
    return In(shape, dtype, lo, hi)


def _special(dtype="float32", values=SPECIAL):
    # by glow's name: NumPy knows "float8_e4m3fn" only once ml_dtypes is imported, which a test
    # file collected on its own may not have done yet
    with np.errstate(over="ignore"):
        return Const(np.asarray(values, np.float64).astype(dt.from_name(dtype.replace("_", "")).np))


RECORDS = [OpRecord(op, [_in(op, s)]) for op in UNARY_FLOAT + list(DOMAIN) for s in SHAPES]
RECORDS += [OpRecord(op, [_in(op, (3, 4), t)], name=t, rtol=TOL[t], atol=TOL[t] / 10)
            for op in UNARY_FLOAT + list(DOMAIN) for t in ("float16", "float64", "bfloat16")]
RECORDS += [OpRecord(op, [_special()], name="special", rtol=1e-5, atol=0)
            for op in UNARY_FLOAT + list(DOMAIN)]
RECORDS += [OpRecord(op, [_special("float64")], name="special-float64", rtol=1e-12, atol=0)
            for op in UNARY_FLOAT + list(DOMAIN)]
RECORDS += [OpRecord(op, [Const(np.asarray(v, np.float32))], name="domain-ends", rtol=1e-5, atol=0)
            for op, v in [("Asin", [-1, 1, 1 - 1e-7, -1 + 1e-7, 1.5, -1.5, 0]),
                          ("Acos", [-1, 1, 1 - 1e-7, -1 + 1e-7, 1.5, -1.5, 0]),
                          ("Atanh", [-1, 1, 1 - 1e-7, -1 + 1e-7, 1.5, -1.5, 0, 1e-20]),
                          ("Acosh", [1, 1 + 1e-6, 0.5, -3, -1e20, 3e38, inf, -inf]),
                          ("Asinh", [3e38, -3e38, 1e-20, 1e10, 1e11])]]
RECORDS += [OpRecord("Tanh", [In((64,), low=-60, high=60)], name="saturating"),
            OpRecord("Sigmoid", [In((64,), low=-100, high=100)], name="saturating"),
            OpRecord("Sinh", [In((64,), low=-89, high=89)], name="near-overflow", rtol=1e-5),
            OpRecord("Cosh", [In((64,), low=-89, high=89)], name="near-overflow", rtol=1e-5),
            OpRecord("Cos", [In((64,), low=-1e4, high=1e4)], name="large-args", atol=1e-6),
            OpRecord("Round", [Const(np.arange(-4, 4.5, 0.5, dtype=np.float32))], name="halves-to-even")]

# integer element types (Abs and Sign on unsigned types are the identity / a 0-1 test)
RECORDS += [OpRecord(op, [In(s, "int32")], name=f"int32-{len(s)}d") for op in ("Relu", "Neg", "Abs", "Sign")
            for s in [(2, 3), ()]]
RECORDS += [OpRecord(op, [In((3, 4), t, -100, 100)], name=t)
            for op in ("Relu", "Neg", "Abs", "Sign") for t in ("int8", "int64", "int16")]
RECORDS += [OpRecord(op, [In((3, 4), t, 0, 200)], name=t)
            for op in ("Abs", "Sign") for t in ("uint8", "uint32")]
RECORDS += [OpRecord(op, [Const(np.array([-128, 127, 0, -1], np.int8))], name="int8-limits")
            for op in ("Abs", "Neg", "Sign", "Relu")]

# IsNaN / IsInf: detection attributes and the float 8 formats
RECORDS += [OpRecord("IsInf", [_special()], {"detect_negative": n, "detect_positive": p},
                     name=f"neg{n}-pos{p}") for n in (0, 1) for p in (0, 1)]
RECORDS += [OpRecord(op, [_special(t, [0, 1, -2, 448, nan])], name=t)
            for op in ("IsNaN", "IsInf") for t in ("float8_e4m3fn", "float8_e5m2")]
RECORDS += [OpRecord(op, [_special("float16")], name="special-float16") for op in ("IsNaN", "IsInf")]

# Mod: C-style (fmod=1, sign of A) and floored (fmod=0, sign of B), every element type
_MOD_EDGES = ([0., -0., 0., -0., -3., 3., -1., 1., inf, -inf, 1., 1., nan, 1., 5.5, -5.5, 1e7],
              [-2., 2., 2., -2., inf, inf, -inf, -inf, 2., 2., 0., -0., 2., nan, 0.5, 0.5, 0.1])
RECORDS += [OpRecord("Mod", [In((3, 4), t, -50, 50), In((3, 4), t, -7, 7)], {"fmod": f}, name=f"{t}-fmod{f}",
                     rtol=TOL.get(t, 0), atol=0)
            for t in ("float32", "float64", "float16", "bfloat16", "int8", "int32", "int64") for f in (0, 1)]
RECORDS += [OpRecord("Mod", [In((3, 4), t, 0, 200), In((4,), t, 0, 9)], {"fmod": f}, name=f"{t}-fmod{f}",
                     rtol=0) for t in ("uint8", "uint32", "uint64") for f in (0, 1)]
# (float64 has no wider type to make a - q * b exact: 1e7 mod 0.1 is left to float32 and float16)
RECORDS += [OpRecord("Mod", [_special(t, _MOD_EDGES[0][:n]), _special(t, _MOD_EDGES[1][:n])], {"fmod": f},
                     name=f"edges-{t}-fmod{f}", rtol=1e-6, atol=0)
            for t, n in (("float32", 17), ("float64", 16), ("float16", 17)) for f in (0, 1)]
RECORDS += [OpRecord("Mod", [In((2, 1, 3)), In((4, 1))], {"fmod": 1}, name="broadcast"),
            OpRecord("Mod", [In((), "int32", -20, 20), In((5,), "int32", -4, 4)], name="int32-0d-zero-div",
                     rtol=0),
            OpRecord("Mod", [In((0, 3)), In((3,))], {"fmod": 1}, name="empty"),
            OpRecord("Mod", [In((6,), "float32", -1e6, 1e6), In((6,), "float32", 0.01, 0.1)], {"fmod": 1},
                     name="large-quotient", rtol=1e-5, atol=0)]

# variadic: one input, two, three with broadcasting
RECORDS += [OpRecord(op, [In(s) for s in shapes], name=f"{len(shapes)}-inputs")
            for op in ("Sum", "Mean") for shapes in [[(2, 3)], [(2, 3), (3,)], [(2, 1, 3), (4, 1), ()]]]
RECORDS += [OpRecord(op, [In((3, 4), t), In((4,), t), In((3, 1), t)], name=t, rtol=TOL[t], atol=TOL[t] / 10)
            for op in ("Sum", "Mean") for t in ("float16", "float64", "bfloat16")]
RECORDS += [OpRecord(op, [In((0, 3)), In((3,)), In((1, 3))], name="empty") for op in ("Sum", "Mean")]

# logic and comparisons
RECORDS += [OpRecord(op, [In(a, "bool"), In(b, "bool")], name=f"{len(a)}d-{len(b)}d")
            for op in ("Or", "Xor")
            for a, b in [((2, 3), (2, 3)), ((2, 1), (1, 3)), ((), (4,)), ((0, 2), (2,))]]
RECORDS += [OpRecord(op, [In(a), In(b)], name=f"{len(a)}d-{len(b)}d")
            for op in ("LessOrEqual", "GreaterOrEqual")
            for a, b in [((2, 3), (2, 3)), ((3, 1), (1, 4)), ((), (0,))]]
RECORDS += [OpRecord(op, [In((5,), t, -4, 4), In((5,), t, -4, 4)], name=t)
            for op in ("LessOrEqual", "GreaterOrEqual") for t in ("int64", "uint8", "float16")]
RECORDS += [OpRecord(op, [_special(), Const(np.float32(nan))], name="nan")
            for op in ("LessOrEqual", "GreaterOrEqual")]

# Max/Min: the floor has the 2-input form; one input, or more than two, are lowered to it
RECORDS += [OpRecord(op, [In(s, t) for s in shapes], name=f"{len(shapes)}-inputs-{t}")
            for op in ("Max", "Min") for t in ("float32", "int32")
            for shapes in [[(2, 3)], [(2, 1, 3), (4, 1), ()], [(3,), (3,), (3,), (2, 3)]]]
RECORDS += [OpRecord(op, [_special(), Const(np.float32(1)), _special()], name="nan-wins")
            for op in ("Max", "Min")]

