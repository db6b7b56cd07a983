"""The fuzzing loop and its command line (`python -m glow.testing.fuzz`)."""

from __future__ import annotations

import argparse
import collections
import sys
import threading
import time

from .generate import generate, op_names
from .runner import FAILING, Runner, have_ort
from .shrink import save, shrink


def fuzz(backend, count, seed=0, *, native=None, timeout=60.0, jobs=1, out="fuzz-failures", ops=None,
         max_nodes=8, use_ort=None, do_shrink=True, start=0, log=None, twice=False, strict=False) -> dict:
    """Run `count` random graphs (indices start..start+count-1 of `seed`); returns the summary."""
    results = {}
    lock = threading.Lock()
    next_i = iter(range(start, start + count))
    tag = backend + ("-floor" if native == "floor" else "")

    def work():
        runner = Runner(backend, native, timeout, use_ort, twice, strict)
        try:
            while True:
                with lock:
                    i = next(next_i, None)
                if i is None:
                    return
                case = generate(seed, i, ops=ops, max_nodes=max_nodes)
                data = case.model.SerializeToString()
                v = runner.run(data, case.feeds)
                v.update(index=i, ops=case.ops, opset=case.opset, nodes=len(case.ops))
                if v["category"] in FAILING and do_shrink and out:
                    cat = v["category"]

                    def fails(m, f, cat=cat):
                        return runner.run(m, f)["category"] == cat
                    model, feeds = shrink(case.model, case.feeds, fails, runner)
                    final = runner.run(model.SerializeToString(), feeds)
                    final.update(seed=seed, index=i, backend=backend, native=native,
                                 original_nodes=len(case.ops))
                    v["saved"] = save(out, f"{tag}-seed{seed}-{i}", model, feeds, final)
                    v["minimal_ops"] = [n.op_type for n in model.graph.node]
                with lock:
                    results[i] = v
                    if log:
                        log(v)
        finally:
            runner.close()

    t0 = time.time()
    threads = [threading.Thread(target=work) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cats = collections.Counter(v["category"] for v in results.values())
    covered = collections.Counter(op for v in results.values() for op in set(v["ops"]))
    return dict(backend=tag, seed=seed, graphs=len(results), seconds=time.time() - t0,
                categories=dict(cats), ops_covered=len(covered), op_counts=dict(covered),
                failures=[results[i] for i in sorted(results) if results[i]["category"] in FAILING],
                notes=[results[i] for i in sorted(results)
                       if results[i]["category"] in ("on-host", "refused", "both-refuse", "ambiguous")],
                ort=have_ort() if use_ort is None else use_ort,
                ort_compared=sum(v.get("ort") == "ok" for v in results.values()))


def report(s: dict, file=sys.stdout) -> None:
    c = s["categories"]
    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(f"glow fuzz: backend {s['backend']}, seed {s['seed']}: {s['graphs']} graphs in {s['seconds']:.0f}s, "
      f"{s['ops_covered']} ops covered, "
      + (f"{s['ort_compared']} also compared with onnxruntime" if s["ort"] else "onnxruntime not used"))
    p("  " + ", ".join(f"{k} {c.get(k, 0)}" for k in
                       ("pass", "mismatch", "ort-mismatch", "error", "internal", "crash", "hang",
                        "unstable", "on-host", "refused", "both-refuse", "ambiguous")))
    for v in s["failures"]:
        where = f" -> {v['saved']} ({', '.join(v.get('minimal_ops', []))})" if v.get("saved") else ""
        p(f"  FAIL #{v['index']} {v['category']}: {v['detail'][:300]}{where}")
        for k in ("ort", "onnx_reference"):
            if v.get(k):
                p(f"      {k}: {v[k]}")
    for v in s["notes"]:
        extra = f" (onnx.reference {v['onnx_reference']})" if v.get("onnx_reference") else ""
        p(f"  note #{v['index']} {v['category']}: {v['detail'][:200]}{extra}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m glow.testing.fuzz",
                                 description="Differential fuzzing of a glow backend (see docs/fuzzing.md).")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--native", choices=["floor", "all"], default=None)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first graph index (to resume or split a run)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per compile+run before 'hang'")
    ap.add_argument("--jobs", type=int, default=1, help="parallel workers")
    ap.add_argument("--out", default="fuzz-failures", help="where minimal failing models go")
    ap.add_argument("--ops", default=None, help="comma-separated ops to draw from (default: all)")
    ap.add_argument("--max-nodes", type=int, default=8)
    ap.add_argument("--no-ort", action="store_true", help="do not compare with onnxruntime")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--twice", action="store_true",
                    help="compile each graph twice in the worker; different outputs are 'unstable'")
    ap.add_argument("--list-ops", action="store_true", help="print the ops the generator knows and exit")
    ap.add_argument("--strict", action="store_true",
                    help="compile with strict=True: what the backend cannot run is refused ('refused'), not run "
                         "on the host ('on-host')")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per graph")
    a = ap.parse_args(argv)
    if a.list_ops:
        print(" ".join(op_names()), f"({len(op_names())} ops)")
        return 0
    if not a.backend:
        ap.error("--backend is required")
    ops = [o.strip() for o in a.ops.split(",")] if a.ops else None
    unknown = sorted(set(ops or []) - set(op_names()))
    if unknown:
        print(f"error: the generator knows no op {', '.join(unknown)} (see --list-ops)", file=sys.stderr)
        return 2
    log = (lambda v: print(f"#{v['index']} {v['category']} {' '.join(v['ops'])} {v['detail'][:160]}",
                           flush=True)) if a.verbose else None
    from ...progress import bar

    graphs = bar(a.count, f"fuzz {a.backend}", unit="graph")  # drawn only on a terminal

    def tick(v):
        graphs.update(1)
        if log:
            log(v)
    with graphs:
        s = fuzz(a.backend, a.count, a.seed, native=a.native, timeout=a.timeout, jobs=a.jobs, out=a.out,
                 ops=ops, max_nodes=a.max_nodes, use_ort=False if a.no_ort else None,
                 do_shrink=not a.no_shrink, start=a.start, log=tick, twice=a.twice, strict=a.strict)
    report(s)
    return 1 if s["failures"] else 0
