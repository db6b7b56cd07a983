"""Elementwise arithmetic ops (binary, with NumPy broadcasting, and unary math)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._shape import broadcast_shapes, same_as
from .registry import BINARY, ELEMENTWISE, UNARY, Tier, op

NUM = dt.NUMERIC
FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})


def _broadcast_rule(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.inputs))]
    return [dt.TensorType(broadcast_shapes(ctx, *shapes), ctx.dtype(0))]


def _keep(dtype_of, fn):
    """Wrap a NumPy function so the result keeps the input's element type (no promotion)."""

    def ref(*xs, **_):
        return np.asarray(fn(*xs)).astype(dtype_of(*xs).dtype, copy=False)

    return ref


def binary(name, fn, types=NUM, since=7, tier=Tier.PRIMITIVE, doc="", groups=()):
    return op(name, inputs=("A:T", "B:T"), outputs=("C:T",), types={"T": types},
              infer=_broadcast_rule, reference=_keep(lambda a, b: a, fn),
              groups={ELEMENTWISE, BINARY, *groups}, tier=tier, onnx_since=since, doc=doc)


def unary(name, fn, types=FLT, since=6, tier=Tier.PRIMITIVE, doc="", groups=()):
    return op(name, inputs=("X:T",), outputs=("Y:T",), types={"T": types}, infer=same_as(0),
              reference=_keep(lambda x: x, fn), groups={ELEMENTWISE, UNARY, *groups}, tier=tier,
              onnx_since=since, doc=doc)


binary("Add", np.add, doc="A + B, broadcasting.")
binary("Sub", np.subtract, doc="A - B, broadcasting.")
binary("Mul", np.multiply, doc="A * B, broadcasting.")


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer division truncates toward zero (C semantics), unlike NumPy's floor division.
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.trunc(a.astype(np.float64) / b.astype(np.float64)).astype(a.dtype)
    return np.divide(a, b)


binary("Div", _div, doc="A / B, broadcasting; integer division truncates toward zero.")

unary("Neg", np.negative, types=NUM - {dt.uint8, dt.uint16, dt.uint32, dt.uint64},
      doc="-X.")
unary("Exp", np.exp, doc="e^X.")
unary("Log", np.log, doc="Natural logarithm.")
unary("Sqrt", np.sqrt, doc="Square root.")
unary("Relu", lambda x: np.maximum(x, 0).astype(x.dtype), types=NUM - {dt.uint8, dt.uint16, dt.uint32,
                                                                       dt.uint64},
      tier=Tier.HIGH, doc="max(X, 0).")
