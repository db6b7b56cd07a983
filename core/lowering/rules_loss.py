"""Lowering rules for training: the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
and the optimizer steps Adagrad, Adam and Momentum (ai.onnx.preview.training).

The target class of every loss entry is read with one Gather on the flattened input (an index per
target entry, no one-hot tensor). Like the references, losses compute 16-bit inputs in float32 and
optimizer steps compute in float64.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import ints, scalar, static_shape
from .registry import lowering
from .rules_index import _in_range


def _cast(rb, x, dtype):
    return x if x.type.dtype == dtype else rb.emit1("Cast", [x], {"to": dtype})


def _work_type(t: dt.DType) -> dt.DType:
    return dt.float64 if t == dt.float64 else dt.float32


def _nll(rb, log_prob, target, weight, attrs):
    """-log_prob[n, target[n, ...], ...] * weight[target] reduced as asked, in log_prob's type.
    Ignored entries read class 0 and weigh 0."""
    shape = static_shape(log_prob)
    n, classes, inner = shape[0], shape[1], int(np.prod(shape[2:], dtype=np.int64))
    target = _cast(rb, target, dt.int64)
    keep = None
    if attrs["ignore_index"] is not None:
        keep = rb.emit1("Not", [rb.emit1("Equal", [target, ints(rb, [attrs["ignore_index"]])])])
        target = rb.emit1("Where", [keep, target, ints(rb, [0])])
    # flat index of input[n, target, d...] = (n * C + target) * D + d. A target outside [0, C)
    # would read another row of the flattened input: the class offset target * D goes through
    # the index checks' table Gather, so it is a run-time InputError naming this node on every
    # backend (ignored entries read class 0, so an ignored target may be anything).
    base = (np.arange(n, dtype=np.int64).reshape(-1, *[1] * (len(shape) - 2)) * classes * inner
            + np.arange(inner, dtype=np.int64).reshape(shape[2:]))
    offset = _in_range(rb, target, classes, scale=inner, poison=True)
    index = rb.emit1("Add", [offset, rb.constant(base, name="base")])
    flat = rb.emit1("Reshape", [log_prob, ints(rb, [-1])])
    picked = rb.emit1("Gather", [flat, index], {"axis": 0})
    w = None if weight is None else rb.emit1("Gather", [weight, target], {"axis": 0})
    if keep is not None:
        ones = rb.constant(np.ones((), log_prob.type.dtype.np), name="one") if w is None else w
        w = rb.emit1("Where", [keep, ones, scalar(rb, 0, log_prob)])
    loss = rb.emit1("Sub", [scalar(rb, 0, picked), picked])
    if w is not None:
        loss = rb.emit1("Mul", [loss, w])
    red = attrs["reduction"]
    if red == "none":
        return loss
    total = rb.emit1("ReduceSum", [loss], {"keepdims": 0})
    if red == "sum":
        return total
    if w is None:  # mean over the entries
        return rb.emit1("Div", [total, scalar(rb, n * inner, total)])
    return rb.emit1("Div", [total, rb.emit1("ReduceSum", [w], {"keepdims": 0})])


def _shapes_known(*vs) -> bool:
    return all(v is None or static_shape(v) is not None for v in vs)


@lowering("NegativeLogLikelihoodLoss")
def lower_nll_loss(rb, node, ins):
    x, target, weight = (list(ins) + [None])[:3]
    if not _shapes_known(x, target, weight):
        return None
    work = _work_type(x.type.dtype)
    w = None if weight is None else _cast(rb, weight, work)
    return [_cast(rb, _nll(rb, _cast(rb, x, work), target, w, node.attrs), x.type.dtype)]


@lowering("SoftmaxCrossEntropyLoss")
def lower_softmax_cross_entropy_loss(rb, node, ins):
    # log_softmax over the class axis, stable: (x - max) - log(sum(exp(x - max))); then NLL
    x, target, weight = (list(ins) + [None])[:3]
    if not _shapes_known(x, target, weight):
        return None
    t, work = x.type.dtype, _work_type(x.type.dtype)
    xw = _cast(rb, x, work)
    shifted = rb.emit1("Sub", [xw, rb.emit1("ReduceMax", [xw, ints(rb, [1])], {"keepdims": 1})])
    total = rb.emit1("ReduceSum", [rb.emit1("Exp", [shifted]), ints(rb, [1])], {"keepdims": 1})
    log_prob = rb.emit1("Sub", [shifted, rb.emit1("Log", [total])])
    w = None if weight is None else _cast(rb, weight, work)
    outs = [_cast(rb, _nll(rb, log_prob, target, w, node.attrs), t), _cast(rb, log_prob, t)]
    return outs[:len(node.outputs)]


# -- optimizer steps -------------------------------------------------------------------------------

_TRAINING = "ai.onnx.preview.training"
_F64 = dt.float64


def _groups(rb, ins, k):
    """(learning rate, step count as float64 scalars, k lists of float64 tensors)."""
    rate, step = (rb.emit1("Reshape", [_cast(rb, v, _F64), ints(rb, [])]) for v in ins[:2])
    n = (len(ins) - 2) // k
    tensors = [_cast(rb, v, _F64) for v in ins[2:]]
    return rate, step, [tensors[g * n:(g + 1) * n] for g in range(k)]


def _c(rb, value):
    return rb.constant(np.asarray(value, np.float64), name="c")


def _axpy(rb, a, x, y):
    """a * x + y for a Python float a (skipped when a is 0)."""
    return y if a == 0 else rb.emit1("Add", [rb.emit1("Mul", [_c(rb, a), x]), y])


def _finish(rb, node, groups):
    """Cast each new tensor to its input's type (outputs are grouped like the inputs)."""
    n = len(groups[0])
    like = node.inputs[2:]
    outs = [_cast(rb, v, like[g * n + i].type.dtype) for g, vs in enumerate(groups) for i, v in enumerate(vs)]
    return outs[:len(node.outputs)]


