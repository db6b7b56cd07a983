"""Lowering rules for signal processing: DFT and STFT as MatMuls with constant DFT matrices, and
the window/mel generators as constants.

A DFT along one axis is a matrix product. The last axis of a signal holds (real) or (real,
imaginary), so after moving the transformed axis next to it and flattening the two, one real
[L * c, K * c_out] matrix maps the interleaved input straight to the interleaved output: no
splitting into real and imaginary parts. The matrix also absorbs the transform's zero-padding
(rows of samples that are not there) and truncation (zero rows for samples past the length), the
one-sided output (only the first n // 2 + 1 columns) and the Hermitian weights of the inverse
real transform. Matrices are built in float64 from exact angles (j * k mod n) and rounded once to
the compute type: float64 for float64 signals, float32 otherwise (as the reference computes).

A dense DFT matrix costs O(n^2) memory, so a rule only fires while the matrix stays within the
driver's 16x budget of the node's largest input or output (batched or short transforms).

Windows and MelWeightMatrix depend only on their scalar inputs: when those are known the output
is a constant. With run-time sizes the output's shape is a run-time value too; the rules then
compute the reference's formula over run-time index ramps (`dynamic_iota`: Expand to the run-time
length and a log-step prefix sum), so the lowered graph has dynamic shapes. STFT and DFT with a
run-time frame or transform length stay unlowered: the DFT matrix would be built at run time with
a size no compile-time check can bound.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..ops.signal import dft_lengths, stft_geometry
from ._build import ints, static_shape
from .driver import MEMORY_BLOWUP_LIMIT
from .registry import lowering


def op1(rb, op, *inputs, **attrs):
    return rb.emit1(op, list(inputs), attrs or None)


def known_scalar(v):
    """A known one-element input as an int; None when absent or unknown."""
    if v is None or v.known is None:
        return None
    return int(np.asarray(v.known).reshape(-1)[0])


def compute_type(x):
    return dt.float64 if x.type.dtype == dt.float64 else dt.float32


def _nbytes(shape, dtype):
    return math.prod(shape) * dtype.itemsize


def fits_budget(matrix_bytes, node) -> bool:
    """A constant the rule creates stays within the driver's budget of the node's largest value."""
    sizes = [v.type.nbytes for v in list(node.all_inputs) + list(node.outputs)
             if isinstance(v.type, dt.TensorType) and v.type.nbytes is not None]
    return bool(sizes) and matrix_bytes <= MEMORY_BLOWUP_LIMIT * max(sizes)


# -- DFT matrices ------------------------------------------------------------------------------------

def _cos_sin(j, k, n):
    """cos and sin of 2 pi j k / n, exact at multiples of a quarter turn (no 1e-16 residues)."""
    r = np.outer(j, k) % n
    theta = 2 * np.pi * r / n
    c, s = np.cos(theta), np.sin(theta)
    quarter = (4 * r) % n == 0
    q = (4 * r) // n
    c = np.where(quarter, np.choose(q % 4, [1.0, 0.0, -1.0, 0.0]), c)
    s = np.where(quarter, np.choose(q % 4, [0.0, 1.0, 0.0, -1.0]), s)
    return c, s


def dft_matrix(length, c, n, inverse, onesided):
    """The [length * c, k_out * c_out] float64 matrix of one DFT along an axis of `length`
    samples with c parts each (1 real, 2 complex), transform length n."""
    if onesided and inverse:
        return _irfft_matrix(length, n)
    k_out = n // 2 + 1 if onesided else n
    used = min(length, n)  # samples past n are truncated: their rows stay zero
    cos, sin = _cos_sin(np.arange(used), np.arange(k_out), n)
    m = np.zeros((length, c, k_out, 2))
    sign, scale = (1.0, 1.0 / n) if inverse else (-1.0, 1.0)
    # (xr + i xi)(cos + i sign sin) = (xr cos - sign xi sin) + i (xi cos + sign xr sin)
    m[:used, 0, :, 0] = cos * scale
    m[:used, 0, :, 1] = sign * sin * scale
    if c == 2:
        m[:used, 1, :, 0] = -sign * sin * scale
        m[:used, 1, :, 1] = cos * scale
    return m.reshape(length * c, k_out * 2)


def _irfft_matrix(bins, n):
    """Inverse real DFT (numpy's irfft): y[t] = (1/n) sum_k w_k Re(X_k e^{2 pi i k t / n}) over the
    first n // 2 + 1 bins, w = 1 for the DC and (even n) Nyquist bins, 2 otherwise; the imaginary
    parts of those two bins drop out."""
    used = min(bins, n // 2 + 1)
    k = np.arange(used)
    w = np.where((k == 0) | (2 * k == n), 1.0, 2.0)[:, None] / n
    cos, sin = _cos_sin(k, np.arange(n), n)
    m = np.zeros((bins, 2, n))
    m[:used, 0] = w * cos
    m[:used, 1] = -w * sin
    m[:used, 1][(k == 0) | (2 * k == n)] = 0.0
    return m.reshape(bins * 2, n)


def _reshape(rb, x, shape):
    shape = list(shape)
    return rb.emit1("Reshape", [x, ints(rb, shape)], {"allowzero": 1} if 0 in shape else None)


def dft_along(rb, node, x, axis, n, inverse, onesided):
    """The DFT of x (static shape) along `axis`, in x's compute type; None over budget."""
    shape = list(x.type.shape)
    rank, length, c = len(shape), shape[axis], shape[-1]
    n, _ = dft_lengths(length, n, inverse, onesided, ValueError)
    ct = compute_type(x)
    m = dft_matrix(length, c, n, inverse, onesided)
    if not fits_budget(m.size * ct.itemsize, node):
        return None
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    xt = op1(rb, "Cast", x, to=ct) if x.type.dtype != ct else x
    if perm != list(range(rank)):
        xt = op1(rb, "Transpose", xt, perm=perm)
    lead = [shape[i] for i in perm[:-2]]
    y = op1(rb, "MatMul", _reshape(rb, xt, lead + [length * c]),
            rb.constant(m.astype(ct.np), name="dft"))
    c_out = 1 if onesided and inverse else 2
    y = _reshape(rb, y, lead + [m.shape[1] // c_out, c_out])
    if perm != list(range(rank)):
        y = op1(rb, "Transpose", y, perm=list(np.argsort(perm)))
    return y


def _valid(shape, axis, n, inverse, onesided) -> bool:
    """Whether a transform along `axis` is well-defined (an IRFFT of one bin has length 0)."""
    try:
        dft_lengths(shape[axis], n, inverse, onesided, ValueError)
    except ValueError:
        return False
    return True


def _dft_out_shape(shape, axis, n, inverse, onesided):
    n, out_len = dft_lengths(shape[axis], n, inverse, onesided, ValueError)
    out = list(shape)
    out[axis] = out_len
    out[-1] = 1 if onesided and inverse else 2
    return out


@lowering("DFT")
def lower_dft(rb, node, ins):
    # A run-time axis: the transform is computed along every axis it may name (only those that
    # give the node's output shape, when that is static) and a Where picks the named one.
    x, length_in, axis_in = (list(ins) + [None, None])[:3]
    shape = static_shape(x)
    if shape is None:
        return None
    rank = len(shape)
    inverse, onesided = node.attrs["inverse"], node.attrs["onesided"]
    n = known_scalar(length_in)
    if length_in is not None and n is None:
        return None  # a run-time dft_length decides the output length
    axis = -2 if axis_in is None else known_scalar(axis_in)
    if axis is not None:
        candidates = [axis % rank]
    else:
        out = static_shape(node.outputs[0])
        candidates = [a for a in range(rank - 1)
                      if _valid(shape, a, n, inverse, onesided)
                      and (out is None or _dft_out_shape(shape, a, n, inverse, onesided) == list(out))]
    ys = [dft_along(rb, node, x, a, n, inverse, onesided) for a in candidates]
    if not ys or any(y is None for y in ys):
        return None
    y = ys[0]
    if len(ys) > 1:
        shapes = [_dft_out_shape(shape, a, n, inverse, onesided) for a in candidates]
        y = _select_axis(rb, axis_in, rank, candidates, ys, shapes)
    return [y if y.type.dtype == x.type.dtype else op1(rb, "Cast", y, to=x.type.dtype)]


def _select_axis(rb, axis_in, rank, candidates, ys, shapes):
    """ys[i] where the run-time axis names candidates[i]. Results of different shapes (one-sided
    transforms change the axis's length) are zero-padded to a common box, selected, and cut back
    to the selected shape by a Slice with run-time ends: the output shape is then dynamic."""
    c64 = lambda v: rb.constant(np.asarray(v, np.int64), name="c")  # noqa: E731
    ax = op1(rb, "Reshape", axis_in, ints(rb, []))
    ax = op1(rb, "Where", op1(rb, "Less", ax, c64(0)), op1(rb, "Add", ax, c64(rank)), ax)
    box = [max(dims) for dims in zip(*shapes)]
    same = all(s == box for s in shapes)
    if not same:
        ys = [y if s == box else op1(rb, "Pad", y, ints(rb, [0] * rank + [b - d for b, d in zip(box, s)]))
              for y, s in zip(ys, shapes)]
    y, ends = ys[-1], c64(shapes[-1])
    for a, ya, sa in zip(candidates[:-1], ys[:-1], shapes[:-1]):
        hit = op1(rb, "Equal", ax, c64(a))
        y = op1(rb, "Where", hit, ya, y)
        if not same:
            ends = op1(rb, "Where", hit, c64(sa), ends)
    return y if same else op1(rb, "Slice", y, c64([0] * rank), ends)


@lowering("STFT")
def lower_stft(rb, node, ins):
    # Frames are one Gather of sample positions ([frames, frame_length]: a constant, or with a
    # run-time frame_step a run-time ramp of frame starts), windowed by a broadcast Mul, then one
    # MatMul with the (one-sided) DFT matrix of a frame. The frame length must be known: it sizes
    # that matrix.
    signal, step_in, window, length_in = (list(ins) + [None, None])[:4]
    shape = static_shape(signal)
    if shape is None or (length_in is not None and known_scalar(length_in) is None):
        return None
    batch, length, c = shape
    onesided = node.attrs["onesided"]
    wlen = None if window is None else (window.type.shape or [None])[0]
    fl = known_scalar(length_in) if length_in is not None else wlen if window is not None else length
    if not isinstance(fl, int):
        return None
    step = known_scalar(step_in)
    frames, bins = stft_geometry(length, step, wlen, fl, onesided, c, ValueError)
    ct = compute_type(signal)
    m = dft_matrix(fl, c, fl, 0, onesided)
    if not fits_budget(m.size * ct.itemsize, node):
        return None
    x = signal if signal.type.dtype == ct else op1(rb, "Cast", signal, to=ct)
    if step is not None:
        pos = rb.constant(np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(fl, dtype=np.int64),
                          name="frames")
    elif batch == 0:
        return None  # Reshape could not infer the run-time frame count of an empty batch
    else:
        pos = _frame_positions(rb, step_in, length, fl)
        frames = -1
    framed = op1(rb, "Gather", x, pos, axis=1)  # [B, frames, fl, c]
    if window is not None:
        w = window if window.type.dtype == ct else op1(rb, "Cast", window, to=ct)
        framed = op1(rb, "Mul", framed, _reshape(rb, w, [fl, 1]))
    y = op1(rb, "MatMul", _reshape(rb, framed, [batch, frames, fl * c]),
            rb.constant(m.astype(ct.np), name="dft"))
    y = _reshape(rb, y, [batch, frames, bins, 2])
    out = node.outputs[0].type.dtype
    return [y if out == ct else op1(rb, "Cast", y, to=out)]


def _frame_positions(rb, step_in, length, fl):
    """[frames, fl] sample positions start + i for a run-time frame_step: frames =
    (length - fl) // step + 1 (a run-time count), start = frame * step."""
    i64 = dt.int64
    step = op1(rb, "Reshape", op1(rb, "Cast", step_in, to=i64), ints(rb, []))
    frames = op1(rb, "Add", op1(rb, "Div", rb.constant(np.asarray(length - fl, np.int64), name="c"), step),
                 rb.constant(np.asarray(1, np.int64), name="c"))
    starts = op1(rb, "Mul", dynamic_iota(rb, frames), step)
    return op1(rb, "Add", op1(rb, "Reshape", starts, ints(rb, [-1, 1])),
               rb.constant(np.arange(fl, dtype=np.int64).reshape(1, fl), name="c"))


# -- generators ------------------------------------------------------------------------------------

def constant_output(rb, node, ins):
    """The node's output as a constant when every input is known (None otherwise): the builder's
    folded value, else the op's reference run on the known inputs."""
    out = node.outputs[0]
    value = out.known
    if value is None:
        if any(v is not None and v.known is None for v in ins):
            return None
        value = node.op.reference(*[None if v is None else v.known for v in ins], **node.attrs)
    return [rb.constant(np.asarray(value, dtype=out.type.dtype.np), name="c")]


#: Cosine-sum coefficients a_k of the windows (as ops/signal.py declares them).
WINDOW_COEFFS = {"HannWindow": (0.5, 0.5), "HammingWindow": (25 / 46, 21 / 46),
                 "BlackmanWindow": (0.42, 0.5, 0.08)}
#: Scan steps of `dynamic_iota`: lengths up to 2^40 (no tensor that long can be allocated).
IOTA_STEPS = 40


def dynamic_iota(rb, n):
    """0, 1, ..., n - 1 (int64) for a run-time 0-d int64 n: a prefix sum of n ones (Expand to
    the run-time shape), by log-steps that add the sum shifted by 2^k (a Pad of [s, -s], clamped
    to n). Every step is an elementwise pass over n values."""
    n1 = op1(rb, "Reshape", n, ints(rb, [1]))
    x = op1(rb, "Expand", rb.constant(np.asarray(1, np.int64), name="c"), n1)
    for k in range(IOTA_STEPS):
        s = op1(rb, "Min", n1, ints(rb, [1 << k]))
        shifted = op1(rb, "Pad", x, op1(rb, "Mul", s, ints(rb, [1, -1])))
        x = op1(rb, "Add", x, shifted)
    return op1(rb, "Sub", x, rb.constant(np.asarray(1, np.int64), name="c"))


def _window_rule(name):
    def rule(rb, node, ins):
        known = constant_output(rb, node, ins)
        return known if known is not None else [_runtime_window(rb, node, ins[0], WINDOW_COEFFS[name])]

    rule.__name__ = f"lower_{name.lower()}"
    return lowering(name)(rule)


def _runtime_window(rb, node, size, coeffs):
    """sum_k (-1)^k a_k cos(k 2 pi j / N) over j = 0..size-1 (N = size, or size - 1 when
    symmetric), in float64 as the reference; the length is a run-time value, so is the shape."""
    f64, i64 = dt.float64, dt.int64
    c = lambda v, t=f64: rb.constant(np.asarray(v, t.np), name="c")  # noqa: E731
    periodic, out = node.attrs["periodic"], node.attrs["output_datatype"]
    n = op1(rb, "Reshape", op1(rb, "Cast", size, to=i64), ints(rb, []))
    j = op1(rb, "Cast", dynamic_iota(rb, n), to=f64)
    big_n = n if periodic else op1(rb, "Sub", n, c(1, i64))
    theta = op1(rb, "Div", op1(rb, "Mul", j, c(2 * math.pi)),
                op1(rb, "Cast", op1(rb, "Max", big_n, c(1, i64)), to=f64))
    w = c(0.0)
    for k, a in enumerate(coeffs):
        term = op1(rb, "Mul", c((-1) ** k * a), op1(rb, "Cos", op1(rb, "Mul", c(float(k)), theta)))
        w = op1(rb, "Add", w, term)
    if not periodic:  # one symmetric sample: the window's centre, 1
        w = op1(rb, "Where", op1(rb, "Equal", n, c(1, i64)), c(1.0), w)
    if not out.is_float:  # the reference rounds to 9 decimals first (1 - 1e-16 must not give 0)
        w = op1(rb, "Div", op1(rb, "Round", op1(rb, "Mul", w, c(1e9))), c(1e9))
    return op1(rb, "Cast", w, to=out)


lower_hann_window = _window_rule("HannWindow")
lower_hamming_window = _window_rule("HammingWindow")
lower_blackman_window = _window_rule("BlackmanWindow")


@lowering("MelWeightMatrix")
def lower_mel_weight_matrix(rb, node, ins):
    known = constant_output(rb, node, ins)
    return known if known is not None else [_runtime_mel(rb, node, ins)]


def _runtime_mel(rb, node, ins):
    """The triangular filterbank from run-time sizes (ops/signal `_mel_ref`, vectorised): band
    edges from num_mel_bins + 2 points equally spaced in mel, floored to spectrogram bins; column
    i rises from edge i to edge i + 1 and falls to edge i + 2 (a band whose first two edges meet
    is 1 at that bin). Shapes follow the run-time sizes."""
    f64, i64 = dt.float64, dt.int64
    c = lambda v, t=f64: rb.constant(np.asarray(v, t.np), name="c")  # noqa: E731
    mels, n_dft, rate, lo, hi = [op1(rb, "Reshape", op1(rb, "Cast", v, to=t), ints(rb, []))
                                 for v, t in zip(ins, (i64, i64, f64, f64, f64))]

    def to_mel(f):  # 2595 log10(1 + f / 700)
        return op1(rb, "Mul", c(2595 / math.log(10)),
                   op1(rb, "Log", op1(rb, "Add", c(1.0), op1(rb, "Div", f, c(700.0)))))

    lo_mel = to_mel(lo)
    count = op1(rb, "Add", mels, c(2, i64))
    step = op1(rb, "Div", op1(rb, "Sub", to_mel(hi), lo_mel), op1(rb, "Cast", count, to=f64))
    points = op1(rb, "Add", op1(rb, "Mul", op1(rb, "Cast", dynamic_iota(rb, count), to=f64), step), lo_mel)
    hz = op1(rb, "Mul", c(700.0), op1(rb, "Sub", op1(rb, "Pow", c(10.0), op1(rb, "Div", points, c(2595.0))),
                                      c(1.0)))
    scaled = op1(rb, "Div", op1(rb, "Mul", op1(rb, "Cast", op1(rb, "Add", n_dft, c(1, i64)), to=f64), hz), rate)
    edge = op1(rb, "Floor", scaled)  # float64 integers: every edge comparison below is exact

    def edges(first):  # edge[first : first + mels] as a [1, mels] row
        end = op1(rb, "Reshape", op1(rb, "Add", mels, c(first, i64)), ints(rb, [1]))
        return op1(rb, "Reshape", op1(rb, "Slice", edge, ints(rb, [first]), end), ints(rb, [1, -1]))

    left, center, right = edges(0), edges(1), edges(2)
    bins = op1(rb, "Add", op1(rb, "Div", n_dft, c(2, i64)), c(1, i64))
    j = op1(rb, "Reshape", op1(rb, "Cast", dynamic_iota(rb, bins), to=f64), ints(rb, [-1, 1]))
    flat = op1(rb, "Equal", center, left)
    rise = op1(rb, "Div", op1(rb, "Sub", j, left),
               op1(rb, "Where", flat, c(1.0), op1(rb, "Sub", center, left)))
    rise = op1(rb, "Where", flat, c(1.0), rise)
    in_rise = op1(rb, "And", op1(rb, "Not", op1(rb, "Less", j, left)),
                  op1(rb, "Not", op1(rb, "Greater", j, center)))
    in_rise = op1(rb, "Where", flat, op1(rb, "Equal", j, center), in_rise)
    fall = op1(rb, "Div", op1(rb, "Sub", right, j),
               op1(rb, "Max", op1(rb, "Sub", right, center), c(1.0)))
    in_fall = op1(rb, "And", op1(rb, "Not", op1(rb, "Less", j, center)), op1(rb, "Less", j, right))
    out = op1(rb, "Where", in_fall, fall, op1(rb, "Where", in_rise, rise, c(0.0)))
    return op1(rb, "Cast", out, to=node.attrs["output_datatype"])
