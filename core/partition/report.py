"""The placement report: text for people, JSON for tools, DOT (and SVG/PNG through Graphviz)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter

from ..errors import GlowError
from ..fileio import write_atomic
from .cost import value_bytes
from .devices import fmt_bytes, fmt_time

#: Fill colours for devices in the picture, in device order.
COLOURS = ("#cfe2ff", "#ffe5b4", "#d4edda", "#f8d7da", "#e2d9f3", "#fff3cd", "#d1ecf1", "#e2e3e5")


def to_json(pl) -> dict:
    return {
        "graph": pl.graph.name,
        "objective": pl.objective,
        "estimate": {"time_s": pl.est_time_s, "transfer_s": pl.est_transfer_s,
                     "bottleneck_s": pl.est_bottleneck_s},
        "devices": [{"name": t.name, "backend": t.device.backend, "kind": t.device.kind,
                     "cap_bytes": t.memory_bytes,
                     "ops": None if t.device.supported_ops is None else sorted(t.device.supported_ops),
                     "peak_gflops": t.device.peak_gflops, "mem_bandwidth_gbs": t.device.mem_bandwidth_gbs,
                     "transfer_gbs": t.device.transfer_gbs, **_usage(u)}
                    for t, u in zip(pl.targets, pl.usage)],
        "partitions": [{"name": p.name, "device": p.target.name, "stage": p.stage,
                        "nodes": [n.name for n in p.nodes], "ops": dict(Counter(n.op.name for n in p.nodes)),
                        "weight_bytes": p.weight_bytes, "peak_activation_bytes": p.peak_activation_bytes,
                        "memory_bytes": p.memory_bytes, "est_time_s": p.est_time_s,
                        "inputs": [v.name for v in p.inputs], "outputs": [v.name for v in p.outputs],
                        "parents": sorted(f"p{q}" for q in p.parents)}
                       for p in pl.partitions],
        "transfers": [{"value": t.value, "bytes": t.nbytes, "from": _end(pl, t.src), "to": _end(pl, t.dst),
                       "est_time_s": t.est_time_s} for t in pl.transfers],
        "nodes": [{"name": n.name, "op": n.op.name, "device": pl.device_of[n.name], **pl.reasons[n.name]}
                  for n in pl.graph.nodes],
    }


def _usage(u: dict) -> dict:
    return {"weight_bytes": u["weights"], "activation_bytes": u["activations"], "used_bytes": u["total"],
            "partitions": [f"p{i}" for i in u["partitions"]]}


def _end(pl, index) -> str:
    if index is None:
        return "host"
    return f"p{index}:{pl.partitions[index].target.name}"


def to_text(pl) -> str:
    calibrated = ", calibrated by measurement" if pl.meta.get("time_scale") is not None else ""
    lines = [f"placement of '{pl.graph.name}' ({len(pl.graph.nodes)} nodes) on {len(pl.targets)} "
             f"device(s), objective {pl.objective}{calibrated}: estimated {fmt_time(pl.est_time_s)} per "
             f"request (transfers {fmt_time(pl.est_transfer_s)}; busiest device {fmt_time(pl.est_bottleneck_s)})",
             "", "devices:"]
    for t, u in zip(pl.targets, pl.usage):
        cap = "no cap" if t.memory_bytes is None else f"cap {fmt_bytes(t.memory_bytes)}"
        ops = "" if t.device.supported_ops is None else f"  ops {'/'.join(sorted(t.device.supported_ops))}"
        full = "  FULL" if t.memory_bytes and u["total"] > 0.9 * t.memory_bytes else ""
        lat = t.device.extra.get("latency_us")  # a link with latency of its own: a remote device's
        link = f"  link {t.device.transfer_gbs:.3g} GB/s + {lat:.0f} us" if lat else ""
        lines.append(f"  {t.name:<10} {t.device.backend:<10} {cap:<16} uses {fmt_bytes(u['total'])}{full} "
                     f"(weights {fmt_bytes(u['weights'])} + activations {fmt_bytes(u['activations'])})"
                     f"  partitions {','.join(f'p{i}' for i in u['partitions']) or '-'}{ops}{link}")
    lines += ["", "partitions:"]
    for p in pl.partitions:
        ops = ", ".join(f"{op} x{c}" if c > 1 else op for op, c in Counter(n.op.name for n in p.nodes).most_common(6))
        deps = ",".join(f"p{q}" for q in sorted(p.parents)) or "inputs"
        lines.append(f"  {p.name:<4} {p.target.name:<10} stage {p.stage:<3} {len(p.nodes):>4} nodes  "
                     f"weights {fmt_bytes(p.weight_bytes):>10}  peak act {fmt_bytes(p.peak_activation_bytes):>10}  "
                     f"est {fmt_time(p.est_time_s):>10}  after {deps}  [{ops}]")
    crossing = [t for t in pl.transfers if t.src is not None and t.dst is not None]
    lines += ["", f"transfers between partitions ({len(crossing)}, "
              f"{fmt_bytes(sum(t.nbytes for t in crossing))}):"]
    for t in crossing:
        lines.append(f"  {t.value:<24} {fmt_bytes(t.nbytes):>10}  {_end(pl, t.src)} -> {_end(pl, t.dst)}  "
                     f"est {fmt_time(t.est_time_s)}")
    kinds = Counter(r["kind"] for r in pl.reasons.values())
    lines += ["", "why (" + ", ".join(f"{k}: {c}" for k, c in kinds.most_common()) + "):"]
    fallbacks = pl.fallbacks()
    if fallbacks:
        ops = Counter(n.op.name for n in pl.graph.nodes if n.name in fallbacks)
        lines.append(f"  {len(fallbacks)} node(s) fell back from {pl.targets[0].name}, which cannot run them: "
                     + ", ".join(f"{op} x{c}" for op, c in ops.most_common()))
    for n in pl.graph.nodes:
        r = pl.reasons[n.name]
        mark = " [fallback]" if r.get("fallback") else ""
        lines.append(f"  {n.name:<24} {n.op.name:<18} -> {pl.device_of[n.name]:<10} {r['kind']}: {r['detail']}{mark}")
    return "\n".join(lines) + "\n"


#: Past this many nodes the picture shows partitions (`view="auto"`): one box per node stops being
#: readable around here (ResNet-50's 123 nodes made a 9,000-pt strip).
NODE_VIEW_LIMIT = 60

#: Graphviz settings shared by both views: top-down, room between boxes so that labels (kept short
#: and wrapped) never overlap; edge labels are laid out by dot as nodes, so they do not collide.
_GRAPH_ATTRS = ('  rankdir=TB; compound=true; newrank=true; nodesep=0.3; ranksep=0.35; '
                'fontname=Helvetica; fontsize=11; labelloc=t;')


def _q(s) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _wrap(text: str, width: int = 22, lines: int = 3) -> str:
    """Wrap a label to `lines` lines of about `width` characters (Graphviz does not wrap)."""
    import textwrap

    out = textwrap.wrap(str(text), width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(out) > lines:
        out = out[:lines - 1] + [out[lines - 1][:width - 1] + "\u2026"]
    return "\n".join(out)


def _view(pl, view: str) -> str:
    if view not in ("auto", "nodes", "partitions"):
        raise GlowError(f"report view must be 'auto', 'nodes' or 'partitions', got {view!r}")
    if view == "auto":
        return "partitions" if len(pl.graph.nodes) > NODE_VIEW_LIMIT else "nodes"
    return view


def to_dot(pl, view: str = "auto") -> str:
    """The placement as Graphviz DOT. `view="nodes"`: one cluster per partition, a box per node
    coloured by device (with why it went there), transfers as bold red edges with their bytes.
    `view="partitions"`: a box per partition (device, node and op counts, memory, estimate),
    transfers between partitions as edges with their total bytes. `"auto"`: partitions past
    NODE_VIEW_LIMIT nodes."""
    if _view(pl, view) == "partitions":
        return _partition_dot(pl)
    return _node_dot(pl)


def _legend(pl, colour) -> list[str]:
    lines = ["  subgraph cluster_legend { label=\"devices\"; style=dashed; fontsize=10;"]
    for i, t in enumerate(pl.targets):
        lines.append(f"    legend{i} [shape=box, style=filled, fillcolor={_q(colour[t.name])}, "
                     f"label={_q(_wrap(t.describe(), 40, 3))}];")
    return lines + ["  }"]


def _node_dot(pl) -> str:
    q = _q
    colour = {t.name: COLOURS[i % len(COLOURS)] for i, t in enumerate(pl.targets)}
    node_id = {n.name: f"n{i}" for i, n in enumerate(pl.graph.nodes)}
    part_of = {n.name: p.index for p in pl.partitions for n in p.nodes}
    lines = [f"digraph {q(pl.graph.name + ' placement')} {{", _GRAPH_ATTRS,
             "  node [fontname=Helvetica, fontsize=10, style=filled, margin=\"0.08,0.03\"]; "
             "edge [fontname=Helvetica, fontsize=9, arrowsize=0.6];"]
    for p in pl.partitions:
        label = (f"{p.name} on {p.target.name}: {len(p.nodes)} nodes, {fmt_bytes(p.memory_bytes)}, "
                 f"est {fmt_time(p.est_time_s)}")
        # The partition's title is a node of its own (not the cluster's label): dot routes edges
        # around nodes, while it lets edges entering the cluster run straight through its label.
        lines.append(f"  subgraph cluster_{p.index} {{ label=\"\"; style=rounded; color=gray40;")
        lines.append(f"    h{p.index} [shape=plaintext, style=\"\", fontsize=10, label={q(_wrap(label, 34, 2))}];")
        inside = {id(o) for n in p.nodes for o in n.outputs}
        for n in p.nodes:  # the title sits above the partition's first nodes
            if not any(id(v) in inside for v in n.all_inputs):
                lines.append(f"    h{p.index} -> {node_id[n.name]} [style=invis];")
        for n in p.nodes:
            r = pl.reasons[n.name]
            tip = f"{r['kind']}: {r['detail']}"
            label = f"{n.op.name}\n{_wrap(n.name, 22, 2)}\n[{r['kind']}]"
            lines.append(f"    {node_id[n.name]} [shape=box, fillcolor={q(colour[p.target.name])}, "
                         f"label={q(label)}, tooltip={q(tip)}"
                         f"{', penwidth=2, color=red' if r.get('fallback') else ''}];")
        lines.append("  }")
    src = {}
    for v in pl.graph.inputs:
        lines.append(f"  {q('in:' + v.name)} [shape=ellipse, fillcolor=white, label={q(_wrap(v.name))}];")
        src[id(v)] = ("in:" + v.name, None)
    for n in pl.graph.nodes:
        for o in n.outputs:
            src[id(o)] = (node_id[n.name], part_of[n.name])
    for n in pl.graph.nodes:
        seen = set()
        for v in n.all_inputs:
            if v.is_constant or id(v) not in src or id(v) in seen:
                continue
            seen.add(id(v))
            s, sp = src[id(v)]
            if sp is not None and sp != part_of[n.name]:
                lines.append(f"  {q(s)} -> {node_id[n.name]} [color=red, penwidth=2, fontcolor=red, "
                             f"label={q(fmt_bytes(value_bytes(v)))}];")
            else:
                lines.append(f"  {q(s)} -> {node_id[n.name]};")
    for v in pl.graph.outputs:
        lines.append(f"  {q('out:' + v.name)} [shape=ellipse, fillcolor=white, style=bold, "
                     f"label={q(_wrap(v.name))}];")
        if id(v) in src:
            lines.append(f"  {q(src[id(v)][0])} -> {q('out:' + v.name)};")
    lines += _legend(pl, colour)
    note = (f"{pl.graph.name}: red edges are transfers between partitions; red boxes fell back from "
            f"{pl.targets[0].name}; [kind] is why a node is where it is")
    lines += [f"  label={q(_wrap(note, 90, 2))};", "}"]
    return "\n".join(lines) + "\n"


def _partition_dot(pl) -> str:
    """Partitions as boxes, transfers as edges: readable for any model size (a box per partition,
    not per node)."""
    q = _q
    colour = {t.name: COLOURS[i % len(COLOURS)] for i, t in enumerate(pl.targets)}
    lines = [f"digraph {q(pl.graph.name + ' placement')} {{", _GRAPH_ATTRS,
             "  node [fontname=Helvetica, fontsize=10, style=filled, shape=box, margin=\"0.1,0.04\"]; "
             "edge [fontname=Helvetica, fontsize=9, arrowsize=0.6];"]
    for p in pl.partitions:
        kinds = Counter(pl.reasons[n.name]["kind"] for n in p.nodes)
        ops = ", ".join(f"{op} x{c}" if c > 1 else op for op, c in Counter(n.op.name for n in p.nodes).most_common(4))
        extra = len({n.op.name for n in p.nodes}) - 4
        ops += f", +{extra} more" if extra > 0 else ""
        fell = sum(1 for n in p.nodes if pl.reasons[n.name].get("fallback"))
        label = (f"{p.name} on {p.target.name}  ({len(p.nodes)} node{'s' * (len(p.nodes) != 1)})\n"
                 f"{_wrap(ops, 34, 2)}\n"
                 f"{fmt_bytes(p.memory_bytes)}, est {fmt_time(p.est_time_s)}\n"
                 + "why: " + ", ".join(f"{k} {c}" for k, c in kinds.most_common())
                 + (f"\n{fell} fell back" if fell else ""))
        tip = "; ".join(n.name for n in p.nodes[:40])
        lines.append(f"  p{p.index} [fillcolor={q(colour[p.target.name])}, label={q(label)}, tooltip={q(tip)}"
                     f"{', penwidth=2, color=red' if fell else ''}];")
    lines.append("  host_in [shape=ellipse, fillcolor=white, label=\"inputs\"];")
    lines.append("  host_out [shape=ellipse, fillcolor=white, style=bold, label=\"outputs\"];")
    edges: dict[tuple, list] = {}
    for t in pl.transfers:
        a = "host_in" if t.src is None else f"p{t.src}"
        b = "host_out" if t.dst is None else f"p{t.dst}"
        edges.setdefault((a, b), []).append(t)
    for p in pl.partitions:  # dependencies that move no bytes (same device) still order the picture
        for c in sorted(p.parents):
            edges.setdefault((f"p{c}", f"p{p.index}"), [])
    for (a, b), ts in edges.items():
        if not ts:
            lines.append(f"  {a} -> {b} [color=gray50];")
            continue
        nbytes = sum(t.nbytes for t in ts)
        what = f"{len(ts)} values" if len(ts) > 1 else _wrap(ts[0].value, 18, 1)
        cross = "host" not in a and "host" not in b
        style = ", color=red, penwidth=2, fontcolor=red" if cross else ", color=gray40"
        lines.append(f"  {a} -> {b} [label={q(fmt_bytes(nbytes) + chr(10) + what)}{style}];")
    lines += _legend(pl, colour)
    crossing = [t for t in pl.transfers if t.src is not None and t.dst is not None]
    note = (f"{pl.graph.name}: {_count(len(pl.graph.nodes), 'node')} in {_count(len(pl.partitions), 'partition')}; "
            f"red edges: {_count(len(crossing), 'transfer')} between partitions "
            f"({fmt_bytes(sum(t.nbytes for t in crossing))}), labelled with their bytes")
    lines += [f"  label={q(_wrap(note, 90, 2))};", "}"]
    return "\n".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    """'1 partition', '2 partitions'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _render(pl, fmt: str, path: str, view: str) -> bytes:
    dot = shutil.which("dot")
    if dot is None:
        raise GlowError(f"{path}: rendering .{fmt} needs Graphviz `dot`, which is not installed "
                        f"(Debian/Ubuntu: apt-get install graphviz; or write .html, .txt or .dot instead)")
    r = subprocess.run([dot, f"-T{fmt}"], input=to_dot(pl, view).encode(), capture_output=True,
                       timeout=300)
    if r.returncode != 0:
        raise GlowError(f"{path}: dot failed: {r.stderr.decode(errors='replace').strip()[:200]}")
    return r.stdout


