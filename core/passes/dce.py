"""Dead-code elimination: drop nodes whose results nobody reads.

Impure nodes (random generators and the like, `OpDef.pure=False`) are kept even when unused:
removing one would shift the random stream the others see.
"""

from __future__ import annotations

import dataclasses

from ..graph import Graph
from .base import Pass


def eliminate_dead_code(graph: Graph) -> Graph:
    live: set[int] = {id(v) for v in graph.outputs}
    keep = []
    for node in reversed(graph.nodes):
        if node.op.pure and not any(id(o) in live for o in node.outputs):
            continue
        keep.append(node)
        live.update(id(v) for v in node.all_inputs)
    if len(keep) == len(graph.nodes):
        return graph
    # Dropping nodes needs no rebuild: nodes are immutable, so the kept ones are shared as they are.
    return dataclasses.replace(graph, nodes=tuple(reversed(keep)))


DCE = Pass("dce", eliminate_dead_code, "drop nodes whose results are never read")
