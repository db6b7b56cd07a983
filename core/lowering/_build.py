"""Small helpers shared by lowering rules: typed scalar constants and common expansions."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt


def scalar(rb, value, like) -> object:
    """A 0-d constant with the element type of value `like`."""
    return rb.constant(np.asarray(value, dtype=like.type.dtype.np), name="c")


def ints(rb, values) -> object:
    """A 1-D int64 constant (axes, shapes, pads)."""
    return rb.constant(np.asarray(list(values), dtype=np.int64).reshape(-1), name="i")


def static_shape(v) -> tuple | None:
    t = v.type
    return t.shape if isinstance(t, dt.TensorType) and t.is_static else None


def is_float(v) -> bool:
    return isinstance(v.type, dt.TensorType) and v.type.dtype.is_float


def op1(rb, op, *inputs, **attrs):
    """One node: `op1(rb, "Cast", v, to=dt.float32)`."""
    return rb.emit1(op, list(inputs), attrs or None)


def cast(rb, v, to):
    """v as element type `to` (no node when it already is)."""
    return v if v.type.dtype == to else op1(rb, "Cast", v, to=to)


def const(rb, value, dtype):
    """A constant of a glow element type."""
    return rb.constant(np.asarray(value, dtype=dtype.np), name="c")
