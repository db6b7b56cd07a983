"""Rebuilding graphs: the one mechanism passes and lowering use to change a graph.

`rebuild(graph, visit)` copies `graph` node by node into a fresh builder. For each node,
`visit(rb, node, inputs)` may return replacement output values (built with `rb`), or None to keep
the node as it is. Names of kept values, graph inputs and outputs are preserved, so a rebuilt graph
keeps its interface; constants are shared, not copied (they are immutable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import dtypes as dt
from .errors import GraphError
from .graph import Graph, GraphBuilder, Node, Value


class Rebuilder(GraphBuilder):
    """A GraphBuilder that knows the node being replaced, for naming new nodes after it."""

    def __init__(self, name: str):
        super().__init__(name)
        self.current: Node | None = None

    def emit(self, op, inputs, attrs=None, num_outputs: int = 1) -> list[Value]:
        """Add a node named after the node being rewritten."""
        base = self.current.name if self.current is not None else op.lower()
        return self.add(op, inputs, attrs, name=f"{base}/{op if isinstance(op, str) else op.name}",
                        num_outputs=num_outputs)

    def emit1(self, op, inputs, attrs=None) -> Value:
        return self.emit(op, inputs, attrs)[0]


Visit = Callable[[Rebuilder, Node, Sequence], Sequence[Value] | None]


def rebuild(graph: Graph, visit: Visit | None = None) -> tuple[Graph, bool]:
    """Copy `graph`, letting `visit` replace nodes. Returns (new graph, whether anything changed)."""
    rb = Rebuilder(graph.name)
    mapping: dict[int, Value] = {}
    for v in graph.inputs:
        mapping[id(v)] = rb.input(v.name, v.type)
    for v in graph.captures:
        mapping[id(v)] = rb.capture(v.name, v.type)
    # Reserve every original name first so that new values never take a name a kept value needs.
    for n in graph.nodes:
        for o in n.outputs:
            rb._names.add(o.name)
        rb._node_names.add(n.name)
    changed = False

    def m(v):
        if v is None:
            return None
        if v.is_constant:
            return v
        return mapping[id(v)]

    renamed: dict[int, Value] = {}

    def captured(v):
        """Sub-graphs find captured values by name: a replaced value keeps its name (Identity)."""
        nv = m(v)
        if nv.name == v.name and not nv.is_constant:
            return nv
        if id(v) not in renamed:
            rb._names.discard(v.name)
            renamed[id(v)] = rb.add1("Identity", [nv], name=f"{v.name}/keep_name", output_names=[v.name])
        return renamed[id(v)]

    for node in graph.nodes:
        inputs = [m(v) for v in node.inputs]
        captures = [captured(v) for v in node.captures]
        new = None
        if visit is not None:
            rb.current = node
            new = visit(rb, node, inputs)
            rb.current = None
        if new is None:
            outs = copy_node(rb, node, inputs, captures)
        else:
            changed = True
            outs = list(new)
            if len(outs) != len(node.outputs):
                raise GraphError(f"rewrite of node '{node.name}' ({node.op.name}) gave {len(outs)} "
                                 f"outputs, expected {len(node.outputs)}")
        for old, nv in zip(node.outputs, outs):
            mapping[id(old)] = nv
    outputs = []
    for v in graph.outputs:
        nv = m(v)
        if nv.name != v.name or nv.is_constant or any(o is nv for o in outputs):
            # Keep the graph's interface: the output keeps its name through an Identity.
            rb._names.discard(v.name)
            nv = rb.add1("Identity", [nv], name=f"{v.name}/keep_name", output_names=[v.name])
        outputs.append(nv)
    return rb.build(outputs, doc=graph.doc, meta=graph.meta), changed


def copy_node(rb: Rebuilder, node: Node, inputs, captures) -> list[Value]:
    """Re-add a node with its original names (the names were reserved by `rebuild`).

    Shape rules run again where an input's type or known value changed; where the old value knew
    more (dims the importer took from the model's declared shapes), the new value keeps that
    knowledge. A node whose inputs did not change keeps its outputs' types as they are.
    """
    for o in node.outputs:
        rb._names.discard(o.name)
    rb._node_names.discard(node.name)
    if not captures and not node.captures and _same_inputs(inputs, node.inputs):
        return rb.add_unchanged(node, inputs)
    outs = rb.add(node.op, inputs, dict(node.attrs), name=node.name, num_outputs=len(node.outputs),
                  output_names=[o.name for o in node.outputs], captures=captures)
    for old, new in zip(node.outputs, outs):
        new.type = more_precise(new.type, old.type)
    return outs


def _same_inputs(new, old) -> bool:
    """Whether `new` inputs are `old` ones or values of the same types and known values (the
    same array object: a value copied unchanged keeps its known array)."""
    return len(new) == len(old) and all(
        a is b or (a is not None and b is not None and a.known is b.known and a.type == b.type)
        for a, b in zip(new, old))


def more_precise(new, old):
    """`new`, with dims that only `old` knows filled in (same element type and rank only)."""
    if not isinstance(new, dt.TensorType) or not isinstance(old, dt.TensorType) or new.dtype != old.dtype:
        return new
    if new.shape is None:
        return old
    if old.shape is None or len(old.shape) != len(new.shape):
        return new
    dims = tuple(n if isinstance(n, int) or not isinstance(o, int) else o for n, o in zip(new.shape, old.shape))
    return new if dims == new.shape else dt.TensorType(dims, new.dtype)
