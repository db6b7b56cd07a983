"""Records for the training ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (every
reduction, class weights, ignore_index inside and outside the class range, int32/int64 targets,
extra spatial dims, 16/64-bit floats) and the optimizer steps Adagrad, Adam and Momentum."""

import numpy as np

from ..op_records import Const, In, OpRecord

C = 5


def _loss(op, name, x=(3, C), dtype="float32", target_dtype="int64", weight=False, ii=None,
          reduction="mean", log_prob=False):
    t = (x[0],) + tuple(x[2:])
    low = -1 if ii == -1 else 0  # draw the ignored class too
    ins = [In(x, dtype), In(t, target_dtype, low, x[1] - 1)]
    if weight:
        ins.append(In((C,), dtype, 0.1, 2))
    attrs = {"reduction": reduction}
    if ii is not None:
        attrs["ignore_index"] = ii
    tol = (2e-3, 2e-3) if dtype in ("float16", "bfloat16") else (1e-5, 1e-6)
    outs = 2 if log_prob else 1
    return OpRecord(op, ins, attrs, name=name, num_outputs=outs, rtol=tol[0], atol=tol[1])


RECORDS = []
for op in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"):
    RECORDS += [
        _loss(op, "mean"),
        _loss(op, "sum-int32", reduction="sum", target_dtype="int32"),
        _loss(op, "none-NCd1d2", x=(2, C, 3, 2), reduction="none"),
        _loss(op, "mean-weight-ii", x=(2, C, 4), weight=True, ii=2),
        _loss(op, "mean-negative-ii", x=(4, C, 3), ii=-1),
        _loss(op, "sum-weight-high-ii", x=(2, C, 2, 2), weight=True, ii=10, reduction="sum"),
        _loss(op, "none-weight-1x1", x=(1, C), weight=True, reduction="none"),
        _loss(op, "float16-mean-weight", dtype="float16", weight=True),
        _loss(op, "float64-sum", x=(3, C, 2), dtype="float64", reduction="sum"),
        _loss(op, "single-class", x=(3, 1, 2)) if op == "SoftmaxCrossEntropyLoss" else
        _loss(op, "one-target", x=(1, C), weight=True),
    ]
RECORDS += [
    _loss("SoftmaxCrossEntropyLoss", "log-prob-none", x=(2, C, 3), reduction="none", log_prob=True),
    _loss("SoftmaxCrossEntropyLoss", "log-prob-mean-ii", x=(3, C), ii=0, log_prob=True, weight=True),
    _loss("SoftmaxCrossEntropyLoss", "log-prob-bfloat16", dtype="bfloat16", log_prob=True),
    OpRecord("SoftmaxCrossEntropyLoss", [Const(np.array([[1000.0, 0.0, -1000.0]], np.float32)),
                                         Const(np.array([2], np.int64))],
             {"reduction": "none"}, name="extreme-logits", num_outputs=2),
]


# -- optimizer steps (ai.onnx.preview.training) ----------------------------------------------------

STEP = In((), "int64", 0, 3)


def _opt(op, name, groups, shapes, t=STEP, dtype="float32", **attrs):
    tensors = [In(s, dtype, 0.1 if g >= 2 else -3, 3) for g in range(groups) for s in shapes]
    return OpRecord(op, [In((), "float32", 0.01, 0.5), t, *tensors], attrs, name=name,
                    num_outputs=(groups - 1) * len(shapes), domain="ai.onnx.preview.training")


RECORDS += [
    _opt("Adagrad", "one", 3, [(3, 2)], decay_factor=0.1, epsilon=1e-5),
    _opt("Adagrad", "two-norm", 3, [(4,), ()], norm_coefficient=0.01),
    _opt("Adam", "one-post", 4, [(2, 2)], alpha=0.95, beta=0.1, norm_coefficient=0.001,
         norm_coefficient_post=0.02),
    _opt("Adam", "two-first-step", 4, [(3,), (1, 2)], t=Const(np.array(0, np.int64))),
    _opt("Adam", "float64-step1d", 4, [(2,)], t=Const(np.array([5], np.int64)), dtype="float64"),
    _opt("Momentum", "standard", 3, [(3, 2)], alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.01),
    _opt("Momentum", "nesterov-first-step", 3, [(2,), (3,)], t=Const(np.array(0, np.int64)), alpha=0.8,
         beta=0.3, mode="nesterov", norm_coefficient=0.0),
]
