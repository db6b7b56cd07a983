"""Signal-processing ops: DFT, STFT, the Hann/Hamming/Blackman windows, MelWeightMatrix, and
ImageDecoder.

Complex tensors follow ONNX: a last axis of 2 holds (real, imaginary); a last axis of 1 is a real
signal. The references compute in the input's precision (float64, else float32) and cast back.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from . import _signal_image
from .registry import ACCUMULATES, SIGNAL, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float16, dt.float64, dt.bfloat16})
IDX = frozenset({dt.int32, dt.int64})
#: The output types the window and mel generators may produce.
GEN_OUT = frozenset({dt.uint8, dt.uint16, dt.uint32, dt.uint64, dt.int8, dt.int16, dt.int32,
                     dt.int64, dt.float16, dt.float32, dt.float64, dt.bfloat16})


def _scalar(ctx, i, what):
    """Input i's known scalar value as an int (None when unknown); checks it is one element."""
    if not ctx.has(i):
        return None
    shape = ctx.shape(i)
    if shape is not None and (len(shape) > 1 or (len(shape) == 1 and shape[0] not in (1, None))):
        raise ctx.error(f"{what} must be a scalar, got shape {list(shape)}")
    v = ctx.value(i)
    return None if v is None else int(np.asarray(v).reshape(-1)[0])


def _int(value, what, op_name) -> int:
    arr = np.asarray(value).reshape(-1)
    if arr.size != 1:
        raise GraphError(f"{op_name}: {what} must be a scalar, got {arr.size} values")
    return int(arr[0])


def _to_complex(x: np.ndarray) -> np.ndarray:
    """The complex signal, in single precision for float32 input: np.fft then rounds as an
    ONNX float32 implementation does (tiny results agree with the references' float32 noise)."""
    real, c = (np.float64, np.complex128) if x.dtype == np.float64 else (np.float32, np.complex64)
    x = x.astype(real)
    if x.shape[-1] == 2:
        return (x[..., 0] + 1j * x[..., 1]).astype(c)
    return x[..., 0].astype(c)


def _from_complex(y: np.ndarray, dtype) -> np.ndarray:
    return np.stack([y.real, y.imag], axis=-1).astype(dtype)


# -- DFT -------------------------------------------------------------------------------------------
def _dft_check(rank, last, axis, inverse, onesided, fail):
    """Validate a DFT's geometry; returns the normalized axis (or None when unknown)."""
    if inverse not in (0, 1) or onesided not in (0, 1):
        raise fail("inverse and onesided must be 0 or 1")
    if rank is not None and rank < 2:
        raise fail(f"input must have rank >= 2 (signal axes plus a last axis of 1 or 2), got {rank}")
    if isinstance(last, int) and last not in (1, 2):
        raise fail(f"the last axis must be 1 (real) or 2 (complex), got {last}")
    if onesided and not inverse and last == 2:
        raise fail("a one-sided forward DFT (RFFT) needs a real input (last axis 1)")
    if onesided and inverse and last == 1:
        raise fail("a one-sided inverse DFT (IRFFT) needs a complex input (last axis 2)")
    if axis is None or rank is None:
        return None
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise fail(f"axis {axis} out of range for rank {rank}: the last axis holds the complex parts")
    return axis % rank


