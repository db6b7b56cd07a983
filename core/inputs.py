"""Generated input values for a graph: what `glow run` and `glow bench`, the benchmarks and tests
feed a model when nobody gives them inputs.

Every call with the same seed gives the same values; a benchmark that must not time a repeated
input (a repeated integer input may hit a cached specialisation) draws with a new seed per call.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import InputError
from .limits import check_alloc


def make_inputs(graph, seed: int = 0, shapes: dict | None = None) -> dict:
    """Deterministic inputs for every graph input; `shapes` ({name: dims}, e.g. from `glow run
    --shape`) gives their shapes, else symbolic dims become 1 (silently: `glow run` warns).
    Floats are standard normal, integers in [0, 10), bools 0 or 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        t = v.type
        if not isinstance(t, dt.TensorType):
            raise InputError(f"input '{v.name}' is a {t}; pass it with --inputs")
        shape = (shapes or {}).get(v.name) or tuple(d if isinstance(d, int) else 1 for d in (t.shape or ()))
        # Refused before NumPy allocates: a 64-bit draw plus the cast result per element.
        check_alloc(f"input '{v.name}'", "a generated input", shape, 8 + t.dtype.itemsize)
        if t.dtype.is_float:
            arr = rng.standard_normal(shape).astype(t.dtype.np)
        elif t.dtype == dt.bool_:
            arr = rng.integers(0, 2, shape).astype(bool)
        elif t.dtype.is_int:
            arr = rng.integers(0, 10, shape).astype(t.dtype.np)
        else:
            raise InputError(f"input '{v.name}' has type {t}; pass it with --inputs")
        feeds[v.name] = arr
    return feeds


__all__ = ["make_inputs"]
