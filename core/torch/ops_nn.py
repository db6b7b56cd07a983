"""ATen rules: convolution, normalisation, pooling, attention (inference forms only).

Training-only results (batch statistics, layer-norm mean and rstd, max-pool indices, attention's
logsumexp) come back as None: a graph that reads them fails that node's import, so it stays eager.
"""

from __future__ import annotations

import numpy as np

from .table import Unsupported, aten


def _pairs(v, n):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


@aten("convolution.default", "conv1d.default", "conv2d.default", "conv3d.default")
def _conv(cx, a):
    d = cx.out_dtype
    x, w = cx.operand(a["input"], d), cx.operand(a["weight"], d)
    n = cx.rank(a["weight"]) - 2
    if isinstance(a["padding"], str):
        raise Unsupported(f"padding='{a['padding']}'")
    pads = _pairs(a["padding"], n)
    attrs = dict(strides=_pairs(a["stride"], n), pads=pads + pads, dilations=_pairs(a["dilation"], n),
                 group=int(a["groups"]))
    b = None if a["bias"] is None else cx.operand(a["bias"], d)
    if a.get("transposed"):
        attrs["output_padding"] = _pairs(a["output_padding"], n)
        return cx.add("ConvTranspose", [x, w, b], **attrs)
    return cx.add("Conv", [x, w, b], **attrs)


def _ones_or(cx, v, n, d):
    return cx.operand(v, d) if v is not None else cx.const(np.ones(n, d.np))


def _zeros_or(cx, v, n, d):
    return cx.operand(v, d) if v is not None else cx.const(np.zeros(n, d.np))


@aten("_native_batch_norm_legit_no_training.default", "batch_norm.default", "native_batch_norm.default",
      "_native_batch_norm_legit.default")
def _batch_norm(cx, a):
    if a.get("training"):
        raise Unsupported("batch_norm in training mode (batch statistics)")
    if a.get("running_mean") is None:
        raise Unsupported("batch_norm without running statistics")
    d = cx.out_dtype
    c = cx.shape(a["input"])[1]
    if not isinstance(c, int):
        raise Unsupported("batch_norm over a channel count of symbolic size")
    y = cx.add("BatchNormalization", [cx.operand(a["input"], d), _ones_or(cx, a["weight"], c, d),
                                      _zeros_or(cx, a["bias"], c, d), cx.operand(a["running_mean"], d),
                                      cx.operand(a["running_var"], d)], epsilon=float(a["eps"]))
    return y if "batch_norm.default" == str(cx.node.target)[5:] else (y, None, None)


@aten("native_layer_norm.default", "layer_norm.default")
def _layer_norm(cx, a):
    d = cx.out_dtype
    norm = tuple(int(s) for s in a["normalized_shape"])
    y = cx.add("LayerNormalization", [cx.operand(a["input"], d), _ones_or(cx, a["weight"], norm, d),
                                      _zeros_or(cx, a["bias"], norm, d)],
               axis=-len(norm), epsilon=float(a["eps"]))
    return y if str(cx.node.target) == "aten.layer_norm.default" else (y, None, None)


@aten("rms_norm.default")
def _rms_norm(cx, a):
    d = cx.out_dtype
    norm = tuple(int(s) for s in a["normalized_shape"])
    if a["eps"] is None:
        raise Unsupported("rms_norm with the dtype's default eps")
    return cx.add("RMSNormalization", [cx.operand(a["input"], d), _ones_or(cx, a["weight"], norm, d)],
                  axis=-len(norm), epsilon=float(a["eps"]))


@aten("native_group_norm.default", "group_norm.default")
def _group_norm(cx, a):
    d = cx.out_dtype
    c = cx.shape(a["input"])[1]
    if not isinstance(c, int):
        raise Unsupported("group_norm over a channel count of symbolic size")
    groups = a.get("group", a.get("num_groups"))
    y = cx.add("GroupNormalization", [cx.operand(a["input"], d), _ones_or(cx, a["weight"], c, d),
                                      _zeros_or(cx, a["bias"], c, d)], num_groups=int(groups), epsilon=float(a["eps"]))
    return y if str(cx.node.target) == "aten.group_norm.default" else (y, None, None)


# -- pooling -------------------------------------------------------------------------------------

@aten("max_pool2d.default", "max_pool1d.default", "max_pool2d_with_indices.default")
def _max_pool(cx, a):
    n = cx.rank(a["self"]) - 2
    k = _pairs(a["kernel_size"], n)
    s = _pairs(a["stride"], n) if a["stride"] else k
    p = _pairs(a["padding"], n)
    y = cx.add("MaxPool", [cx.v(a["self"])], kernel_shape=k, strides=s, pads=p + p,
               dilations=_pairs(a["dilation"], n), ceil_mode=int(bool(a["ceil_mode"])))
    return (y, None) if "with_indices" in str(cx.node.target) else y


@aten("avg_pool2d.default", "avg_pool1d.default")
def _avg_pool(cx, a):
    n = cx.rank(a["self"]) - 2
    if a.get("divisor_override") is not None:
        raise Unsupported("avg_pool with divisor_override")
    k = _pairs(a["kernel_size"], n)
    s = _pairs(a["stride"], n) if a["stride"] else k
    p = _pairs(a["padding"], n)
    return cx.add("AveragePool", [cx.v(a["self"])], kernel_shape=k, strides=s, pads=p + p,
                  ceil_mode=int(bool(a["ceil_mode"])), count_include_pad=int(bool(a["count_include_pad"])))


@aten("adaptive_avg_pool2d.default", "_adaptive_avg_pool2d.default", "adaptive_avg_pool1d.default")
def _adaptive_avg_pool(cx, a):
    out = _pairs(a["output_size"], cx.rank(a["self"]) - 2)
    x = cx.v(a["self"])
    if all(o == 1 for o in out):
        return cx.add("GlobalAveragePool", [x])
    spatial = cx.shape(a["self"])[2:]
    if not all(isinstance(i, int) and i % o == 0 for i, o in zip(spatial, out)):
        raise Unsupported("adaptive pooling to a size that does not divide the input")
    k = tuple(i // o for i, o in zip(spatial, out))
    return cx.add("AveragePool", [x], kernel_shape=k, strides=k)


# -- attention -----------------------------------------------------------------------------------

@aten("scaled_dot_product_attention.default", "_scaled_dot_product_flash_attention_for_cpu.default")
def _sdpa(cx, a):
    if a.get("dropout_p"):
        raise Unsupported("attention dropout (training)")
    if cx.rank(a["query"]) != 4:
        raise Unsupported("attention over inputs that are not 4-D (batch, heads, seq, dim)")
    d = cx.out_dtype
    mask = a.get("attn_mask")
    q, k, v = (cx.operand(a[n], d) for n in ("query", "key", "value"))
    m = None
    if mask is not None:
        m = cx.v(mask)
        if m.type.dtype.is_float and m.type.dtype != d:
            m = cx.add("Cast", [m], to=d)
    attrs = {"is_causal": int(bool(a["is_causal"]))}
    if a.get("scale") is not None:
        attrs["scale"] = float(a["scale"])
    y = cx.add("Attention", [q, k, v, m], **attrs)
    return y if str(cx.node.target) == "aten.scaled_dot_product_attention.default" else (y, None)