def dft_lengths(dim, n, inverse, onesided, fail):
    """(transform length, output length along the axis); None where unknown."""
    if n is None and isinstance(dim, int):
        n = 2 * (dim - 1) if onesided and inverse else dim
    if n is None:
        return None, None
    if n < 1:
        raise fail(f"the transform length (dft_length) must be positive, got {n}")
    return n, (n // 2 + 1 if onesided and not inverse else n)


def _dft_infer(ctx):
    a = ctx.attrs
    shape = ctx.shape(0)
    rank = None if shape is None else len(shape)
    axis = _scalar(ctx, 2, "axis") if ctx.has(2) else -2
    axis = _dft_check(rank, shape[-1] if shape else None, axis, a["inverse"], a["onesided"],
                      ctx.error)
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    n = _scalar(ctx, 1, "dft_length")
    out = list(shape)
    out[-1] = 1 if a["onesided"] and a["inverse"] else 2
    if axis is not None and ctx.has(1) and n is None:
        out[axis] = None  # a dft_length known only at run time
    elif axis is not None:
        out[axis] = dft_lengths(shape[axis], n, a["inverse"], a["onesided"], ctx.error)[1]
    elif ctx.has(1) or a["onesided"]:
        out[:-1] = [None] * (rank - 1)  # some axis changes length, but which one is not known
    return [dt.TensorType(tuple(out), ctx.dtype(0))]


def _dft_ref(x, dft_length=None, axis=None, inverse=0, onesided=0):
    fail = lambda m: GraphError(f"DFT: {m}")  # noqa: E731
    ax = _dft_check(x.ndim, x.shape[-1], -2 if axis is None else _int(axis, "axis", "DFT"),
                    inverse, onesided, fail)
    n = None if dft_length is None else _int(dft_length, "dft_length", "DFT")
    n, _ = dft_lengths(x.shape[ax], n, inverse, onesided, fail)
    c = _to_complex(x)
    # np.fft zero-pads or truncates the axis to n, as ONNX's dft_length asks.
    if onesided and inverse:
        return np.fft.irfft(c, n=n, axis=ax)[..., None].astype(x.dtype)
    if onesided:
        y = np.fft.rfft(c.real, n=n, axis=ax)
    elif inverse:
        y = np.fft.ifft(c, n=n, axis=ax)
    else:
        y = np.fft.fft(c, n=n, axis=ax)
    return _from_complex(y, x.dtype)


def _dft_from_onnx(ic):
    if ic.opset >= 20:
        return ic.emit("DFT", ic.inputs, ic.attrs)
    # Opsets 17-19 took the axis as an attribute, defaulting to 1 (opset 20 defaults to -2).
    attrs = dict(ic.attrs)
    axis = ic.const(np.asarray(attrs.pop("axis", 1), np.int64))
    inputs = list(ic.inputs) + [None] * (2 - len(ic.inputs))
    return ic.emit("DFT", [inputs[0], inputs[1], axis], attrs)


op("DFT", inputs=("input:T1", "dft_length:T2?", "axis:I?"), outputs=("output:T1",),
   types={"T1": FLT, "T2": IDX, "I": frozenset({dt.int64})},
   attrs=(Attr("inverse", "int", 0), Attr("onesided", "int", 0)),
   infer=_dft_infer, reference=_dft_ref, groups={SIGNAL, ACCUMULATES}, tier=Tier.HIGH, onnx_since=20,
   from_onnx=_dft_from_onnx,
   doc="Discrete Fourier transform along one axis (forward, inverse, one-sided RFFT or IRFFT); "
       "the last axis holds real (1) or real and imaginary (2) parts.")


# -- STFT ------------------------------------------------------------------------------------------
def stft_geometry(length, step, window_len, fl, onesided, last, fail):
    """(frames, bins) for frame length fl; entries None where unknown."""
    if onesided not in (0, 1):
        raise fail("onesided must be 0 or 1")
    if isinstance(last, int) and last not in (1, 2):
        raise fail(f"the signal's last axis must be 1 (real) or 2 (complex), got {last}")
    if onesided and last == 2:
        raise fail("a one-sided STFT needs a real signal (last axis 1); set onesided=0")
    if step is not None and step < 1:
        raise fail(f"frame_step must be positive, got {step}")
    if isinstance(fl, int) and isinstance(window_len, int) and fl != window_len:
        raise fail(f"frame_length {fl} differs from the window's length {window_len}")
    if not isinstance(fl, int):
        return None, None
    if fl < 1:
        raise fail(f"frame_length must be positive, got {fl}")
    frames = None
    if isinstance(length, int) and step is not None:
        if fl > length:
            raise fail(f"frame_length {fl} is longer than the signal ({length})")
        frames = (length - fl) // step + 1
    return frames, (fl // 2 + 1 if onesided else fl)


def _stft_infer(ctx):
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 3:
        raise ctx.error(f"signal must be [batch, length, 1 or 2], got shape {list(shape)}")
    wshape = ctx.shape(2) if ctx.has(2) else None
    if wshape is not None and len(wshape) != 1:
        raise ctx.error(f"window must be 1-D, got shape {list(wshape)}")
    batch, length, last = shape if shape is not None else (None, None, None)
    window_len = wshape[0] if wshape is not None else None
    # frame_length, else the window's length, else the whole signal; None while unknown.
    fl = _scalar(ctx, 3, "frame_length") if ctx.has(3) else window_len if ctx.has(2) else length
    frames, bins = stft_geometry(length, _scalar(ctx, 1, "frame_step"), window_len, fl,
                                  ctx.attrs["onesided"], last, ctx.error)
    return [dt.TensorType((batch, frames, bins, 2), ctx.dtype(0))]


def _stft_ref(signal, frame_step, window=None, frame_length=None, onesided=1):
    fail = lambda m: GraphError(f"STFT: {m}")  # noqa: E731
    if signal.ndim != 3:
        raise fail(f"signal must be [batch, length, 1 or 2], got shape {list(signal.shape)}")
    if window is not None and window.ndim != 1:
        raise fail(f"window must be 1-D, got shape {list(window.shape)}")
    step = _int(frame_step, "frame_step", "STFT")
    window_len = None if window is None else window.shape[0]
    fl = (_int(frame_length, "frame_length", "STFT") if frame_length is not None
          else window_len if window is not None else signal.shape[1])
    frames, bins = stft_geometry(signal.shape[1], step, window_len, fl, onesided,
                                  signal.shape[2], fail)
    x = _to_complex(signal)  # [batch, length]
    w = np.ones(fl, x.real.dtype) if window is None else window.astype(x.real.dtype)
    starts = np.arange(frames) * step
    framed = x[:, starts[:, None] + np.arange(fl)] * w  # [batch, frames, fl]
    return _from_complex(np.fft.fft(framed, axis=-1)[..., :bins], signal.dtype)


op("STFT", inputs=("signal:T1", "frame_step:T2", "window:T1?", "frame_length:T2?"),
   outputs=("output:T1",), types={"T1": FLT, "T2": IDX}, attrs=(Attr("onesided", "int", 1),),
   infer=_stft_infer, reference=_stft_ref, groups={SIGNAL, ACCUMULATES}, tier=Tier.HIGH, onnx_since=17,
   doc="Short-time Fourier transform: the DFT of each windowed frame of a [batch, length, 1|2] "
       "signal, giving [batch, frames, bins, 2].")


# -- Windows ---------------------------------------------------------------------------------------
def _window_infer(ctx):
    if ctx.attrs["periodic"] not in (0, 1):
        raise ctx.error("periodic must be 0 or 1")
    if ctx.attrs["output_datatype"] not in GEN_OUT:
        raise ctx.error(f"output_datatype {ctx.attrs['output_datatype']} is not a numeric type")
    n = _scalar(ctx, 0, "size")
    if n is not None and n < 0:
        raise ctx.error(f"size must be non-negative, got {n}")
    return [dt.TensorType((n,), ctx.attrs["output_datatype"])]


def _window(name, coeffs, doc):
    """A cosine-sum window sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1."""

    def ref(size, periodic=1, output_datatype=dt.float32):
        n = _int(size, "size", name)
        if n < 0:
            raise GraphError(f"{name}: size must be non-negative, got {n}")
        if n == 1 and not periodic:
            w = np.ones(1)  # the limit of the symmetric window: its centre sample (N - 1 = 0)
        else:
            theta = 2 * math.pi * np.arange(n, dtype=np.float64) / (n if periodic else n - 1)
            w = sum((-1) ** k * a * np.cos(k * theta) for k, a in enumerate(coeffs))
            w = np.asarray(w, np.float64).reshape(n)
        if not output_datatype.is_float:
            w = np.round(w, 9)  # rounding noise must not decide an integer (1 - 1e-16 -> 0)
        return w.astype(output_datatype.np)

    op(name, inputs=("size:T1",), outputs=("output:T2",), types={"T1": IDX, "T2": GEN_OUT},
       attrs=(Attr("periodic", "int", 1), Attr("output_datatype", "dtype", dt.float32)),
       infer=_window_infer, reference=ref, groups={SIGNAL}, tier=Tier.HIGH, onnx_since=17, doc=doc)


_window("HannWindow", (0.5, 0.5), "Hann window of length size (periodic by default).")
_window("HammingWindow", (25 / 46, 21 / 46), "Hamming window (a0 = 25/46) of length size.")
_window("BlackmanWindow", (0.42, 0.5, 0.08), "Blackman window of length size.")


# -- MelWeightMatrix -------------------------------------------------------------------------------
def _mel_infer(ctx):
    if ctx.attrs["output_datatype"] not in GEN_OUT:
        raise ctx.error(f"output_datatype {ctx.attrs['output_datatype']} is not a numeric type")
    mels, dft_len = _scalar(ctx, 0, "num_mel_bins"), _scalar(ctx, 1, "dft_length")
    for i, what in ((2, "sample_rate"), (3, "lower_edge_hertz"), (4, "upper_edge_hertz")):
        shape = ctx.shape(i)
        if shape is not None and len(shape) > 1:
            raise ctx.error(f"{what} must be a scalar, got shape {list(shape)}")
    if mels is not None and mels < 1 or dft_len is not None and dft_len < 1:
        raise ctx.error("num_mel_bins and dft_length must be positive")
    return [dt.TensorType((None if dft_len is None else dft_len // 2 + 1, mels),
                          ctx.attrs["output_datatype"])]


def _mel_ref(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz,
             output_datatype=dt.float32):
    mels = _int(num_mel_bins, "num_mel_bins", "MelWeightMatrix")
    n_dft = _int(dft_length, "dft_length", "MelWeightMatrix")
    rate = _int(sample_rate, "sample_rate", "MelWeightMatrix")
    lo = float(np.asarray(lower_edge_hertz, np.float64).reshape(-1)[0])
    hi = float(np.asarray(upper_edge_hertz, np.float64).reshape(-1)[0])
    if mels < 1 or n_dft < 1 or rate < 1:
        raise GraphError("MelWeightMatrix: num_mel_bins, dft_length and sample_rate must be positive")
    if not 0 <= lo < hi:
        raise GraphError(f"MelWeightMatrix: need 0 <= lower_edge_hertz < upper_edge_hertz, got "
                         f"{lo}, {hi}")
    bins = n_dft // 2 + 1
    # ONNX's definition: num_mel_bins + 2 points equally spaced in mel (the step divides the
    # range by the point count), mapped back to hertz and floored to spectrogram bins.
    lo_mel, hi_mel = (2595 * math.log10(1 + f / 700) for f in (lo, hi))
    points = np.arange(mels + 2) * ((hi_mel - lo_mel) / (mels + 2)) + lo_mel
    hz = 700 * (10 ** (points / 2595) - 1)
    edge = np.floor((n_dft + 1) * hz / rate).astype(np.int64)
    out = np.zeros((bins, mels))
    for i in range(mels):
        left, center, right = int(edge[i]), int(edge[i + 1]), int(edge[i + 2])
        if center == left:
            if 0 <= center < bins:
                out[center, i] = 1.0
        else:
            for j in range(max(left, 0), min(center + 1, bins)):
                out[j, i] = (j - left) / (center - left)
        for j in range(max(center, 0), min(right, bins)):
            out[j, i] = (right - j) / (right - center)
    return out.astype(output_datatype.np)


op("MelWeightMatrix",
   inputs=("num_mel_bins:T1", "dft_length:T1", "sample_rate:T1", "lower_edge_hertz:T2",
           "upper_edge_hertz:T2"),
   outputs=("output:T3",), types={"T1": IDX, "T2": FLT, "T3": GEN_OUT},
   attrs=(Attr("output_datatype", "dtype", dt.float32),), infer=_mel_infer, reference=_mel_ref,
   groups={SIGNAL}, tier=Tier.HIGH, onnx_since=17,
   doc="[dft_length // 2 + 1, num_mel_bins] triangular filterbank mapping a one-sided linear "
       "spectrum to the mel scale (mel = 2595 log10(1 + f / 700)).")


# -- ImageDecoder ----------------------------------------------------------------------------------
_PIXEL_FORMATS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def _image_infer(ctx):
    fmt = ctx.attrs["pixel_format"]
    if fmt not in _PIXEL_FORMATS:
        raise ctx.error(f"pixel_format must be one of {list(_PIXEL_FORMATS)}, got '{fmt}'")
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 1:
        raise ctx.error(f"encoded_stream must be 1-D bytes, got shape {list(shape)}")
    return [dt.TensorType((None, None, _PIXEL_FORMATS[fmt]), dt.uint8)]


op("ImageDecoder", inputs=("encoded_stream:T1",), outputs=("image:T2",),
   types={"T1": frozenset({dt.uint8}), "T2": frozenset({dt.uint8})},
   attrs=(Attr("pixel_format", "string", "RGB"),), infer=_image_infer,
   reference=lambda data, pixel_format="RGB": _signal_image.decode(data, pixel_format),
   groups={SIGNAL}, tier=Tier.HIGH, onnx_since=20,
   doc="Decodes an encoded image (BMP, PNG, PNM, TIFF built in; JPEG, JPEG 2000, WebP through "
       "Pillow) into [H, W, C] uint8, C = 3 (RGB/BGR) or 1 (Grayscale).")
