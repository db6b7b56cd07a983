"""Stable text and DOT renderings of a graph (stable: same graph, same text, for golden tests)."""

from __future__ import annotations

import numpy as np

from .graph import Graph, Value


def _attr(v) -> str:
    if isinstance(v, Graph):
        return f"<graph {v.name}>"
    if isinstance(v, np.ndarray):
        return f"<tensor {v.dtype}{list(v.shape)}>"
    if isinstance(v, float):
        return repr(round(v, 7))
    if isinstance(v, tuple):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    return str(v)


def _val(v: Value | None) -> str:
    return "_" if v is None else f"%{v.name}"


def format_graph(g: Graph, indent: str = "") -> str:
    ins = ", ".join(f"%{v.name}: {v.type}" for v in g.inputs)
    outs = ", ".join(f"%{v.name}" for v in g.outputs)
    lines = [f"{indent}graph {g.name}({ins}) -> ({outs}) {{"]
    if g.captures:
        lines.append(f"{indent}  captures {', '.join(f'%{v.name}: {v.type}' for v in g.captures)}")
    for c in g.constants:
        lines.append(f"{indent}  %{c.name} = constant {c.type}")
    for n in g.nodes:
        outs = ", ".join(f"%{o.name}: {o.type}" for o in n.outputs)
        args = ", ".join(_val(v) for v in n.inputs)
        attrs = {k: v for k, v in n.attrs.items() if v is not None}
        attr_s = (" {" + ", ".join(f"{k}={_attr(v)}" for k, v in sorted(attrs.items())) + "}") if attrs else ""
        lines.append(f"{indent}  {outs} = {n.op.name}({args}){attr_s}  # {n.name}")
        for v in attrs.values():
            subs = [v] if isinstance(v, Graph) else [x for x in v if isinstance(x, Graph)] \
                if isinstance(v, tuple) else []
            for sub in subs:
                lines.append(format_graph(sub, indent + "    "))
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def to_dot(g: Graph) -> str:
    """Graphviz DOT: ops as boxes, graph inputs/outputs as ellipses, edges labelled with types."""

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {q(g.name)} {{", "  rankdir=TB;", "  node [fontname=Helvetica];"]
    producer = {}
    for v in g.inputs:
        lines.append(f"  {q('in:' + v.name)} [shape=ellipse, label={q(v.name + chr(10) + str(v.type))}];")
        producer[id(v)] = "in:" + v.name
    for i, n in enumerate(g.nodes):
        nid = f"n{i}"
        lines.append(f"  {q(nid)} [shape=box, label={q(n.op.name + chr(10) + n.name)}];")
        for v in n.all_inputs:
            if v.is_constant:
                continue
            src = producer.get(id(v))
            if src is not None:
                lines.append(f"  {q(src)} -> {q(nid)} [label={q(str(v.type))}];")
        for o in n.outputs:
            producer[id(o)] = nid
    for v in g.outputs:
        lines.append(f"  {q('out:' + v.name)} [shape=ellipse, style=bold, label={q(v.name)}];")
        if id(v) in producer:
            lines.append(f"  {q(producer[id(v)])} -> {q('out:' + v.name)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
