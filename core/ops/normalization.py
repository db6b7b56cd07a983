"""Normalization ops: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN, and
Dropout (a regulariser; the identity at inference).

Statistics are computed in float32 or wider (the `stash_type` where an op has one); results are
rounded once to the output type.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from .reduce import FLT, float_work, wide
from .registry import NN, NORM, Attr, Tier, op

FLOAT8 = frozenset({dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz})
BOOL = frozenset({dt.bool_})
GROUPS = {NN, NORM}


def _work_dtype(*arrays) -> np.dtype:
    """float64 when any input is float64, else float32."""
    return np.dtype(np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32)


def _trim_outputs(ic) -> int:
    """How many outputs the ONNX node really uses (trailing empty names do not count)."""
    n = len(ic.node.output)
    while n > 1 and not ic.node.output[n - 1]:
        n -= 1
    return n


def _emit_n(ic, op_name, inputs, attrs, n):
    """Like ic.emit, but for the first `n` outputs of the ONNX node only."""
    return ic.b.add(op_name, inputs, attrs, name=ic.node.name or None, num_outputs=n,
                    output_names=list(ic.node.output[:n]), captures=ic.captures)


def _check_channel_param(ctx, i, what, c):
    s = ctx.shape(i)
    if s is None:
        return
    if len(s) != 1 or (isinstance(s[0], int) and isinstance(c, int) and s[0] != c):
        raise ctx.error(f"{what} must have shape [{c if c is not None else 'C'}], got {list(s)}")


def _channel_view(p: np.ndarray, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast against an (N, C, D1, ...) tensor."""
    return p.reshape((-1,) + (1,) * (ndim - 2)) if ndim >= 2 else p.reshape(-1)


def _stash(ctx) -> dt.DType:
    s = ctx.attrs["stash_type"]
    if s not in FLT:
        raise ctx.error(f"stash_type must be a float type (float32, float64, float16, bfloat16), got {s}")
    return s


def _stash_np(stash) -> np.dtype:
    # Half-precision stash types are emulated in float32, rounded at the outputs.
    return np.dtype(np.float64) if stash.np == np.float64 else np.dtype(np.float32)


