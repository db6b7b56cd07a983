"""Pass infrastructure: a pass is a small named object; pipelines are lists of passes.

A pass has a `name` and `apply(graph) -> graph`. It returns the *same* graph object when it
changed nothing, which is how `FixedPoint` knows when to stop. `run_passes` applies a list of
passes in order and, when `GLOW_VERIFY` >= 2 (tests set it), runs the verifier after every pass so
that a broken rewrite is reported by the pass that made it, not three passes later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import GraphError
from ..graph import Graph


@dataclass(frozen=True)
class Pass:
    """A named graph-to-graph function."""

    name: str
    fn: Callable[[Graph], Graph]
    doc: str = ""

    def apply(self, graph: Graph) -> Graph:
        return self.fn(graph)

    def __repr__(self):
        return f"Pass({self.name})"


@dataclass(frozen=True)
class FixedPoint:
    """Run `passes` in order, again and again, until a whole round changes nothing."""

    name: str
    passes: tuple
    max_rounds: int = 16

    def apply(self, graph: Graph) -> Graph:
        for _ in range(self.max_rounds):
            before = graph
            for p in self.passes:
                graph = _apply_one(p, graph)
            if graph is before:
                break
        return graph

    def __repr__(self):
        return f"FixedPoint({self.name}: {', '.join(p.name for p in self.passes)})"


@dataclass
class PassLog:
    """What a pipeline did: one (pass name, nodes before, nodes after) row per pass applied."""

    rows: list = field(default_factory=list)

    def record(self, name: str, before: Graph, after: Graph):
        self.rows.append((name, len(before.nodes), len(after.nodes)))

    def format(self) -> str:
        return "\n".join(f"{name:<28} {a:>6} -> {b:<6}" for name, a, b in self.rows)


# The innermost log being recorded into (set by run_passes; FixedPoint members record too).
_LOGS: list[PassLog] = []


def _verify_enabled() -> bool:
    from ..interpreter import verify_level

    return verify_level() >= 2


def _apply_one(p, graph: Graph) -> Graph:
    out = p.apply(graph)
    if out is not graph:
        if _LOGS:
            _LOGS[-1].record(p.name, graph, out)
        if _verify_enabled() and not isinstance(p, FixedPoint):
            from ..verify import verify_graph

            try:
                verify_graph(out)
            except GraphError as e:
                raise GraphError(f"after pass '{p.name}': {e}") from None
    return out


def run_passes(graph: Graph, passes: Sequence, log: PassLog | None = None) -> Graph:
    """Apply `passes` in order (verifying after each one when GLOW_VERIFY >= 2)."""
    if log is not None:
        _LOGS.append(log)
    try:
        for p in passes:
            graph = _apply_one(p, graph)
    finally:
        if log is not None:
            _LOGS.pop()
    return graph
