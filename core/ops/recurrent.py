"""Recurrent ops: RNN, GRU, LSTM (every direction, layout and activation of ONNX) and the stateful
causal depthwise convolution CausalConvWithState (a recurrent-style carry of the last k-1 inputs)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .registry import NN, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})


def _sigmoid(x):
    # exp(-log(1 + e^-x)) never overflows, unlike 1 / (1 + exp(-x)) for large negative x.
    return np.exp(-np.logaddexp(0, -x))


# ONNX's recurrent activation functions (matched case-insensitively): (fn(x, alpha, beta),
# default alpha, default beta); a None default means the function takes no such parameter.
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}

_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


class _BadAttr(ValueError):
    pass


def _activations(attrs, defaults: tuple[str, ...], num_dirs: int) -> list[list]:
    """Per direction, the activation callables (alpha/beta bound), or raise _BadAttr."""
    per_dir = len(defaults)
    names = list(attrs["activations"] or defaults * num_dirs)
    if len(names) == per_dir and num_dirs == 2:
        names = names * 2
    elif len(names) == 2 * per_dir and num_dirs == 1:
        names = names[:per_dir]  # ONNX's own RNN default lists both directions' functions
    if len(names) != per_dir * num_dirs:
        raise _BadAttr(f"activations needs {per_dir * num_dirs} function names, got {len(names)}")
    # alpha/beta values are consumed in order by the functions that take them (as onnxruntime does)
    alphas, betas = list(attrs["activation_alpha"] or ()), list(attrs["activation_beta"] or ())
    fns = []
    for name in names:
        entry = _ACTIVATIONS.get(str(name).lower())
        if entry is None:
            raise _BadAttr(f"unknown activation '{name}' (expected one of {sorted(_ACTIVATIONS)})")
        fn, da, db = entry
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return [fns[d * per_dir:(d + 1) * per_dir] for d in range(num_dirs)]


def _check_shape(ctx, i, name, want):
    if not ctx.has(i) or ctx.shape(i) is None:
        return
    shape = ctx.shape(i)
    if len(shape) != len(want):
        raise ctx.error(f"{name} must have rank {len(want)}, got shape {list(shape)}")
    if any(isinstance(g, int) and isinstance(w, int) and g != w for g, w in zip(shape, want)):
        shown = ["?" if not isinstance(w, int) else w for w in want]
        raise ctx.error(f"{name} has shape {list(shape)}, expected {shown}")


def _recurrent_infer(gates: int, defaults: tuple[str, ...], n_outputs: int):
    def infer(ctx):
        a = ctx.attrs
        if a["direction"] not in _DIRECTIONS:
            raise ctx.error(f"direction must be forward, reverse or bidirectional, got '{a['direction']}'")
        if a["layout"] not in (0, 1):
            raise ctx.error(f"layout must be 0 or 1, got {a['layout']}")
        if a["clip"] is not None and not a["clip"] > 0:
            raise ctx.error(f"clip must be positive, got {a['clip']}")
        nd = _DIRECTIONS[a["direction"]]
        try:
            _activations(a, defaults, nd)
        except _BadAttr as e:
            raise ctx.error(str(e)) from None
        for i, name in ((0, "X"), (1, "W"), (2, "R")):
            if ctx.rank(i) not in (None, 3):
                raise ctx.error(f"{name} must have rank 3, got shape {list(ctx.shape(i))}")
        x = ctx.shape(0) or (None,) * 3
        r = ctx.shape(2) or (None,) * 3
        hidden = a["hidden_size"] or r[2]
        if a["hidden_size"] is not None and a["hidden_size"] <= 0:
            raise ctx.error(f"hidden_size must be positive, got {a['hidden_size']}")
        g = gates * hidden if isinstance(hidden, int) else None
        seq, batch = (x[0], x[1]) if a["layout"] == 0 else (x[1], x[0])
        _check_shape(ctx, 1, "W", (nd, g, x[2]))
        _check_shape(ctx, 2, "R", (nd, g, hidden))
        _check_shape(ctx, 3, "B", (nd, None if g is None else 2 * g))
        _check_shape(ctx, 4, "sequence_lens", (batch,))
        state = (nd, batch, hidden) if a["layout"] == 0 else (batch, nd, hidden)
        _check_shape(ctx, 5, "initial_h", state)
        if n_outputs == 3:
            _check_shape(ctx, 6, "initial_c", state)
            _check_shape(ctx, 7, "P", (nd, None if not isinstance(hidden, int) else 3 * hidden))
        y = (seq, nd, batch, hidden) if a["layout"] == 0 else (batch, seq, nd, hidden)
        t = ctx.dtype(0)
        return [dt.TensorType(y, t)] + [dt.TensorType(state, t)] * (n_outputs - 1)

    return infer


def _clipper(clip):
    return (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)


def _rnn_cell(W, R, B, acts, clip):
    H = R.shape[-1]
    bias = B[:H] + B[H:]
    f, cl = acts[0], _clipper(clip)

    def step(x, h, c):
        return f(cl(x @ W.T + h @ R.T + bias)), c

    return step


def _gru_cell(W, R, B, acts, clip, linear_before_reset):
    Wz, Wr, Wh = np.split(W, 3)
    Rz, Rr, Rh = np.split(R, 3)
    Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = np.split(B, 6)
    f, g = acts
    cl = _clipper(clip)

    def step(x, h, c):
        z = f(cl(x @ Wz.T + h @ Rz.T + Wbz + Rbz))
        r = f(cl(x @ Wr.T + h @ Rr.T + Wbr + Rbr))
        if linear_before_reset:
            hh = g(cl(x @ Wh.T + r * (h @ Rh.T + Rbh) + Wbh))
        else:
            hh = g(cl(x @ Wh.T + (r * h) @ Rh.T + Rbh + Wbh))
        return (1 - z) * hh + z * h, c

    return step


def _lstm_cell(W, R, B, P, acts, clip, input_forget):
    H = R.shape[-1]
    bias = B[:4 * H] + B[4 * H:]
    Pi, Po, Pf = np.split(P, 3)
    f, g, hf = acts
    cl = _clipper(clip)

    def step(x, h, c):
        gi, go, gf, gc = np.split(x @ W.T + h @ R.T + bias, 4, axis=-1)  # ONNX gate order: i o f c
        i = f(cl(gi + Pi * c))
        forget = 1 - i if input_forget else f(cl(gf + Pf * c))
        c_new = forget * c + i * g(cl(gc))
        o = f(cl(go + Po * c_new))
        return o * hf(c_new), c_new

    return step


def _run_recurrent(kind, X, W, R, B, sequence_lens, initial_h, initial_c, P, attrs):
    defaults = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}[kind]
    nd = _DIRECTIONS[attrs["direction"]]
    acts = _activations(attrs, defaults, nd)
    out_dtype = X.dtype
    work = np.float64 if X.dtype == np.float64 else np.float32  # 16-bit floats accumulate in float32
    if attrs["layout"] == 1:  # batch-major: work time-major, transpose back at the end
        X = X.swapaxes(0, 1)
        initial_h = None if initial_h is None else initial_h.swapaxes(0, 1)
        initial_c = None if initial_c is None else initial_c.swapaxes(0, 1)
    X, W, R = X.astype(work), W.astype(work), R.astype(work)
    T, N, _ = X.shape
    H = R.shape[-1]
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    B = np.zeros((nd, 2 * gates * H), work) if B is None else B.astype(work)
    P = np.zeros((nd, 3 * H), work) if P is None else P.astype(work)
    h0 = np.zeros((nd, N, H), work) if initial_h is None else initial_h.astype(work)
    c0 = np.zeros((nd, N, H), work) if initial_c is None else initial_c.astype(work)
    lens = np.full(N, T, np.int64) if sequence_lens is None else sequence_lens.astype(np.int64)
    if np.any((lens < 0) | (lens > T)):
        raise ValueError(f"sequence_lens {lens.tolist()} must lie in [0, {T}]")
    Y = np.zeros((T, nd, N, H), work)
    Y_h, Y_c = np.zeros((nd, N, H), work), np.zeros((nd, N, H), work)
    batch = np.arange(N)
    for d in range(nd):
        if kind == "RNN":
            step = _rnn_cell(W[d], R[d], B[d], acts[d], attrs["clip"])
        elif kind == "GRU":
            step = _gru_cell(W[d], R[d], B[d], acts[d], attrs["clip"], attrs["linear_before_reset"])
        else:
            step = _lstm_cell(W[d], R[d], B[d], P[d], acts[d], attrs["clip"], attrs["input_forget"])
        reverse = attrs["direction"] == "reverse" or d == 1
        h, c = h0[d], c0[d]
        for s in range(T):
            # each batch entry runs over its own first lens[b] steps; reverse starts at lens[b] - 1
            active = s < lens
            if not active.any():
                break
            t = np.where(active, lens - 1 - s if reverse else s, 0)
            h_new, c_new = step(X[t, batch], h, c)
            h = np.where(active[:, None], h_new, h)
            c = np.where(active[:, None], c_new, c)
            Y[t[active], d, batch[active]] = h_new[active]
        Y_h[d], Y_c[d] = h, c
    if attrs["layout"] == 1:
        Y, Y_h, Y_c = Y.transpose(2, 0, 1, 3), Y_h.swapaxes(0, 1), Y_c.swapaxes(0, 1)
    outs = (Y, Y_h, Y_c) if kind == "LSTM" else (Y, Y_h)
    return tuple(o.astype(out_dtype) for o in outs)


_COMMON_ATTRS = (
    Attr("hidden_size", "int", None), Attr("direction", "string", "forward"), Attr("layout", "int", 0),
    Attr("activations", "strings", None), Attr("activation_alpha", "floats", None),
    Attr("activation_beta", "floats", None), Attr("clip", "float", None),
)
_TYPES = {"T": FLT, "T1": frozenset({dt.int32})}


def _ref(kind):
    def ref(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, **attrs):
        return _run_recurrent(kind, X, W, R, B, sequence_lens, initial_h, initial_c, P, attrs)

    return ref


op("RNN", inputs=("X:T", "W:T", "R:T", "B:T?", "sequence_lens:T1?", "initial_h:T?"),
   outputs=("Y:T?", "Y_h:T?"), types=_TYPES, attrs=_COMMON_ATTRS,
   infer=_recurrent_infer(1, ("Tanh",), 2), reference=_ref("RNN"),
   groups={NN}, tier=Tier.HIGH, onnx_since=7,
   doc="Simple recurrent net H_t = f(X_t W^T + H_{t-1} R^T + b), over one or both directions.")

op("GRU", inputs=("X:T", "W:T", "R:T", "B:T?", "sequence_lens:T1?", "initial_h:T?"),
   outputs=("Y:T?", "Y_h:T?"), types=_TYPES,
   attrs=_COMMON_ATTRS + (Attr("linear_before_reset", "int", 0),),
   infer=_recurrent_infer(3, ("Sigmoid", "Tanh"), 2), reference=_ref("GRU"),
   groups={NN}, tier=Tier.HIGH, onnx_since=7,
   doc="Gated recurrent unit (update/reset/hidden gates, ONNX gate order z r h).")

op("LSTM", inputs=("X:T", "W:T", "R:T", "B:T?", "sequence_lens:T1?", "initial_h:T?", "initial_c:T?", "P:T?"),
   outputs=("Y:T?", "Y_h:T?", "Y_c:T?"), types=_TYPES,
   attrs=_COMMON_ATTRS + (Attr("input_forget", "int", 0),),
   infer=_recurrent_infer(4, ("Sigmoid", "Tanh", "Tanh"), 3), reference=_ref("LSTM"),
   groups={NN}, tier=Tier.HIGH, onnx_since=7,
   doc="Long short-term memory (ONNX gate order i o f c, optional peepholes P = [Pi Po Pf]).")


# -- CausalConvWithState -------------------------------------------------------------------------

def _causal_conv_infer(ctx):
    if ctx.attrs["activation"] not in ("none", "silu", "swish"):
        raise ctx.error(f"activation must be 'none', 'silu' or 'swish', got '{ctx.attrs['activation']}'")
    for i, name in ((0, "input"), (1, "weight")):
        if ctx.rank(i) not in (None, 3):
            raise ctx.error(f"{name} must have rank 3, got shape {list(ctx.shape(i))}")
    x = ctx.shape(0) or (None,) * 3
    w = ctx.shape(1) or (None,) * 3
    k = w[2]
    if k == 0:
        raise ctx.error("weight has kernel size 0")
    _check_shape(ctx, 1, "weight", (x[1], 1, k))
    _check_shape(ctx, 2, "bias", (x[1],))
    state = (x[0], x[1], k - 1 if isinstance(k, int) else None)
    _check_shape(ctx, 3, "past_state", state)
    return [ctx.input(0), dt.TensorType(state, ctx.dtype(0))]


def _causal_conv_ref(input, weight, bias=None, past_state=None, activation="none"):
    n, ch, length = input.shape
    k = weight.shape[2]
    pad = np.zeros((n, ch, k - 1), input.dtype) if past_state is None else past_state
    padded = np.concatenate([pad, input], axis=2)
    p, w = padded.astype(np.float32), weight[:, 0, :].astype(np.float32)
    out = np.zeros((n, ch, length), np.float32)
    for j in range(k):  # output t sees padded[t .. t + k - 1], i.e. inputs t - k + 1 .. t
        out += w[None, :, j, None] * p[:, :, j:j + length]
    if bias is not None:
        out += bias.astype(np.float32)[None, :, None]
    out = out.astype(input.dtype)
    if activation in ("silu", "swish"):
        o = out.astype(np.float32)
        out = (o * _sigmoid(o)).astype(input.dtype)
    return out, padded[:, :, length:]


op("CausalConvWithState", inputs=("input:T", "weight:T", "bias:T?", "past_state:T?"),
   outputs=("output:T", "present_state:T"),
   types={"T": frozenset({dt.float32, dt.float16, dt.bfloat16})},
   attrs=(Attr("activation", "string", "none"),),
   infer=_causal_conv_infer, reference=_causal_conv_ref,
   groups={NN}, tier=Tier.HIGH, onnx_since=27,
   doc="Causal depthwise 1-D convolution over (N, C, L) continuing from a carried state of the last "
       "k-1 inputs, with optional fused SiLU; returns the output and the new state.")
