"""The decoder ops onnxruntime-genai's model builder writes (Llama, Mistral, Qwen, Phi, Gemma):
GroupQueryAttention with its KV cache and fused rotary embedding, the skip (residual) and plain
RMS and layer norms, and onnxruntime's own RotaryEmbedding (domain com.microsoft, except
SimplifiedLayerNormalization, which onnxruntime registers in the default domain).

Semantics follow onnxruntime's CPU kernels, checked against onnxruntime on random inputs
(tests/test_genai_ops.py). GroupQueryAttention's KV cache:

* past_key/past_value (B, kv_heads, P, head) hold the keys and values of the tokens before this
  call, right-padded to P; seqlens_k[b] + 1 is row b's total length after it and
  total_sequence_length the longest. present_* have length max(P, total_sequence_length): with
  P = max_length (onnxruntime-genai's `past_present_share_buffer`) they are the same buffers, and
  this call writes only its own rows into them.
* a first prompt (sequence length == total_sequence_length) has no past; otherwise one new token
  per row (decoding), or, for one row, a chunk after a past ("subsequent prompt").
* query position s of row b sits at past_b + s (past_b = seqlens_k[b] + 1 - S, or 0 for a first
  prompt): it attends causally to keys [0, past_b + s] below the row's length (the last
  local_window_size of them, its own included, when local_window_size > 0), and rotary
  embedding rotates it and its key by that position.
* present_* hold each row's valid past, then its new rows, and zeros after: the rows past a
  row's length are never read, so a caller that passes one buffer as past and present (the
  generator) may leave them as they were.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .registry import CACHE_UPDATE, NN, Attr, Tier, op

MS = "com.microsoft"
FLT = frozenset({dt.float32, dt.float16, dt.bfloat16})
I32 = frozenset({dt.int32})
I64 = frozenset({dt.int64})


def _dim(shape, i):
    return None if shape is None or len(shape) <= i else shape[i]


# -- GroupQueryAttention -------------------------------------------------------------------------

def _gqa_heads(ctx):
    """(head_size, packed) from the query's hidden size and the head counts."""
    a = ctx.attrs
    h, kvh = a["num_heads"], a["kv_num_heads"]
    if h <= 0 or kvh <= 0 or h % kvh:
        raise ctx.error(f"num_heads {h} must be a positive multiple of kv_num_heads {kvh}")
    packed = not ctx.has(1)
    if ctx.has(1) != ctx.has(2):
        raise ctx.error("key and value must be given together (or both left out for a packed QKV query)")
    hidden = _dim(ctx.shape(0), 2)
    if not isinstance(hidden, int):
        return None, packed
    parts = h + 2 * kvh if packed else h
    if hidden % parts:
        raise ctx.error(f"query hidden size {hidden} is not a multiple of {parts} heads")
    return hidden // parts, packed


def _gqa_infer(ctx):
    a = ctx.attrs
    for i, name in ((0, "query"), (1, "key"), (2, "value")):
        if ctx.has(i) and ctx.rank(i) not in (None, 3):
            raise ctx.error(f"{name} must have rank 3 (batch, sequence, hidden), got shape {list(ctx.shape(i))}")
    if ctx.has(3) != ctx.has(4):
        raise ctx.error("past_key and past_value must be given together")
    if a["do_rotary"] and not (ctx.has(7) and ctx.has(8)):
        raise ctx.error("do_rotary needs cos_cache and sin_cache")
    for i in (9, 10, 11):
        if ctx.has(i):
            raise ctx.error(f"input {i} ({('position_ids', 'attention_bias', 'head_sink')[i - 9]}) is not "
                            "supported yet")
    if a["smooth_softmax"] or a["qk_output"]:
        raise ctx.error("smooth_softmax and qk_output are not supported yet")
    head, packed = _gqa_heads(ctx)
    q = ctx.shape(0)
    batch, seq = _dim(q, 0), _dim(q, 1)
    kvh = a["kv_num_heads"]
    past = ctx.shape(3) if ctx.has(3) else None
    if past is not None:
        if len(past) != 4 or (isinstance(past[1], int) and past[1] != kvh):
            raise ctx.error(f"past_key shape {list(past)} must be (batch, kv_num_heads, past_len, head_size)")
        if isinstance(head, int) and isinstance(past[3], int) and past[3] != head:
            raise ctx.error(f"past_key head size {past[3]} differs from the query's {head}")
    past_len = _dim(past, 2) if past is not None else 0
    total = ctx.value(6)
    present = None
    if total is not None and isinstance(past_len, int):
        present = max(int(np.asarray(total).reshape(-1)[0]), past_len)
    h = a["num_heads"]
    kv = dt.TensorType((batch, kvh, present, head), ctx.dtype(0))
    return [dt.TensorType((batch, seq, h * head if isinstance(head, int) else None), ctx.dtype(0)), kv, kv]


