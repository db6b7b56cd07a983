"""Constant folding: a node whose inputs are all constants becomes a constant.

The value is computed by the op's NumPy reference, the same code the reference interpreter runs,
so a folded graph computes exactly what the unfolded one did (the idea of Glow's ConstantFold,
which compiles constant sub-graphs for its Interpreter backend). Folding walks the graph in order,
so a whole constant sub-graph collapses in one pass. Values the builder already knows without
input data (`Value.known`, e.g. Shape of a statically shaped tensor) fold the same way.

Never folded: impure ops (`OpDef.pure=False`), ops with sub-graphs, results that are not plain
arrays (sequences, optionals), and results whose type would differ from the node's (quantized).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..aligned import SPILL_MIN_BYTES, frozen, spilled
from ..graph import Graph
from ..rewrite import rebuild
from .base import Pass
from .patterns import captured_values

#: Results larger than this stay computed at run time (a guard against absurd expansions; weights
#: computed by a sub-graph, like the light models' ConstantOfShape weights, are folded whatever
#: their size, as Glow does).
MAX_FOLD_BYTES = 1 << 30


def _foldable(node) -> bool:
    return node.op.pure and not node.op.has_subgraphs and not node.captures


def _evaluate(node, ins):
    """The node's results if every input is a constant, else its builder-known values, else None."""
    if all(v is None or v.data is not None for v in ins):
        with np.errstate(all="ignore"):
            try:
                res = node.op.reference(*[None if v is None else v.data for v in ins], **dict(node.attrs))
            except Exception:  # noqa: BLE001 - a failing fold leaves the error to run time
                return None
        return list(res) if isinstance(res, tuple) else [res]
    if all(o.known is not None for o in node.outputs):
        return [o.known for o in node.outputs]
    return None


def _fits(value, old) -> bool:
    """`value` can stand for the old output `old`: a plain array of a compatible type."""
    t = old.type
    if not isinstance(value, np.ndarray) or not isinstance(t, dt.TensorType):
        return False
    if isinstance(t.dtype, dt.QuantizedDType) or value.nbytes > MAX_FOLD_BYTES:
        return False
    try:
        if dt.from_numpy(value.dtype) != t.dtype:
            return False
    except Exception:  # noqa: BLE001 - a dtype glow has no name for
        return False
    return dt.shape_fits(t.shape, value.shape)


def _own(value: np.ndarray, ins) -> np.ndarray:
    """A folded value made read-only down to its memory where that memory is the reference's new
    array (not a view of an input's, whose owner may write it): the cpu backend then reads a large
    one where it lies instead of copying it; a large one goes to a temporary file's pages, whose
    memory is given back once a backend has packed its copy (glow.aligned.spilled)."""
    if any(v is not None and v.data is not None and np.may_share_memory(value, v.data) for v in ins):
        return value
    if value.nbytes >= SPILL_MIN_BYTES and not value.dtype.hasobject:
        out = spilled(np.ascontiguousarray(value), value.dtype, value.shape)
        if out is not None:
            return out
    return frozen(value)


def fold_constants(graph: Graph) -> Graph:
    pinned = captured_values(graph)

    def visit(rb, node, ins):
        if not _foldable(node) or not node.outputs or any(id(o) in pinned for o in node.outputs):
            return None
        if node.op.name == "Identity" and any(o is v for o in graph.outputs for v in node.outputs):
            return None  # binds a graph output to its name: nothing to gain
        if any((getattr(o.type, "nbytes", None) or 0) > MAX_FOLD_BYTES for o in node.outputs):
            return None  # decided by the type, before the reference would try to allocate it
        values = _evaluate(node, ins)
        if values is None or len(values) < len(node.outputs):
            return None
        values = values[:len(node.outputs)]
        if not all(_fits(np.asarray(v) if np.isscalar(v) else v, o) for v, o in zip(values, node.outputs)):
            return None
        return [rb.constant(_own(np.asarray(v), ins), name=o.name) for v, o in zip(values, node.outputs)]

    new, changed = rebuild(graph, visit)
    if not changed:
        return graph
    from .dce import eliminate_dead_code

    return eliminate_dead_code(new)


CONSTANT_FOLD = Pass("constant-fold", fold_constants,
                     "replace nodes computed from constants by their values (reference kernels)")
