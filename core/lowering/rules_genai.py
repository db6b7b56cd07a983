"""Lowering rules for onnxruntime-genai's decoder ops (glow.ops.genai): the norms become the
residual Add and RMSNormalization / LayerNormalization, onnxruntime's RotaryEmbedding becomes
ONNX's, and GroupQueryAttention becomes rotary, a masked scatter of the new rows into the cache
and grouped attention over the whole cache with each row's causal mask computed from seqlens_k.

The GroupQueryAttention rule reads and writes the whole cache (length T) on every call: right for
a backend without a kernel of its own, but a backend that decodes token by token wants a kernel
that writes only the new rows and attends over each row's length (the cpu backend has one).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import cast, ints, scalar, static_shape
from .registry import lowering
from .rules_attention import _grouped_matmul, _masked_softmax, _reshape, _slice, _softcap, _transpose

MS = "com.microsoft"


def _residual(rb, x, skip, bias):
    total = rb.emit1("Add", [x, skip])
    return total if bias is None else rb.emit1("Add", [total, bias])


def _inv_rms(rb, x, axis, epsilon):
    """float32 1 / sqrt(mean(x^2 over dims [axis, rank)) + epsilon), dims kept."""
    xf = cast(rb, x, dt.float32)
    r = len(static_shape(x))
    axes = list(range(axis % r, r))
    mean = rb.emit1("ReduceMean", [rb.emit1("Mul", [xf, xf]), ints(rb, axes)], {"keepdims": 1})
    return rb.emit1("Reciprocal", [rb.emit1("Sqrt", [rb.emit1("Add", [mean, scalar(rb, epsilon, mean)])])])


@lowering("SimplifiedLayerNormalization")
def lower_simplified_layer_norm(rb, node, ins):
    x, scale = ins
    if static_shape(x) is None:
        return None
    a = node.attrs
    y = rb.emit1("RMSNormalization", [x, scale], {"axis": a["axis"], "epsilon": a["epsilon"]})
    if len(node.outputs) < 2 or node.outputs[1] is None:
        return [y]
    return [y, _inv_rms(rb, x, a["axis"], a["epsilon"])]


@lowering("SkipSimplifiedLayerNormalization", MS)
def lower_skip_simplified_layer_norm(rb, node, ins):
    x, skip, gamma, bias = (list(ins) + [None])[:4]
    if static_shape(x) is None:
        return None
    total = _residual(rb, x, skip, bias)
    eps = node.attrs["epsilon"]
    y = rb.emit1("RMSNormalization", [total, gamma], {"axis": -1, "epsilon": eps})
    outs = [y]
    if len(node.outputs) > 1:
        inv = _inv_rms(rb, total, -1, eps)
        outs += [rb.emit1("Mul", [inv, scalar(rb, 0, inv)]), inv, total]
    return outs[:len(node.outputs)]


@lowering("SkipLayerNormalization", MS)
def lower_skip_layer_norm(rb, node, ins):
    x, skip, gamma, beta, bias = (list(ins) + [None, None])[:5]
    if static_shape(x) is None:
        return None
    total = _residual(rb, x, skip, bias)
    ln = [total, gamma] + ([beta] if beta is not None else [])
    y = rb.emit1("LayerNormalization", ln, {"axis": -1, "epsilon": node.attrs["epsilon"]})
    outs = [y]
    if len(node.outputs) > 1:
        tf = cast(rb, total, dt.float32)
        mean = rb.emit1("ReduceMean", [tf, ints(rb, [-1])], {"keepdims": 1})
        centred = rb.emit1("Sub", [tf, mean])
        var = rb.emit1("ReduceMean", [rb.emit1("Mul", [centred, centred]), ints(rb, [-1])], {"keepdims": 1})
        inv = rb.emit1("Reciprocal", [rb.emit1("Sqrt", [rb.emit1("Add", [var, scalar(rb, node.attrs["epsilon"],
                                                                                           var)])])])
        outs += [mean, inv, total]
    return outs[:len(node.outputs)]


@lowering("RotaryEmbedding", MS)
def lower_ms_rotary_embedding(rb, node, ins):
    x, pos, cos, sin = ins
    shape, cs = static_shape(x), static_shape(cos)
    if shape is None or cs is None or static_shape(pos) is None:
        return None
    a = node.attrs
    seq = shape[2] if len(shape) == 4 else shape[1]
    if int(np.prod(static_shape(pos))) == 1 and len(static_shape(pos)) <= 1:  # an offset
        steps = rb.constant(np.arange(seq, dtype=np.int64).reshape(1, seq), name="steps")
        pos = rb.emit1("Add", [_reshape(rb, pos, [1, 1]), steps])
        pos = rb.emit1("Expand", [pos, ints(rb, [shape[0], seq])])
    rot = a["rotary_embedding_dim"] or 2 * cs[-1]
    if rot // 2 < cs[-1]:
        cos, sin = _slice(rb, cos, 1, 0, rot // 2), _slice(rb, sin, 1, 0, rot // 2)
    heads = a["num_heads"] or (shape[2] // rot if len(shape) == 3 else 0)
    attrs = {"interleaved": a["interleaved"], "rotary_embedding_dim": rot}
    if len(shape) == 3:
        attrs["num_heads"] = heads
    return [rb.emit1("RotaryEmbedding", [x, cos, sin, pos], attrs)]


# -- GroupQueryAttention ---------------------------------------------------------------------------

def _split_heads(rb, x, heads, start, count):
    """Heads [start, start + count) of (B, S, heads*D) as (B, count, S, D)."""
    b, s, hidden = static_shape(x)
    d = hidden // heads
    part = x if (start, count) == (0, heads) else _slice(rb, x, 2, start * d, (start + count) * d)
    return _transpose(rb, _reshape(rb, part, [b, s, count, d]), (0, 2, 1, 3))


@lowering("GroupQueryAttention", MS)
def lower_group_query_attention(rb, node, ins):
    a = node.attrs
    q_in, k_in, v_in, past_k, past_v, seqlens, total_len, cos, sin = (list(ins) + [None] * 9)[:9]
    present_t = node.outputs[1].type
    if static_shape(q_in) is None or not (isinstance(present_t, dt.TensorType) and present_t.is_static):
        return None
    h, kvh = a["num_heads"], a["kv_num_heads"]
    b, seq, _ = static_shape(q_in)
    _, _, t, d = present_t.shape
    ft = q_in.type.dtype
    if k_in is None:
        parts = h + 2 * kvh
        q, k, v = (_split_heads(rb, q_in, parts, s, n) for s, n in ((0, h), (h, kvh), (h + kvh, kvh)))
    else:
        q = _split_heads(rb, q_in, h, 0, h)
        k, v = _split_heads(rb, k_in, kvh, 0, kvh), _split_heads(rb, v_in, kvh, 0, kvh)
    # per row: its length, its past (0 for a first prompt: sequence length == total), its positions
    lens = rb.emit1("Add", [cast(rb, seqlens, dt.int64), ints(rb, [1])])  # (B,)
    first = rb.emit1("Equal", [cast(rb, _reshape(rb, total_len, [1]), dt.int64), ints(rb, [seq])])
    past = rb.emit1("Where", [first, ints(rb, [0]), rb.emit1("Sub", [lens, ints(rb, [seq])])])  # (B,)
    steps = rb.constant(np.arange(seq, dtype=np.int64).reshape(1, seq), name="steps")
    pos = rb.emit1("Add", [_reshape(rb, past, [b, 1]), steps])  # (B, S)
    if a["do_rotary"]:
        rot = {"interleaved": a["rotary_interleaved"], "rotary_embedding_dim": 2 * static_shape(cos)[1]}
        q = rb.emit1("RotaryEmbedding", [q, cos, sin, pos], rot)
        k = rb.emit1("RotaryEmbedding", [k, cos, sin, pos], rot)
    # the cache: key position p of row b holds the row's past there, its new row p - past, or 0
    kpos = rb.constant(np.arange(t, dtype=np.int64).reshape(1, t), name="kpos")
    rel = rb.emit1("Sub", [kpos, _reshape(rb, past, [b, 1])])  # (B, T)
    is_new = rb.emit1("And", [rb.emit1("Not", [rb.emit1("Less", [rel, ints(rb, [0])])]),
                              rb.emit1("Less", [rel, ints(rb, [seq])])])
    is_old = rb.emit1("Less", [rel, ints(rb, [0])])
    pick = rb.emit1("Min", [rb.emit1("Max", [rel, ints(rb, [0])]), ints(rb, [seq - 1])])
    index = rb.emit1("Expand", [_reshape(rb, pick, [b, 1, t, 1]), ints(rb, [b, kvh, t, d])])
    present = []
    for new, old in ((k, past_k), (v, past_v)):
        gathered = rb.emit1("GatherElements", [new, index], {"axis": 2})
        keep = scalar(rb, 0, gathered)
        if old is not None:
            p = static_shape(old)[2]
            if p < t:
                old = rb.emit1("Pad", [old, ints(rb, [0, 0, 0, 0, 0, 0, t - p, 0])])
            keep = rb.emit1("Where", [_reshape(rb, is_old, [b, 1, t, 1]), old, keep])
        present.append(rb.emit1("Where", [_reshape(rb, is_new, [b, 1, t, 1]), gathered, keep]))
    # attention over the cache: query s of row b sees keys [0, past_b + s] below the row's length
    qpos = _reshape(rb, pos, [b, 1, seq, 1])
    kp = _reshape(rb, kpos, [1, 1, 1, t])
    allowed = rb.emit1("And", [rb.emit1("Not", [rb.emit1("Greater", [kp, qpos])]),
                               rb.emit1("Less", [kp, _reshape(rb, lens, [b, 1, 1, 1])])])
    if a["local_window_size"] > 0:
        first_key = rb.emit1("Sub", [qpos, ints(rb, [a["local_window_size"] - 1])])
        allowed = rb.emit1("And", [allowed, rb.emit1("Not", [rb.emit1("Less", [kp, first_key])])])
    f32 = dt.float32
    alpha = a["scale"] or 1 / np.sqrt(d)
    kt = _transpose(rb, cast(rb, present[0], f32), (0, 1, 3, 2))
    logits = rb.emit1("Mul", [_grouped_matmul(rb, cast(rb, q, f32), kt, kvh), scalar(rb, alpha, kt)])
    if a["softcap"] > 0:
        logits = _softcap(rb, logits, a["softcap"])
    folded = rb.emit1("Where", [allowed, logits, scalar(rb, -np.inf, logits)])
    probs = _masked_softmax(rb, folded)
    y = _grouped_matmul(rb, probs, cast(rb, present[1], f32), kvh)  # (B, H, S, D)
    y = _reshape(rb, _transpose(rb, y, (0, 2, 1, 3)), [b, seq, h * d])
    return [cast(rb, y, ft), *present]
