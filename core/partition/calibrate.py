"""Calibration by measurement: time each partition on its device, correct the estimates, re-place.

The roofline only ranks devices; a backend's real speed per op differs (an interpreter's per-node
overhead, a JIT's fusions, a slow kernel). After a first placement every partition is run alone on
its device with real inputs (the partitions in index order, which is a topological order). Each
node's estimated time on its device's backend is then scaled by its partition's measured /
estimated ratio; on devices of other backends by that device's overall ratio. Placing again
with these times balances pipeline stages in wall time rather than in FLOPs.
"""

from __future__ import annotations

import time

import numpy as np


def measure_partitions(parts, exes, feeds: dict, repeats: int = 3) -> list[float]:
    """Median seconds of each partition's executable, run alone on real inputs."""
    values = dict(feeds)
    out = []
    for p, exe in zip(parts, exes):
        ins = {v.name: values[v.name] for v in p.inputs}
        times = []
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                outs = exe.run(ins)
            times.append(time.perf_counter() - t0)
        values.update({v.name: outs[v.name] for v in p.outputs})
        out.append(sorted(times)[len(times) // 2])
    return out


def time_scale(placement, measured: list[float]) -> np.ndarray:
    """Factors [node, device] for the next placement (on top of the ones this placement used)."""
    graph, targets = placement.graph, placement.targets
    n, k = len(graph.nodes), len(targets)
    base = placement.meta.get("time_scale")
    base = np.ones((n, k)) if base is None else np.array(base, dtype=float)
    node_index = {nd.name: i for i, nd in enumerate(graph.nodes)}
    dev_index = {t.name: j for j, t in enumerate(targets)}
    ratio = np.full((n, k), np.nan)
    spent, estimated = np.zeros(k), np.zeros(k)
    for p, seconds in zip(placement.partitions, measured):
        j = dev_index[p.target.name]
        r = seconds / max(p.est_time_s, 1e-9)
        spent[j] += seconds
        estimated[j] += p.est_time_s
        same_backend = [jj for jj, t in enumerate(targets) if t.backend is p.target.backend]
        for node in p.nodes:
            ratio[node_index[node.name], same_backend] = r
    device_ratio = np.where(estimated > 0, spent / np.maximum(estimated, 1e-12), np.nan)
    fallback = np.nanmean(device_ratio) if np.isfinite(device_ratio).any() else 1.0
    device_ratio = np.where(np.isfinite(device_ratio), device_ratio, fallback)
    ratio = np.where(np.isfinite(ratio), ratio, device_ratio[None, :])
    return base * ratio
