"""The ONNX node suite on one backend, over several worker processes (for GPU machines, where
each case's kernel build dominates and the host has cores to spare).

    python scripts/parallel_node_suite.py --backend cuda [--native floor] [--jobs 8]

Prints the pass count, the failures not in the backend's known-failures list, and listed
failures that pass now; exits 1 when either list is non-empty (as glow.testing.node_suite does).
Workers are spawned (not forked): a CUDA context does not survive a fork.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time


def _init(backend):
    import glow

    glow.available_backends()  # discover once per worker


def _one(args):
    name, backend, native = args
    from glow.testing.node_suite import case_by_name, run_case

    try:
        return name, run_case(case_by_name()[name], backend, native)
    except Exception as e:  # noqa: BLE001 - a crash is that case's failure
        return name, f"crash: {type(e).__name__}: {e}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True)
    p.add_argument("--native", default=None)
    p.add_argument("--jobs", type=int, default=8)
    a = p.parse_args(argv)
    from glow.testing.node_suite import collect_cases, load_known_failures, may_pass

    names = [c.name for c in collect_cases()]
    key = a.backend if not a.native else f"{a.backend}-{a.native}"
    known = load_known_failures(key)
    t = time.time()
    with mp.get_context("spawn").Pool(a.jobs, initializer=_init, initargs=(a.backend,)) as pool:
        results = dict(pool.imap_unordered(_one, [(n, a.backend, a.native) for n in names], chunksize=4))
    fails = {n: r for n, r in results.items() if r}
    print(f"{key}: {len(names) - len(fails)}/{len(names)} passed in {time.time() - t:.1f}s ({a.jobs} workers)")
    new = sorted(set(fails) - set(known))
    fixed = sorted(n for n in known if n in results and n not in fails and not may_pass(known[n]))
    for n in new:
        print(f"  NEW FAIL {n}: {fails[n][:300]}")
    for n in fixed:
        print(f"  NOW PASSES {n} (listed: {known[n]})")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
