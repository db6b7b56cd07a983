"""Pipelining: requests per second for one model on one device vs split over two logical devices.

    python benchmarks/pipelining.py [--model resnet50] [--backend cpu] [--requests 48] [--json]

Configurations (every request has its own input; clients are closed loops, each sending its next
request when the previous one returns):
  * plain    glow.compile(model, backend): the single-device executable, no runtime around it;
  * 1 device the multi-device runtime with one device holding the whole model (all threads);
  * 2 devices the model cut into two balanced pipeline stages (objective "throughput") on two
             logical devices of the same backend, the threads split between them;
  * 2 calibrated  the same, with the stages re-balanced by measured partition times
             (glow.partition.calibrate: the roofline estimates balance FLOPs, not wall time).
Each at 1 and 8 concurrent clients. With one client the stages of a request run one after the
other, so splitting cannot help (it adds a hand-off); with 8, request k+1's first stage runs while
request k's second runs, so two stages on two devices can approach twice the single-device rate
when the stages are balanced and each device has its own cores. Also printed: how busy each
device's worker was (busy time / wall time) and the placement's estimated stage times.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from dataclasses import replace

import glow
import numpy as np
from glow.partition import compile_partitioned
from glow.plugins import registry
from glow.testing.models import light_models


def logical(backend: str, name: str, threads: int):
    base = registry().records[backend].devices[0]
    return replace(base, name=name, memory_bytes=None, extra={**base.extra, "threads": threads})


def closed_loop(run, feeds: list, clients: int) -> float:
    """Requests per second with `clients` threads each sending requests back to back."""
    next_i, lock = [0], threading.Lock()

    def client():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= len(feeds):
                return
            run(feeds[i])

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(feeds) / (time.perf_counter() - t0)


def measure(case, backend: str, requests: int, threads: int, rounds: int) -> list[dict]:
    feeds0 = case.data_sets[0][0]
    rng = np.random.default_rng(0)
    feeds = [{k: (v + rng.standard_normal(v.shape).astype(v.dtype) * 0.01) for k, v in feeds0.items()}
             for _ in range(requests)]
    half = max(1, threads // 2)
    exes = {
        "plain": glow.compile(case.model_path, backend=backend, threads=threads),
        "1 device": compile_partitioned(case.model_path, [logical(backend, "one", threads)]),
        "2 devices": compile_partitioned(
            case.model_path, [logical(backend, "a", half), logical(backend, "b", max(1, threads - half))],
            objective="throughput"),
        "2 calibrated": compile_partitioned(
            case.model_path, [logical(backend, "a", half), logical(backend, "b", max(1, threads - half))],
            objective="throughput", calibrate=feeds[0], calibration_rounds=2),
    }
    for label, exe in exes.items():
        exe.run(feeds[0])  # compile on first run (JIT backends), warm caches
        if hasattr(exe, "placement"):
            print(f"  {label}: stages " + ", ".join(f"{p.name} on {p.target.name} est {p.est_time_s * 1e3:.1f} ms"
                                                  for p in exe.placement.partitions), flush=True)
    samples: dict = {}
    # Rounds interleave the configurations so that a noisy neighbour slows all of them alike.
    for r in range(rounds):
        for label, exe in exes.items():
            for clients in (1, 8):
                busy0 = exe.busy_seconds() if hasattr(exe, "busy_seconds") else {}
                t0 = time.perf_counter()
                rps = closed_loop(exe.run, feeds, clients)
                wall = time.perf_counter() - t0
                busy = {k: (v - busy0.get(k, 0.0)) / wall for k, v in exe.busy_seconds().items()} if busy0 else {}
                samples.setdefault((label, clients), []).append((rps, busy))
                print(f"  round {r}: {label:<10} {clients} client(s): {rps:7.2f} req/s  "
                      + " ".join(f"{k} busy {v:.0%}" for k, v in busy.items()), flush=True)
    for exe in exes.values():
        if hasattr(exe, "close"):
            exe.close()
    rows = []
    for (label, clients), got in samples.items():
        got.sort(key=lambda x: x[0])
        rps, busy = got[len(got) // 2]
        rows.append({"config": label, "clients": clients, "rps": rps, "rps_all": [g[0] for g in got],
                     "busy": busy})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50", help="light model name (default resnet50)")
    ap.add_argument("--backend", default=None, help="default: cpu when available, else reference")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads in all (default: all cores)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    backend = args.backend or ("cpu" if "cpu" in glow.available_backends() else "reference")
    case = next(c for c in light_models() if c.name == f"light_{args.model}")
    print(f"{case.name} on {backend}, {args.requests} requests, {args.threads} thread(s) in all, "
          f"{os.cpu_count()} core(s)", flush=True)
    rows = measure(case, backend, args.requests, args.threads, args.rounds)
    if args.json:
        print(json.dumps({"model": case.name, "backend": backend, "threads": args.threads, "rows": rows}, indent=2))
    else:
        base = {r["clients"]: r["rps"] for r in rows if r["config"] == "1 device"}
        busy = {r["config"]: r["busy"] for r in rows if r["clients"] == 8}
        print(f"\nmedians of {args.rounds} rounds (load average {os.getloadavg()[0]:.1f}):")
        print("| config | 1 client req/s | 8 clients req/s | 8 clients vs 1 device | device busy at 8 |")
        print("|---|---|---|---|---|")
        for label in ("plain", "1 device", "2 devices", "2 calibrated"):
            r = {x["clients"]: x["rps"] for x in rows if x["config"] == label}
            b = ", ".join(f"{k} {v:.0%}" for k, v in busy[label].items()) or "-"
            print(f"| {label} | {r[1]:.2f} | {r[8]:.2f} | {r[8] / base[8]:.2f}x | {b} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
