"""Serving over Ray devices: 8 clients x 50 requests through one ray device, a pipelined
two-node placement and 2 replicas, every output checked (issue 21's numbers).

    python benchmarks/distributed.py                   # light ResNet-50 and the BERT-tiny encoder
    python benchmarks/distributed.py --clients 8 --requests 50 --models resnet50 --no-write

A local Ray cluster of simulated nodes is started (ray.cluster_utils.Cluster): a head that runs
nothing and nodes node_a and node_b with `--cpus` CPUs each (`--nodes-cpus 2` on a bigger machine).
On one machine the "network" is Ray's shared-memory object store, so the figures are Ray's own
overhead, not a real link's; `measure_link` gives the link figures to put in plugins.toml.

Rows, per model:
- `local`: glow cpu in this process, requests one after another (no Ray): the floor.
- `ray x1`: the whole model in one actor on node_a.
- `pipelined`: split over node_a and node_b by memory caps (objective "throughput").
- `replicas x2`: the whole model twice, one actor per node, behind one load-balanced submit.

Every client sends its requests one after another (each waits for its answer), with inputs drawn
from a pool of distinct random tensors; every output is compared with the local result for the
same input (max abs difference reported, must stay within 1e-4). Throughput = requests / wall;
latency = median and 90th percentile of each request's submit-to-result time.

Per-transfer overhead: `ray x1`'s median latency minus `local`'s, with one client, is what one
request pays for the round trip through Ray (its inputs in, its outputs out, the actor call);
measure_link's round trips of 1 KiB and 8 MiB give a leg's latency and bandwidth.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, write_results  # noqa: E402 (benchmarks/host.py, next to this script)


def _models(names):
    import numpy as np
    from glow.testing import nlp_models
    from glow.testing.models import light_models

    rng = np.random.default_rng(0)
    out = {}
    if "resnet50" in names:
        case = next(c for c in light_models() if c.name == "light_resnet50")
        shape = case.data_sets[0][0]["gpu_0/data_0"].shape
        pool = [{"gpu_0/data_0": rng.standard_normal(shape).astype(np.float32)} for _ in range(24)]
        out["resnet50"] = (case.model_path, pool, "90MiB")
    if "encoder" in names:
        m = nlp_models.encoder(layers=4, hidden=256, heads=4, ffn=1024, dynamic=False, batch=1, seq=64)
        pool = [nlp_models.token_feeds(m, 1, 64, rng) for _ in range(24)]
        out["encoder"] = (m, pool, "8MiB")
    return out


def serve(exe, pool, want, clients, requests):
    """`clients` threads x `requests` each; returns (wall s, latencies, max abs diff, errors)."""
    import numpy as np

    lat, diffs, errors = [], [], []
    lock = threading.Lock()

    def client(k):
        for i in range(requests):
            j = (k * 7 + i) % len(pool)
            t0 = time.perf_counter()
            try:
                out = exe.submit(pool[j]).result(timeout=300)
            except Exception as e:  # noqa: BLE001 - counted and shown
                with lock:
                    errors.append(repr(e)[:200])
                continue
            dt = time.perf_counter() - t0
            d = max(float(np.abs(out[n] - want[j][n]).max()) for n in out)
            with lock:
                lat.append(dt)
                diffs.append(d)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, lat, max(diffs, default=float("nan")), errors


def row(name, config, exe, pool, want, clients, requests, extra=None):
    wall, lat, diff, errors = serve(exe, pool, want, clients, requests)
    lat.sort()
    r = {"model": name, "config": config, "clients": clients, "requests": clients * requests,
         "ok": len(lat), "errors": len(errors), "max_abs_diff": diff,
         "throughput_rps": len(lat) / wall, "latency_ms_p50": statistics.median(lat) * 1e3 if lat else None,
         "latency_ms_p90": lat[int(0.9 * (len(lat) - 1))] * 1e3 if lat else None, **(extra or {})}
    print(f"  {config:<12} {r['ok']:>4}/{r['requests']} ok  {r['throughput_rps']:7.1f} req/s  "
          f"p50 {r['latency_ms_p50']:8.2f} ms  p90 {r['latency_ms_p90']:8.2f} ms  max diff {diff:.1e}"
          + (f"  ERRORS {errors[:1]}" if errors else ""), flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50, help="requests per client")
    ap.add_argument("--models", default="resnet50,encoder")
    ap.add_argument("--cpus", type=int, default=1, help="CPUs of each simulated node")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import glow
    import ray
    from glow.backends.ray.link import measure_link
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 400 << 20})
    for name in ("node_a", "node_b"):
        cluster.add_node(num_cpus=args.cpus, resources={name: 1}, object_store_memory=300 << 20)
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    cluster.wait_for_nodes()
    print(f"CPU: {cpu_model()}; {os.cpu_count()} cores; nodes node_a, node_b with {args.cpus} CPU(s) each",
          flush=True)
    link = measure_link("ray:cpu/node_a")
    print(f"link to node_a: {link['latency_us']:.0f} us a leg, {link['transfer_gbs']:.2f} GB/s "
          f"(round trips {link['round_trip_small_ms']:.2f} ms for 1 KiB, {link['round_trip_large_ms']:.2f} ms "
          "for 8 MiB)", flush=True)
    rows = []
    for name, (model, pool, cap) in _models(args.models.split(",")).items():
        local = glow.compile(model, "cpu", threads=1)
        want = [local.run(f) for f in pool]
        print(f"{name}:", flush=True)
        rows.append(row(name, "local", local, pool, want, 1, args.requests))
        configs = [("ray x1", dict(devices=["a=ray:cpu/node_a"])),
                   ("pipelined", dict(devices=[f"a=ray:cpu/node_a@{cap}", f"b=ray:cpu/node_b@{cap}"],
                                      objective="throughput")),
                   ("replicas x2", dict(devices=["ray:cpu"], replicas=2))]
        for config, kw in configs:
            t0 = time.perf_counter()
            exe = glow.compile(model, threads=1, **kw)
            compile_s = time.perf_counter() - t0
            placement = exe.placement
            crossing = [t for t in placement.transfers if t.src is not None and t.dst is not None]
            extra = {"compile_s": compile_s, "partitions": len(placement.partitions),
                     "cross_transfers": len(crossing), "cross_bytes": sum(t.nbytes for t in crossing)}
            if config == "ray x1":  # one client: the overhead of the trip through Ray per request
                one = row(name, "ray x1 (1 client)", exe, pool, want, 1, args.requests, extra)
                one["overhead_ms"] = one["latency_ms_p50"] - rows[-1]["latency_ms_p50"]
                print(f"  -> one request through Ray costs {one['overhead_ms']:.2f} ms more than in process",
                      flush=True)
                rows.append(one)
            rows.append(row(name, config, exe, pool, want, args.clients, args.requests, extra))
            exe.close()
    ray.shutdown()
    cluster.shutdown()
    bad = [r for r in rows if r["errors"] or not r["max_abs_diff"] <= 1e-4]
    if not args.no_write:
        print("wrote", write_results("distributed", {"cpu": cpu_model(), "cores": os.cpu_count(),
                                                     "node_cpus": args.cpus, "link": link, "rows": rows}))
    if bad:
        print(f"FAILED: {len(bad)} row(s) with errors or outputs off by more than 1e-4")
        sys.exit(1)


if __name__ == "__main__":
    main()
