"""Placement: support, cost and memory together, then the cut into partitions, then the reasons.

    feasibility  (support.py)      which devices can run each node, after lowering
    constraints  (constraints.py)  pins, bans, strict mode
    search       (search.py)       DP over the topological order + refinement (or pipeline stages)
    memory       (here)            exact per-device check on the cut; move nodes off full devices
    cut          (cut.py)          the DAG of partitions
    reasons      (here)            per node: pinned / only option / cheaper by X / memory / balance
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph
from .constraints import allowed_matrix, resolve_bans, resolve_pins
from .cost import CostTable
from .cut import Partition, Transfer, cut, device_usage
from .devices import PartitionError, Target, fmt_bytes, fmt_time
from .search import Memory, Problem, priority, refine, runs, staged, viterbi
from .support import feasibility

OBJECTIVES = ("latency", "throughput", "priority")


@dataclass
class Placement:
    """Where every node runs, why, and the partitions that result."""

    graph: Graph
    targets: list[Target]
    objective: str
    device_of: dict  # node name -> device name
    reasons: dict  # node name -> {"kind", "detail", "fallback"}
    partitions: list[Partition]
    transfers: list[Transfer]
    usage: list[dict]  # per device: weights, activations, total, cap, partitions
    est_time_s: float  # one request, sequentially: compute + transfers
    est_transfer_s: float
    est_bottleneck_s: float  # the busiest device's time per request (pipelined throughput bound)
    meta: dict = field(default_factory=dict)

    def fallbacks(self) -> list[str]:
        return [n for n, r in self.reasons.items() if r.get("fallback")]

    # report formats (report.py)
    def to_text(self) -> str:
        from .report import to_text

        return to_text(self)

    def to_json(self) -> dict:
        from .report import to_json

        return to_json(self)

    def to_dot(self, view: str = "auto") -> str:
        from .report import to_dot

        return to_dot(self, view)

    def write(self, path: str, view: str = "auto") -> None:
        from .report import write_report

        write_report(self, path, view)


def place(graph: Graph, targets: list[Target], *, pins=None, bans=None, strict: bool = False,
          objective: str = "latency", time_scale: np.ndarray | None = None) -> Placement:
    """Place every node of an (optimised) graph on one of `targets` and cut the result.
    `time_scale[i, j]` multiplies node i's estimated time on device j (calibration.py)."""
    if objective not in OBJECTIVES:
        raise PartitionError(f"unknown objective '{objective}' (expected one of {', '.join(OBJECTIVES)})")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise PartitionError(f"device names must be unique, got {names}")
    by_branches: set = set()  # (node, device): control flow the device runs as a partition of its own
    feas = feasibility(graph, targets, by_branches)
    pinned = resolve_pins(graph, targets, pins)
    banned = resolve_bans(graph, targets, bans)
    allowed = allowed_matrix(graph, targets, feas, pinned, banned, strict)
    table = CostTable.build(graph, targets, allowed)
    if time_scale is not None:
        table.time = table.time * time_scale
    problem = Problem(table, allowed)
    _check_total_memory(problem, graph)
    assign = None
    if objective == "throughput" and len(targets) > 1:
        assign = staged(problem)
    elif objective == "priority":
        assign = priority(problem)
    if assign is None:
        assign = viterbi(problem)
        if assign is None:
            assign = _spread(problem)
        assign = refine(problem, assign)
    assign = fit_memory(problem, graph, assign, by_branches)
    parts, transfers = cut(graph, targets, assign, times=problem.time[np.arange(problem.n), assign],
                           alone=by_branches)
    usage = device_usage(parts, targets)
    reasons = explain(problem, graph, assign, feas, pinned, objective)
    load = problem.load(assign)
    return Placement(graph, targets, objective, {n.name: targets[int(assign[i])].name
                                                 for i, n in enumerate(graph.nodes)},
                     reasons, parts, transfers, usage, problem.total(assign),
                     problem.transfer_total(assign), float(load.max()) if len(load) else 0.0,
                     {"pins": pins, "bans": bans, "strict": strict, "time_scale": time_scale})


def _check_total_memory(p: Problem, graph: Graph):
    weights = float(p.weight_bytes.sum())
    room = float(p.cap.sum())
    if weights > room:
        raise PartitionError(f"the model's weights ({fmt_bytes(weights)}) exceed the memory of all "
                             f"devices together ({fmt_bytes(room)})")


def _spread(p: Problem) -> np.ndarray:
    """When the DP finds no path that fits (its memory view is approximate), start from each node's
    cheapest device with room left, in topological order; fit_memory repairs what remains."""
    a = np.zeros(p.n, dtype=np.int64)
    used = np.zeros(p.k)
    for i in range(p.n):
        order = np.argsort(p.time[i])
        room = [j for j in order if p.allowed[i, j] and used[j] + p.weight_bytes[i] + p.work[i] <= p.cap[j]]
        a[i] = room[0] if room else order[0]
        used[a[i]] += p.weight_bytes[i]
    return a


