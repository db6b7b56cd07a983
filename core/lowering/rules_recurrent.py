"""Lowering rules for recurrent nets (RNN, GRU, LSTM) and CausalConvWithState.

The recurrences are unrolled over their static sequence length. The input projection X W^T of
every time step is one MatMul up front; each step then adds h R^T and applies the gates with
elementwise ops (Sigmoid/Tanh/... are emitted as ops and lowered by their own rules). Ragged
batches (`sequence_lens`) are handled without data-dependent shapes: a reverse direction reads and
writes its steps through a Gather that reverses each batch entry's first lens[b] steps, and Where
freezes the state and zeroes the output of entries whose sequence has ended.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import ints, scalar, static_shape
from .registry import lowering

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


# -- small builders --------------------------------------------------------------------------------

def _slice(rb, x, axis, start, end, step=1):
    return rb.emit1("Slice", [x, ints(rb, [start]), ints(rb, [end]), ints(rb, [axis]), ints(rb, [step])])


def _reshape(rb, x, shape):
    return rb.emit1("Reshape", [x, ints(rb, shape)])


def _transpose(rb, x, perm):
    return rb.emit1("Transpose", [x], {"perm": list(perm)})


def _cast(rb, x, dtype):
    return x if x is None or x.type.dtype == dtype else rb.emit1("Cast", [x], {"to": dtype})


def _work_type(t: dt.DType) -> dt.DType:
    """The reference computes 16-bit floats in float32 and float64 in float64."""
    return dt.float64 if t == dt.float64 else dt.float32


# -- activation functions (ONNX names, matched case-insensitively) ---------------------------------

def _op(name, *attr_names):
    def emit(rb, x, a, b):
        vals = dict(zip(attr_names, (v for v in (a, b) if v is not None)))
        return rb.emit1(name, [x], vals)

    return emit


def _affine(rb, x, a, b):
    return rb.emit1("Add", [rb.emit1("Mul", [x, scalar(rb, a, x)]), scalar(rb, b, x)])


def _scaled_tanh(rb, x, a, b):
    return rb.emit1("Mul", [rb.emit1("Tanh", [rb.emit1("Mul", [x, scalar(rb, b, x)])]), scalar(rb, a, x)])


# name -> (emit(rb, x, alpha, beta), default alpha, default beta); None: takes no such parameter
_ACTIVATIONS = {
    "relu": (_op("Relu"), None, None),
    "tanh": (_op("Tanh"), None, None),
    "sigmoid": (_op("Sigmoid"), None, None),
    "affine": (_affine, 1.0, 0.0),
    "leakyrelu": (_op("LeakyRelu", "alpha"), 0.01, None),
    "thresholdedrelu": (_op("ThresholdedRelu", "alpha"), 1.0, None),
    "scaledtanh": (_scaled_tanh, 1.0, 1.0),
    "hardsigmoid": (_op("HardSigmoid", "alpha", "beta"), 0.2, 0.5),
    "elu": (_op("Elu", "alpha"), 1.0, None),
    "softsign": (_op("Softsign"), None, None),
    "softplus": (_op("Softplus"), None, None),
}


def _activations(attrs, kind: str, num_dirs: int):
    """Per direction, the activation emitters `fn(rb, x)` (same resolution as the reference:
    alpha/beta values are consumed in order by the functions that take them); None if invalid."""
    defaults = _DEFAULT_ACTIVATIONS[kind]
    per_dir = len(defaults)
    names = list(attrs["activations"] or defaults * num_dirs)
    if len(names) == per_dir and num_dirs == 2:
        names = names * 2
    elif len(names) == 2 * per_dir and num_dirs == 1:
        names = names[:per_dir]
    if len(names) != per_dir * num_dirs:
        return None
    alphas, betas = list(attrs["activation_alpha"] or ()), list(attrs["activation_beta"] or ())
    fns = []
    for name in names:
        entry = _ACTIVATIONS.get(str(name).lower())
        if entry is None:
            return None
        emit, da, db = entry
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        fns.append(lambda rb, x, emit=emit, a=a, b=b: emit(rb, x, a, b))
    return [fns[d * per_dir:(d + 1) * per_dir] for d in range(num_dirs)]


# -- the unrolled recurrence -----------------------------------------------------------------------

class _Step:
    """What every cell needs: the builder, sizes, clip, and the direction's weights."""

    def __init__(self, rb, hidden, clip, acts, r_t, rb_h, peep):
        self.rb, self.H, self.acts, self.r_t, self.rb_h, self.peep = rb, hidden, acts, r_t, rb_h, peep
        self.clip = clip

    def clipped(self, x):
        if not self.clip:
            return x
        rb = self.rb
        return rb.emit1("Min", [rb.emit1("Max", [x, scalar(rb, -self.clip, x)]), scalar(rb, self.clip, x)])

    def gate(self, x, start, count=1):
        return _slice(self.rb, x, 1, start * self.H, (start + count) * self.H)