def _adaptive_step(rb, x, rate_times_v, h, eps):
    """x - rate * v / (sqrt(h) + eps)."""
    den = rb.emit1("Add", [rb.emit1("Sqrt", [h]), _c(rb, eps)])
    return rb.emit1("Sub", [x, rb.emit1("Div", [rate_times_v, den])])


@lowering("Adagrad", _TRAINING)
def lower_adagrad(rb, node, ins):
    a = node.attrs
    rate, step, (xs, gs, hs) = _groups(rb, ins, 3)
    rate = rb.emit1("Div", [rate, _axpy(rb, a["decay_factor"], step, _c(rb, 1.0))])  # decayed rate
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = _axpy(rb, a["norm_coefficient"], x, g)  # gradient of the L2 regularization term added
        h = rb.emit1("Add", [h, rb.emit1("Mul", [g, g])])
        new_x.append(_adaptive_step(rb, x, rb.emit1("Mul", [rate, g]), h, a["epsilon"]))
        new_h.append(h)
    return _finish(rb, node, [new_x, new_h])


@lowering("Adam", _TRAINING)
def lower_adam(rb, node, ins):
    a = node.attrs
    alpha, beta = a["alpha"], a["beta"]
    rate, step, (xs, gs, vs, hs) = _groups(rb, ins, 4)
    # bias correction of both moments, from the first step on (step 0 takes the plain rate)
    root = rb.emit1("Sqrt", [rb.emit1("Sub", [_c(rb, 1.0), rb.emit1("Pow", [_c(rb, beta), step])])])
    corrected = rb.emit1("Div", [rb.emit1("Mul", [rate, root]),
                                 rb.emit1("Sub", [_c(rb, 1.0), rb.emit1("Pow", [_c(rb, alpha), step])])])
    rate = rb.emit1("Where", [rb.emit1("Greater", [step, _c(rb, 0.0)]), corrected, rate])
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = _axpy(rb, a["norm_coefficient"], x, g)
        v = rb.emit1("Add", [rb.emit1("Mul", [_c(rb, alpha), v]), rb.emit1("Mul", [_c(rb, 1 - alpha), g])])
        gg = rb.emit1("Mul", [rb.emit1("Mul", [_c(rb, 1 - beta), g]), g])
        h = rb.emit1("Add", [rb.emit1("Mul", [_c(rb, beta), h]), gg])
        x = _adaptive_step(rb, x, rb.emit1("Mul", [rate, v]), h, a["epsilon"])
        if a["norm_coefficient_post"]:
            x = rb.emit1("Mul", [_c(rb, 1 - a["norm_coefficient_post"]), x])
        new_x.append(x)
        new_v.append(v)
        new_h.append(h)
    return _finish(rb, node, [new_x, new_v, new_h])


@lowering("Momentum", _TRAINING)
def lower_momentum(rb, node, ins):
    a = node.attrs
    alpha = a["alpha"]
    rate, step, (xs, gs, vs) = _groups(rb, ins, 3)
    # the first step (T = 0) takes the whole gradient
    b = rb.emit1("Where", [rb.emit1("Greater", [step, _c(rb, 0.0)]), _c(rb, a["beta"]), _c(rb, 1.0)])
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = _axpy(rb, a["norm_coefficient"], x, g)
        v = rb.emit1("Add", [rb.emit1("Mul", [_c(rb, alpha), v]), rb.emit1("Mul", [b, g])])
        move = _axpy(rb, alpha, v, g) if a["mode"] == "nesterov" else v
        new_x.append(rb.emit1("Sub", [x, rb.emit1("Mul", [rate, move])]))
        new_v.append(v)
    return _finish(rb, node, [new_x, new_v])
