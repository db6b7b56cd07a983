"""Shape specialisation: a graph with dynamic shapes, made static for one set of concrete inputs.

Code-generating backends need every shape at compile time. When a model has symbolic dims, or
small integer inputs that decide shapes (a Reshape's target, a Slice's bounds, an Expand's shape),
the executable compiles one static version per *input signature*: the inputs' shapes and dtypes,
plus the values of small integer inputs, which become constants (so the shape rules see them).
`specialize(graph, feeds)` builds that static graph; `signature(graph, feeds)` is its cache key.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import GraphError, InputError
from .graph import Graph
from .rewrite import Rebuilder, copy_node

#: Integer inputs up to this many elements are specialised on their values (shape-like inputs).
VALUE_LIMIT = 64


def needs_specialization(graph: Graph) -> bool:
    """Whether some value's shape is unknown (symbolic dims, or shapes decided by input values)."""
    return not graph.is_static()


def _value_input(t) -> bool:
    return (isinstance(t, dt.TensorType) and t.dtype in (dt.int64, dt.int32) and t.is_static
            and (t.numel or 0) <= VALUE_LIMIT)


def signature(graph: Graph, feeds: dict, values: bool) -> tuple:
    """The cache key of a specialisation: input shapes and dtypes (and small int values)."""
    key = []
    for v in graph.inputs:
        a = feeds[v.name]
        if isinstance(a, np.ndarray):
            val = a.tobytes() if values and _value_input(dt.type_of(a)) else None
            key.append((v.name, a.shape, a.dtype.str, val))
        else:
            key.append((v.name, type(a).__name__))
    return tuple(key)


def specialize_static(graph: Graph, feeds: dict) -> tuple[Graph, dict, bool]:
    """Specialise on input shapes; if shapes still depend on input values, on small integer
    input values too. Returns (graph, remaining feeds, whether values were used)."""
    g, rest = specialize(graph, feeds, values=False)
    if g.is_static():
        return g, rest, False
    g, rest = specialize(graph, feeds, values=True)
    return g, rest, True


def specialize(graph: Graph, feeds: dict, values: bool = False) -> tuple[Graph, dict]:
    """The graph with concrete input shapes (with `values`, small integer inputs become
    constants), plus the feeds that remain inputs. Every node is re-added, so shape rules rerun."""
    rb = Rebuilder(graph.name)
    mapping = {}
    remaining = {}
    fed: set[int] = set()  # values computed from input values made constants
    for v in graph.inputs:
        a = feeds[v.name]
        if values and isinstance(a, np.ndarray) and _value_input(dt.type_of(a)):
            mapping[id(v)] = rb.constant(a, name=v.name)
            fed.add(id(mapping[id(v)]))
        elif isinstance(a, np.ndarray):
            mapping[id(v)] = rb.input(v.name, dt.TensorType(a.shape, v.type.dtype))
            remaining[v.name] = a
        else:
            mapping[id(v)] = rb.input(v.name, v.type)
            remaining[v.name] = a
    for n in graph.nodes:
        for o in n.outputs:
            rb._names.add(o.name)
        rb._node_names.add(n.name)

    def m(v):
        return None if v is None else v if v.is_constant else mapping[id(v)]

    for n in graph.nodes:
        ins = [m(v) for v in n.inputs]
        from_feeds = any(v is not None and id(v) in fed for v in ins)
        try:
            outs = copy_node(rb, n, ins, [m(v) for v in n.captures])
        except GraphError as e:  # e.g. an index out of range: the input values' fault
            if not from_feeds:
                raise
            raise InputError(str(e)) from None
        if from_feeds:
            fed.update(id(o) for o in outs)
        for old, new in zip(n.outputs, outs):
            mapping[id(old)] = new
    outputs = []
    for v in graph.outputs:
        nv = m(v)
        if nv.name != v.name or nv.is_constant:
            rb._names.discard(v.name)
            nv = rb.add1("Identity", [nv], name=f"{v.name}/keep_name", output_names=[v.name])
        outputs.append(nv)
    return rb.build(outputs, doc=graph.doc, meta=graph.meta), remaining
