"""Rewrite rules: functions indexed by op name, combined with `+`, driven to a fixed point.

A rule is `fn(ctx, rb, node, ins) -> [Value] | None`, called while `rebuild` copies the graph:
`node` is the node of the *old* graph (ask `ctx` how many users its values have there), `ins` are
its inputs in the *new* graph (look at `ins[i].node` to match what produced them), and `rb` builds
replacement nodes. Returning None keeps the node. The first rule that returns values wins.

Nodes that bind a graph output (an Identity whose result is a graph output) are never rewritten:
`rebuild` adds exactly such an Identity to keep an output's name when a rule replaces the value
behind it, so rewriting them again would never reach a fixed point.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph import Graph, Node, Value
from ..rewrite import rebuild
from .dce import eliminate_dead_code


class Context:
    """What a rule may ask about the old graph."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._users = graph.users()
        self._outputs = {id(v) for v in graph.outputs}
        self._captured = captured_values(graph)
        #: Names that must not change: graph outputs and values sub-graphs capture by name.
        self.fixed_names = {v.name for v in graph.outputs} | {
            v.name for n in graph.nodes for v in n.captures}

    def users(self, v: Value) -> list[Node]:
        return self._users.get(id(v), [])

    def single_use(self, v: Value) -> bool:
        """`v` feeds exactly one node input and is not a graph output."""
        return len(self.users(v)) == 1 and not self.is_output(v) and \
            sum(1 for x in self.users(v)[0].all_inputs if x is v) == 1

    def is_output(self, v: Value) -> bool:
        return id(v) in self._outputs

    def pinned(self, node: Node) -> bool:
        """Whether a sub-graph reads one of `node`'s results by name: it must not be replaced."""
        return any(id(o) in self._captured for o in node.outputs)


def captured_values(graph: Graph) -> set[int]:
    """ids of values read by control-flow sub-graphs. A sub-graph finds them by *name*, and a
    replacement value would carry another name, so passes leave their producers alone."""
    return {id(v) for n in graph.nodes for v in n.captures}


Rule = Callable[[Context, object, Node, list], list | None]


class Rules:
    """A table of rewrite rules by op name. `rules_a + rules_b` tries a's rules first."""

    def __init__(self, name: str, table: dict | None = None, groups: dict | None = None):
        self.name = name
        self.table: dict[str, list[Rule]] = {k: list(v) for k, v in (table or {}).items()}
        #: Rules offered to every op in a property group (e.g. all elementwise ops).
        self.groups: dict[str, list[Rule]] = {k: list(v) for k, v in (groups or {}).items()}

    def rule(self, *ops: str):
        """Decorator: register `fn` for each of `ops`."""

        def deco(fn):
            for op in ops:
                self.table.setdefault(op, []).append(fn)
            return fn

        return deco

    def group_rule(self, group: str):
        """Decorator: register `fn` for every op in the property `group`."""

        def deco(fn):
            self.groups.setdefault(group, []).append(fn)
            return fn

        return deco

    def rules_for(self, node: Node) -> list[Rule]:
        out = list(self.table.get(node.op.name, ()))
        for g in sorted(node.op.groups):
            out.extend(self.groups.get(g, ()))
        return out

    def __add__(self, other: Rules) -> Rules:
        out = Rules(f"{self.name}+{other.name}", self.table, self.groups)
        for op, fns in other.table.items():
            out.table.setdefault(op, []).extend(fns)
        for g, fns in other.groups.items():
            out.groups.setdefault(g, []).extend(fns)
        return out

    def apply_once(self, graph: Graph) -> tuple[Graph, bool]:
        ctx = Context(graph)

        def visit(rb, node, ins):
            if is_output_binding(ctx, node) or ctx.pinned(node):
                return None
            for fn in self.rules_for(node):
                out = fn(ctx, rb, node, ins)
                if out is not None:
                    keep_output_names(ctx, rb, node, out)
                    return out
            return None

        return rebuild(graph, visit)

    def apply(self, graph: Graph, max_rounds: int = 16) -> Graph:
        """Apply the rules until nothing changes; returns `graph` itself when nothing applied."""
        out = graph
        for _ in range(max_rounds):
            new, changed = self.apply_once(out)
            if not changed:
                break
            out = eliminate_dead_code(new)
        return out


def keep_output_names(ctx: Context, rb, node: Node, outs, first_new: int = 0) -> None:
    """Give a graph output's replacement value the output's name, instead of letting `rebuild`
    add an Identity to keep the name. Only node results are renamed, and only those whose name
    nothing else depends on: not graph inputs, constants, other outputs, or values a sub-graph
    captures by name (those keep the Identity)."""
    for old, new in zip(node.outputs, outs):
        if (not ctx.is_output(old) or new is None or new.node is None or new.name == old.name
                or new.name in ctx.fixed_names or sum(1 for o in outs if o is new) != 1):
            continue
        rb._names.discard(new.name)
        new.name = old.name  # rebuild reserved the old name for exactly this value
        ctx.fixed_names.add(new.name)


def is_output_binding(ctx: Context, node: Node) -> bool:
    return node.op.name == "Identity" and any(ctx.is_output(o) for o in node.outputs)


# -- small matching helpers ----------------------------------------------------------------------
def producer(v: Value | None, op: str | None = None) -> Node | None:
    """The node producing `v` (in the graph being built), if it is an `op` node (any op if None)."""
    if v is None or v.node is None:
        return None
    return v.node if op is None or v.node.op.name == op else None


def const(v: Value | None) -> np.ndarray | None:
    """`v`'s value if it is a compile-time constant."""
    return None if v is None or v.data is None else v.data


def const_ints(v: Value | None) -> list[int] | None:
    c = const(v)
    if c is None or c.dtype.kind not in "iu":
        return None
    return [int(x) for x in c.reshape(-1)]


def is_splat(v: Value | None, x: float) -> bool:
    """`v` is a constant whose every element equals `x` (an empty constant is not a splat)."""
    c = const(v)
    if c is None or c.size == 0 or c.dtype.kind not in "biuf":
        return False
    return bool(np.all(c == x))


def static_shape(v: Value) -> tuple | None:
    t = v.type
    return tuple(t.shape) if getattr(t, "is_static", False) else None


def same_type(a: Value, b: Value) -> bool:
    """Equal tensor types with every dim known or named (so `a` can stand for `b`)."""
    t = a.type
    return (t == b.type and getattr(t, "shape", None) is not None
            and all(d is not None for d in t.shape))