def fit_memory(p: Problem, graph: Graph, a: np.ndarray, alone=frozenset()) -> np.ndarray:
    """Check every device on the real cut (weights once per device + the largest partition peak);
    while one is over its cap, move the node or run that frees most per second of cost added."""
    a = a.copy()
    for _ in range(p.n * p.k + 1):
        parts, _ = cut(graph, p.targets, a, build=False, alone=alone)
        usage = device_usage(parts, p.targets)
        over = [(u["total"] - p.cap[j], j) for j, u in enumerate(usage) if u["total"] > p.cap[j]]
        if not over:
            return a
        _, d = max(over)
        mem = Memory(p, a.copy())
        best, best_score = None, np.inf
        groups = [g for g in runs(a) if a[g[0]] == d]
        groups += [[i] for g in groups if len(g) > 1 for i in g]
        for group in groups:
            freed = sum(b for i in group for _, b in p.consts[i]) + max(p.work[i] for i in group)
            for j in range(p.k):
                if j == d or not p.allowed[group, j].all() or not mem.fits(group, j):
                    continue
                score = max(p.delta(a, group, j), 0.0) / freed + 1e-12 * len(group)
                if score < best_score:
                    best, best_score = (group, j), score
        if best is None:
            u = usage[d]
            raise PartitionError(
                f"device {p.targets[d].name} needs {fmt_bytes(u['total'])} (weights "
                f"{fmt_bytes(u['weights'])}, activations {fmt_bytes(u['activations'])}) but has "
                f"{fmt_bytes(p.cap[d])}, and no node can move to another device with room")
        group, j = best
        a[group] = j
    raise PartitionError("memory repair did not converge")


def explain(p: Problem, graph: Graph, a: np.ndarray, feas: dict, pinned: dict, objective: str) -> dict:
    """Per node: why it runs where it does."""
    mem = Memory(p, a.copy())
    primary = p.targets[0]
    out = {}
    for i, node in enumerate(graph.nodes):
        cur = int(a[i])
        here = p.targets[cur]
        fallback = cur != 0 and feas[node.name][primary.name] is not None
        if node.name in pinned:
            out[node.name] = {"kind": "pinned", "detail": f"pinned by '{pinned[node.name][1]}'",
                              "fallback": False}
            continue
        others = [j for j in range(p.k) if j != cur and p.allowed[i, j]]
        if not others:
            why = "; ".join(feas[node.name][t.name] or f"{t.name} banned"
                            for j, t in enumerate(p.targets) if j != cur)
            detail = f"only {here.name} can run it" + (f" ({why})" if why else "")
            out[node.name] = {"kind": "only", "detail": detail, "fallback": fallback}
            continue
        deltas = {j: p.delta(a, [i], j) for j in others}
        j = min(deltas, key=deltas.get)
        alt = p.targets[j]
        compute = p.time[i, j] - p.time[i, cur]
        if objective == "priority" and cur < min(others):
            detail = f"first listed device that can run it (on {alt.name}: {_signed(deltas[j])})"
            out[node.name] = {"kind": "priority", "detail": detail, "fallback": fallback}
        elif deltas[j] > 1e-12:
            detail = (f"cheaper by {fmt_time(deltas[j])} than on {alt.name} (compute "
                      f"{fmt_time(p.time[i, cur])} vs {fmt_time(p.time[i, j])}, transfers "
                      f"{_signed(deltas[j] - compute)})")
            out[node.name] = {"kind": "cost", "detail": detail, "fallback": fallback}
        elif not mem.fits([i], j):
            detail = (f"memory: {alt.name} would be {fmt_time(-deltas[j])} faster but is full "
                      f"({fmt_bytes(mem.need_after([i], j))} needed, cap {fmt_bytes(p.cap[j])})")
            out[node.name] = {"kind": "memory", "detail": detail, "fallback": fallback}
        elif objective == "throughput":
            detail = (f"pipeline stage on {here.name} balances the stages ({alt.name} would be "
                      f"{fmt_time(-deltas[j])} faster for one request alone)")
            out[node.name] = {"kind": "balance", "detail": detail, "fallback": fallback}
        else:
            detail = f"as cheap as on {alt.name}; kept with its neighbours"
            out[node.name] = {"kind": "tie", "detail": detail, "fallback": fallback}
    return out


def _signed(x: float) -> str:
    if abs(x) < 5e-8:
        return "+0"
    return ("+" if x > 0 else "-") + fmt_time(abs(x))
