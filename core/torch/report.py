"""`glow.torch.explain(model, *args)`: what ran on glow, what stayed in torch, and why.

It compiles `model` with the glow backend (as `torch.compile(model, backend="glow")` would),
runs it once on `args` and reports, for every ATen node of every graph dynamo handed over, the
glow partition that ran it or the reason it stayed eager; plus dynamo's graph breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Why a supported node still runs in torch: it was alone between unsupported ones, and one
#: movement or compute op is not worth a call into glow (CapabilityBasedPartitioner drops it).
ALONE = "supported, but alone between nodes torch runs (a one-op partition is not worth a glow call)"


@dataclass
class Explanation:
    #: (graph index, FX node name, ATen op, "glow" or "eager", partition name or reason)
    nodes: list = field(default_factory=list)
    #: dynamo's reasons for splitting the model into several graphs
    graph_breaks: list = field(default_factory=list)
    graphs: int = 0

    @property
    def on_glow(self) -> list:
        return [r for r in self.nodes if r[3] == "glow"]

    @property
    def eager(self) -> list:
        return [r for r in self.nodes if r[3] == "eager"]

    def __str__(self):
        lines = [f"{self.graphs} graph(s), {len(self.graph_breaks)} graph break(s); "
                 f"{len(self.on_glow)} ATen node(s) on glow, {len(self.eager)} eager"]
        lines += [f"  graph break: {b}" for b in self.graph_breaks]
        for g, name, op, where, why in self.nodes:
            lines.append(f"  [{g}] {name:<24} {op:<40} {where:<5} {why}")
        return "\n".join(lines)


def explain(model, *args, options: dict | None = None, verbose: bool = False) -> Explanation:
    """Compile `model` on glow (fresh: dynamo's caches are reset), run it on `args`, and say what
    ran where. `options` as torch.compile's for the glow backend. Printed if `verbose`."""
    import torch

    from .dynamo import backend, recording

    torch._dynamo.reset()  # a model compiled before would not hand its graphs over again
    brk = torch._dynamo.explain(model)(*args)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=lambda gm, ex: backend(gm, ex, options=options))
    with recording() as reports, torch.no_grad():
        compiled(*args)
    out = Explanation(graph_breaks=[str(getattr(r, "reason", r)).splitlines()[0] for r in brk.break_reasons],
                      graphs=len(reports))
    for g, rep in enumerate(reports):
        for name, op in rep["nodes"]:
            if name in rep["glow"]:
                row = ("glow", rep["glow"][name])
            elif name in rep["failed"]:
                row = ("eager", f"glow could not compile its partition: {rep['failed'][name]}")
            elif name in rep["eager"]:
                row = ("eager", rep["eager"][name])
            elif name in rep["sizes"]:
                row = ("eager", "size arithmetic (torch's)")
            else:
                row = ("eager", ALONE)
            out.nodes.append((g, name, op, *row))
    if verbose:
        print(out)
    return out
