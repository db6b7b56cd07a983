"""Helpers shared by the movement, index and generator op modules (types, dims, folding)."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ._shape import ints, numel

#: Every element type (ops that only move bytes).
ALL = frozenset(dt.ALL)
#: The 16 "classic" ONNX tensor types most movement/index ops accept.
STD = dt.NUMERIC | {dt.bool_, dt.string, dt.complex64, dt.complex128}
I64 = frozenset({dt.int64})
IND = frozenset({dt.int32, dt.int64})
#: Largest value (in elements) a compile-time fold may produce; matches graph.KNOWN_VALUE_LIMIT.
FOLD_LIMIT = 4096


def merge_dim(ctx, a, b, what="dims"):
    """Two dims that must agree: the static one wins; two different static dims are an error."""
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ctx.error(f"{what} disagree: {a} vs {b}")
        return a
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    return a if a == b else None


def value_len(ctx, i):
    """Number of elements of a 1-D input (from its value or its static shape), else None."""
    v = ctx.value(i)
    if v is not None:
        return int(np.asarray(v).size)
    s = ctx.shape(i)
    if s is None:
        return None
    if len(s) == 0:
        return 1
    return s[0] if len(s) == 1 and isinstance(s[0], int) else None


def scalar_of(ctx, i):
    """A known scalar (0-D or 1-element) integer input value, else None."""
    v = ints(ctx.value(i))
    if v is None:
        return None
    if len(v) != 1:
        raise ctx.error(f"input {i} must be a scalar, got {len(v)} values")
    return v[0]


def zero_of(dtype):
    """The fill value for 'zero' in dtype: '' for strings (NumPy's object zero is the int 0)."""
    return np.asarray("", dtype=object) if dtype == np.object_ else np.zeros((), dtype=dtype)


def fold_small(infer, reference):
    """A `known_value` rule that folds like the builder does, but only when the *output* is small.

    Ops whose output can be far bigger than their inputs (ConstantOfShape, Expand, Tile, Range,
    ...) would otherwise materialise huge constants at compile time.
    """

    def known(ctx):
        if any(ctx.has(i) and ctx.value(i) is None for i in range(len(ctx.inputs))):
            return [None] * ctx.num_outputs
        out = infer(ctx)
        n = numel(out[0].shape) if isinstance(out[0], dt.TensorType) else None
        if n is None or n > FOLD_LIMIT:
            return [None] * ctx.num_outputs
        args = [ctx.value(i) if ctx.has(i) else None for i in range(len(ctx.inputs))]
        try:
            res = reference(*args, **ctx.attrs)
        except Exception:  # folding is an optimisation; the real run reports real errors
            return [None] * ctx.num_outputs
        res = list(res) if isinstance(res, tuple) else [res]
        return (res + [None] * ctx.num_outputs)[:ctx.num_outputs]

    return known


def prod_dims(dims):
    """Product of dims, or None if any is not static."""
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None


def mul_dim(d, k):
    return d * k if isinstance(d, int) else None


def div_dim(ctx, d, k, what):
    """d / k for a dim that must divide evenly; None if d is not static."""
    if not isinstance(d, int):
        return None
    if d % k:
        raise ctx.error(f"{what} {d} is not divisible by {k}")
    return d // k


def attr_input(ic, name="axes"):
    """For old-opset adapters: an ints attribute that later became an int64 input, as a constant."""
    v = ic.attrs.get(name)
    return None if v is None else ic.const(np.asarray(v, dtype=np.int64).reshape(-1))


def norm_axes(ctx, axes, rank, what="axes"):
    """Normalised axes; raises (via ctx) on an out-of-range or repeated axis."""
    out = [ctx.axis(a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {list(axes)} repeat an axis")
    return out


class RefCtx:
    """Stand-in for an InferContext in reference code: errors become plain ValueErrors."""

    @staticmethod
    def error(msg):
        return ValueError(msg)

    @staticmethod
    def axis(a, rank):
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"axis {a} out of range for rank {rank}")
        return a % rank if rank else 0
