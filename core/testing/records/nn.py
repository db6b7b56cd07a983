"""Records for the softmax family, Gemm, Einsum, Det, the normalizations, LRN and Dropout: every
axis form (negative, first, last, size-1), empty tensors where legal, C broadcasting and both
transposes for Gemm, diagonals/ellipses/broadcasting/three operands for Einsum, singular and
pivoting matrices for Det, all outputs of the multi-output normalizations, 16/64-bit floats and
integers where the op takes them."""

import numpy as np

from ..op_records import Const, In, OpRecord

HALF = ("float16", "bfloat16")
HALF_TOL = {"rtol": 1e-2, "atol": 1e-2}


def tol(dtype):
    return HALF_TOL if dtype in HALF else {}


RECORDS = []

# -- softmax family --------------------------------------------------------------------------------
TIES = Const(np.array([[1.0, 3.0, 3.0], [np.nan, 2.0, np.nan], [-np.inf, -np.inf, -np.inf]], np.float32))
for op in ("Softmax", "LogSoftmax", "Hardmax"):
    RECORDS += [
        OpRecord(op, [In((2, 5))], name="last-axis"),
        OpRecord(op, [In((3, 4))], {"axis": 0}, name="axis0"),
        OpRecord(op, [In((2, 3, 4))], {"axis": 1}, name="middle-axis"),
        OpRecord(op, [In((2, 3, 4))], {"axis": -2}, name="negative-axis"),
        OpRecord(op, [In((4, 1))], name="unit-axis"),
        OpRecord(op, [In((1,))], name="single"),
        OpRecord(op, [In((0, 3))], name="empty"),
        OpRecord(op, [In((3, 6), low=500, high=1000)], name="large"),
        OpRecord(op, [In((3, 6), low=-1000, high=-500)], name="very-negative"),
        OpRecord(op, [In((3, 4), "float64")], name="float64"),
    ]
    RECORDS += [OpRecord(op, [In((3, 7), t)], name=t, **tol(t)) for t in HALF]
RECORDS += [OpRecord("Hardmax", [TIES], name="ties-nan-inf")]

# -- Gemm ------------------------------------------------------------------------------------------
M, K, N = 3, 4, 5
for ta in (0, 1):
    for tb in (0, 1):
        a, b = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
        RECORDS.append(OpRecord("Gemm", [In(a), In(b), In((M, N))],
                                {"transA": ta, "transB": tb, "alpha": 0.5, "beta": 2.0},
                                name=f"tA{ta}-tB{tb}"))
RECORDS += [
    OpRecord("Gemm", [In((M, K)), In((K, N))], name="no-c"),
    OpRecord("Gemm", [In((M, K)), In((K, N)), In(())], name="scalar-c"),
    OpRecord("Gemm", [In((M, K)), In((K, N)), In((1,))], name="single-c"),
    OpRecord("Gemm", [In((M, K)), In((K, N)), In((N,))], {"beta": -1.5}, name="row-c"),
    OpRecord("Gemm", [In((M, K)), In((K, N)), In((M, 1))], name="column-c"),
    OpRecord("Gemm", [In((M, K)), In((K, N)), In((1, N))], {"alpha": 0.0}, name="zero-alpha"),
    OpRecord("Gemm", [In((1, 1)), In((1, 1)), In((1, 1))], name="1x1"),
    OpRecord("Gemm", [In((M, 0)), In((0, N)), In((M, N))], name="empty-k"),
    OpRecord("Gemm", [In((M, K), "float64"), In((K, N), "float64"), In((N,), "float64")], name="float64"),
    OpRecord("Gemm", [In((M, K), "int32", -5, 5), In((K, N), "int32", -5, 5), In((N,), "int32", -5, 5)],
             name="int32"),
    OpRecord("Gemm", [In((M, K), "int64", -5, 5), In((N, K), "int64", -5, 5), In((M, N), "int64", -5, 5)],
             {"transB": 1, "alpha": 2.5, "beta": 0.5}, name="int64-scaled"),
]
RECORDS += [OpRecord("Gemm", [In((M, K), t), In((K, N), t), In((1, N), t)], {"alpha": 0.7, "beta": 0.3},
                     name=t, **tol(t)) for t in HALF]