def _rnn_step(s: _Step, pre, h, c):
    rb = s.rb
    return s.acts[0](rb, s.clipped(rb.emit1("Add", [pre, rb.emit1("MatMul", [h, s.r_t])]))), c


def _gru_step(s: _Step, pre, h, c, linear_before_reset):
    rb = s.rb
    f, g = s.acts
    # z and r together: [x Wz + h Rz + b, x Wr + h Rr + b] share one MatMul and one activation
    zr = f(rb, s.clipped(rb.emit1("Add", [s.gate(pre, 0, 2),
                                          rb.emit1("MatMul", [h, _slice(rb, s.r_t, 1, 0, 2 * s.H)])])))
    z, r = s.gate(zr, 0), s.gate(zr, 1)
    rh_t = _slice(rb, s.r_t, 1, 2 * s.H, 3 * s.H)
    if linear_before_reset:
        hr = rb.emit1("Add", [rb.emit1("MatMul", [h, rh_t]), s.rb_h])
        pre_h = rb.emit1("Add", [s.gate(pre, 2), rb.emit1("Mul", [r, hr])])
    else:
        hr = rb.emit1("MatMul", [rb.emit1("Mul", [r, h]), rh_t])
        pre_h = rb.emit1("Add", [rb.emit1("Add", [s.gate(pre, 2), hr]), s.rb_h])
    hh = g(rb, s.clipped(pre_h))
    one_minus_z = rb.emit1("Sub", [scalar(rb, 1, z), z])
    return rb.emit1("Add", [rb.emit1("Mul", [one_minus_z, hh]), rb.emit1("Mul", [z, h])]), c


def _lstm_step(s: _Step, pre, h, c, input_forget):
    rb = s.rb
    f, g, hf = s.acts
    gates = rb.emit1("Add", [pre, rb.emit1("MatMul", [h, s.r_t])])  # ONNX gate order: i o f c

    def peep(x, k, state):  # peepholes P = [Pi Po Pf] look at the cell state
        return x if s.peep is None else rb.emit1("Add", [x, rb.emit1("Mul", [s.peep[k], state])])

    i = f(rb, s.clipped(peep(s.gate(gates, 0), 0, c)))
    if input_forget:
        forget = rb.emit1("Sub", [scalar(rb, 1, i), i])
    else:
        forget = f(rb, s.clipped(peep(s.gate(gates, 2), 2, c)))
    cand = g(rb, s.clipped(s.gate(gates, 3)))
    c_new = rb.emit1("Add", [rb.emit1("Mul", [forget, c]), rb.emit1("Mul", [i, cand])])
    o = f(rb, s.clipped(peep(s.gate(gates, 1), 1, c_new)))
    return rb.emit1("Mul", [o, hf(rb, c_new)]), c_new


def _reverse_index(rb, lens_row, steps, batch):
    """Flat (T*N) indices reversing each batch entry's first lens[b] steps (a permutation that is
    its own inverse: steps past lens[b] stay in place)."""
    t = rb.constant(np.arange(steps, dtype=np.int64).reshape(steps, 1), name="t")
    rev = rb.emit1("Sub", [rb.emit1("Sub", [lens_row, ints(rb, [1])]), t])
    row = rb.emit1("Where", [rb.emit1("Less", [t, lens_row]), rev, t])
    b = rb.constant(np.arange(batch, dtype=np.int64).reshape(1, batch), name="b")
    return rb.emit1("Add", [rb.emit1("Mul", [row, ints(rb, [batch])]), b])


def _permute_steps(rb, v, index, steps, batch):
    """v (T, N, F) read through a flat (T, N) step index."""
    feat = static_shape(v)[2]
    return rb.emit1("Gather", [_reshape(rb, v, [steps * batch, feat]), index], {"axis": 0})


