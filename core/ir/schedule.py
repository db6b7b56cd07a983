"""Memory-aware scheduling: the order in which the graph's nodes become instructions.

Glow's ChildMemSizeBasedScheduler, a generalisation of Sethi-Ullman numbering: to compute a node,
compute its operands one after another, starting with the operand whose subtree needs the most
memory *beyond what its result keeps* (`max_mem - result_size`). The subtrees that free the most
memory run first, while little else is held; what they keep is small.

Impure nodes keep their relative order (they may share a random stream).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph import Graph, Node


def _result_size(node: Node) -> int:
    return sum(o.type.nbytes or 0 for o in node.outputs if isinstance(o.type, dt.TensorType)
               and o.type.is_static)


def _deps(graph: Graph) -> dict[int, list[Node]]:
    """id(node) -> the nodes it must follow (producers of its inputs; earlier impure nodes)."""
    producer = {id(o): n for n in graph.nodes for o in n.outputs}
    deps: dict[int, list[Node]] = {}
    last_impure = None
    for n in graph.nodes:
        ds = []
        for v in n.all_inputs:
            p = producer.get(id(v))
            if p is not None and p not in ds:
                ds.append(p)
        if not n.op.pure:
            if last_impure is not None and last_impure not in ds:
                ds.append(last_impure)
            last_impure = n
        deps[id(n)] = ds
    return deps


def max_memory(graph: Graph, deps) -> dict[int, int]:
    """Sethi-Ullman style estimate of the peak memory needed to compute each node's subtree."""
    need: dict[int, int] = {}
    for n in graph.nodes:  # topological order: operands first
        children = sorted(deps[id(n)], key=lambda c: need[id(c)] - _result_size(c), reverse=True)
        held, peak = 0, 0
        for c in children:
            peak = max(peak, held + need[id(c)])
            held += _result_size(c)
        need[id(n)] = max(peak, held + _result_size(n))
    return need


def schedule(graph: Graph) -> list[Node]:
    """The graph's nodes in a memory-aware topological order."""
    deps = _deps(graph)
    need = max_memory(graph, deps)
    by_id = {id(n): n for n in graph.nodes}
    done: set[int] = set()
    order: list[Node] = []
    producer = {id(o): n for n in graph.nodes for o in n.outputs}

    def visit(root: Node):
        stack = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if id(n) in done:
                continue
            if expanded:
                done.add(id(n))
                order.append(n)
                continue
            stack.append((n, True))
            kids = sorted((c for c in deps[id(n)] if id(c) not in done),
                          key=lambda c: need[id(c)] - _result_size(c), reverse=True)
            # The stack is LIFO: push the child to run first last.
            for c in reversed(kids):
                stack.append((c, False))

    for v in graph.outputs:
        p = producer.get(id(v))
        if p is not None:
            visit(p)
    for n in graph.nodes:  # impure nodes nobody reads, kept by DCE
        visit(by_id[id(n)])
    return order
