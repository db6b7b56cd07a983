"""Fold inference BatchNormalization, and per-channel Mul/Add, into the Conv or Gemm before it.

    y = scale * (conv(x, W) + B - mean) / sqrt(var + eps) + bias
      = conv(x, W * s) + (B - mean) * s + bias          with s = scale / sqrt(var + eps)

(Glow's OptimizeBatchNorm.) The producer must have no other user, every parameter must be a
constant, and the BatchNormalization must be in inference form (one output). A Mul or Add by a
per-output-channel constant folds the same way (Caffe2 "Scale" layers become Mul + Add), and into
a BatchNormalization's own scale and bias, so that BN -> Mul -> Add chains collapse to one BN.
New weights are computed in float64 and rounded once to the weight's type.
"""

from __future__ import annotations

import numpy as np

from ..aligned import SPILL_MIN_BYTES, drop_pages, spilled_parts
from .base import Pass
from .patterns import Rules, const, producer, same_type

RULES = Rules("fold-batchnorm")


def _channel_vector(c: np.ndarray | None, out_rank: int, channels: int, axis: int = 1):
    """`c` as a length-`channels` vector if it only varies along `axis` of an output of
    rank `out_rank` (right-aligned broadcasting), else None."""
    if c is None or c.dtype.kind != "f" or c.ndim > out_rank:
        return None
    full = c.reshape((1,) * (out_rank - c.ndim) + c.shape)
    if any(d != 1 for i, d in enumerate(full.shape) if i != axis) or full.shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(full.reshape(-1), (channels,)).astype(np.float64)


def _bn_params(bn, ins):
    """(s, t) with bn(x) = s * x + t per channel, or None if not foldable."""
    if len(bn.outputs) != 1 or bn.attrs.get("training_mode", 0):
        return None
    scale, bias, mean, var = (const(v) for v in ins[1:5])
    if any(p is None or p.dtype.kind != "f" for p in (scale, bias, mean, var)):
        return None
    eps = float(bn.attrs.get("epsilon", 1e-5))
    s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return s, bias.astype(np.float64) - mean.astype(np.float64) * s


def _conv_with(rb, conv, cins, s, t):
    """conv(x, W) * s + t (per output channel) as one Conv with new constant weights."""
    w, b = const(cins[1]), const(cins[2]) if len(cins) > 2 else None
    if w is None or w.dtype.kind != "f" or (len(cins) > 2 and cins[2] is not None and b is None):
        return None
    m = w.shape[0]
    if s.shape[0] != m:
        return None
    w2 = _scaled(w, s.reshape((m,) + (1,) * (w.ndim - 1)))
    b0 = np.zeros(m) if b is None else b.astype(np.float64)
    b2 = (b0 * s + t).astype(w.dtype)
    return rb.emit1("Conv", [cins[0], rb.constant(w2, "w_folded"), rb.constant(b2, "b_folded")],
                    dict(conv.attrs))


def _scaled(w, s):
    """w * s (s broadcast to w) in float64, rounded once to w's type. A large one is made a block
    of rows (axis 0) at a time into a temporary file's pages (glow.aligned.spilled_parts), as an
    imported weight is: never whole in float64, and given back once a backend has packed it."""
    def rows(i, j):
        return (w[i:j].astype(np.float64) * (s[i:j] if s.shape[0] > 1 else s)).astype(w.dtype)

    out = None
    if w.nbytes >= SPILL_MIN_BYTES:
        step = max(1, (1 << 20) // max(1, w[:1].nbytes))
        out = spilled_parts((rows(i, i + step) for i in range(0, w.shape[0], step)), w.dtype, w.shape)
    out = rows(0, w.shape[0]) if out is None else out
    drop_pages(w)  # a spilled source: read once here
    return out


def _gemm_with(rb, gemm, gins, s, t):
    """gemm(A, B, C) * s + t (per output column) as one Gemm with new constants."""
    b, c = const(gins[1]), const(gins[2]) if len(gins) > 2 else None
    if b is None or b.dtype.kind != "f" or b.ndim != 2:
        return None
    if len(gins) > 2 and gins[2] is not None and c is None:
        return None  # a runtime bias
    trans_b = gemm.attrs.get("transB", 0)
    m = b.shape[0] if trans_b else b.shape[1]
    if s.shape[0] != m:
        return None
    b2 = _scaled(b, s[:, None] if trans_b else s[None, :])
    beta = float(gemm.attrs.get("beta", 1.0))
    c0 = np.zeros(m) if c is None else beta * c.astype(np.float64)
    c2 = c0 * s + t
    attrs = dict(gemm.attrs, beta=1.0)
    return rb.emit1("Gemm", [gins[0], rb.constant(b2, "b_folded"),
                             rb.constant(c2.astype(b.dtype), "c_folded")], attrs)


def _fold_affine(ctx, rb, node, x_old, x_new, s, t):
    """Fold `y = s * x + t` (per channel of axis 1) into x's producer, if it is foldable."""
    if not ctx.single_use(x_old):
        return None
    p = producer(x_new)
    if p is None:
        return None
    out = None
    if p.op.name == "Conv":
        out = _conv_with(rb, p, list(p.inputs), s, t)
    elif p.op.name == "Gemm":
        out = _gemm_with(rb, p, list(p.inputs), s, t)
    elif p.op.name == "BatchNormalization":
        params = _bn_params(p, list(p.inputs))
        if params is not None:
            s0, t0 = params
            # s * (s0 * x + t0) + t as a BatchNormalization with mean 0 and var 1 - eps
            out = _bn_with(rb, p, p.inputs[0], s0 * s, t0 * s + t)
    if out is None or not same_type(out, node.outputs[0]):
        return None
    return [out]


def _bn_with(rb, bn, x, s, t):
    """A BatchNormalization computing s * x + t exactly (mean 0, var 1 - eps, so sqrt(var+eps)=1)."""
    eps = float(bn.attrs.get("epsilon", 1e-5))
    if eps >= 1:
        return None
    n = s.shape[0]
    params = (s, t, np.zeros(n), np.full(n, 1.0 - eps))
    consts = [rb.constant(a.astype(const(old).dtype), nm) for a, old, nm in
              zip(params, bn.inputs[1:5], ("scale", "bias", "mean", "var"))]
    return rb.emit1("BatchNormalization", [x] + consts, dict(bn.attrs))


@RULES.rule("BatchNormalization")
def fold_batchnorm(ctx, rb, node, ins):
    params = _bn_params(node, ins)
    if params is None or getattr(ins[0].type, "rank", None) is None:
        return None
    return _fold_affine(ctx, rb, node, node.inputs[0], ins[0], *params)


@RULES.rule("Mul", "Add")
def fold_channel_arith(ctx, rb, node, ins):
    out = node.outputs[0]
    rank, shape = getattr(out.type, "rank", None), getattr(out.type, "shape", None)
    if rank is None or rank < 2 or not isinstance(shape[1], int):
        return None
    for i in (0, 1):
        x_old, x_new, c = node.inputs[i], ins[i], ins[1 - i]
        vec = _channel_vector(const(c), rank, shape[1])
        if vec is None or x_new.data is not None:
            continue
        s, t = (vec, np.zeros_like(vec)) if node.op.name == "Mul" else (np.ones_like(vec), vec)
        res = _fold_affine(ctx, rb, node, x_old, x_new, s, t)
        if res is not None:
            return res
    return None


def fold_batchnorm_pass(graph):
    return RULES.apply(graph)


FOLD_BATCHNORM = Pass("fold-batchnorm", fold_batchnorm_pass,
                      "fold BatchNormalization and per-channel Mul/Add into Conv/Gemm weights")
