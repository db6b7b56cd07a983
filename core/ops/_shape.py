"""Shape helpers for op shape rules. Dims are int (static), str (symbolic) or None (unknown)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import dtypes as dt


def broadcast_shapes(ctx, *shapes) -> tuple | None:
    """NumPy broadcasting over possibly-unknown dims; raises a GraphError naming ctx's node."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        static = {d for d in dims if isinstance(d, int) and d != 1}
        if len(static) > 1:
            raise ctx.error(f"shapes {[list(s) for s in shapes]} do not broadcast")
        if static:
            out.append(static.pop())
        elif all(d == 1 for d in dims):
            out.append(1)
        else:
            sym = {d for d in dims if d != 1}
            out.append(sym.pop() if len(sym) == 1 else None)
    return tuple(out)


def same_as(i: int = 0):
    """Shape rule: one output with input i's type."""
    return lambda ctx: [ctx.input(i)]


def as_dtype(i: int, dtype):
    """Shape rule: input i's shape with a fixed element type."""
    return lambda ctx: [dt.TensorType(ctx.shape(i), dtype)]


def numel(shape) -> int | None:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)  # exact: NumPy's int64 product wraps past 2**63


def unknown(rank: int | None) -> tuple | None:
    return None if rank is None else (None,) * rank


def ints(value) -> list[int] | None:
    """A known 1-D/0-D integer value as a list, else None."""
    if value is None:
        return None
    return [int(v) for v in np.asarray(value).reshape(-1)]


def normalize_axes(ctx, axes: Sequence[int], rank: int | None) -> list[int]:
    return [ctx.axis(a, rank) for a in axes]
