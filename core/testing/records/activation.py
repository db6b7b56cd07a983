"""Records for activation functions: attribute variants, edge shapes (0-d, size-1 dims, empty),
every element type an op takes, and special values (inf, NaN, saturation, overflow ranges)."""

import numpy as np

from ..op_records import Const, In, OpRecord

inf, nan = np.inf, np.nan

SHAPES = [(2, 3), (), (4, 1, 5), (0, 3)]
SPECIAL = [0.0, -0.0, 1e-6, -1e-6, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 20.0, -20.0,
           50.0, -50.0, 88.0, -88.0, 100.0, -100.0, 1e20, -1e20, inf, -inf, nan]
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-3, "bfloat16": 1e-2}

#: op -> attribute variants (the first is the defaults)
ACTIVATIONS = {
    "LeakyRelu": [{}, {"alpha": 0.3}],
    "Elu": [{}, {"alpha": 2.5}],
    "Selu": [{}, {"alpha": 2.0, "gamma": 3.0}],
    "Celu": [{}, {"alpha": 0.5}],
    "HardSigmoid": [{}, {"alpha": 0.5, "beta": 0.6}],
    "HardSwish": [{}],
    "Softplus": [{}],
    "Softsign": [{}],
    "ThresholdedRelu": [{}, {"alpha": -0.5}],
    "Mish": [{}],
    "Swish": [{}, {"alpha": -1.5}],
    "Gelu": [{}, {"approximate": "tanh"}],
    "Shrink": [{}, {"bias": 1.5, "lambd": 0.7}, {"bias": -0.5, "lambd": 0.0}],
}


def _name(attrs):
    return "-".join(f"{k}{v}" for k, v in attrs.items()) or "default"


def _special(dtype="float32"):
    return Const(np.asarray(SPECIAL, np.float64).astype(dtype))


RECORDS = [OpRecord(op, [In(s)], attrs, name=f"{_name(attrs)}-{len(s)}d{'-empty' if 0 in s else ''}")
           for op, variants in ACTIVATIONS.items() for attrs in variants for s in SHAPES]
RECORDS += [OpRecord(op, [In((3, 4), t)], variants[-1], name=t, rtol=TOL[t], atol=TOL[t] / 10)
            for op, variants in ACTIVATIONS.items() for t in ("float16", "float64", "bfloat16")
            if (op, t) != ("Shrink", "bfloat16")]  # (Shrink's schema has no bfloat16)
# (atol: the tanh form of Gelu is exact far below 0, where the reference's 1 + tanh gives 0)
RECORDS += [OpRecord(op, [_special(t)], attrs, name=f"special-{t}-{_name(attrs)}", rtol=TOL[t], atol=1e-30)
            for op, variants in ACTIVATIONS.items() for attrs in variants for t in ("float32", "float64")]
RECORDS += [OpRecord(op, [In((64,), "float32", -12, 12)], attrs, name=f"wide-range-{_name(attrs)}", atol=1e-7)
            for op, variants in ACTIVATIONS.items() for attrs in variants]

# Shrink also takes integers: shrunk in float64 and truncated back, as the reference does
RECORDS += [OpRecord("Shrink", [In((3, 4), t, -10, 10)], {"bias": 1.5, "lambd": 2.0}, name=t)
            for t in ("int8", "int32", "int64")]

# PRelu: slope broadcasts to X (per channel, per last axis, scalar), integer types too
RECORDS += [OpRecord("PRelu", [In(x), In(s)], name=f"x{len(x)}d-slope{'x'.join(map(str, s)) or 's'}")
            for x, s in [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4), (4,)), ((2, 3), ()), ((2, 3), (2, 3)),
                         ((), ()), ((1, 3), (1,)), ((0, 3), (3,))]]
RECORDS += [OpRecord("PRelu", [In((3, 4), t, -9, 9), In((4,), t, -3, 3)], name=t)
            for t in ("int32", "int64", "uint32", "float16", "float64")]

# Clip: each bound optional, 0-d or [1]-shaped bounds, min > max, integer types, empty input
RECORDS += [OpRecord("Clip", [In(s), Const(np.float32(-1)), Const(np.float32(1.5))], name=f"{len(s)}d")
            for s in SHAPES]
RECORDS += [
    OpRecord("Clip", [In((2, 3))], name="no-bounds"),
    OpRecord("Clip", [In((2, 3)), Const(np.float32(0.5))], name="min-only"),
    OpRecord("Clip", [In((2, 3)), None, Const(np.float32(0.5))], name="max-only"),
    OpRecord("Clip", [In((2, 3)), Const(np.float32(2)), Const(np.float32(-1))], name="min-above-max"),
    OpRecord("Clip", [In(()), Const(np.array([0.5], np.float32)), Const(np.array([1.0], np.float32))],
             name="0d-with-1-element-bounds"),
    OpRecord("Clip", [In((2, 3)), In(()), In((1,))], name="runtime-bounds"),
    OpRecord("Clip", [_special(), Const(np.float32(-inf)), Const(np.float32(5))], name="special"),
]
RECORDS += [OpRecord("Clip", [In((3, 4), t, -100, 100), Const(np.asarray(lo, t)), Const(np.asarray(9, t))],
                     name=t)
            for t, lo in [("int8", -5), ("int32", -5), ("int64", -5), ("uint8", 3), ("float16", -5),
                          ("float64", -5)]]