def to_html(pl, svg: str | None = None) -> str:
    """A self-contained page: the summary, the picture (`svg`, when given), and tables of devices,
    partitions, transfers and every node -> device -> reason (readable without tooltips)."""
    from html import escape as e

    def table(head, rows):
        out = ["<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows]
        return "\n".join(out + ["</table>"])

    summary = to_text(pl).split("\n", 1)[0]
    colour = {t.name: COLOURS[i % len(COLOURS)] for i, t in enumerate(pl.targets)}
    nodes = ["<table><tr><th>node</th><th>op</th><th>device</th><th>why</th><th>detail</th></tr>"]
    for n in pl.graph.nodes:
        r, d = pl.reasons[n.name], pl.device_of[n.name]
        mark = " (fallback)" if r.get("fallback") else ""
        nodes.append(f"<tr><td>{e(n.name)}</td><td>{e(n.op.name)}</td>"
                     f"<td style=\"background:{colour.get(d, '#fff')}\">{e(d)}</td>"
                     f"<td>{e(r['kind'] + mark)}</td><td>{e(r['detail'])}</td></tr>")
    nodes.append("</table>")
    parts = table(["partition", "device", "stage", "nodes", "ops", "memory", "est", "after"],
                  [(p.name, p.target.name, p.stage, len(p.nodes),
                    ", ".join(f"{o} x{c}" for o, c in Counter(n.op.name for n in p.nodes).most_common()),
                    fmt_bytes(p.memory_bytes), fmt_time(p.est_time_s),
                    ",".join(f"p{q}" for q in sorted(p.parents)) or "inputs") for p in pl.partitions])
    xfers = table(["value", "bytes", "from", "to", "est"],
                  [(t.value, fmt_bytes(t.nbytes), _end(pl, t.src), _end(pl, t.dst), fmt_time(t.est_time_s))
                   for t in pl.transfers])
    devs = table(["device", "backend", "cap", "used", "partitions"],
                 [(t.name, t.device.backend, "none" if t.memory_bytes is None else fmt_bytes(t.memory_bytes),
                   fmt_bytes(u["total"]), ",".join(f"p{i}" for i in u["partitions"]) or "-")
                  for t, u in zip(pl.targets, pl.usage)])
    picture = svg[svg.index("<svg"):] if svg and "<svg" in svg else (
        "<p>(no picture: Graphviz <code>dot</code> is not installed)</p>")
    style = ("body{font-family:Helvetica,Arial,sans-serif;margin:1.5em} table{border-collapse:collapse;"
             "margin-bottom:1.5em} td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;"
             "font-size:13px;vertical-align:top} th{background:#eee} .pic{overflow:auto;max-height:90vh;"
             "border:1px solid #ddd}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(pl.graph.name)} placement"
            f"</title><style>{style}</style></head><body>\n<h1>Placement of {e(pl.graph.name)}</h1>\n"
            f"<p>{e(summary)}</p>\n<h2>Devices</h2>\n{devs}\n<h2>Picture</h2>\n<div class=\"pic\">"
            f"{picture}</div>\n<h2>Partitions</h2>\n{parts}\n<h2>Transfers</h2>\n{xfers}\n"
            f"<h2>Nodes: where and why</h2>\n" + "\n".join(nodes) + "\n</body></html>\n")


def write_report(pl, path: str, view: str = "auto") -> None:
    """By extension: .json, .dot, .txt, .html (tables of every node -> device -> reason, with the
    picture embedded when Graphviz is installed), or .svg/.png/.pdf rendered by Graphviz `dot`.
    `view` picks the picture (see to_dot). Written through a temporary file (glow.fileio): no
    partial report, and an unwritable folder or a folder at `path` is a GlowError naming the path."""
    ext = os.path.splitext(path)[1].lower()
    _view(pl, view)
    if ext == ".json":
        text = json.dumps(to_json(pl), indent=2)
    elif ext in (".dot", ".gv"):
        text = to_dot(pl, view)
    elif ext in (".txt", ""):
        text = to_text(pl)
    elif ext in (".html", ".htm"):
        svg = _render(pl, "svg", path, view).decode() if shutil.which("dot") else None
        text = to_html(pl, svg)
    elif ext in (".svg", ".png", ".pdf"):
        data = _render(pl, ext[1:], path, view)
        write_atomic(path, lambda f: f.write(data), suffix=ext, what="placement report")
        return
    else:
        raise GlowError(f"{path}: unknown report format '{ext}' (use .txt, .json, .dot, .html, .svg or .png)")
    write_atomic(path, lambda f: f.write(text.encode()), suffix=ext, what="placement report")
