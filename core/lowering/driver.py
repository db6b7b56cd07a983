"""The lowering driver: rewrite unsupported nodes with their rules until all are supported."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError, LoweringError
from ..graph import Graph, Node
from ..limits import check_alloc
from ..rewrite import rebuild
from .floor import FLOOR, is_host_op
from .registry import rule_for

#: No value created by lowering one node may be larger than this many times the largest input or
#: output of that node (im2col for convolutions is the largest expected expansion).
MEMORY_BLOWUP_LIMIT = 16
MAX_ROUNDS = 64


def supports_floor(node: Node, host: bool = True) -> bool:
    """The floor's own predicate: its ops, with Max/Min in their binary form and Pad in constant
    mode (reflect/edge/wrap lower to Slice/Concat); with `host`, host ops too (they have no
    lowering and run on the host whatever the backend)."""
    if host and is_host_op(node.op):
        return True
    name = node.op.name
    if name in ("Max", "Min"):
        return len(node.inputs) == 2
    if name == "Pad":
        return node.attrs.get("mode", "constant") == "constant"
    return name in FLOOR


def lower_to_supported(graph: Graph, supports: Callable[[Node], bool], backend: str = "backend",
                       verify: bool = False) -> Graph:
    """Lower every node `supports` rejects, to a fixed point. Raises LoweringError naming all
    ops that cannot reach the backend's supported set."""
    for _ in range(MAX_ROUNDS):
        stuck: Counter = Counter()

        def visit(rb, node, inputs, stuck=stuck):
            if supports(node):
                return None
            empty = _empty_outputs(rb, node)
            if empty is not None:
                return empty
            rule = rule_for(node.op.name, node.op.domain)
            outs = None
            if rule is not None:
                # Rules may build constants the size of the output (Range's iota, index tables):
                # an output past the memory budget is refused before they are materialised.
                for o in node.outputs:
                    if isinstance(o.type, dt.TensorType) and o.type.is_static:
                        check_alloc(f"node '{node.name}' ({node.op.name})", f"output '{o.name}'",
                                    o.type.shape, o.type.dtype.itemsize)
                before = len(rb._nodes)
                outs = rule(rb, node, inputs)
                if outs is not None:
                    _check_lowered(node, outs, rb._nodes[before:])
            if outs is None:
                stuck[node.op.name] += 1
            return outs

        graph, changed = rebuild(graph, visit)
        if verify:
            from ..verify import verify_graph

            verify_graph(graph)
        if not changed:
            if stuck:
                listing = ", ".join(f"{op} (x{n})" for op, n in sorted(stuck.items()))
                raise LoweringError(f"backend '{backend}' cannot run {len(stuck)} op type(s), which "
                                    f"have no lowering to its supported ops: {listing}", dict(stuck))
            return graph
    raise LoweringError(f"lowering for backend '{backend}' did not reach a fixed point in "
                        f"{MAX_ROUNDS} rounds (a rule lowers to an op that lowers back)")


def _empty_outputs(rb, node: Node):
    """Empty constants for a pure node whose every output is a static tensor with no elements, or
    None. Such outputs hold no values, so no rule is needed, whatever the op: rules may then
    assume something to compute (a scale, a reshape to a non-empty row, a tap table), and an
    empty tensor still flows through every op on every backend."""
    if not node.outputs or not node.op.pure or node.op.has_subgraphs or node.captures:
        return None
    outs = []
    for o in node.outputs:
        t = o.type
        if not (isinstance(t, dt.TensorType) and t.is_static and t.numel == 0):
            return None
        c = rb.constant(np.zeros(t.shape, t.dtype.np), name=o.name)
        if c.type != t:  # a quantized type (scale and offset) has no plain constant of its own
            return None
        outs.append(c)
    return outs


def _nbytes(v) -> int | None:
    t = v.type
    return t.nbytes if isinstance(t, dt.TensorType) else None


def _check_lowered(node: Node, outs, new_nodes):
    """Lowered outputs keep the node's types; no intermediate blows memory up."""
    for old, new in zip(node.outputs, outs):
        if not _same_type(old.type, new.type):
            raise GraphError(f"lowering of node '{node.name}' ({node.op.name}) changed output type "
                             f"{old.type} to {new.type}")
    values = list(node.all_inputs) + list(node.outputs)
    if any(not isinstance(v.type, dt.TensorType) for v in values):
        return  # sequences/optionals have no byte size to compare against
    sizes = [s for s in map(_nbytes, values) if s]
    if not sizes:
        return
    limit = MEMORY_BLOWUP_LIMIT * max(sizes)
    for n in new_nodes:
        for o in n.outputs:
            size = _nbytes(o)
            if size is not None and size > limit:
                raise GraphError(f"lowering of node '{node.name}' ({node.op.name}) creates '{o.name}' "
                                 f"({o.type}, {size} bytes), over {MEMORY_BLOWUP_LIMIT}x its largest "
                                 f"input/output")


def _same_type(a, b) -> bool:
    """Same element type and no contradicting static dim (one side may know less)."""
    if not isinstance(a, dt.TensorType) or not isinstance(b, dt.TensorType):
        return type(a) is type(b)
    if a.dtype != b.dtype:
        return False
    if a.shape is None or b.shape is None:
        return True
    return len(a.shape) == len(b.shape) and all(
        not (isinstance(x, int) and isinstance(y, int)) or x == y for x, y in zip(a.shape, b.shape))
