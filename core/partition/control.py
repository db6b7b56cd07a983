"""Control flow on a device: an If whose branches the device runs, as a partition of its own.

A backend that compiles static programs has no If with a run-time condition: its lowering rule
inlines the taken branch when the condition is known, and computes both branches and selects
when they are cheap and cannot fail. Otherwise, when the condition is data and every node of
both branches runs on the device (natively or lowered, nested control flow alike), the If is
placed there as a partition of its own: its executable (glow.runtime.control.IfExecutable) reads
the condition on the host and runs the branch it picks, each branch compiled for the device by
the single-device flow. A detector's post-processing then does not bounce to the host for its
If. Branches find outer values by name (captures); compiled alone, those become their inputs.
"""

from __future__ import annotations

from ..graph import Graph, GraphBuilder, Node
from .devices import Target

#: Control-flow ops a device may run by running their branches (Loop and Scan lower or go to the host).
BY_BRANCHES = frozenset({"If"})
BRANCHES = ("then_branch", "else_branch")


def branch_graph(node: Node, attr: str) -> Graph:
    """Sub-graph `attr` of `node` as a graph of its own: its captures become inputs of the same names."""
    g: Graph = node.attrs[attr]
    b = GraphBuilder(f"{node.name}.{attr}")
    env = {id(v): b.input(v.name, v.type) for v in (*g.inputs, *g.captures)}

    def get(v):
        return None if v is None else v if v.is_constant else env[id(v)]

    for n in g.nodes:
        outs = b.add(n.op, [get(v) for v in n.inputs], dict(n.attrs), name=n.name, num_outputs=len(n.outputs),
                     output_names=[o.name for o in n.outputs], captures=[get(c) for c in n.captures])
        env.update(zip(map(id, n.outputs), outs))
    return b.build([get(o) for o in g.outputs], doc=f"{attr} of {node.name}")


def runs_by_branches(node: Node, target: Target) -> str | None:
    """None when `target` runs every node of each branch of `node` (an If); else why not."""
    from .support import feasibility

    if node.op.name not in BY_BRANCHES:
        return f"{target.name} has no {node.op.name} with a run-time condition"
    for attr in BRANCHES:
        g = branch_graph(node, attr)
        why = [r for row in feasibility(g, [target]).values() for r in row.values() if r is not None]
        if why:
            return f"its {attr} has nodes {target.name} cannot run ({why[0]})"
    return None


def compile_on(graph: Graph, target: Target, *, threads: int | None = None, optimize: bool = True):
    """`graph` compiled for one device; where it holds control flow the device runs by branches,
    as partitions on that device around each such node."""
    from ..errors import LoweringError
    from .compile import compile_for_device, compile_partitions
    from .placement import place

    try:
        return compile_for_device(graph, target, threads=threads, optimize=optimize)
    except LoweringError:
        if not any(n.op.name in BY_BRANCHES for n in graph.nodes):
            raise
    from ..runtime import PartitionedExecutable

    placement = place(graph, [target])  # a PartitionError says what the device lacks
    return PartitionedExecutable(placement, compile_partitions(placement.partitions, threads=threads,
                                                               optimize=optimize))