def gqa_positions(seqlens_k, seq: int, first: bool) -> np.ndarray:
    """(B, S) absolute position of each query: after the row's past, or from 0 for a first
    prompt (its padding included)."""
    total = seqlens_k.astype(np.int64) + 1
    s = np.arange(seq)[None, :]
    if first:
        return np.broadcast_to(s, (total.size, seq))
    return (total - seq)[:, None] + s


def _rotate(x, cos, sin, interleaved):
    """x (B, H, S, D) rotated by per-(B, S) angles; cos/sin (B, S, rot/2)."""
    rot = 2 * cos.shape[-1]
    part = x[..., :rot]
    c, s = cos[:, None], sin[:, None]
    if interleaved:
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:
        x1, x2 = part[..., :rot // 2], part[..., rot // 2:]
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    out = np.stack([real, imag], -1).reshape(part.shape) if interleaved else np.concatenate([real, imag], -1)
    return np.concatenate([out.astype(x.dtype), x[..., rot:]], -1)


def _gqa_ref(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
             total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None,
             attention_bias=None, head_sink=None, *, num_heads, kv_num_heads, scale, softcap,
             local_window_size, do_rotary, rotary_interleaved, smooth_softmax, qk_output):
    b, seq, hidden = query.shape
    h, kvh = num_heads, kv_num_heads
    if key is None:
        d = hidden // (h + 2 * kvh)
        qkv = query.reshape(b, seq, h + 2 * kvh, d).transpose(0, 2, 1, 3)
        q, k, v = qkv[:, :h], qkv[:, h:h + kvh], qkv[:, h + kvh:]
    else:
        d = hidden // h
        q = query.reshape(b, seq, h, d).transpose(0, 2, 1, 3)
        k = key.reshape(b, seq, kvh, d).transpose(0, 2, 1, 3)
        v = value.reshape(b, seq, kvh, d).transpose(0, 2, 1, 3)
    total = int(np.asarray(total_sequence_length).reshape(-1)[0])
    p = 0 if past_key is None else past_key.shape[2]
    first = seq == total
    if not first and seq != 1 and b != 1:
        raise ValueError(f"sequence length {seq} after a past needs batch 1, got batch {b}")
    if not first and total != p + seq and total > p:  # neither a dynamic cache nor a static one
        raise ValueError(f"total_sequence_length {total} must be the past length {p} + the sequence length "
                         f"{seq} (a cache of the past alone), or at most {p} (a buffer for max_length)")
    lens = np.asarray(seqlens_k).reshape(-1).astype(np.int64) + 1  # each row's total length
    if lens.size != b:
        raise ValueError(f"seqlens_k has {lens.size} entries for batch {b}")
    past_len = np.zeros(b, np.int64) if first else lens - seq
    if (past_len < 0).any() or (lens > max(p, total)).any():
        raise ValueError(f"seqlens_k {list(lens - 1)} do not fit sequence length {seq}, past length {p} and "
                         f"total_sequence_length {total}")
    pos = gqa_positions(np.asarray(seqlens_k).reshape(-1), seq, first)
    if do_rotary:
        if pos.max(initial=0) >= cos_cache.shape[0]:
            raise ValueError(f"position {int(pos.max())} is past the rotary caches' {cos_cache.shape[0]} rows")
        cos, sin = cos_cache[pos], sin_cache[pos]
        q, k = _rotate(q, cos, sin, rotary_interleaved), _rotate(k, cos, sin, rotary_interleaved)
    t = max(p, total)
    present_k = np.zeros((b, kvh, t, d), query.dtype)
    present_v = np.zeros((b, kvh, t, d), query.dtype)
    f32 = np.float32
    alpha = f32(1 / np.sqrt(d) if not scale else scale)
    out = np.zeros((b, h, seq, d), f32)
    for r in range(b):
        n = int(past_len[r])  # the row's valid past, then its new rows; the rest stays zero
        if n:
            present_k[r, :, :n], present_v[r, :, :n] = past_key[r, :, :n], past_value[r, :, :n]
        present_k[r, :, n:n + seq], present_v[r, :, n:n + seq] = k[r], v[r]
        keys = present_k[r].astype(f32)[np.arange(h) // (h // kvh)]  # (H, T, D)
        vals = present_v[r].astype(f32)[np.arange(h) // (h // kvh)]
        logits = np.einsum("hsd,htd->hst", q[r].astype(f32), keys) * alpha
        if softcap > 0:
            logits = softcap * np.tanh(logits / softcap)
        qpos = n + np.arange(seq)[:, None]
        kpos = np.arange(t)[None, :]
        allowed = (kpos <= qpos) & (kpos < lens[r])  # a padded query sees the row's keys only
        if local_window_size >= 0:  # the last local_window_size keys, its own included
            allowed &= kpos > qpos - local_window_size
        logits = np.where(allowed[None], logits, -np.inf)
        m = logits.max(-1, keepdims=True)
        e = np.exp(logits - m)
        out[r] = np.einsum("hst,htd->hsd", e / e.sum(-1, keepdims=True), vals)
    y = out.transpose(0, 2, 1, 3).reshape(b, seq, h * d).astype(query.dtype)
    return y, present_k, present_v


op("GroupQueryAttention",
   inputs=("query:T", "key:T?", "value:T?", "past_key:T?", "past_value:T?", "seqlens_k:M", "total_sequence_length:M",
           "cos_cache:T?", "sin_cache:T?", "position_ids:P?", "attention_bias:T?", "head_sink:T?"),
   outputs=("output:T", "present_key:T", "present_value:T"),
   types={"T": FLT, "M": I32, "P": I64},
   attrs=(Attr("num_heads", "int"), Attr("kv_num_heads", "int"), Attr("scale", "float", 0.0),
          Attr("softcap", "float", 0.0), Attr("local_window_size", "int", -1), Attr("do_rotary", "int", 0),
          Attr("rotary_interleaved", "int", 0), Attr("smooth_softmax", "int", 0), Attr("qk_output", "int", 0)),
   infer=_gqa_infer, reference=_gqa_ref, groups={NN, CACHE_UPDATE}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="Causal multi-head attention with fewer key/value heads than query heads, a KV cache that the "
       "call appends to (in place when past and present are one buffer), and optional rotary "
       "embedding, sliding window and softcap (onnxruntime's contrib op).")


# -- RMS and layer norms, with and without the residual (skip) ---------------------------------

def _simplified_infer(ctx):
    x = ctx.input(0)
    if x.rank == 0:
        raise ctx.error("X must have rank >= 1")
    axis = ctx.axis(ctx.attrs["axis"], x.rank) if x.rank is not None else None
    outs = [x]
    if ctx.num_outputs > 1:  # inv_std_var: one per normalised row, dims from axis on kept as 1
        shape = None if x.shape is None or axis is None else tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
        outs.append(dt.TensorType(shape, dt.float32))
    return outs


def _rms(x, axes, epsilon):
    """x in float32, its inverse RMS over `axes` (kept)."""
    xf = x.astype(np.float32)
    inv = 1 / np.sqrt((xf * xf).mean(axis=axes, keepdims=True) + np.float32(epsilon))
    return xf, inv.astype(np.float32)


def _simplified_ref(x, scale, *, axis, epsilon, stash_type):
    axes = tuple(range(axis % x.ndim, x.ndim))
    xf, inv = _rms(x, axes, epsilon)
    return (xf * inv * scale.astype(np.float32)).astype(x.dtype), inv


op("SimplifiedLayerNormalization", inputs=("X:T", "scale:T"), outputs=("Y:T", "inv_std_var:U?"),
   types={"T": FLT, "U": frozenset({dt.float32})},
   attrs=(Attr("axis", "int", -1), Attr("epsilon", "float", 1e-5), Attr("stash_type", "int", 1)),
   infer=_simplified_infer, reference=_simplified_ref, groups={NN}, tier=Tier.HIGH, onnx_since=1,
   doc="RMS normalisation (onnxruntime's contrib op in the default domain): X / sqrt(mean(X^2 over dims "
       "[axis, rank)) + epsilon) * scale, in float32; optionally the inverse RMS.")


def _skip_infer(ctx):
    x = ctx.input(0)
    if x.rank is not None and x.rank not in (2, 3):
        raise ctx.error(f"input must have rank 2 or 3, got {x}")
    s = ctx.shape(1)
    if s is not None and x.shape is not None and tuple(s) != tuple(x.shape):
        tail = tuple(x.shape[-len(s):]) if len(s) <= len(x.shape) else None
        if tail != tuple(s) and not (len(s) == len(x.shape) and s[0] == 1 and tuple(s[1:]) == tuple(x.shape[1:])):
            raise ctx.error(f"skip shape {list(s)} must be the input's {list(x.shape)} or broadcast to it")
    hidden = None if x.shape is None else x.shape[-1]
    for i, name in ((2, "gamma"), (3, "beta" if ctx.op.name == "SkipLayerNormalization" else "bias"), (4, "bias")):
        if i < len(ctx.inputs) and ctx.has(i) and ctx.shape(i) is not None:
            if len(ctx.shape(i)) != 1 or (isinstance(hidden, int) and ctx.shape(i)[0] != hidden):
                raise ctx.error(f"{name} must have shape [{hidden}], got {list(ctx.shape(i))}")
    stats = dt.TensorType(None if x.shape is None else tuple(x.shape[:-1]) + (1,), dt.float32)
    return [x, stats, stats, x][:ctx.num_outputs]


def _skip_simplified_ref(x, skip, gamma, bias=None, *, epsilon):
    total = x + skip + (bias if bias is not None else 0)
    xf, inv = _rms(total, (-1,), epsilon)
    y = (xf * inv * gamma.astype(np.float32)).astype(x.dtype)
    return y, np.zeros_like(inv), inv, total.astype(x.dtype)


op("SkipSimplifiedLayerNormalization", inputs=("input:T", "skip:T", "gamma:T", "bias:T?"),
   outputs=("output:T", "mean:U?", "inv_std_var:U?", "input_skip_bias_sum:T?"),
   types={"T": FLT, "U": frozenset({dt.float32})}, attrs=(Attr("epsilon", "float", 1e-5),),
   infer=_skip_infer, reference=_skip_simplified_ref, groups={NN}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="The residual add, then RMS normalisation over the last dim: s = input + skip (+ bias); "
       "s / sqrt(mean(s^2) + epsilon) * gamma; also s itself (onnxruntime's contrib op).")


def _skip_layer_ref(x, skip, gamma, beta=None, bias=None, *, epsilon):
    total = x + skip + (bias if bias is not None else 0)
    tf = total.astype(np.float32)
    mean = tf.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((tf - mean) ** 2).mean(-1, keepdims=True) + np.float32(epsilon))
    y = (tf - mean) * inv * gamma.astype(np.float32) + (beta.astype(np.float32) if beta is not None else 0)
    return y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32), total.astype(x.dtype)


op("SkipLayerNormalization", inputs=("input:T", "skip:T", "gamma:T", "beta:T?", "bias:T?"),
   outputs=("output:T", "mean:U?", "inv_std_var:U?", "input_skip_bias_sum:T?"),
   types={"T": FLT, "U": frozenset({dt.float32})}, attrs=(Attr("epsilon", "float", 1e-12),),
   infer=_skip_infer, reference=_skip_layer_ref, groups={NN}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="The residual add, then layer normalisation over the last dim: s = input + skip (+ bias); "
       "(s - mean) / sqrt(var + epsilon) * gamma (+ beta); also s itself (onnxruntime's contrib op).")


# -- onnxruntime's RotaryEmbedding -------------------------------------------------------------

def _ms_rotary_infer(ctx):
    x = ctx.shape(0)
    if x is not None and len(x) not in (3, 4):
        raise ctx.error(f"input must have rank 3 (B, S, hidden) or 4 (B, heads, S, head), got {list(x)}")
    if x is not None and len(x) == 3 and not ctx.attrs["num_heads"]:
        ctx_cos = ctx.shape(2)
        if ctx_cos is None or not isinstance(ctx_cos[-1], int):
            raise ctx.error("a 3-D input needs num_heads, or a cos_cache of known width")
    if ctx.attrs["is_packed_batching"]:
        raise ctx.error("is_packed_batching is not supported yet")
    return [ctx.input(0)]


def _ms_rotary_ref(x, position_ids, cos_cache, sin_cache, *, interleaved, num_heads, rotary_embedding_dim,
                   is_packed_batching, scale):
    b = x.shape[0]
    seq = x.shape[2] if x.ndim == 4 else x.shape[1]
    pos = np.asarray(position_ids).astype(np.int64)
    if pos.size == 1 and (pos.ndim <= 1):  # an offset: positions offset .. offset + S - 1
        pos = np.broadcast_to(pos.reshape(-1)[0] + np.arange(seq), (b, seq))
    rot = rotary_embedding_dim or 2 * cos_cache.shape[-1]
    if x.ndim == 4:
        xh = x
    else:
        heads = num_heads or x.shape[2] // (2 * cos_cache.shape[-1])
        xh = x.reshape(b, seq, heads, -1).transpose(0, 2, 1, 3)
    if pos.max(initial=0) >= cos_cache.shape[0] or pos.min(initial=0) < 0:
        raise ValueError(f"position ids must lie in [0, {cos_cache.shape[0]}), got {int(pos.min())}..{int(pos.max())}")
    cos, sin = cos_cache[pos][..., :rot // 2], sin_cache[pos][..., :rot // 2]
    y = _rotate(xh, cos, sin, interleaved)
    return y if x.ndim == 4 else y.transpose(0, 2, 1, 3).reshape(x.shape)


op("RotaryEmbedding", inputs=("input:T", "position_ids:M", "cos_cache:T", "sin_cache:T"), outputs=("output:T",),
   types={"T": FLT, "M": I64},
   attrs=(Attr("interleaved", "int", 0), Attr("num_heads", "int", 0), Attr("rotary_embedding_dim", "int", 0),
          Attr("is_packed_batching", "int", 0), Attr("scale", "float", 1.0)),
   infer=_ms_rotary_infer, reference=_ms_rotary_ref, groups={NN}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="onnxruntime's rotary embedding: rotates pairs of each head's first rotary_embedding_dim features "
       "by the angles of position_ids ((B, S), or one offset) in the cos/sin caches.")