# -- Einsum ----------------------------------------------------------------------------------------
EINSUM = [
    ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
    ("batch-matmul", "bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
    ("attention-scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("diagonal", "ii->i", [(4, 4)]),
    ("trace", "ii", [(3, 3)]),
    ("batch-diagonal", "...ii ->...i", [(2, 3, 3)]),
    ("double-repeat", "iji->ij", [(3, 2, 3)]),
    ("transpose", "ij->ji", [(3, 4)]),
    ("sum-all", "ij->", [(3, 4)]),
    ("sum-rows", "ij->i", [(3, 4)]),
    ("inner", "i,i", [(5,), (5,)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("hadamard", "ij,ij->ij", [(3, 4), (3, 4)]),
    ("matvec", "ij,j->i", [(3, 4), (4,)]),
    ("implicit", "ij,jk", [(2, 3), (3, 4)]),
    ("three-operands", "ijk,jl,lm->ikm", [(2, 3, 4), (3, 5), (5, 2)]),
    ("ellipsis-broadcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("unit-contracted", "ij,jk->ik", [(3, 1), (4, 5)]),
    ("private-sum", "ij,k->j", [(3, 4), (2,)]),
    ("scalar", "->", [()]),
    ("empty", "ij,jk->ik", [(0, 3), (3, 2)]),
]
RECORDS += [OpRecord("Einsum", [In(s) for s in shapes], {"equation": eq}, name=name)
            for name, eq, shapes in EINSUM]
RECORDS += [OpRecord("Einsum", [In((2, 3), t, -5, 5), In((3, 4), t, -5, 5)], {"equation": "ij,jk->ik"},
                     name=t, **tol(t)) for t in ("int32", "int8", "uint16", "int64", "float64", *HALF)]

# -- Det -------------------------------------------------------------------------------------------
RECORDS += [
    OpRecord("Det", [In((2, 2))], name="2x2"),
    OpRecord("Det", [In((3, 3))], name="3x3", rtol=1e-4),
    OpRecord("Det", [In((5, 5))], name="5x5", rtol=1e-4, atol=1e-4),
    OpRecord("Det", [In((2, 3, 4, 4))], name="batched", rtol=1e-4, atol=1e-4),
    OpRecord("Det", [In((1, 1))], name="1x1"),
    OpRecord("Det", [In((4, 0, 0))], name="empty-matrices"),
    OpRecord("Det", [Const(np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]],
                                     [[0.0, 0.0], [0.0, 3.0]]], np.float32))], name="singular-and-swap"),
    OpRecord("Det", [In((4, 4), "float64")], name="float64", rtol=1e-10),
    OpRecord("Det", [In((3, 3), "float16", -1, 1)], name="float16", rtol=1e-2, atol=1e-2),
]

# -- normalizations --------------------------------------------------------------------------------
VAR = {"low": 0.5, "high": 2.0}


def _bn(shape, dtype="float32", pdtype="float32", **attrs):
    c = (shape[1],) if len(shape) > 1 else (1,)
    outs = 3 if attrs.get("training_mode") else 1
    ins = [In(shape, dtype), In(c, pdtype), In(c, pdtype), In(c, pdtype), In(c, pdtype, **VAR)]
    name = f"{len(shape)}d-{dtype}-{pdtype}" + ("-training" if outs == 3 else "")
    return OpRecord("BatchNormalization", ins, attrs, name=name, num_outputs=outs, **tol(dtype))


RECORDS += [_bn((2, 3, 4, 5)), _bn((2, 3)), _bn((4,)), _bn((1, 2, 3), "float16"),
            _bn((2, 3, 2), "float16", "float32"), _bn((2, 3, 4), "float64", "float64", epsilon=0.1),
            _bn((2, 3, 4, 5), training_mode=1, momentum=0.7),
            _bn((3, 2), "bfloat16", "bfloat16", training_mode=1)]

for t in ("float32", "float64", *HALF):
    RECORDS.append(OpRecord("InstanceNormalization", [In((2, 3, 4), t), In((3,), t), In((3,), t)],
                            name=f"3d-{t}", **tol(t)))
RECORDS += [OpRecord("InstanceNormalization", [In((1, 2, 3, 1)), In((2,)), In((2,))], {"epsilon": 0.5},
                     name="4d-unit")]

LN = "LayerNormalization"
RECORDS += [
    OpRecord(LN, [In((2, 3, 4)), In((4,)), In((4,))], name="last-axis"),
    OpRecord(LN, [In((2, 3, 4)), In((3, 4)), In((1, 4))], {"axis": 1}, name="axis1-broadcast-b"),
    OpRecord(LN, [In((2, 3, 4)), In((2, 3, 4))], {"axis": -3}, name="axis0-no-b"),
    OpRecord(LN, [In((2, 3, 4)), In((4,)), In((4,))], name="three-outputs", num_outputs=3),
    OpRecord(LN, [In((3, 5)), In((5,))], {"stash_type": 11}, name="stash-float64", num_outputs=3),
    OpRecord(LN, [In((3, 5), "float16"), In((5,), "float16"), In((5,), "float16")], {"stash_type": 10},
             name="float16-stash-float16", num_outputs=3, **HALF_TOL),
    OpRecord(LN, [In((3, 5), "bfloat16"), In((5,), "bfloat16")], name="bfloat16", **HALF_TOL),
    OpRecord(LN, [In((4,)), In(())], name="vector-scalar-scale"),
    OpRecord(LN, [In((0, 4)), In((4,))], name="empty-batch"),
]

GN = "GroupNormalization"
RECORDS += [
    OpRecord(GN, [In((2, 4, 3)), In((4,)), In((4,))], {"num_groups": 2}, name="2-groups"),
    OpRecord(GN, [In((1, 6, 2, 2)), In((6,)), In((6,))], {"num_groups": 3, "epsilon": 0.1}, name="4d"),
    OpRecord(GN, [In((2, 3)), In((3,)), In((3,))], {"num_groups": 1}, name="1-group-2d"),
    OpRecord(GN, [In((2, 4, 5)), In((4,)), In((4,))], {"num_groups": 4, "stash_type": 11},
             name="per-channel-float64-stash"),
    OpRecord(GN, [In((2, 4, 3), "float16"), In((4,), "float16"), In((4,), "float16")], {"num_groups": 2},
             name="float16", **HALF_TOL),
    OpRecord(GN, [In((2, 4, 0)), In((4,)), In((4,))], {"num_groups": 2}, name="empty-groups"),
]

RMS = "RMSNormalization"
RECORDS += [
    OpRecord(RMS, [In((2, 3, 4)), In((4,))], name="last-axis"),
    OpRecord(RMS, [In((2, 3, 4)), In((3, 1))], {"axis": 1}, name="axis1-broadcast"),
    OpRecord(RMS, [In((2, 3)), In(())], {"axis": -2, "stash_type": 11}, name="all-float64-stash"),
    OpRecord(RMS, [In((2, 5), "float16"), In((5,), "float32")], name="float16-x-float32-scale", **HALF_TOL),
    OpRecord(RMS, [In((2, 5), "bfloat16"), In((5,), "bfloat16")], name="bfloat16", **HALF_TOL),
]

ZERO_ROW = Const(np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]], np.float32))
for p in (1, 2):
    RECORDS += [
        OpRecord("LpNormalization", [In((3, 4))], {"p": p}, name=f"p{p}-last"),
        OpRecord("LpNormalization", [In((3, 4, 2))], {"p": p, "axis": 0}, name=f"p{p}-axis0"),
        OpRecord("LpNormalization", [ZERO_ROW], {"p": p}, name=f"p{p}-zero-slice"),
        OpRecord("LpNormalization", [In((3, 4), "float16")], {"p": p}, name=f"p{p}-float16", **HALF_TOL),
    ]

