"""Common-subexpression elimination: two nodes with the same op, attributes and inputs become one.

Small constants are deduplicated by value first (shape tensors, scalars), so that `x + 1` written
twice with two separate constants still merges. Large weights are compared by identity only:
hashing them would cost time on every run, and real models rarely repeat a large weight.
Two-input ops of the op table's COMMUTATIVE group match either way round (`a + b` == `b + a`,
exactly, in IEEE arithmetic).
Impure ops and nodes with sub-graph captures are never merged.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..ops.registry import COMMUTATIVE
from ..rewrite import copy_node, rebuild
from .base import Pass
from .patterns import captured_values

#: Constants up to this many bytes are compared by value.
DEDUP_CONSTANT_BYTES = 1024


def _hashable(x):
    """A hashable stand-in for an attribute value (graphs and big arrays by identity)."""
    if isinstance(x, np.ndarray):
        if x.nbytes <= DEDUP_CONSTANT_BYTES and x.dtype != object:
            return ("array", x.dtype.str, x.shape, x.tobytes())
        return ("id", id(x))
    if isinstance(x, (tuple, list)):
        return tuple(_hashable(e) for e in x)
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return x


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    seen: dict = {}
    constants: dict = {}
    merged = False
    # Graph outputs and values sub-graphs capture by name keep their own node.
    graph_outputs = {id(v) for v in graph.outputs} | captured_values(graph)

    def canon(v):
        """The representative of a small constant with this value."""
        if v is None or v.data is None:
            return v
        d = v.data
        if d.dtype == object or d.nbytes > DEDUP_CONSTANT_BYTES:
            return v
        return constants.setdefault((str(v.type), d.dtype.str, d.shape, d.tobytes()), v)

    def visit(rb, node, ins):
        nonlocal merged
        if not node.op.pure or node.captures:
            return None
        canon_ins = [canon(v) for v in ins]
        ids = tuple(None if v is None else id(v) for v in canon_ins)
        if node.op.in_group(COMMUTATIVE) and len(ids) == 2:
            ids = tuple(sorted(ids, key=lambda i: -1 if i is None else i))
        key = (id(node.op), ids, len(node.outputs),
               tuple(sorted((k, _hashable(v)) for k, v in node.attrs.items())))
        # A node that defines a graph output stays: merging it would only add an Identity that
        # keeps the output's name.
        if key in seen and not any(id(o) in graph_outputs for o in node.outputs):
            merged = True
            return seen[key]
        if any(a is not b for a, b in zip(canon_ins, ins)):
            merged = True
        # Copy the first node of each key ourselves, keeping its names (rebuild would do the same),
        # so that later duplicates can be pointed at its outputs in the new graph.
        outs = copy_node(rb, node, canon_ins, [])
        seen.setdefault(key, outs)
        return outs

    new, _ = rebuild(graph, visit)
    return new if merged else graph


CSE = Pass("cse", eliminate_common_subexpressions, "merge nodes with equal op, attributes and inputs")