def _direction(rb, kind, attrs, acts, x, w, r, bias, peep, d, hidden):
    """The cell of direction d and the projected inputs X W^T + b of all steps, (T, N, G*H)."""
    gates = _GATES[kind] * hidden
    wd = _reshape(rb, _slice(rb, w, 0, d, d + 1), [gates, -1])
    rd = _reshape(rb, _slice(rb, r, 0, d, d + 1), [gates, hidden])
    pre_all = rb.emit1("MatMul", [x, rb.emit1("Transpose", [wd], {"perm": [1, 0]})])
    rb_h = None
    if bias is not None:
        bd = _reshape(rb, _slice(rb, bias, 0, d, d + 1), [2 * gates])
        wb, rbias = _slice(rb, bd, 0, 0, gates), _slice(rb, bd, 0, gates, 2 * gates)
        if kind == "GRU":  # Rbh sits inside the reset gate's product; the rest adds up front
            rb_h = _slice(rb, rbias, 0, 2 * hidden, 3 * hidden)
            rbias = rb.emit1("Pad", [_slice(rb, rbias, 0, 0, 2 * hidden), ints(rb, [0, hidden])])
        pre_all = rb.emit1("Add", [pre_all, rb.emit1("Add", [wb, rbias])])
    if kind == "GRU" and rb_h is None:
        rb_h = rb.constant(np.zeros((hidden,), x.type.dtype.np), name="rbh")
    pd = None
    if peep is not None:
        pflat = _reshape(rb, _slice(rb, peep, 0, d, d + 1), [3 * hidden])
        pd = [_slice(rb, pflat, 0, k * hidden, (k + 1) * hidden) for k in range(3)]
    r_t = rb.emit1("Transpose", [rd], {"perm": [1, 0]})
    return _Step(rb, hidden, attrs["clip"], acts[d], r_t, rb_h, pd), pre_all


def _unroll(rb, kind, attrs, step, pre_all, h, c, reverse, lens_col, index):
    """Run one direction over all steps; returns (Y (T, N, H), last h, last c)."""
    steps, batch, gates = static_shape(pre_all)
    hidden = step.H
    if reverse and index is not None:  # each entry's own first lens[b] steps, backwards
        pre_all = _permute_steps(rb, pre_all, index, steps, batch)
    zeros = rb.constant(np.zeros((batch, hidden), pre_all.type.dtype.np), name="zeros")
    outs = [None] * steps
    for s in range(steps):
        t = steps - 1 - s if reverse and index is None else s
        pre = _reshape(rb, _slice(rb, pre_all, 0, t, t + 1), [batch, gates])
        if kind == "RNN":
            h_new, c_new = _rnn_step(step, pre, h, c)
        elif kind == "GRU":
            h_new, c_new = _gru_step(step, pre, h, c, attrs["linear_before_reset"])
        else:
            h_new, c_new = _lstm_step(step, pre, h, c, attrs["input_forget"])
        if lens_col is not None:  # entries whose sequence ended keep their state and output 0
            active = rb.emit1("Less", [ints(rb, [s]), lens_col])
            outs[t] = rb.emit1("Where", [active, h_new, zeros])
            h = rb.emit1("Where", [active, h_new, h])
            c = c_new if kind != "LSTM" else rb.emit1("Where", [active, c_new, c])
        else:
            outs[t], h, c = h_new, h_new, c_new
    y = rb.emit1("Concat", [_reshape(rb, o, [1, batch, hidden]) for o in outs], {"axis": 0})
    if reverse and index is not None:
        y = _reshape(rb, _permute_steps(rb, y, index, steps, batch), [steps, batch, hidden])
    return y, h, c


