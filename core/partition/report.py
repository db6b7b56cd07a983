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
        lines.append(f"  {t.name:<10} {t.device.backend:<10} {cap:<16} uses {fmt_bytes(u['total'])}{full} "
                     f"(weights {fmt_bytes(u['weights'])} + activations {fmt_bytes(u['activations'])})"
                     f"  partitions {','.join(f'p{i}' for i in u['partitions']) or '-'}{ops}")
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


def to_dot(pl) -> str:
    """One cluster per partition, nodes coloured by device, transfers as bold red edges."""

    def q(s: str) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    colour = {t.name: COLOURS[i % len(COLOURS)] for i, t in enumerate(pl.targets)}
    node_id = {n.name: f"n{i}" for i, n in enumerate(pl.graph.nodes)}
    part_of = {n.name: p.index for p in pl.partitions for n in p.nodes}
    lines = [f"digraph {q(pl.graph.name + ' placement')} {{", "  rankdir=TB; compound=true;",
             "  node [fontname=Helvetica, fontsize=10, style=filled]; edge [fontname=Helvetica, fontsize=9];"]
    for p in pl.partitions:
        label = (f"{p.name} on {p.target.name}: {len(p.nodes)} nodes, {fmt_bytes(p.memory_bytes)}, "
                 f"est {fmt_time(p.est_time_s)}")
        lines.append(f"  subgraph cluster_{p.index} {{ label={q(label)}; style=rounded; color=gray40;")
        for n in p.nodes:
            r = pl.reasons[n.name]
            tip = f"{r['kind']}: {r['detail']}"
            lines.append(f"    {node_id[n.name]} [shape=box, fillcolor={q(colour[p.target.name])}, "
                         f"label={q(n.op.name + chr(10) + n.name)}, tooltip={q(tip)}"
                         f"{', penwidth=2, color=red' if r.get('fallback') else ''}];")
        lines.append("  }")
    src = {}
    for v in pl.graph.inputs:
        lines.append(f"  {q('in:' + v.name)} [shape=ellipse, fillcolor=white, label={q(v.name)}];")
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
                lines.append(f"  {q(s)} -> {node_id[n.name]} [color=red, penwidth=2, "
                             f"label={q(fmt_bytes(value_bytes(v)))}];")
            else:
                lines.append(f"  {q(s)} -> {node_id[n.name]};")
    for v in pl.graph.outputs:
        lines.append(f"  {q('out:' + v.name)} [shape=ellipse, fillcolor=white, style=bold, label={q(v.name)}];")
        if id(v) in src:
            lines.append(f"  {q(src[id(v)][0])} -> {q('out:' + v.name)};")
    lines.append("  subgraph cluster_legend { label=\"devices\"; style=dashed;")
    for i, t in enumerate(pl.targets):
        lines.append(f"    legend{i} [shape=box, fillcolor={q(colour[t.name])}, label={q(t.describe())}];")
    lines.append("  }")
    note = f"red edges: transfers between partitions; red boxes: nodes that fell back from {pl.targets[0].name}"
    lines.append(f"  label={q(note)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_report(pl, path: str) -> None:
    """By extension: .json, .dot, .txt, or .svg/.png/.pdf rendered by Graphviz `dot`. Written
    through a temporary file (glow.fileio): no partial report, and an unwritable folder or a
    folder at `path` is a GlowError naming the path."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".json":
        text = json.dumps(to_json(pl), indent=2)
    elif ext in (".dot", ".gv"):
        text = to_dot(pl)
    elif ext in (".txt", ""):
        text = to_text(pl)
    elif ext in (".svg", ".png", ".pdf"):
        dot = shutil.which("dot")
        if dot is None:
            raise GlowError(f"{path}: rendering {ext} needs Graphviz `dot`, which is not installed "
                            f"(write .dot and render it elsewhere)")
        r = subprocess.run([dot, f"-T{ext[1:]}"], input=to_dot(pl).encode(), capture_output=True,
                           timeout=300)
        if r.returncode != 0:
            raise GlowError(f"{path}: dot failed: {r.stderr.decode(errors='replace').strip()[:200]}")
        write_atomic(path, lambda f: f.write(r.stdout), suffix=ext, what="placement report")
        return
    else:
        raise GlowError(f"{path}: unknown report format '{ext}' (use .txt, .json, .dot, .svg or .png)")
    write_atomic(path, lambda f: f.write(text.encode()), suffix=ext, what="placement report")