# -- BatchNormalization ----------------------------------------------------------------------------
def _bn_infer(ctx):
    x = ctx.input(0)
    if x.rank == 0:
        raise ctx.error("X must have rank >= 1 (N x C x D1 ...)")
    c = None if x.shape is None else (x.shape[1] if len(x.shape) >= 2 else 1)
    for i, what in ((1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")):
        _check_channel_param(ctx, i, what, c)
    if ctx.num_outputs > 1 and not ctx.attrs["training_mode"]:
        raise ctx.error("running_mean/running_var outputs exist only with training_mode=1")
    stat = dt.TensorType((c,), ctx.dtype(3))
    return [x, stat, stat][:max(ctx.num_outputs, 1)]


def _batch_norm(x, scale, b, mean, var, *, epsilon, momentum, training_mode):
    w = _work_dtype(x, scale, b, mean, var)
    xw = x.astype(w)
    p = [_channel_view(a.astype(w), x.ndim) for a in (scale, b, mean, var)]
    s_, b_, m_, v_ = p
    if not training_mode:
        return (s_ * (xw - m_) / np.sqrt(v_ + w.type(epsilon)) + b_).astype(x.dtype)
    axes = tuple(i for i in range(x.ndim) if i != 1) if x.ndim >= 2 else (0,)
    cur_mean = xw.mean(axis=axes)
    cur_var = xw.var(axis=axes)  # the population variance, as ONNX defines
    y = s_ * (xw - _channel_view(cur_mean, x.ndim)) / np.sqrt(_channel_view(cur_var, x.ndim)
                                                              + w.type(epsilon)) + b_
    mom = w.type(momentum)
    run_mean = mean.astype(w) * mom + cur_mean * (1 - mom)
    run_var = var.astype(w) * mom + cur_var * (1 - mom)
    return y.astype(x.dtype), run_mean.astype(mean.dtype), run_var.astype(var.dtype)


def _bn_from_onnx(ic):
    attrs = {k: v for k, v in ic.attrs.items() if k not in ("spatial", "is_test", "consumed_inputs")}
    n = _trim_outputs(ic)
    if ic.opset < 14 and n > 1:  # before training_mode, extra outputs meant training
        if n > 3:
            raise ic.error("the saved_mean/saved_var outputs of BatchNormalization before opset 14 "
                           "are not supported")
        attrs["training_mode"] = 1
    per_channel = getattr(ic.inputs[1].type, "rank", None) == 1  # then spatial makes no difference
    if ic.opset < 9 and int(ic.attrs.get("spatial", 1)) == 0 and not per_channel:
        if n > 1:
            raise ic.error("training-mode BatchNormalization with spatial=0 is not supported")
        # Per-activation statistics: the parameters are (C, D1, ...) and broadcast against
        # (N, C, D1, ...) from the right, so the plain formula applies elementwise.
        x, scale, b, mean, var = ic.inputs
        eps = ic.const(np.asarray(attrs.get("epsilon", 1e-5), dtype=x.type.dtype.np))
        std = ic.add("Sqrt", [ic.add("Add", [var, eps])[0]])[0]
        norm = ic.add("Div", [ic.add("Sub", [x, mean])[0], std])[0]
        return _emit_n(ic, "Add", [ic.add("Mul", [norm, scale])[0], b], None, 1)
    return _emit_n(ic, "BatchNormalization", ic.inputs, attrs, n)


op("BatchNormalization",
   inputs=("X:T", "scale:T1", "B:T1", "input_mean:T2", "input_var:T2"),
   outputs=("Y:T", "running_mean:T2?", "running_var:T2?"),
   types={"T": FLT, "T1": FLT, "T2": FLT},
   attrs=(Attr("epsilon", "float", 1e-5), Attr("momentum", "float", 0.9),
          Attr("training_mode", "int", 0)),
   infer=_bn_infer, reference=_batch_norm, groups=GROUPS, tier=Tier.KERNEL, onnx_since=15,
   from_onnx=_bn_from_onnx,
   doc="scale * (X - mean) / sqrt(var + epsilon) + B per channel (axis 1); training_mode uses the "
       "batch statistics and also returns the updated running mean and variance.")


# -- InstanceNormalization -------------------------------------------------------------------------
def _instance_norm_infer(ctx):
    x = ctx.input(0)
    if x.rank is not None and x.rank < 3:
        raise ctx.error(f"input must have rank >= 3 (N x C x D1 ...), got {x}")
    c = None if x.shape is None else x.shape[1]
    _check_channel_param(ctx, 1, "scale", c)
    _check_channel_param(ctx, 2, "B", c)
    return [x]


def _instance_norm(x, scale, b, *, epsilon):
    w = _work_dtype(x)
    xw = x.astype(w)
    axes = tuple(range(2, x.ndim))
    mean = xw.mean(axis=axes, keepdims=True)
    var = ((xw - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (xw - mean) / np.sqrt(var + w.type(epsilon))
    y = y * _channel_view(scale.astype(w), x.ndim) + _channel_view(b.astype(w), x.ndim)
    return y.astype(x.dtype)


op("InstanceNormalization", inputs=("input:T", "scale:T", "B:T"), outputs=("output:T",),
   types={"T": FLT}, attrs=(Attr("epsilon", "float", 1e-5),), infer=_instance_norm_infer,
   reference=_instance_norm, groups=GROUPS, tier=Tier.HIGH, onnx_since=6,
   doc="Normalises each (instance, channel) over its spatial dims, then scale and B per channel.")


# -- LayerNormalization / RMSNormalization ---------------------------------------------------------
def _unidirectional(ctx, i, what, target):
    """Check that input i broadcasts to `target` without changing it."""
    s = ctx.shape(i)
    if s is None or target is None:
        return
    bad = len(s) > len(target) or any(isinstance(d, int) and d != 1 and isinstance(t, int) and d != t
                                      for d, t in zip(reversed(s), reversed(target)))
    if bad:
        raise ctx.error(f"{what} of shape {list(s)} does not broadcast to X's shape {list(target)}")


def _layer_norm_infer(ctx):
    x = ctx.input(0)
    stash = _stash(ctx)
    if x.rank == 0:
        raise ctx.error("X must have rank >= 1")
    axis = ctx.axis(ctx.attrs["axis"], x.rank)
    _unidirectional(ctx, 1, "Scale", x.shape)
    if ctx.has(2):
        _unidirectional(ctx, 2, "B", x.shape)
    stat = None if x.shape is None else x.shape[:axis] + (1,) * (len(x.shape) - axis)
    out = [x, dt.TensorType(stat, stash), dt.TensorType(stat, stash)]
    return out[:max(ctx.num_outputs, 1)]


def _layer_norm(x, scale, b=None, *, axis, epsilon, stash_type):
    w = _stash_np(stash_type)
    axes = tuple(range(axis % x.ndim, x.ndim))
    xw = x.astype(w)
    mean = xw.mean(axis=axes, keepdims=True)
    d = xw - mean
    inv_std = 1 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + w.type(epsilon))
    y = (d * inv_std).astype(x.dtype) * scale  # the second stage runs in X's type
    if b is not None:
        y = y + b
    return y.astype(x.dtype), mean.astype(stash_type.np), inv_std.astype(stash_type.np)


op("LayerNormalization", inputs=("X:T", "Scale:T", "B:T?"), outputs=("Y:T", "Mean:U?", "InvStdDev:U?"),
   types={"T": FLT, "U": FLT},
   attrs=(Attr("axis", "int", -1), Attr("epsilon", "float", 1e-5),
          Attr("stash_type", "dtype", dt.float32)),
   infer=_layer_norm_infer, reference=_layer_norm, groups=GROUPS, tier=Tier.KERNEL, onnx_since=17,
   doc="Standardises X over dims [axis, rank) (in stash_type precision), then * Scale + B; "
       "optionally returns the mean and inverse standard deviation.")


def _rms_norm_infer(ctx):
    x = ctx.input(0)
    _stash(ctx)
    if x.rank == 0:
        raise ctx.error("X must have rank >= 1")
    ctx.axis(ctx.attrs["axis"], x.rank)
    _unidirectional(ctx, 1, "scale", x.shape)
    return [x.with_dtype(ctx.dtype(1))]


def _rms_norm(x, scale, *, axis, epsilon, stash_type):
    w = _stash_np(stash_type)
    axes = tuple(range(axis % x.ndim, x.ndim))
    xw = x.astype(w)
    rms = np.sqrt((xw * xw).mean(axis=axes, keepdims=True) + w.type(epsilon))
    return ((xw / rms).astype(x.dtype).astype(scale.dtype) * scale).astype(scale.dtype)


op("RMSNormalization", inputs=("X:T", "scale:V"), outputs=("Y:V",), types={"T": FLT, "V": FLT},
   attrs=(Attr("axis", "int", -1), Attr("epsilon", "float", 1e-5),
          Attr("stash_type", "dtype", dt.float32)),
   infer=_rms_norm_infer, reference=_rms_norm, groups=GROUPS, tier=Tier.HIGH, onnx_since=23,
   doc="X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale.")


# -- GroupNormalization ----------------------------------------------------------------------------
def _group_norm_infer(ctx):
    x = ctx.input(0)
    _stash(ctx)
    g = ctx.attrs["num_groups"]
    if g <= 0:
        raise ctx.error(f"num_groups must be positive, got {g}")
    if x.rank is not None and x.rank < 2:
        raise ctx.error(f"X must have rank >= 2 (N x C x ...), got {x}")
    c = None if x.shape is None else x.shape[1]
    if isinstance(c, int) and c % g:
        raise ctx.error(f"{c} channels cannot be split into {g} groups")
    _check_channel_param(ctx, 1, "scale", c)
    _check_channel_param(ctx, 2, "bias", c)
    return [x]


def _group_norm(x, scale, bias, *, num_groups, epsilon, stash_type):
    w = _stash_np(stash_type)
    n, c = x.shape[:2]
    if c % num_groups:
        raise ValueError(f"{c} channels cannot be split into {num_groups} groups")
    per_group = (c // num_groups) * math.prod(x.shape[2:])
    xg = x.astype(w).reshape(n, num_groups, per_group)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    normalized = ((xg - mean) / np.sqrt(var + w.type(epsilon))).reshape(x.shape).astype(x.dtype)
    return (normalized * _channel_view(scale, x.ndim) + _channel_view(bias, x.ndim)).astype(x.dtype)


def _group_norm_from_onnx(ic):
    if ic.opset >= 21:
        return ic.emit("GroupNormalization", ic.inputs, ic.attrs)
    # Opset 18 gave scale and bias per group; opset 21 per channel: repeat each C/G times.
    x, scale, bias = ic.inputs
    g = int(ic.attrs["num_groups"])
    shape = x.type.shape if isinstance(x.type, dt.TensorType) else None
    c = shape[1] if shape is not None and len(shape) >= 2 else None
    if not isinstance(c, int):
        raise ic.error("GroupNormalization before opset 21 needs a known channel count")
    if g <= 0 or c % g:
        raise ic.error(f"{c} channels cannot be split into {g} groups")
    per_channel = []
    for v in (scale, bias):
        if v.is_constant:
            per_channel.append(ic.const(np.repeat(np.asarray(v.data).reshape(-1), c // g)))
            continue
        col = ic.add("Reshape", [v, ic.const(np.asarray([g, 1], dtype=np.int64))])[0]
        grid = ic.add("Mul", [col, ic.const(np.ones((1, c // g), dtype=v.type.dtype.np))])[0]
        per_channel.append(ic.add("Reshape", [grid, ic.const(np.asarray([c], dtype=np.int64))])[0])
    return ic.emit("GroupNormalization", [x, *per_channel], ic.attrs)


op("GroupNormalization", inputs=("X:T", "scale:T", "bias:T"), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("num_groups", "int"), Attr("epsilon", "float", 1e-5),
          Attr("stash_type", "dtype", dt.float32)),
   infer=_group_norm_infer, reference=_group_norm, groups=GROUPS, tier=Tier.HIGH, onnx_since=21,
   from_onnx=_group_norm_from_onnx,
   doc="Standardises each group of C/num_groups channels per instance, then scale and bias per "
       "channel.")


# -- LpNormalization / MeanVarianceNormalization ---------------------------------------------------
def _lp_norm_infer(ctx):
    x = ctx.input(0)
    if ctx.attrs["p"] not in (1, 2):
        raise ctx.error(f"p must be 1 or 2, got {ctx.attrs['p']}")
    if x.rank == 0:
        raise ctx.error("input must have rank >= 1")
    ctx.axis(ctx.attrs["axis"], x.rank)
    return [x]


def _lp_norm(x, *, axis, p):
    w = wide(x)
    norm = (np.sum(np.abs(w), axis=axis, keepdims=True) if p == 1
            else np.sqrt(np.sum(w * w, axis=axis, keepdims=True)))
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(norm == 0, 0, w / norm)  # an all-zero slice stays zero
    return y.astype(x.dtype)


op("LpNormalization", inputs=("input:T",), outputs=("output:T",), types={"T": FLT},
   attrs=(Attr("axis", "int", -1), Attr("p", "int", 2)), infer=_lp_norm_infer, reference=_lp_norm,
   groups=GROUPS, tier=Tier.HIGH, onnx_since=1,
   doc="input / its L1 or L2 norm along `axis`; an all-zero slice stays zero.")


def _mvn_infer(ctx):
    x = ctx.input(0)
    axes = [ctx.axis(a, x.rank) for a in ctx.attrs["axes"]]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {list(ctx.attrs['axes'])} contain a duplicate")
    return [x]


def _mvn(x, *, axes):
    w = float_work(x)
    axes = tuple(a % x.ndim for a in axes)
    mean = w.mean(axis=axes, keepdims=True)
    # Same value as ONNX's sqrt(E[X^2] - E[X]^2), but never negative through rounding.
    std = np.sqrt(((w - mean) ** 2).mean(axis=axes, keepdims=True))
    return ((w - mean) / (std + w.dtype.type(1e-9))).astype(x.dtype)


op("MeanVarianceNormalization", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("axes", "ints", (0, 2, 3)),), infer=_mvn_infer, reference=_mvn, groups=GROUPS,
   tier=Tier.HIGH, onnx_since=13,
   doc="(X - mean) / (std + 1e-9), with mean and std taken over `axes`.")


# -- LRN -------------------------------------------------------------------------------------------
def _lrn_infer(ctx):
    x = ctx.input(0)
    if x.rank is not None and x.rank < 2:
        raise ctx.error(f"X must have rank >= 2 (N x C x ...), got {x}")
    if ctx.attrs["size"] <= 0:
        raise ctx.error(f"size must be positive, got {ctx.attrs['size']}")
    return [x]


def _lrn(x, *, size, alpha, beta, bias):
    w = wide(x)
    c = x.shape[1]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2  # floor and ceil of (size-1)/2
    pad = [(0, 0)] * x.ndim
    pad[1] = (before, after)
    sq = np.pad(w * w, pad)
    # Channel c sums the squares of channels c-before .. c+after (clipped at the edges).
    square_sum = sum(sq[:, k:k + c] for k in range(size))
    return (w / (w.dtype.type(bias) + w.dtype.type(alpha / size) * square_sum) ** w.dtype.type(beta)
            ).astype(x.dtype)


op("LRN", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("size", "int"), Attr("alpha", "float", 1e-4), Attr("beta", "float", 0.75),
          Attr("bias", "float", 1.0)),
   infer=_lrn_infer, reference=_lrn, groups=GROUPS, tier=Tier.KERNEL, onnx_since=1,
   doc="Local response normalization across `size` neighbouring channels (AlexNet).")


# -- Dropout ---------------------------------------------------------------------------------------
def _dropout_infer(ctx):
    x = ctx.input(0)
    for i, what in ((1, "ratio"), (2, "training_mode")):
        if ctx.has(i) and ctx.shape(i) is not None and any(d != 1 for d in ctx.shape(i)):
            raise ctx.error(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
    ratio = ctx.value(1)
    if ratio is not None and not 0 <= float(np.asarray(ratio, np.float64).reshape(-1)[0]) < 1:
        raise ctx.error(f"ratio must be in [0, 1), got {float(ratio.reshape(-1)[0])}")
    return [x, x.with_dtype(dt.bool_)][:max(ctx.num_outputs, 1)]


def _dropout(data, ratio=None, training_mode=None, *, seed):
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    r = 0.5 if ratio is None else float(np.asarray(ratio, np.float64).reshape(-1)[0])
    if not training or r == 0:
        return data, np.ones(data.shape, dtype=bool)
    if not 0 <= r < 1:
        raise ValueError(f"ratio must be in [0, 1), got {r}")
    # With a seed the mask is reproducible: a NumPy RandomState(seed) uniform draw per element
    # (the stream is implementation-defined in ONNX; other backends need not match it).
    rng = np.random.RandomState(seed) if seed is not None else np.random.default_rng()
    mask = rng.uniform(0.0, 1.0, data.shape) >= r
    w = data.astype(np.float64 if data.dtype == np.float64 else np.float32)
    return (w * mask * w.dtype.type(1 / (1 - r))).astype(data.dtype), mask


def _dropout_from_onnx(ic):
    if ic.opset >= 12:
        return ic.emit("Dropout", ic.inputs, ic.attrs)
    # Opsets 7-11: ratio was an attribute and there was no training mode (inference: identity).
    x = ic.inputs[0]
    ratio = ic.const(np.asarray(ic.attrs.get("ratio", 0.5), dtype=np.float32))
    if ic.opset >= 10 or _trim_outputs(ic) == 1:
        return _emit_n(ic, "Dropout", [x, ratio], {}, _trim_outputs(ic))
    y, mask = ic.add("Dropout", [x, ratio], num_outputs=2)
    return [y, ic.add("Cast", [mask], {"to": x.type.dtype})[0]]  # opsets 7-9: mask had X's type


op("Dropout", inputs=("data:T", "ratio:T1?", "training_mode:T2?"), outputs=("output:T", "mask:T2?"),
   types={"T": FLT | FLOAT8, "T1": FLT | FLOAT8, "T2": BOOL},
   attrs=(Attr("seed", "int", None),), infer=_dropout_infer, reference=_dropout, groups={NN},
   tier=Tier.HIGH, onnx_since=12, from_onnx=_dropout_from_onnx, pure=False,
   doc="Identity unless training_mode: then zeroes each element with probability `ratio` and "
       "scales the rest by 1/(1-ratio); `mask` marks the kept elements.")
