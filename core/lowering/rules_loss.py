"""Lowering rules for the loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

The target class of every entry is read with one Gather on the flattened input (an index per
target entry, no one-hot tensor). Like the reference, 16-bit inputs are computed in float32.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import ints, scalar, static_shape
from .registry import lowering


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
    # flat index of input[n, target, d...] = (n * C + target) * D + d
    base = (np.arange(n, dtype=np.int64).reshape(-1, *[1] * (len(shape) - 2)) * classes * inner
            + np.arange(inner, dtype=np.int64).reshape(shape[2:]))
    index = rb.emit1("Add", [rb.emit1("Mul", [target, ints(rb, [inner])]), rb.constant(base, name="base")])
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
