"""Which devices can run a node: natively, or after lowering to the device's support predicate.

A node's lowerability is decided by trying: the node alone becomes a one-node graph (its constant
and compile-time-known inputs stay constants, so rules that need them see them) and is lowered
with the device's predicate. Results are cached by the node's signature, so the hundred identical
Conv+Relu nodes of a ResNet are tried once.
"""

from __future__ import annotations

import numpy as np

from ..errors import GlowError, LoweringError
from ..graph import Graph, GraphBuilder, Node
from ..lowering import lower_to_supported
from .devices import Target


def feasibility(graph: Graph, targets: list[Target],
                by_branches: set | None = None) -> dict[str, dict[str, str | None]]:
    """node name -> target name -> None when the target can run the node, else why not. An If
    that a target runs only by running its branches (glow.partition.control) is feasible there,
    and (node name, target name) goes into `by_branches`."""
    from .control import BY_BRANCHES, runs_by_branches

    cache: dict = {}
    out = {}
    for node in graph.nodes:
        row = {}
        for t in targets:
            if t.supports(node):
                row[t.name] = None
                continue
            key = (t.name, _signature(node))
            if key not in cache:
                why = _try_lowering(node, t)
                branches = why is not None and node.op.name in BY_BRANCHES and runs_by_branches(node, t) is None
                cache[key] = (None, True) if branches else (why, False)
            row[t.name], branches = cache[key]
            if branches and by_branches is not None:
                by_branches.add((node.name, t.name))
        out[node.name] = row
    return out


def _try_lowering(node: Node, target: Target) -> str | None:
    try:
        lower_to_supported(_alone(node), target.supports, target.name)
    except LoweringError as e:
        if not e.ops:
            return str(e)
        return f"{target.name} cannot run " + ", ".join(f"{op} (x{n})" for op, n in sorted(e.ops.items()))
    except GlowError as e:
        return str(e)
    return None


def _alone(node: Node) -> Graph:
    """`node` as a graph of its own; known inputs become constants."""
    b = GraphBuilder(f"probe_{node.name}")
    mapped: dict[int, object] = {}

    def m(v):
        if v is None or v.is_constant:
            return v
        if id(v) not in mapped:
            if v.known is not None:
                mapped[id(v)] = b.constant(v.known, v.name, v.type.dtype)
            else:
                mapped[id(v)] = b.input(v.name, v.type)
        return mapped[id(v)]

    ins = [m(v) for v in node.inputs]
    caps = []
    for v in node.captures:
        if id(v) not in mapped:
            mapped[id(v)] = b.input(v.name, v.type)
        caps.append(mapped[id(v)])
    outs = b.add(node.op, ins, dict(node.attrs), name=node.name, num_outputs=len(node.outputs),
                 output_names=[o.name for o in node.outputs], captures=caps)
    return b.build(outs)


def _signature(node: Node):
    """What lowering can depend on: op, attributes, input types, and the values of known inputs."""
    ins = []
    for v in node.all_inputs:
        k = v.known
        ins.append((str(v.type), None if k is None else (k.shape, str(k.dtype), _digest(k))))
    attrs = tuple(sorted((k, id(v) if isinstance(v, (Graph, list, tuple)) and _has_graph(v) else repr(v))
                         for k, v in node.attrs.items()))
    return (node.op.domain, node.op.name, attrs, tuple(ins), len(node.outputs))


def _has_graph(v) -> bool:
    return isinstance(v, Graph) or (isinstance(v, (list, tuple)) and any(isinstance(x, Graph) for x in v))


def _digest(a: np.ndarray):
    if a.dtype == object or a.size > 4096:
        return id(a)  # large or boxed constants: identity (they are not shared between signatures)
    return np.ascontiguousarray(a).tobytes()
