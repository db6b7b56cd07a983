"""Static memory plan and graph-optimiser effect on the nine light models of the onnx wheel.

    python benchmarks/memory_plan.py [--backend reference-ir] [--models resnet50 ...] [--json]

For each model: node counts as imported, after the target-independent optimiser, and as handed to
the backend (after its fusions); then, for the instruction IR, the activation bytes with one
buffer per value (no IR passes), with no reuse (after copy elimination and buffer sharing), the
most bytes live at once (the lower bound for any plan of this schedule), and the arena the
planner made. All sizes are rounded up to 64 bytes per buffer. Prints a Markdown table
(docs/memory.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import time

import glow
from glow.flow import optimize_for_backend
from glow.ir import build_ir, lower_to_ir
from glow.ir.instr import aligned
from glow.passes import optimize_graph
from glow.plugins import registry
from glow.testing.models import light_models

MB = 1e6


def measure(case, backend) -> dict:
    t0 = time.perf_counter()
    imported = glow.load_onnx(case.model_path)
    optimized = optimize_graph(imported)
    final = optimize_for_backend(imported, backend)
    naive = build_ir(final, optimize=False)  # one buffer per value, lifetimes tightened only
    program = lower_to_ir(final)
    plan = program.plan
    return {
        "model": case.name.removeprefix("light_"),
        "nodes_imported": len(imported.nodes),
        # The light models compute every weight with a ConstantOfShape node; folding those is
        # real work for the optimiser but says little about the network itself.
        "weight_generators": imported.op_counts().get("ConstantOfShape", 0),
        "nodes_optimized": len(optimized.nodes),
        "nodes_backend": len(final.nodes),
        "activations": len(plan.intervals),
        "per_value_bytes": sum(aligned(b.nbytes) for b in naive.activations()),
        "no_reuse_bytes": plan.no_reuse_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "arena_bytes": plan.arena_bytes,
        "strategy": plan.strategy,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def table(rows) -> str:
    head = ("| model | nodes imported → optimised (→ backend) | reduction | without weight generators "
            "| activations | "
            "one buffer per value MB | no reuse MB | lower bound MB | arena MB | arena / bound | "
            "no reuse / arena |")
    out = [head, "|" + "---|" * 11]
    for r in rows:
        red = 1 - r["nodes_optimized"] / r["nodes_imported"]
        compute = r["nodes_imported"] - r["weight_generators"]
        red2 = f"{compute} → {r['nodes_optimized']}: {1 - r['nodes_optimized'] / compute:.0%}"
        out.append(
            f"| {r['model']} | {r['nodes_imported']} → {r['nodes_optimized']} ({r['nodes_backend']}) "
            f"| {red:.0%} | {red2} | {r['activations']} | {r['per_value_bytes'] / MB:.2f} "
            f"| {r['no_reuse_bytes'] / MB:.2f} "
            f"| {r['lower_bound_bytes'] / MB:.2f} | {r['arena_bytes'] / MB:.2f} "
            f"| {r['arena_bytes'] / max(r['lower_bound_bytes'], 1):.3f} "
            f"| {r['no_reuse_bytes'] / max(r['arena_bytes'], 1):.2f}x |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="reference-ir", help="whose lowering and fusions apply")
    p.add_argument("--models", nargs="*", help="substrings of model names (default: all nine)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    backend = registry().get(a.backend)
    cases = [c for c in light_models() if not a.models or any(m in c.name for m in a.models)]
    rows = [measure(c, backend) for c in cases]
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
