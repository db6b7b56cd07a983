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
from .registry import lowering

_HALF = (dt.float16, dt.bfloat16)


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
    s = rb.emit1("ReduceSum", [e, ints(rb, [-1])], {"keepdims": 1})
    s = rb.emit1("Where", [rb.emit1("Equal", [s, zero]), scalar(rb, 1, x), s])
    return rb.emit1("Div", [e, s])


def _and(rb, a, b):
    return b if a is None else rb.emit1("And", [a, b])


# -- Attention -------------------------------------------------------------------------------------

def _structural_mask(rb, a, sq, total, offset, nonpad, batch):
    """Which keys each query may see from positions alone (causal, windows, valid length), as a
    bool broadcastable to (B, H, Sq, total); None when everything is visible."""
    causal, left, right = a["is_causal"], a["left_window_size"], a["right_window_size"]
    if nonpad is None:  # positions are all static: a constant
        if not causal and left < 0 and right < 0:
            return None
        q = np.arange(sq).reshape(sq, 1) + offset
        k = np.arange(total).reshape(1, total)
        ok = np.ones((sq, total), bool)
        ok &= (k <= q) if causal else True
        ok &= (k >= q - left) if left >= 0 else True
        ok &= (k <= q + right) if right >= 0 else True
        return rb.constant(ok.reshape(1, 1, sq, total), name="mask")
    valid = _reshape(rb, nonpad, [batch, 1, 1, 1])  # external cache: the queries end at nonpad
    k = rb.constant(np.arange(total, dtype=np.int64).reshape(1, 1, 1, total), name="kpos")
    q = rb.emit1("Add", [rb.emit1("Sub", [valid, ints(rb, [sq])]),
                         rb.constant(np.arange(sq, dtype=np.int64).reshape(1, 1, sq, 1), name="qpos")])
    ok = rb.emit1("Less", [k, valid])
    if causal:
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Greater", [k, q])])])
    if left >= 0:
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Less", [k, rb.emit1("Sub", [q, ints(rb, [left])])])])])
    if right >= 0:
        ok = rb.emit1("And", [ok, rb.emit1("Not", [rb.emit1("Greater", [k, rb.emit1("Add", [q, ints(rb, [right])])])])])
    return ok


def _attention_bias(rb, a, mask, t1, sq, total, offset, nonpad, batch):
    """The additive bias (t1): the float mask where allowed, -inf elsewhere; None if no mask."""
    allowed = _structural_mask(rb, a, sq, total, offset, nonpad, batch)
    bias = None
    if mask is not None:
        ms = static_shape(mask)
        short = total - ms[-1]
        is_bool = mask.type.dtype == dt.bool_
        if not is_bool:
            mask = _cast(rb, mask, t1)
        if short:  # a short mask is padded with "not allowed"
            fill = rb.constant(np.asarray(False if is_bool else -np.inf, mask.type.dtype.np), name="fill")
            mask = rb.emit1("Pad", [mask, ints(rb, [0] * (2 * len(ms) - 1) + [short]), fill])
        if is_bool:
            allowed = _and(rb, allowed, mask)
        else:
            bias = mask
    if allowed is None:
        return bias
    return rb.emit1("Where", [allowed, rb.constant(np.zeros((), t1.np), name="zero") if bias is None else bias,
                              rb.constant(np.asarray(-np.inf, t1.np), name="neg_inf")])


def _softcap(rb, raw, cap):
    # cap * tanh(raw / cap); 16-bit types go through float32 so the tanh expansion keeps accuracy
    x = _cast(rb, raw, dt.float32) if raw.type.dtype in _HALF else raw
    y = rb.emit1("Mul", [rb.emit1("Tanh", [rb.emit1("Div", [x, scalar(rb, cap, x)])]), scalar(rb, cap, x)])
    return _cast(rb, y, raw.type.dtype)


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
    offset = static_shape(past_k)[2] if past_k is not None else 0
    bias = _attention_bias(rb, a, mask, t1, sq, total, offset, nonpad, batch)
    # sqrt(scale) multiplies both Q and K, which keeps Q K^T in range for 16-bit types
    s = rb.constant(np.asarray(np.sqrt(1 / np.sqrt(d) if a["scale"] is None else a["scale"]), t1.np), name="scale")
    kt = _transpose(rb, rb.emit1("Mul", [k, s]), (0, 1, 3, 2))
    raw = _grouped_matmul(rb, rb.emit1("Mul", [q, s]), kt, hkv)
    capped = _softcap(rb, raw, a["softcap"]) if a["softcap"] > 0 else raw
    logits = capped if bias is None else rb.emit1("Add", [capped, bias])
    precision = a["softmax_precision"] or t1
    probs = _masked_softmax(rb, _cast(rb, logits, precision))
    if bias is not None:  # a query that may see no key gets a zero row (decided on the mask)
        empty = rb.emit1("Equal", [bias, rb.constant(np.asarray(-np.inf, t1.np), name="neg_inf")])
        empty = rb.emit1("ReduceMin", [empty, ints(rb, [-1])], {"keepdims": 1})
        probs = rb.emit1("Where", [empty, scalar(rb, 0, probs), probs])
    y = _grouped_matmul(rb, _cast(rb, probs, t1), _cast(rb, v, t1), hkv)
    if len(static_shape(node.inputs[0])) == 3:
        y = _heads_last(rb, y)
    outs = [y, present_k, present_v]
    if len(node.outputs) > 3:
        outs.append(_cast(rb, (raw, capped, logits, probs)[a["qk_matmul_output_mode"]], t1))
    return outs[:len(node.outputs)]
