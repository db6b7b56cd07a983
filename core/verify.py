"""The graph verifier: structural and type checks, run after every pass when GLOW_VERIFY is set.

Errors name the bad node and show the few lines of IR around it.
"""

from __future__ import annotations

from . import dtypes as dt
from .errors import GraphError
from .graph import Graph, check_node_inputs
from .ops.registry import InferContext


def verify_graph(g: Graph, *, check_types: bool = True) -> None:
    """Raise GraphError if `g` is malformed: order, names, op signatures, types, sub-graphs."""
    defined: set[int] = set()
    names: dict[str, object] = {}

    def define(v, where):
        prev = names.get(v.name)
        if prev is not None and prev is not v:
            _fail(g, where, f"value name '{v.name}' is defined twice")
        names[v.name] = v
        defined.add(id(v))

    for v in g.inputs + g.captures:
        if v.node is not None or v.is_constant:
            _fail(g, None, f"graph input '{v.name}' must be a placeholder")
        define(v, None)
    for i, n in enumerate(g.nodes):
        for v in n.all_inputs:
            if v.is_constant:
                continue
            if id(v) not in defined:
                _fail(g, i, f"node '{n.name}' ({n.op.name}) reads '{v.name}' before it is defined")
        where = f"node '{n.name}' ({n.op.name})"
        if check_types:
            attrs = check_node_inputs(n.op, where, list(n.inputs), dict(n.attrs))
            if attrs.keys() != dict(n.attrs).keys():
                _fail(g, i, f"{where}: attributes not completed with defaults")
            ctx = InferContext(n.op, n.name, [v.type if v is not None else None for v in n.inputs],
                               attrs, len(n.outputs), [v.known if v is not None else None for v in n.inputs])
            try:
                expected = list(n.op.infer(ctx))
            except GraphError as e:
                _fail(g, i, str(e))
            for o, t in zip(n.outputs, expected):
                if not _compatible(o.type, t):
                    _fail(g, i, f"{where}: output '{o.name}' has type {o.type} but the op's rule "
                                f"gives {t}")
        for j, o in enumerate(n.outputs):
            if o.node is not n or o.index != j:
                _fail(g, i, f"{where}: output {j} does not point back to its node")
            define(o, i)
        for a in n.attrs.values():
            for sub in ([a] if isinstance(a, Graph) else
                        [x for x in a if isinstance(x, Graph)] if isinstance(a, tuple) else []):
                verify_graph(sub, check_types=check_types)
    for v in g.outputs:
        if not v.is_constant and id(v) not in defined:
            _fail(g, None, f"graph output '{v.name}' is not defined")


def _compatible(have, want) -> bool:
    """`have` may be more precise than `want` (a pass may have learnt a dim), never contradict it."""
    if type(have) is not type(want):
        return False
    if isinstance(have, dt.TensorType):
        if have.dtype != want.dtype:
            return False
        if want.shape is None or have.shape is None:
            return True
        if len(have.shape) != len(want.shape):
            return False
        return all(not isinstance(w, int) or h == w for h, w in zip(have.shape, want.shape))
    return True


def _fail(g: Graph, index: int | None, message: str):
    context = ""
    if index is not None:
        lo, hi = max(0, index - 2), min(len(g.nodes), index + 3)
        rows = []
        for k in range(lo, hi):
            n = g.nodes[k]
            mark = ">>" if k == index else "  "
            ins = ", ".join("_" if v is None else f"%{v.name}" for v in n.inputs)
            outs = ", ".join(f"%{o.name}: {o.type}" for o in n.outputs)
            rows.append(f"{mark} {outs} = {n.op.name}({ins})")
        context = " | near: " + " ; ".join(rows)
    raise GraphError(f"graph '{g.name}': {message}{context}")
