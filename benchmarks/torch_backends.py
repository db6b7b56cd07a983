"""`torch.compile` backends side by side: eager, inductor, glow, and OpenVINO's (where installed).

    python benchmarks/torch_backends.py                          # bert, llama, resnet; 1 and 2 threads
    python benchmarks/torch_backends.py --models bert,vit --threads 1 --repeats 50 --no-write

Each (model, backend, threads) runs in a fresh process (OpenVINO's backend changes dynamo's global
settings when imported, and every compile starts cold): torch.set_num_threads(T) and the backend's
own thread setting (glow: options={"threads": T}; OpenVINO: INFERENCE_NUM_THREADS). Compile time
is the first call (dynamo's trace plus the backend's compile); latency the median of --repeats
calls after 3 warm-ups, every output checked against eager (rtol 1e-3). Models are those of
tests/torch_models.py (transformers configs with random weights, hand-written CNNs). Results go to
benchmarks/results-torch-backends.json with the CPU's name.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from host import cpu_model, write_results  # noqa: E402

BACKENDS = ("eager", "inductor", "glow", "openvino")


def measure(model_name: str, backend: str, threads: int, repeats: int) -> dict:
    """One measurement, in this process."""
    import torch
    from torch_models import MODELS

    torch.set_num_threads(threads)
    model, args = MODELS[model_name]()
    with torch.no_grad():
        want = model(*args)
        if backend == "eager":
            fn = model
        elif backend == "glow":
            fn = torch.compile(model, backend="glow", options={"threads": threads})
        elif backend == "openvino":
            import openvino.torch  # noqa: F401  (registers the backend)

            fn = torch.compile(model, backend="openvino",
                               options={"device": "CPU", "config": {"INFERENCE_NUM_THREADS": str(threads)}})
        else:
            fn = torch.compile(model, backend=backend)
        t = time.perf_counter()
        got = fn(*args)
        compile_s = time.perf_counter() - t
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)
        for _ in range(3):
            fn(*args)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t)
    return {"compile_s": compile_s, "latency_ms": 1000 * statistics.median(times)}


def available(backend: str) -> str | None:
    if backend == "openvino":
        try:
            import openvino.torch  # noqa: F401
        except Exception as e:  # not installed, or it does not import beside this torch
            return f"{type(e).__name__}: {e}"
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="bert,llama,resnet")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--one", help=argparse.SUPPRESS)  # model,backend,threads: measure in this process
    a = p.parse_args(argv)
    if a.one:
        m, b, t = a.one.split(",")
        print(json.dumps(measure(m, b, int(t), a.repeats)))
        return 0
    rows = []
    for model in a.models.split(","):
        for threads in (int(t) for t in a.threads.split(",")):
            for backend in a.backends.split(","):
                why = available(backend)
                if why is not None:
                    rows.append({"model": model, "backend": backend, "threads": threads, "skipped": why})
                    continue
                r = subprocess.run([sys.executable, __file__, "--one", f"{model},{backend},{threads}",
                                    "--repeats", str(a.repeats)], capture_output=True, text=True)
                row = {"model": model, "backend": backend, "threads": threads}
                if r.returncode:
                    row["error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:300]
                else:
                    row.update(json.loads(r.stdout.strip().splitlines()[-1]))
                rows.append(row)
                print(json.dumps(row), flush=True)
    _summary(rows)
    if not a.no_write:
        print(write_results("torch-backends", {"cpu": cpu_model(), "rows": rows}))
    return 0


def _summary(rows):
    """glow's latency over the fastest other backend's, geometric mean over models, per thread count."""
    import math

    by = {}
    for r in rows:
        if "latency_ms" in r:
            by.setdefault((r["model"], r["threads"]), {})[r["backend"]] = r
    for threads in sorted({t for _, t in by}):
        ratios, compile_ratios = [], []
        for (_model, t), got in by.items():
            if t != threads or "glow" not in got:
                continue
            others = [v["latency_ms"] for k, v in got.items() if k != "glow"]
            if others:
                ratios.append(got["glow"]["latency_ms"] / min(others))
            if "inductor" in got:
                compile_ratios.append(got["glow"]["compile_s"] / got["inductor"]["compile_s"])
        if ratios:
            gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
            line = f"{threads} thread(s): glow latency / fastest other, geomean {gm:.2f}x over {len(ratios)} models"
            if compile_ratios:
                cg = math.exp(sum(map(math.log, compile_ratios)) / len(compile_ratios))
                line += f"; glow compile / inductor compile, geomean {cg:.2f}x"
            print(line)


if __name__ == "__main__":
    sys.exit(main())
