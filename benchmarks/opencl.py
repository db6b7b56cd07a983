"""The OpenCL backend (PoCL's CPU device here) against onnxruntime on the twelve benchmark models.

    python benchmarks/opencl.py                       # all twelve; writes benchmarks/results-opencl.json
    python benchmarks/opencl.py --models resnet50 mlp --rounds 5 --no-write

Each model is measured with `glow.bench.bench` (glow and onnxruntime interleaved in one process,
medians with min-max), onnxruntime with as many threads as there are cores (PoCL's pthread
device uses them all). The JSON feeds the OpenCL table of docs/performance.md (benchmarks/
run_all.py) and docs/performance-opencl.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_all import MODELS, _peers, geomean  # noqa: E402

RESULTS = os.path.join(HERE, "results-opencl.json")
#: Rounds for the small models; the large ones get a third (each round of VGG-19 is ~1 s).
SMALL = {"mlp", "small_cnn", "transformer", "squeezenet", "shufflenet"}


def run(models, rounds: int) -> dict:
    from glow.bench import bench

    threads = len(os.sched_getaffinity(0))
    out = []
    for m in models:
        r = bench(m, backend="opencl", threads=threads, rounds=rounds if m in SMALL else max(3, rounds // 3))
        out.append(r.to_dict())
        print(f"{m:14s} opencl {r.glow.median_ms:9.3f} ms  ort({threads}T) {r.peer.median_ms:9.3f} ms  "
              f"ratio {r.ratio:5.2f}  diff {r.max_abs_diff:.1e}", flush=True)
    return {"results": out, "threads": threads}


def table(data: dict) -> list[str]:
    """Markdown rows: model, glow opencl ms, onnxruntime ms, ratio; then the geometric mean."""
    def ms(t):
        return f"{t['median_ms']:.2f} ({t['min_ms']:.2f}-{t['max_ms']:.2f})"

    res = data["results"]
    lines = [f"| model | glow opencl ms | onnxruntime ms ({data['threads']} threads) | ratio |",
             "|---|---|---|---|"]
    lines += [f"| {r['model']} | {ms(r['glow'])} | {ms(_peers(r)[r['peer_name']])} | {r['ratio']:.2f} |" for r in res]
    lines += ["", f"Geometric mean of the ratios: **{geomean([r['ratio'] for r in res]):.2f}** over "
              f"{len(res)} models (measured {data.get('date', '?')}, load average "
              f"{data.get('loadavg_start', '?')} -> {data.get('loadavg_end', '?')})."]
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-write", action="store_true", help="print only; leave results-opencl.json")
    a = ap.parse_args(argv)
    load0 = [round(x, 1) for x in os.getloadavg()]
    data = run(a.models, a.rounds)
    data.update(date=time.strftime("%Y-%m-%d"), loadavg_start=load0,
                loadavg_end=[round(x, 1) for x in os.getloadavg()])
    print("\n".join(table(data)))
    if not a.no_write:
        with open(RESULTS, "w") as f:
            json.dump(data, f, indent=1)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