MVN = "MeanVarianceNormalization"
RECORDS += [
    OpRecord(MVN, [In((2, 3, 4, 2))], name="default-axes"),
    OpRecord(MVN, [In((2, 3, 4))], {"axes": (-1,)}, name="last-axis"),
    OpRecord(MVN, [In((3, 4), "float64")], {"axes": (0, 1)}, name="all-float64"),
    OpRecord(MVN, [In((2, 3, 2, 2), "float16")], name="float16", **HALF_TOL),
]

RECORDS += [
    OpRecord("LRN", [In((2, 5, 3, 3))], {"size": 3}, name="size3"),
    OpRecord("LRN", [In((2, 5, 3))], {"size": 4, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, name="even-size"),
    OpRecord("LRN", [In((1, 3, 2, 2))], {"size": 7, "alpha": 0.1}, name="size-over-channels"),
    OpRecord("LRN", [In((2, 4))], {"size": 1}, name="size1-2d"),
    OpRecord("LRN", [In((1, 4, 2, 2), "float16")], {"size": 3, "alpha": 0.1}, name="float16", **HALF_TOL),
    OpRecord("LRN", [In((1, 4, 2, 2), "float64")], {"size": 5, "alpha": 0.1}, name="float64"),
]

# -- Dropout ---------------------------------------------------------------------------------------
TRUE, FALSE = Const(np.array(True)), Const(np.array(False))
RECORDS += [
    OpRecord("Dropout", [In((3, 4))], name="inference"),
    OpRecord("Dropout", [In((3, 4)), Const(np.float32(0.3))], name="inference-mask", num_outputs=2),
    OpRecord("Dropout", [In((2, 3)), In(()), FALSE], name="training-off-mask", num_outputs=2),
    OpRecord("Dropout", [In((0, 3), "float16")], name="empty-mask", num_outputs=2),
    OpRecord("Dropout", [In((3, 4)), Const(np.float32(0.3)), TRUE], {"seed": 3}, name="seeded-training",
             num_outputs=2),
    OpRecord("Dropout", [In((3, 4), "float16"), None, TRUE], {"seed": 0}, name="seeded-default-ratio",
             num_outputs=2),
    OpRecord("Dropout", [In((3, 4), "float64"), Const(np.float64(0.0)), TRUE], {"seed": 1},
             name="seeded-zero-ratio", num_outputs=2),
    OpRecord("Dropout", [In((3, 4)), Const(np.float32(0.5)), In((), "bool")], {"seed": 2},
             name="seeded-runtime-training", num_outputs=2),
    OpRecord("Dropout", [In((2, 3)), Const(np.float32(0.0)), TRUE], name="unseeded-zero-ratio",
             num_outputs=2),
]
