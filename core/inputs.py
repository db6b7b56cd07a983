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
    Floats are standard normal, integers in [0, 10) (below the size of the table they index,
    when they are a Gather's indices: token-type ids index a table of 2), bools 0 or 1."""
    rng = np.random.default_rng(seed)
    bounds = _index_bounds(graph)
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
            arr = rng.integers(0, max(1, min(10, bounds.get(v.name, 10))), shape).astype(t.dtype.np)
        else:
            raise InputError(f"input '{v.name}' has type {t}; pass it with --inputs")
        feeds[v.name] = arr
    return feeds


#: Ops that pass index values through unchanged (ids cast, reshaped, unsqueezed on their way).
_PASS_THROUGH = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"})


def _index_bounds(graph) -> dict[str, int]:
    """{input name: size of the smallest table it indexes}, for integer inputs that reach the
    indices of a Gather (directly or through casts and reshapes) whose data has a static dim."""
    users: dict[int, list] = {}
    for n in graph.nodes:
        for i, x in enumerate(n.inputs):
            if x is not None:
                users.setdefault(id(x), []).append((n, i))
    bounds = {}
    for v in graph.inputs:
        stack, best = [v], None
        while stack:
            x = stack.pop()
            for n, i in users.get(id(x), ()):
                if n.op.name in _PASS_THROUGH and i == 0:
                    stack.extend(n.outputs)
                elif n.op.name == "Gather" and i == 1:
                    shape = getattr(n.inputs[0].type, "shape", None)
                    axis = n.attrs.get("axis", 0)
                    if shape and -len(shape) <= axis < len(shape) and isinstance(shape[axis], int):
                        best = shape[axis] if best is None else min(best, shape[axis])
        if best is not None:
            bounds[v.name] = best
    return bounds


__all__ = ["make_inputs"]
