"""Activation functions: elementwise nonlinearities with (mostly) float attributes, plus Clip and PRelu.

All are high-level: each is a short formula over primitives (compare, select, exp, ...), so every
backend gets them by lowering. The references compute in float32 or wider (`float_math`).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._shape import numel, same_as
from .elementwise import FLT, NUM, erf, float_math
from .registry import ACTIVATION, ELEMENTWISE, UNARY, Attr, Tier, op


def activation(name, fn, attrs=(), types=FLT, since=6, doc=""):
    """A one-input activation `fn(x, **attrs)` whose output has x's type."""
    return op(name, inputs=("X:T",), outputs=("Y:T",), types={"T": types}, attrs=attrs,
              infer=same_as(0), reference=float_math(fn), groups={ELEMENTWISE, UNARY, ACTIVATION},
              tier=Tier.HIGH, onnx_since=since, doc=doc)


def _sigmoid(x):
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x):
    return np.logaddexp(0, x)  # log(1 + e^x) without overflow


activation("LeakyRelu", lambda x, alpha: np.where(x < 0, alpha * x, x),
           attrs=(Attr("alpha", "float", 0.01),), doc="X for X >= 0, alpha * X otherwise.")
activation("Elu", lambda x, alpha: np.where(x < 0, alpha * np.expm1(x), x),
           attrs=(Attr("alpha", "float", 1.0),), doc="X for X >= 0, alpha * (e^X - 1) otherwise.")
activation("Selu", lambda x, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(x)),
           attrs=(Attr("alpha", "float", 1.67326319217681884765625),
                  Attr("gamma", "float", 1.05070102214813232421875)),
           doc="gamma * X for X > 0, gamma * alpha * (e^X - 1) otherwise.")


def _celu(x, alpha):
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))


activation("Celu", _celu, attrs=(Attr("alpha", "float", 1.0),), since=12,
           doc="max(0, X) + min(0, alpha * (e^(X/alpha) - 1)).")
activation("HardSigmoid", lambda x, alpha, beta: np.clip(alpha * x + beta, 0, 1),
           attrs=(Attr("alpha", "float", 0.2), Attr("beta", "float", 0.5)),
           doc="max(0, min(1, alpha * X + beta)).")
activation("HardSwish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1), since=14,
           doc="X * max(0, min(1, X / 6 + 1/2)).")
activation("Softplus", _softplus, since=1, doc="log(1 + e^X).")
activation("Softsign", lambda x: x / (1 + np.abs(x)), since=1, doc="X / (1 + |X|).")
activation("ThresholdedRelu", lambda x, alpha: np.where(x > alpha, x, 0),
           attrs=(Attr("alpha", "float", 1.0),), since=10, doc="X for X > alpha, 0 otherwise.")
activation("Mish", lambda x: x * np.tanh(_softplus(x)), since=18, doc="X * tanh(softplus(X)).")
activation("Swish", lambda x, alpha: x * _sigmoid(alpha * x), attrs=(Attr("alpha", "float", 1.0),),
           since=24, doc="X * sigmoid(alpha * X).")


def _gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x.astype(np.float64) / np.sqrt(2)))


def _gelu_infer(ctx):
    if ctx.attrs["approximate"] not in ("none", "tanh"):
        raise ctx.error(f"attribute approximate must be 'none' or 'tanh', got {ctx.attrs['approximate']!r}")
    return [ctx.input(0)]


op("Gelu", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("approximate", "string", "none"),), infer=_gelu_infer, reference=float_math(_gelu),
   groups={ELEMENTWISE, UNARY, ACTIVATION}, tier=Tier.HIGH, onnx_since=20,
   doc="X * Phi(X), Phi the standard normal CDF (or its tanh approximation if approximate='tanh').")


def _shrink(x, bias, lambd):
    x = x.astype(np.float64) if x.dtype.kind in "iu" else x  # integer inputs: X + bias is fractional
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


