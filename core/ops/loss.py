"""Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class axis 1, optional class
weights, ignore_index, reductions none/sum/mean)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import InputError
from .index import index_message
from .registry import NN, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
IND = frozenset({dt.int32, dt.int64})
_REDUCTIONS = ("none", "sum", "mean")


def _loss_infer(ctx, what: str):
    """Shared checks: input (N, C, d1..dk), target (N, d1..dk), weight (C); returns the loss type."""
    red = ctx.attrs["reduction"]
    if red not in _REDUCTIONS:
        raise ctx.error(f"reduction must be one of {list(_REDUCTIONS)}, got '{red}'")
    x, t = ctx.shape(0), ctx.shape(1)
    if x is not None and len(x) < 2:
        raise ctx.error(f"{what} must have rank >= 2 (N, C, ...), got shape {list(x)}")
    if x is not None and t is not None:
        if len(t) != len(x) - 1:
            raise ctx.error(f"target shape {list(t)} must be {what} shape {list(x)} without the class axis")
        for a, b in zip(t, (x[0],) + tuple(x[2:])):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise ctx.error(f"target shape {list(t)} does not match {what} shape {list(x)}")
    if x is not None and isinstance(x[1], int) and ctx.value(1) is not None:
        # constant targets (or run-time ones that specialisation made constants): checked here,
        # as Gather checks constant indices, before a lowering turns them into flat offsets
        _check_targets(ctx.value(1), x[1], ctx.attrs["ignore_index"],
                       lambda m: ctx.error(f"constant targets: {m}"))
    if ctx.has(2) and ctx.shape(2) is not None:
        w = ctx.shape(2)
        c = x[1] if x is not None else None
        if len(w) != 1 or (isinstance(w[0], int) and isinstance(c, int) and w[0] != c):
            raise ctx.error(f"weight must have shape [C] = [{c}], got {list(w)}")
    shape = (t if t is not None else (None if x is None else (x[0],) + tuple(x[2:]))) \
        if red == "none" else ()
    return dt.TensorType(shape, ctx.dtype(0))


def _check_targets(target, classes, ignore_index, error):
    """A target class outside [0, C) that is not ignore_index is bad input (negative ones too:
    no wrapping); an ignored target is never read, so it may be anything."""
    target = np.asarray(target).astype(np.int64)
    bad = ((target < 0) | (target >= classes)) & (target != ignore_index if ignore_index is not None else True)
    if bad.any():
        raise error(index_message(int(target[bad].reshape(-1)[0]), classes, negative=False))


def _nll(log_prob, target, weight, reduction, ignore_index):
    """-log_prob[n, target[n, ...], ...] * weight[target], with ignored entries weighing 0."""
    classes = log_prob.shape[1]
    target = target.astype(np.int64)
    keep = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    _check_targets(target, classes, ignore_index, InputError)
    safe = np.where(keep, target, 0)  # ignored entries may hold any value; read class 0 instead
    picked = np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]
    w = np.ones(target.shape, log_prob.dtype) if weight is None else weight[safe]
    w = np.where(keep, w, 0).astype(log_prob.dtype)
    loss = (-picked * w).astype(log_prob.dtype)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype=log_prob.dtype)
    return np.asarray(loss.sum() / w.sum(), dtype=log_prob.dtype)


def _nll_ref(input, target, weight=None, ignore_index=None, reduction="mean"):
    work = np.float64 if input.dtype == np.float64 else np.float32
    w = None if weight is None else weight.astype(work)
    return _nll(input.astype(work), target, w, reduction, ignore_index).astype(input.dtype)


op("NegativeLogLikelihoodLoss", inputs=("input:T", "target:Tind", "weight:T?"), outputs=("loss:T",),
   types={"T": FLT, "Tind": IND},
   attrs=(Attr("ignore_index", "int", None), Attr("reduction", "string", "mean")),
   infer=lambda ctx: [_loss_infer(ctx, "input")], reference=_nll_ref,
   groups={NN}, tier=Tier.HIGH, onnx_since=12,
   doc="Negative log-likelihood of the target classes (class axis 1), optionally class-weighted; "
       "'mean' divides by the total weight of the non-ignored targets.")


def _log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _sce_infer(ctx):
    return [_loss_infer(ctx, "scores"), ctx.input(0)]


def _sce_ref(scores, labels, weights=None, ignore_index=None, reduction="mean"):
    work = np.float64 if scores.dtype == np.float64 else np.float32
    log_prob = _log_softmax(scores.astype(work), axis=1)
    w = None if weights is None else weights.astype(work)
    loss = _nll(log_prob, labels, w, reduction, ignore_index)
    return loss.astype(scores.dtype), log_prob.astype(scores.dtype)


op("SoftmaxCrossEntropyLoss", inputs=("scores:T", "labels:Tind", "weights:T?"),
   outputs=("output:T", "log_prob:T?"), types={"T": FLT, "Tind": IND},
   attrs=(Attr("ignore_index", "int", None), Attr("reduction", "string", "mean")),
   infer=_sce_infer, reference=_sce_ref, groups={NN}, tier=Tier.HIGH, onnx_since=12,
   doc="Cross entropy of softmax(scores) over axis 1 against integer labels: NegativeLogLikelihoodLoss "
       "of the log-softmax, which is also returned as the optional log_prob output.")
