"""Lowering rules for the attention family: Attention, FlexAttention, LinearAttention,
RotaryEmbedding and SwiGLU.

Grouped-query attention never repeats K/V heads: Q's heads are folded into the query axis
((B, Hq, S, D) -> (B, Hkv, g*S, D), query head h = kv*g + j), so one MatMul per product serves the
whole group and no intermediate grows beyond the scores. Masks that depend only on positions known
at compile time (causal, sliding windows, past length) become constants; with `nonpad_kv_seqlen`
they are computed from it with comparisons.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ._build import ints, scalar, static_shape
from .driver import MEMORY_BLOWUP_LIMIT
from .registry import lowering

_HALF = (dt.float16, dt.bfloat16)
#: Up to this many keys, bfloat16 softmax sums are accumulated in bfloat16 (see _masked_softmax).
_BF16_SEQUENTIAL_SUM = 32


# -- small builders --------------------------------------------------------------------------------

def _slice(rb, x, axis, start, end, step=1):
    return rb.emit1("Slice", [x, ints(rb, [start]), ints(rb, [end]), ints(rb, [axis]), ints(rb, [step])])


def _reshape(rb, x, shape):
    return rb.emit1("Reshape", [x, ints(rb, shape)])


def _cast(rb, x, dtype):
    return x if x.type.dtype == dtype else rb.emit1("Cast", [x], {"to": dtype})


def _transpose(rb, x, perm):
    return rb.emit1("Transpose", [x], {"perm": list(perm)})


def _heads_first(rb, x, heads):
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hd = static_shape(x)
    return _transpose(rb, _reshape(rb, x, [b, s, heads, hd // heads]), (0, 2, 1, 3))


def _heads_last(rb, x):
    """(B, H, S, D) -> (B, S, H*D)."""
    b, h, s, d = static_shape(x)
    return _reshape(rb, _transpose(rb, x, (0, 2, 1, 3)), [b, s, h * d])


def _grouped_matmul(rb, a, b, kv_heads):
    """a (B, Hq, S, X) @ b (B, Hkv, X, Y) where query head h reads kv head h // (Hq / Hkv)."""
    batch, hq, s, x = static_shape(a)
    if hq == kv_heads:
        return rb.emit1("MatMul", [a, b])
    folded = _reshape(rb, a, [batch, kv_heads, hq // kv_heads * s, x])
    return _reshape(rb, rb.emit1("MatMul", [folded, b]), [batch, hq, s, static_shape(b)[-1]])


def _masked_softmax(rb, x):
    """Softmax over the last axis, subtracting the max; a row that is all -inf gives zeros."""
    neg_inf, zero = scalar(rb, -np.inf, x), scalar(rb, 0, x)
    m = rb.emit1("ReduceMax", [x, ints(rb, [-1])], {"keepdims": 1})
    m = rb.emit1("Where", [rb.emit1("Equal", [m, neg_inf]), zero, m])
    e = rb.emit1("Exp", [rb.emit1("Sub", [x, m])])
    n = static_shape(x)[-1]
    if x.type.dtype == dt.bfloat16 and 0 < n <= _BF16_SEQUENTIAL_SUM:
        # ONNX's reference (NumPy on ml_dtypes) sums bfloat16 one element at a time, rounding each
        # partial sum; the expected outputs of the bfloat16 node tests depend on that rounding
        s = _slice(rb, e, -1, 0, 1)
        for j in range(1, n):
            s = rb.emit1("Add", [s, _slice(rb, e, -1, j, j + 1)])
    else:
        s = rb.emit1("ReduceSum", [e, ints(rb, [-1])], {"keepdims": 1})
    s = rb.emit1("Where", [rb.emit1("Equal", [s, zero]), scalar(rb, 1, x), s])
    return rb.emit1("Div", [e, s])


def _and(rb, a, b):
    return b if a is None else rb.emit1("And", [a, b])


# -- Attention -------------------------------------------------------------------------------------

def _structural_mask(rb, a, rows, total, offset, nonpad, batch):
    """Which keys the queries `rows` (r0, r1) may see from positions alone (causal, windows,
    valid length), as a bool broadcastable to (B, H, r1 - r0, total); None if all are visible."""
    causal, left, right = a["is_causal"], a["left_window_size"], a["right_window_size"]
    r0, r1 = rows
    if nonpad is None:  # positions are all static: a constant
        if not causal and left < 0 and right < 0:
            return None
        q = np.arange(r0, r1).reshape(-1, 1) + offset
        k = np.arange(total).reshape(1, total)
        ok = np.ones((r1 - r0, total), bool)
        ok &= (k <= q) if causal else True
        ok &= (k >= q - left) if left >= 0 else True
        ok &= (k <= q + right) if right >= 0 else True
        return rb.constant(ok.reshape(1, 1, r1 - r0, total), name="mask")
    valid = _reshape(rb, nonpad, [batch, 1, 1, 1])  # external cache: the queries end at nonpad
    k = rb.constant(np.arange(total, dtype=np.int64).reshape(1, 1, 1, total), name="kpos")
    q = rb.emit1("Add", [rb.emit1("Sub", [valid, ints(rb, [offset])]),
                         rb.constant(np.arange(r0, r1, dtype=np.int64).reshape(1, 1, -1, 1), name="qpos")])
    ok = rb.emit1("Less", [k, valid])
    if causal:
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Greater", [k, q])])])
    if left >= 0:
        first = rb.emit1("Sub", [q, ints(rb, [left])])
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Less", [k, first])])])
    if right >= 0:
        last = rb.emit1("Add", [q, ints(rb, [right])])
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Greater", [k, last])])])
    return ok


def _full_mask(rb, mask, t1, total):
    """attn_mask as bool, or as t1 for an additive mask, padded to `total` keys with 'not allowed'."""
    if mask is None:
        return None
    ms = static_shape(mask)
    is_bool = mask.type.dtype == dt.bool_
    if not is_bool:
        mask = _cast(rb, mask, t1)
    short = total - ms[-1]
    if short:
        fill = rb.constant(np.asarray(False if is_bool else -np.inf, mask.type.dtype.np), name="fill")
        mask = rb.emit1("Pad", [mask, ints(rb, [0] * (2 * len(ms) - 1) + [short]), fill])
    return mask


def _attention_bias(rb, a, mask, t1, rows, sq, total, offset, nonpad, batch):
    """The additive bias (t1) of the query rows: the float mask where allowed, -inf elsewhere;
    None when nothing is masked."""
    allowed = _structural_mask(rb, a, rows, total, offset, nonpad, batch)
    bias = None
    if mask is not None:
        ms = static_shape(mask)
        if len(ms) >= 2 and ms[-2] == sq and rows != (0, sq):
            mask = _slice(rb, mask, len(ms) - 2, *rows)
        if mask.type.dtype == dt.bool_:
            allowed = _and(rb, allowed, mask)
        else:
            bias = mask
    if allowed is None:
        return bias
    if bias is None:
        bias = rb.constant(np.zeros((), t1.np), name="zero")
    return rb.emit1("Where", [allowed, bias, rb.constant(np.asarray(-np.inf, t1.np), name="neg_inf")])


def _softcap(rb, raw, cap):
    # cap * tanh(raw / cap); 16-bit types go through float32 so the tanh expansion keeps accuracy
    x = _cast(rb, raw, dt.float32) if raw.type.dtype in _HALF else raw
    y = rb.emit1("Mul", [rb.emit1("Tanh", [rb.emit1("Div", [x, scalar(rb, cap, x)])]), scalar(rb, cap, x)])
    return _cast(rb, y, raw.type.dtype)


def _query_chunk(node, rows, row_bytes) -> int:
    """How many query rows to attend at once so that the scores stay well inside the driver's
    memory bound (a fraction of MEMORY_BLOWUP_LIMIT times the node's largest input/output)."""
    sizes = [v.type.nbytes for v in (*node.all_inputs, *node.outputs) if isinstance(v.type, dt.TensorType)]
    budget = MEMORY_BLOWUP_LIMIT // 4 * max(sizes, default=0)
    return max(1, min(rows, budget // max(row_bytes, 1)))


def _attend(rb, a, q, kt, v, bias, hkv):
    """softmax(softcap(q kt) + bias) v for one block of query rows; returns y and the four
    qk_matmul_output candidates (raw, capped, logits, probs)."""
    t1 = q.type.dtype
    raw = _grouped_matmul(rb, q, kt, hkv)
    capped = _softcap(rb, raw, a["softcap"]) if a["softcap"] > 0 else raw
    logits = capped if bias is None else rb.emit1("Add", [capped, bias])
    probs = _masked_softmax(rb, _cast(rb, logits, a["softmax_precision"] or t1))
    if bias is not None:  # a query that may see no key gets a zero row (decided on the mask)
        empty = rb.emit1("Equal", [bias, rb.constant(np.asarray(-np.inf, t1.np), name="neg_inf")])
        empty = rb.emit1("ReduceMin", [empty, ints(rb, [-1])], {"keepdims": 1})
        probs = rb.emit1("Where", [empty, scalar(rb, 0, probs), probs])
    y = _grouped_matmul(rb, _cast(rb, probs, t1), v, hkv)
    return y, (raw, capped, logits, probs)


@lowering("Attention")
def lower_attention(rb, node, ins):
    a = node.attrs
    q, k, v, mask, past_k, past_v, nonpad = (list(ins) + [None] * 7)[:7]
    if any(x is not None and static_shape(x) is None for x in (q, k, v, mask, past_k, past_v, nonpad)):
        return None
    t1 = q.type.dtype
    if len(static_shape(q)) == 3:
        q, k, v = (_heads_first(rb, x, h) for x, h in ((q, a["q_num_heads"]), (k, a["kv_num_heads"]),
                                                        (v, a["kv_num_heads"])))
    if past_k is not None:
        k = rb.emit1("Concat", [past_k, k], {"axis": 2})
        v = rb.emit1("Concat", [past_v, v], {"axis": 2})
    present_k, present_v = k, v
    batch, hq, sq, d = static_shape(q)
    hkv, total = static_shape(k)[1:3]
    # query i sits at absolute position i + offset: after the past keys, or ending at nonpad
    offset = static_shape(past_k)[2] if past_k is not None else sq if nonpad is not None else 0
    mask = _full_mask(rb, mask, t1, total)
    # sqrt(scale) multiplies both Q and K, which keeps Q K^T in range for 16-bit types
    scale = 1 / np.sqrt(d) if a["scale"] is None else a["scale"]
    s = rb.constant(np.asarray(np.sqrt(scale), t1.np), name="scale")
    qs = rb.emit1("Mul", [q, s])
    kt = _transpose(rb, rb.emit1("Mul", [k, s]), (0, 1, 3, 2))
    v = _cast(rb, v, t1)
    itemsize = max(t1.itemsize, (a["softmax_precision"] or t1).itemsize, 4)
    chunk = _query_chunk(node, sq, batch * hq * total * itemsize)
    ys, qks = [], []
    for r0 in range(0, sq, chunk):  # blocks of query rows bound the scores' memory
        rows = (r0, min(sq, r0 + chunk))
        q_rows = qs if rows == (0, sq) else _slice(rb, qs, 2, *rows)
        bias = _attention_bias(rb, a, mask, t1, rows, sq, total, offset, nonpad, batch)
        y, candidates = _attend(rb, a, q_rows, kt, v, bias, hkv)
        ys.append(y)
        if len(node.outputs) > 3:
            qks.append(_cast(rb, candidates[a["qk_matmul_output_mode"]], t1))
    y = ys[0] if len(ys) == 1 else rb.emit1("Concat", ys, {"axis": 2})
    if len(static_shape(node.inputs[0])) == 3:
        y = _heads_last(rb, y)
    outs = [y, present_k, present_v]
    if qks:
        outs.append(qks[0] if len(qks) == 1 else rb.emit1("Concat", qks, {"axis": 2}))
    return outs[:len(node.outputs)]


# -- FlexAttention ---------------------------------------------------------------------------------

def _inline(rb, graph, x):
    """The one-input, one-output sub-graph applied to x (its nodes re-emitted here; they lower
    further by their own rules). The result keeps x's type, as the reference casts it."""
    mapping = {id(graph.inputs[0]): x}
    for n in graph.nodes:
        ins = [None if v is None else v if v.is_constant else mapping[id(v)] for v in n.inputs]
        for old, new in zip(n.outputs, rb.emit(n.op, ins, dict(n.attrs), num_outputs=len(n.outputs))):
            mapping[id(old)] = new
    out = graph.outputs[0]
    return _cast(rb, out if out.is_constant else mapping[id(out)], x.type.dtype)


def _inlinable(graph) -> bool:
    return graph is None or (not graph.captures and len(graph.inputs) == 1 and len(graph.outputs) == 1
                             and not any(n.captures or n.op.has_subgraphs for n in graph.nodes))


@lowering("FlexAttention", "ai.onnx.preview")
def lower_flex_attention(rb, node, ins):
    a = node.attrs
    q, k, v = ins
    if any(static_shape(x) is None for x in (q, k, v)):
        return None
    mods = [m for m in (a["score_mod"], a["prob_mod"]) if m is not None]
    if not all(_inlinable(m) for m in mods):
        return None
    t = q.type.dtype
    ct = a["softmax_precision"] or (dt.float64 if t == dt.float64 else dt.float32)
    batch, hq, sq, d = static_shape(q)
    hkv, skv = static_shape(k)[1:3]
    chunk = _query_chunk(node, sq, batch * hq * skv * max(t.itemsize, ct.itemsize))
    if mods and chunk < sq:
        return None  # the sub-graphs see whole score matrices, which would break the memory bound
    scale = np.float32(1 / np.sqrt(d) if a["scale"] is None else a["scale"])
    s = rb.constant(np.asarray(np.sqrt(scale), t.np), name="scale")
    qs = rb.emit1("Mul", [q, s])
    kt = _transpose(rb, rb.emit1("Mul", [k, s]), (0, 1, 3, 2))
    v = _cast(rb, v, ct)
    ys = []
    for r0 in range(0, sq, chunk):  # blocks of query rows bound the scores' memory
        q_rows = qs if chunk >= sq else _slice(rb, qs, 2, r0, min(sq, r0 + chunk))
        scores = _cast(rb, _grouped_matmul(rb, q_rows, kt, hkv), ct)
        if a["score_mod"] is not None:
            scores = _inline(rb, a["score_mod"], scores)
        probs = _masked_softmax(rb, scores)
        if a["prob_mod"] is not None:
            probs = _inline(rb, a["prob_mod"], probs)
        ys.append(_grouped_matmul(rb, probs, v, hkv))
    y = ys[0] if len(ys) == 1 else rb.emit1("Concat", ys, {"axis": 2})
    return [_cast(rb, y, t)]


# -- LinearAttention -------------------------------------------------------------------------------

@lowering("LinearAttention")
def lower_linear_attention(rb, node, ins):
    # the sequential recurrence, unrolled over time in float32 (as the reference): per step the
    # state (B, Hkv, dk, dv) decays, takes the (delta-corrected) outer product k v^T, and is read
    # by the group of query heads sharing it through one MatMul
    a = node.attrs
    query, key, value, past, decay, beta = (list(ins) + [None] * 6)[:6]
    if any(x is not None and static_shape(x) is None for x in (query, key, value, past, decay, beta)):
        return None
    f32 = dt.float32
    hq, hkv = a["q_num_heads"], a["kv_num_heads"]
    b, steps, qd = static_shape(query)
    dk, dv = qd // hq, static_shape(value)[2] // hkv
    q = _reshape(rb, _cast(rb, query, f32), [b, steps, hkv, hq // hkv * dk])
    k = _reshape(rb, _cast(rb, key, f32), [b, steps, hkv, dk])
    v = _reshape(rb, _cast(rb, value, f32), [b, steps, hkv, dv])
    if decay is not None:  # per head (B, T, Hkv) or per key dim (B, T, Hkv*dk): exp once for all steps
        per = static_shape(decay)[2] // hkv
        decay = rb.emit1("Exp", [_reshape(rb, _cast(rb, decay, f32), [b, steps, hkv, per])])
    if beta is not None:  # (B, T, Hkv|1)
        beta = _cast(rb, beta, f32)
    state = (rb.constant(np.zeros((b, hkv, dk, dv), np.float32), name="state") if past is None
             else _cast(rb, past, f32))
    scale = a["scale"] or 1 / math.sqrt(dk)
    outs = []
    for i in range(steps):
        k_t = _reshape(rb, _slice(rb, k, 1, i, i + 1), [b, hkv, dk, 1])
        v_t = _reshape(rb, _slice(rb, v, 1, i, i + 1), [b, hkv, 1, dv])
        if decay is not None:
            state = rb.emit1("Mul", [state, _reshape(rb, _slice(rb, decay, 1, i, i + 1), [b, hkv, per, 1])])
        if beta is not None:  # write only the part of v the state does not already predict from k
            pred = rb.emit1("MatMul", [_reshape(rb, k_t, [b, hkv, 1, dk]), state])
            beta_t = _reshape(rb, _slice(rb, beta, 1, i, i + 1), [b, -1, 1, 1])
            v_t = rb.emit1("Mul", [beta_t, rb.emit1("Sub", [v_t, pred])])
        state = rb.emit1("Add", [state, rb.emit1("Mul", [k_t, v_t])])
        q_t = _reshape(rb, _slice(rb, q, 1, i, i + 1), [b, hkv, hq // hkv, dk])
        read = rb.emit1("Mul", [rb.emit1("MatMul", [q_t, state]), scalar(rb, scale, state)])
        outs.append(_reshape(rb, read, [b, 1, hq * dv]))
    if not outs:  # no steps: an empty output, the state passes through
        out = rb.constant(np.zeros((b, 0, hq * dv), np.float32), name="empty")
    else:
        out = outs[0] if len(outs) == 1 else rb.emit1("Concat", outs, {"axis": 1})
    state_t = past.type.dtype if past is not None else query.type.dtype
    return [_cast(rb, out, query.type.dtype), _cast(rb, state, state_t)][:len(node.outputs)]


# -- RotaryEmbedding -------------------------------------------------------------------------------

@lowering("RotaryEmbedding")
def lower_rotary_embedding(rb, node, ins):
    a = node.attrs
    x, cos, sin, pos = (list(ins) + [None])[:4]
    if static_shape(x) is None or static_shape(cos) is None or static_shape(sin) is None:
        return None
    shape = static_shape(x)
    if len(shape) == 4:  # (B, H, S, D): the caches broadcast over heads at axis 1
        head, heads_axis = shape[3], 1
    else:  # (B, S, H*D) -> (B, S, H, D): the caches broadcast over heads at axis 2
        head, heads_axis = shape[2] // a["num_heads"], 2
        x = _reshape(rb, x, [shape[0], shape[1], a["num_heads"], head])
    rot = a["rotary_embedding_dim"] or head
    if pos is not None:
        cos = rb.emit1("Gather", [cos, pos], {"axis": 0})
        sin = rb.emit1("Gather", [sin, pos], {"axis": 0})
    cs = list(static_shape(cos))  # (B, S, rot/2)
    cs.insert(heads_axis, 1)
    cos, sin = _reshape(rb, cos, cs), _reshape(rb, sin, cs)
    if a["interleaved"]:  # pairs (x0, x1), (x2, x3), ...
        x1, x2 = _slice(rb, x, -1, 0, rot, 2), _slice(rb, x, -1, 1, rot, 2)
    else:  # pairs (x_i, x_{i + rot/2})
        x1, x2 = _slice(rb, x, -1, 0, rot // 2), _slice(rb, x, -1, rot // 2, rot)
    real = rb.emit1("Sub", [rb.emit1("Mul", [cos, x1]), rb.emit1("Mul", [sin, x2])])
    imag = rb.emit1("Add", [rb.emit1("Mul", [sin, x1]), rb.emit1("Mul", [cos, x2])])
    if a["interleaved"]:
        half = list(static_shape(real))
        pair = [_reshape(rb, p, half + [1]) for p in (real, imag)]
        rotated = _reshape(rb, rb.emit1("Concat", pair, {"axis": -1}), half[:-1] + [rot])
    else:
        rotated = rb.emit1("Concat", [real, imag], {"axis": -1})
    if rot < head:
        rotated = rb.emit1("Concat", [rotated, _slice(rb, x, -1, rot, head)], {"axis": -1})
    return [_reshape(rb, rotated, list(shape)) if len(shape) == 3 else rotated]


# -- SwiGLU ----------------------------------------------------------------------------------------

@lowering("SwiGLU")
def lower_swiglu(rb, node, ins):
    a, b = ins
    alpha = node.attrs["alpha"]
    scaled = a if alpha == 1.0 else rb.emit1("Mul", [a, scalar(rb, alpha, a)])
    gate = rb.emit1("Sigmoid", [scaled])
    return [rb.emit1("Mul", [rb.emit1("Mul", [a, gate]), b])]