# Shrink's schema takes the integers too, but not bfloat16.
activation("Shrink", _shrink, attrs=(Attr("bias", "float", 0.0), Attr("lambd", "float", 0.5)),
           types=NUM - {dt.bfloat16}, since=9,
           doc="X + bias for X < -lambd, X - bias for X > lambd, 0 otherwise.")


# -- PRelu -------------------------------------------------------------------------------------------

def _prelu_infer(ctx):
    x, slope = ctx.shape(0), ctx.shape(1)
    if x is not None and slope is not None:
        # Unidirectional broadcasting: slope stretches to X's shape, never the other way round.
        bad = len(slope) > len(x) or any(
            isinstance(s, int) and isinstance(d, int) and s not in (1, d)
            for d, s in zip(x[len(x) - len(slope):], slope))
        if bad:
            raise ctx.error(f"slope shape {list(slope)} does not broadcast to input shape {list(x)}")
    return [ctx.input(0)]


@float_math
def _prelu(x, slope):
    return np.where(x < 0, slope.astype(x.dtype) * x, x)


def _prelu_from_onnx(ic):
    x, slope = ic.inputs[0], ic.inputs[1]
    if ic.opset < 7 and x is not None and slope is not None and x.type.rank is not None \
            and x.type.rank > 2 and slope.type.shape is not None and len(slope.type.shape) == 1 \
            and slope.type.shape[0] != 1:
        # Opset 6 and older: a 1-D slope is per channel (axis 1), not aligned with the last axis.
        shape = np.asarray([0] + [1] * (x.type.rank - 2), np.int64)
        slope = ic.add("Reshape", [slope, ic.const(shape)])[0]
    return ic.emit("PRelu", [x, slope], ic.attrs)


op("PRelu", inputs=("X:T", "slope:T"), outputs=("Y:T",),
   types={"T": FLT | {dt.int32, dt.int64, dt.uint32, dt.uint64}}, infer=_prelu_infer,
   reference=_prelu, groups={ELEMENTWISE, ACTIVATION}, tier=Tier.HIGH, onnx_since=6,
   from_onnx=_prelu_from_onnx,
   doc="X for X >= 0, slope * X otherwise; slope broadcasts to X's shape.")


# -- Clip --------------------------------------------------------------------------------------------

def _clip_infer(ctx):
    for i, what in ((1, "min"), (2, "max")):
        if ctx.has(i):
            n = numel(ctx.shape(i))
            if n is not None and (n != 1 or len(ctx.shape(i)) > 1):
                raise ctx.error(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
    return [ctx.input(0)]


def _clip(x, lo=None, hi=None):
    # Max then Min, so that min > max gives max everywhere, as ONNX specifies.
    y = x if lo is None else np.maximum(x, lo.reshape(()))
    y = y if hi is None else np.minimum(y, hi.reshape(()))
    return np.asarray(y).astype(x.dtype, copy=False)


def _clip_from_onnx(ic):
    if ic.opset >= 11:
        return ic.emit("Clip", ic.inputs, ic.attrs)
    # Opset 6-10: bounds were float attributes (defaulting to -/+ FLT_MAX, which clips infinities);
    # they become scalar inputs of the input's type.
    x, big = ic.inputs[0], float(np.finfo(np.float32).max)
    lo, hi = ic.attrs.get("min", -big), ic.attrs.get("max", big)
    with np.errstate(over="ignore"):  # FLT_MAX in float16 is inf: the intended "no bound"
        lo, hi = np.asarray(lo, x.type.dtype.np), np.asarray(hi, x.type.dtype.np)
    return ic.emit("Clip", [x, ic.const(lo), ic.const(hi)])


op("Clip", inputs=("input:T", "min:T?", "max:T?"), outputs=("output:T",), types={"T": NUM},
   infer=_clip_infer, reference=_clip, groups={ELEMENTWISE, ACTIVATION}, tier=Tier.HIGH,
   onnx_since=6, from_onnx=_clip_from_onnx,
   doc="X limited to [min, max] (scalar inputs, each optional); min > max gives max everywhere.")
