"""Attention family: Attention (scaled dot-product with GQA, masks, KV cache, causal and sliding
windows, softcap), LinearAttention (recurrent linear/gated/delta rules), FlexAttention (score and
probability modifier sub-graphs), RotaryEmbedding and SwiGLU."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .registry import ACTIVATION, ELEMENTWISE, NN, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
FLT3 = frozenset({dt.float32, dt.float16, dt.bfloat16})
_SOFTMAX_PRECISIONS = frozenset({dt.float32, dt.float16, dt.float64, dt.bfloat16})


# -- dim arithmetic on possibly-unknown dims ------------------------------------------------------

def _div(ctx, a, b, what):
    if isinstance(a, int) and isinstance(b, int):
        if b <= 0 or a % b:
            raise ctx.error(f"{what}: {a} is not divisible by {b}")
        return a // b
    return None


def _mul(a, b):
    return a * b if isinstance(a, int) and isinstance(b, int) else None


def _add(a, b):
    return a + b if isinstance(a, int) and isinstance(b, int) else None


def _same(ctx, what, a, b):
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise ctx.error(f"{what}: {a} != {b}")


def _conflict(shape, want) -> bool:
    """Whether a shape contradicts an expected one (different rank, or two known dims differ)."""
    return len(shape) != len(want) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                          for a, b in zip(shape, want))


def _heads_first(x, heads):
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hd = x.shape
    return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def _heads_last(x):
    """(B, H, S, D) -> (B, S, H*D)."""
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def _matmul(a, b):
    # numpy computes some 16-bit types in float32; keep the operand's type as an ONNX MatMul would
    return np.matmul(a, b).astype(a.dtype)


def _softmax(x):
    """Softmax over the last axis; an all -inf row gives zeros rather than NaN."""
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0, m).astype(x.dtype))
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s).astype(x.dtype)


def _check_scale(ctx):
    scale = ctx.attrs["scale"]
    if scale is not None and not scale > 0:
        raise ctx.error(f"scale must be positive (sqrt(scale) multiplies both Q and K), got {scale}")


# -- Attention -----------------------------------------------------------------------------------

def _attention_infer(ctx):
    a = ctx.attrs
    if a["qk_matmul_output_mode"] not in (0, 1, 2, 3):
        raise ctx.error(f"qk_matmul_output_mode must be 0..3, got {a['qk_matmul_output_mode']}")
    for w in ("left_window_size", "right_window_size"):
        if a[w] < -1:
            raise ctx.error(f"{w} must be -1 or nonnegative, got {a[w]}")
    if a["softmax_precision"] is not None and a["softmax_precision"] not in _SOFTMAX_PRECISIONS:
        raise ctx.error(f"softmax_precision must be a float type, got {a['softmax_precision']}")
    _check_scale(ctx)
    if a["softcap"] < 0:
        raise ctx.error(f"softcap must be nonnegative (0 = off), got {a['softcap']}")
    if ctx.has(4) != ctx.has(5):
        raise ctx.error("past_key and past_value must be given together")
    if ctx.has(6) and ctx.has(4):
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    ranks = {r for r in (ctx.rank(0), ctx.rank(1), ctx.rank(2)) if r is not None}
    if len(ranks) > 1:
        raise ctx.error(f"Q, K and V must have the same rank, got {[ctx.rank(i) for i in range(3)]}")
    rank = ranks.pop() if ranks else None
    if rank not in (None, 3, 4):
        raise ctx.error(f"Q, K and V must have rank 3 or 4, got {rank}")
    hq, hkv = a["q_num_heads"], a["kv_num_heads"]
    if rank == 4 and (hq is not None or hkv is not None):
        raise ctx.error("q_num_heads/kv_num_heads are only for 3-D (packed heads) inputs")
    if rank == 3 and (hq is None or hkv is None):
        raise ctx.error("3-D inputs need both q_num_heads and kv_num_heads")
    t1, t2 = ctx.dtype(0), ctx.dtype(2)
    if rank is None:
        return [dt.TensorType(None, t1), dt.TensorType((None,) * 4, t1),
                dt.TensorType((None,) * 4, t2), dt.TensorType((None,) * 4, t1)]
    q, k, v = (ctx.shape(i) or (None,) * rank for i in range(3))
    if rank == 3:
        batch, sq, skv = q[0], q[1], k[1]
        d = _div(ctx, q[2], hq, "Q hidden size / q_num_heads")
        dk = _div(ctx, k[2], hkv, "K hidden size / kv_num_heads")
        dv = _div(ctx, v[2], hkv, "V hidden size / kv_num_heads")
    else:
        batch, hq, sq, d = q
        _, hkv, skv, dk = k
        dv = v[3]
        _same(ctx, "K and V head counts", hkv, v[1])
    _same(ctx, "Q and K head sizes", d, dk)
    _same(ctx, "K and V sequence lengths", skv, v[2] if rank == 4 else v[1])
    for i in (1, 2):
        _same(ctx, "batch sizes of Q and K/V", batch, (ctx.shape(i) or (None,))[0])
    if isinstance(hq, int) and isinstance(hkv, int) and (hkv <= 0 or hq % hkv):
        raise ctx.error(f"q_num_heads {hq} must be a multiple of kv_num_heads {hkv}")
    total = skv
    if ctx.has(4):
        for i, name, last in ((4, "past_key", dk), (5, "past_value", dv)):
            p = ctx.shape(i)
            if p is not None and _conflict(p, (batch, hkv, None, last)):
                raise ctx.error(f"{name} shape {list(p)} must be (batch, kv_num_heads, past_len, head_size)")
        past = (ctx.shape(4) or (None,) * 4)[2]
        total = _add(past, skv)
    if ctx.has(3) and ctx.shape(3) is not None:
        m = ctx.shape(3)
        if len(m) > 4 or (m and isinstance(m[-1], int) and isinstance(total, int) and m[-1] > total):
            raise ctx.error(f"attn_mask shape {list(m)} does not fit (batch, heads, {sq}, {total})")
    y = (batch, sq, _mul(hq, dv)) if rank == 3 else (batch, hq, sq, dv)
    return [dt.TensorType(y, t1), dt.TensorType((batch, hkv, total, dk), t1),
            dt.TensorType((batch, hkv, total, dv), t2), dt.TensorType((batch, hq, sq, total), t1)]


def _allowed_and_bias(attn_mask, nonpad, batch, sq, total, offset, is_causal, left, right, ftype):
    """Which keys each query may see (bool, broadcastable to (B, H, Sq, total)) and the additive
    float bias from a float mask. `offset` (scalar or per-batch (B,)) places query i at absolute
    position i + offset: the count of valid keys before the query block."""
    qpos = np.arange(sq).reshape(1, 1, sq, 1) + np.reshape(offset, (-1, 1, 1, 1))
    kpos = np.arange(total).reshape(1, 1, 1, total)
    allowed = np.ones((1, 1, sq, total), bool)
    if is_causal:
        allowed = allowed & (kpos <= qpos)
    if left >= 0:
        allowed = allowed & (kpos >= qpos - left)
    if right >= 0:
        allowed = allowed & (kpos <= qpos + right)
    if nonpad is not None:
        allowed = allowed & (kpos < nonpad.reshape(batch, 1, 1, 1))
    bias = np.zeros((), ftype)
    if attn_mask is not None:
        short = total - attn_mask.shape[-1]  # a short mask is padded with "not allowed"
        if short:
            fill = False if attn_mask.dtype == np.bool_ else -np.inf
            attn_mask = np.pad(attn_mask, [(0, 0)] * (attn_mask.ndim - 1) + [(0, short)],
                               constant_values=fill)
        if attn_mask.dtype == np.bool_:
            allowed = allowed & attn_mask
        else:
            bias = attn_mask.astype(ftype)
    return allowed, bias


def _attention_ref(Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, *,
                   scale, is_causal, q_num_heads, kv_num_heads, softmax_precision, softcap,
                   qk_matmul_output_mode, left_window_size, right_window_size):
    t1 = Q.dtype
    packed = Q.ndim == 3
    if packed:
        Q, K, V = _heads_first(Q, q_num_heads), _heads_first(K, kv_num_heads), _heads_first(V, kv_num_heads)
    if past_key is not None:
        K = np.concatenate([past_key, K], axis=2)
        V = np.concatenate([past_value, V], axis=2)
    present_key, present_value = K, V
    batch, hq, sq, d = Q.shape
    hkv, total = K.shape[1], K.shape[2]
    if past_key is not None:
        offset = past_key.shape[2]
    elif nonpad_kv_seqlen is not None:  # external cache: the valid keys end where the queries end
        offset = nonpad_kv_seqlen.astype(np.int64) - sq
    else:
        offset = 0
    allowed, bias = _allowed_and_bias(attn_mask, nonpad_kv_seqlen, batch, sq, total, offset, is_causal,
                                      left_window_size, right_window_size, t1)
    bias = np.where(allowed, bias, np.asarray(-np.inf, t1))
    if hq != hkv:  # grouped-query: query head h uses K/V head h // (hq / hkv)
        K, V = np.repeat(K, hq // hkv, axis=1), np.repeat(V, hq // hkv, axis=1)
    # scale sqrt(scale) into both Q and K, which keeps Q K^T in range for 16-bit types
    s = np.asarray(np.sqrt(1 / np.sqrt(d) if scale is None else scale), t1)
    raw = _matmul(Q * s, np.swapaxes(K * s, -1, -2))
    capped = (softcap * np.tanh(raw / softcap)).astype(t1) if softcap > 0 else raw
    logits = (capped + bias).astype(t1)
    probs = _softmax(logits.astype(t1 if softmax_precision is None else softmax_precision.np))
    # a query that may see no key at all gets a zero row (decided on the mask, not on the logits)
    empty = np.all(np.isneginf(bias), axis=-1, keepdims=True)
    probs = np.where(empty, 0, probs).astype(probs.dtype)
    qk = (raw, capped, logits, probs)[qk_matmul_output_mode].astype(t1)
    y = _matmul(probs.astype(t1), V.astype(t1))
    if packed:
        y = _heads_last(y)
    return y, present_key, present_value, qk


def _attention_from_onnx(ic):
    attrs = dict(ic.attrs)
    q = ic.inputs[0].type
    # before opset 25 the head-count attributes were allowed (and ignored) with 4-D inputs
    if ic.opset < 25 and getattr(q, "rank", None) == 4:
        attrs.pop("q_num_heads", None)
        attrs.pop("kv_num_heads", None)
    return ic.emit("Attention", ic.inputs, attrs)


op("Attention",
   inputs=("Q:T1", "K:T1", "V:T2", "attn_mask:U?", "past_key:T1?", "past_value:T2?",
           "nonpad_kv_seqlen:I?"),
   outputs=("Y:T1", "present_key:T1?", "present_value:T2?", "qk_matmul_output:T1?"),
   types={"T1": FLT, "T2": FLT, "U": dt.NUMERIC | {dt.bool_}, "I": frozenset({dt.int64})},
   attrs=(Attr("is_causal", "int", 0), Attr("kv_num_heads", "int", None), Attr("q_num_heads", "int", None),
          Attr("qk_matmul_output_mode", "int", 0), Attr("scale", "float", None),
          Attr("softcap", "float", 0.0), Attr("softmax_precision", "dtype", None),
          Attr("left_window_size", "int", -1), Attr("right_window_size", "int", -1)),
   infer=_attention_infer, reference=_attention_ref, from_onnx=_attention_from_onnx,
   groups={NN}, tier=Tier.HIGH, onnx_since=23,
   doc="softmax(softcap(Q K^T * scale) + mask) V over heads (MHA/GQA/MQA), with a bool or additive "
       "mask, bottom-right causal and sliding-window masking, and an optional KV cache.")


# -- LinearAttention -----------------------------------------------------------------------------

_UPDATE_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
                 "gated_delta": (True, True)}  # rule -> (decays the state, delta correction)


def _linear_attention_infer(ctx):
    a = ctx.attrs
    if a["update_rule"] not in _UPDATE_RULES:
        raise ctx.error(f"update_rule must be one of {sorted(_UPDATE_RULES)}, got '{a['update_rule']}'")
    gated, delta = _UPDATE_RULES[a["update_rule"]]
    for i, name, need in ((4, "decay", gated), (5, "beta", delta)):
        if need and not ctx.has(i):
            raise ctx.error(f"update_rule '{a['update_rule']}' needs the {name} input")
        if not need and ctx.has(i):
            raise ctx.error(f"update_rule '{a['update_rule']}' does not take the {name} input")
    hq, hkv = a["q_num_heads"], a["kv_num_heads"]
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ctx.error(f"q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}")
    for i, name in ((0, "query"), (1, "key"), (2, "value"), (4, "decay"), (5, "beta")):
        if ctx.has(i) and ctx.rank(i) not in (None, 3):
            raise ctx.error(f"{name} must have rank 3 (B, T, H*D), got shape {list(ctx.shape(i))}")
    q, k, v = (ctx.shape(i) or (None,) * 3 for i in range(3))
    batch, seq = q[0], q[1]
    dk = _div(ctx, q[2], hq, "query hidden size / q_num_heads")
    _same(ctx, "key hidden size", k[2], _mul(hkv, dk))
    dv = _div(ctx, v[2], hkv, "value hidden size / kv_num_heads")
    for i in (1, 2, 4, 5):
        if ctx.has(i) and ctx.shape(i) is not None:
            _same(ctx, "batch sizes", batch, ctx.shape(i)[0])
            _same(ctx, "sequence lengths", seq, ctx.shape(i)[1])
    if ctx.has(4) and ctx.shape(4) is not None:
        last = ctx.shape(4)[2]
        if isinstance(last, int) and last != hkv and last != _mul(hkv, dk):
            raise ctx.error(f"decay last dim {last} must be kv_num_heads ({hkv}) or kv_num_heads*d_k")
    if ctx.has(5) and ctx.shape(5) is not None:
        last = ctx.shape(5)[2]
        if isinstance(last, int) and last not in (hkv, 1):
            raise ctx.error(f"beta last dim {last} must be kv_num_heads ({hkv}) or 1")
    state = (batch, hkv, dk, dv)
    if ctx.has(3) and ctx.shape(3) is not None:
        p = ctx.shape(3)
        if _conflict(p, state):
            raise ctx.error(f"past_state shape {list(p)} must be (B, kv_num_heads, d_k, d_v) = {list(state)}")
    sdt = ctx.dtype(3) if ctx.has(3) else ctx.dtype(0)
    return [dt.TensorType((batch, seq, _mul(hq, dv)), ctx.dtype(0)), dt.TensorType(state, sdt)]


def _linear_attention_ref(query, key, value, past_state=None, decay=None, beta=None, *, chunk_size,
                          kv_num_heads, q_num_heads, scale, update_rule):
    # chunk_size only tunes chunk-parallel kernels; the result is the sequential recurrence below
    gated, delta = _UPDATE_RULES[update_rule]
    f32 = np.float32  # state and products accumulate in float32 whatever the input type
    b, t, _ = query.shape
    q = _heads_first(query, q_num_heads).astype(f32)
    k = _heads_first(key, kv_num_heads).astype(f32)
    v = _heads_first(value, kv_num_heads).astype(f32)
    dk, dv = q.shape[-1], v.shape[-1]
    group = q_num_heads // kv_num_heads
    if decay is not None:  # (B, T, H_kv) per-head or (B, T, H_kv*d_k) per-key-dim -> (B, H_kv, T, 1|d_k)
        g = decay.reshape(b, t, kv_num_heads, -1).transpose(0, 2, 1, 3).astype(f32)
    if beta is not None:  # (B, T, H_kv|1) -> (B, H_kv|1, T, 1)
        bt = beta.reshape(b, t, -1, 1).transpose(0, 2, 1, 3).astype(f32)
    state = (np.zeros((b, kv_num_heads, dk, dv), f32) if past_state is None
             else past_state.astype(f32))
    s = f32(1 / np.sqrt(dk) if not scale else scale)
    out = np.zeros((b, q_num_heads, t, dv), f32)
    for i in range(t):
        k_t, v_t = k[:, :, i], v[:, :, i]
        if gated:
            state = state * np.exp(g[:, :, i])[..., None]
        if delta:  # write only the part of v_t the state does not already predict from k_t
            v_t = bt[:, :, i] * (v_t - np.einsum("bhkv,bhk->bhv", state, k_t))
        state = state + k_t[..., :, None] * v_t[..., None, :]
        read = np.repeat(state, group, axis=1) if group > 1 else state
        out[:, :, i] = s * np.einsum("bhk,bhkv->bhv", q[:, :, i], read)
    sdt = query.dtype if past_state is None else past_state.dtype
    return _heads_last(out).astype(query.dtype), state.astype(sdt)


op("LinearAttention",
   inputs=("query:T", "key:T", "value:T", "past_state:S?", "decay:T?", "beta:T?"),
   outputs=("output:T", "present_state:S"), types={"T": FLT3, "S": FLT3},
   attrs=(Attr("chunk_size", "int", 64), Attr("kv_num_heads", "int"), Attr("q_num_heads", "int"),
          Attr("scale", "float", 0.0), Attr("update_rule", "string", "gated_delta")),
   infer=_linear_attention_infer, reference=_linear_attention_ref,
   groups={NN}, tier=Tier.HIGH, onnx_since=27,
   doc="Linear attention as a recurrence over a (d_k x d_v) state per KV head (linear, gated, delta or "
       "gated-delta update); returns the outputs and the final state.")


# -- FlexAttention -------------------------------------------------------------------------------

def _flex_compute_type(in_dtype, precision):
    if precision is not None:
        return precision
    return dt.float64 if in_dtype == dt.float64 else dt.float32


def _flex_infer(ctx):
    for i, name in enumerate("QKV"):
        if ctx.rank(i) not in (None, 4):
            raise ctx.error(f"{name} must have rank 4, got shape {list(ctx.shape(i))}")
    _check_scale(ctx)
    prec = ctx.attrs["softmax_precision"]
    if prec is not None and prec not in _SOFTMAX_PRECISIONS:
        raise ctx.error(f"softmax_precision must be a float type, got {prec}")
    q, k, v = (ctx.shape(i) or (None,) * 4 for i in range(3))
    _same(ctx, "Q and K head sizes", q[3], k[3])
    _same(ctx, "K and V head counts", k[1], v[1])
    _same(ctx, "K and V sequence lengths", k[2], v[2])
    if isinstance(q[1], int) and isinstance(k[1], int) and (k[1] == 0 or q[1] % k[1]):
        raise ctx.error(f"Q heads {q[1]} must be a multiple of K/V heads {k[1]}")
    ct = _flex_compute_type(ctx.dtype(0), prec)
    for name in ("score_mod", "prob_mod"):
        g = ctx.attrs[name]
        if g is None:
            continue
        if len(g.inputs) != 1 or len(g.outputs) != 1:
            raise ctx.error(f"{name} must take one input and give one output, "
                            f"got {len(g.inputs)} and {len(g.outputs)}")
        for what, t in (("input", g.inputs[0].type), ("output", g.outputs[0].type)):
            if isinstance(t, dt.TensorType) and t.dtype != ct:
                raise ctx.error(f"{name} {what} is {t.dtype.name}, expected the softmax precision {ct.name}")
    return [dt.TensorType((q[0], q[1], q[2], v[3]), ctx.dtype(0))]


def _run_mod(graph, x, scope):
    from ..interpreter import run_graph

    out = run_graph(graph, {graph.inputs[0].name: x, **(scope or {})})
    y = np.asarray(next(iter(out.values())))
    if y.shape != x.shape:
        raise ValueError(f"sub-graph '{graph.name}' changed the shape {list(x.shape)} to {list(y.shape)}")
    return y.astype(x.dtype)


def _flex_ref(Q, K, V, *, scale, score_mod, prob_mod, softmax_precision, _scope=None):
    ct = _flex_compute_type(dt.from_numpy(Q.dtype), softmax_precision).np
    group = Q.shape[1] // K.shape[1]
    K, V = np.repeat(K, group, axis=1), np.repeat(V, group, axis=1)
    s = np.asarray(np.sqrt(np.float32(1 / np.sqrt(Q.shape[3]) if scale is None else scale)), Q.dtype)
    scores = _matmul(Q * s, np.swapaxes(K * s, -1, -2)).astype(ct)
    if score_mod is not None:
        scores = _run_mod(score_mod, scores, _scope)
    probs = _softmax(scores)
    if prob_mod is not None:
        probs = _run_mod(prob_mod, probs, _scope)
    return np.matmul(probs, V.astype(ct)).astype(Q.dtype)


op("FlexAttention", inputs=("Q:T1", "K:T1", "V:T1"), outputs=("Y:T1",), types={"T1": FLT},
   attrs=(Attr("scale", "float", None), Attr("score_mod", "graph", None), Attr("prob_mod", "graph", None),
          Attr("softmax_precision", "dtype", None)),
   infer=_flex_infer, reference=_flex_ref, groups={NN}, tier=Tier.HIGH,
   domain="ai.onnx.preview", onnx_since=1, from_onnx=lambda ic: ic.emit(ic.opdef, ic.inputs, ic.attrs),
   doc="softmax(score_mod(Q K^T * scale)) V with optional user sub-graphs modifying the scores and "
       "the probabilities (GQA when K/V have fewer heads).")


# -- RotaryEmbedding -----------------------------------------------------------------------------

def _rotary_infer(ctx):
    a = ctx.attrs
    x = ctx.shape(0)
    if x is not None and len(x) not in (3, 4):
        raise ctx.error(f"X must have rank 3 or 4, got shape {list(x)}")
    heads = a["num_heads"]
    if x is not None and len(x) == 3 and not heads:
        raise ctx.error("3-D input needs the num_heads attribute")
    head = None
    if x is not None:
        head = x[3] if len(x) == 4 else _div(ctx, x[2], heads, "hidden size / num_heads")
    rot = a["rotary_embedding_dim"] or head
    if isinstance(rot, int) and (rot % 2 or (isinstance(head, int) and rot > head)):
        raise ctx.error(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
    want = 2 if ctx.has(3) else 3
    for i, name in ((1, "cos_cache"), (2, "sin_cache")):
        s = ctx.shape(i)
        if s is None:
            continue
        if len(s) != want:
            how = "with" if want == 2 else "without"
            raise ctx.error(f"{name} must have rank {want} {how} position_ids, got shape {list(s)}")
        if isinstance(rot, int):
            _same(ctx, f"{name} last dim vs rotary_embedding_dim / 2", s[-1], rot // 2)
    return [ctx.input(0)]


def _rotary_ref(X, cos_cache, sin_cache, position_ids=None, *, interleaved, num_heads, rotary_embedding_dim):
    shape = X.shape
    x = X.transpose(0, 2, 1, 3) if X.ndim == 4 else X.reshape(shape[0], shape[1], num_heads, -1)
    rot = rotary_embedding_dim or x.shape[-1]  # x: (B, S, heads, head_size)
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache[:, :, None, :], sin_cache[:, :, None, :]  # (B, S, 1, rot/2)
    part = x[..., :rot]
    if interleaved:  # pairs are (x0, x1), (x2, x3), ...
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:  # pairs are (x_i, x_{i + rot/2})
        x1, x2 = part[..., :rot // 2], part[..., rot // 2:]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(part.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([rotated, x[..., rot:]], axis=-1).astype(X.dtype)
    return y.transpose(0, 2, 1, 3) if X.ndim == 4 else y.reshape(shape)


op("RotaryEmbedding", inputs=("X:T", "cos_cache:T", "sin_cache:T", "position_ids:M?"), outputs=("Y:T",),
   types={"T": FLT3, "M": frozenset({dt.int64})},
   attrs=(Attr("interleaved", "int", 0), Attr("num_heads", "int", 0), Attr("rotary_embedding_dim", "int", 0)),
   infer=_rotary_infer, reference=_rotary_ref, groups={NN}, tier=Tier.HIGH, onnx_since=23,
   doc="Rotates pairs of the first rotary_embedding_dim features of each head by position-dependent "
       "angles given as cos/sin caches (optionally indexed by position_ids).")


# -- SwiGLU --------------------------------------------------------------------------------------

def _swiglu_infer(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is not None and b is not None and _conflict(a, b):
        raise ctx.error(f"A and B must have the same shape (no broadcasting), got {list(a)} and {list(b)}")
    return [ctx.input(0)]


def _swiglu_ref(A, B, *, alpha):
    gate = (1 / (1 + np.exp(-alpha * A))).astype(A.dtype)
    return (A * gate * B).astype(A.dtype)


op("SwiGLU", inputs=("A:T", "B:T"), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("alpha", "float", 1.0),), infer=_swiglu_infer, reference=_swiglu_ref,
   groups={ACTIVATION, ELEMENTWISE}, tier=Tier.HIGH, onnx_since=28,
   doc="Swish-gated linear unit: A * sigmoid(alpha * A) * B, for same-shape A and B.")