def _lower_recurrent(rb, node, ins, kind):
    a = node.attrs
    x, w, r, bias, seq_lens, h0 = ins[:6]
    c0, peep = (ins[6], ins[7]) if kind == "LSTM" else (None, None)
    xs, rs = static_shape(x), static_shape(r)
    if xs is None or rs is None or (seq_lens is not None and static_shape(seq_lens) is None):
        return None
    num_dirs = 2 if a["direction"] == "bidirectional" else 1
    acts = _activations(a, kind, num_dirs)
    steps, batch = (xs[0], xs[1]) if a["layout"] == 0 else (xs[1], xs[0])
    if acts is None or steps == 0:
        return None
    out_t = x.type.dtype
    work = _work_type(out_t)
    x, w, r, bias, h0, c0, peep = (_cast(rb, v, work) for v in (x, w, r, bias, h0, c0, peep))
    if a["layout"] == 1:  # batch-major: work time-major, transpose back at the end
        x, h0, c0 = (None if v is None else _transpose(rb, v, (1, 0, 2)) for v in (x, h0, c0))
    hidden = rs[2]
    if seq_lens is not None and seq_lens.known is not None and np.all(seq_lens.known == steps):
        seq_lens = None  # every sequence is full: no masking
    lens_col = index = None
    if seq_lens is not None:
        lens64 = _cast(rb, seq_lens, dt.int64)
        lens_col = _reshape(rb, lens64, [batch, 1])
        index = _reverse_index(rb, _reshape(rb, lens64, [1, batch]), steps, batch)
    ys, yh, yc = [], [], []
    for d in range(num_dirs):
        step, pre_all = _direction(rb, kind, a, acts, x, w, r, bias, peep, d, hidden)
        zeros = rb.constant(np.zeros((batch, hidden), work.np), name="zeros")
        h = zeros if h0 is None else _reshape(rb, _slice(rb, h0, 0, d, d + 1), [batch, hidden])
        c = zeros if c0 is None else _reshape(rb, _slice(rb, c0, 0, d, d + 1), [batch, hidden])
        reverse = a["direction"] == "reverse" or d == 1
        y, h, c = _unroll(rb, kind, a, step, pre_all, h, c, reverse, lens_col, index)
        ys.append(_reshape(rb, y, [steps, 1, batch, hidden]))
        yh.append(_reshape(rb, h, [1, batch, hidden]))
        yc.append(_reshape(rb, c, [1, batch, hidden]))
    y, y_h, y_c = (v[0] if len(v) == 1 else rb.emit1("Concat", v, {"axis": i})
                   for v, i in ((ys, 1), (yh, 0), (yc, 0)))
    if a["layout"] == 1:
        y = rb.emit1("Transpose", [y], {"perm": [2, 0, 1, 3]})
        y_h, y_c = (rb.emit1("Transpose", [v], {"perm": [1, 0, 2]}) for v in (y_h, y_c))
    outs = [_cast(rb, v, out_t) for v in (y, y_h, y_c)]
    return outs[:len(node.outputs)]


@lowering("RNN")
def lower_rnn(rb, node, ins):
    return _lower_recurrent(rb, node, list(ins) + [None] * (6 - len(ins)), "RNN")


@lowering("GRU")
def lower_gru(rb, node, ins):
    return _lower_recurrent(rb, node, list(ins) + [None] * (6 - len(ins)), "GRU")


@lowering("LSTM")
def lower_lstm(rb, node, ins):
    return _lower_recurrent(rb, node, list(ins) + [None] * (8 - len(ins)), "LSTM")


@lowering("CausalConvWithState")
def lower_causal_conv_with_state(rb, node, ins):
    # out[t] = sum_j w[:, j] * padded[t + j] over the carried state followed by the input: k shifted
    # slices times per-channel weights (exact; no im2col copy), accumulated in float32 as the reference
    x, w = ins[0], ins[1]
    bias, past = (list(ins) + [None, None])[2:4]
    xs, ws = static_shape(x), static_shape(w)
    if xs is None or ws is None:
        return None
    n, ch, length = xs
    k = ws[2]
    if past is None:
        padded = rb.emit1("Pad", [x, ints(rb, [0, 0, k - 1, 0, 0, 0])])
    else:
        padded = rb.emit1("Concat", [past, x], {"axis": 2})
    p32, w32 = _cast(rb, padded, dt.float32), _cast(rb, _reshape(rb, w, [1, ch, k]), dt.float32)
    out = None
    for j in range(k):
        term = rb.emit1("Mul", [_slice(rb, w32, 2, j, j + 1), _slice(rb, p32, 2, j, j + length)])
        out = term if out is None else rb.emit1("Add", [out, term])
    if bias is not None:
        out = rb.emit1("Add", [out, _reshape(rb, _cast(rb, bias, dt.float32), [1, ch, 1])])
    out = _cast(rb, out, x.type.dtype)  # the reference rounds before the activation
    if node.attrs["activation"] in ("silu", "swish"):
        o = _cast(rb, out, dt.float32)
        out = _cast(rb, rb.emit1("Mul", [o, rb.emit1("Sigmoid", [o])]), x.type.dtype)
    state = _slice(rb, padded, 2, length, length + k - 1)
    return [out, state][:len(node.outputs)]
