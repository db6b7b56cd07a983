"""Peak resident memory per engine: a fresh process per (model, engine) loads the model, compiles
it and runs it 5 times at 1 thread; its peak resident set (VmHWM) is what it cost.

    python benchmarks/memory.py                           # the light models with >= 25 MB of weights
    python benchmarks/memory.py --models squeezenet resnet50 --no-write

Each process imports only its own engine (glow imports no onnxruntime), so the figures are what a
user's process holds. "imports" is the same process's resident set after importing the engine and
NumPy/onnx, before any model: the fixed overhead (glow's includes LLVM). Results go to
benchmarks/results-memory.json; docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ENGINES = ("glow", "onnxruntime", "openvino")
#: The light models with at least 25 MB of weights (their weights are made at load time).
MODELS = ["resnet50", "vgg19", "bvlc_alexnet", "zfnet512", "densenet121", "inception_v2"]

CHILD = r'''
import json, sys
def status():
    return {k: int(v.split()[0]) / 1024 for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
            if k in ("VmHWM", "VmRSS")}
engine, path = sys.argv[1], sys.argv[2]
import numpy as np, onnx
if engine == "glow":
    import glow
elif engine == "onnxruntime":
    import onnxruntime as ort
else:
    import openvino as ov
base = status()["VmRSS"]
m = onnx.load(path, load_external_data=False)
inits = {i.name for i in m.graph.initializer}
inp = [i for i in m.graph.input if i.name not in inits][0]
shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
del m
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
if engine == "glow":
    exe = glow.compile(path, backend="cpu", threads=1)
    run = lambda: exe.run({inp.name: x})
elif engine == "onnxruntime":
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, {inp.name: x})
else:
    c = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"})
    run = lambda: c({inp.name: x})
for _ in range(5):
    run()
s = status()
print(json.dumps({"imports_mib": base, "peak_mib": s["VmHWM"], "end_mib": s["VmRSS"]}))
'''


def measure(path: str, engine: str) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, engine, path], capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail[:200]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def weights_mb(path: str) -> float:
    """Bytes of the model's weights once loaded (the light models make theirs with ConstantOfShape)."""
    from glow.onnx_import import load_onnx
    from glow.passes import optimize_graph

    graph = optimize_graph(load_onnx(path))
    return sum(v.data.nbytes for v in graph.constants) / 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from glow.backends.cpu import jit
    from glow.bench import resolve_model
    from host import cpu_model, write_results

    engines = [e for e in args.engines.split(",") if e]
    rows = []
    host = f"{cpu_model()} ({jit.cpu_name()}, {jit.isa()})"
    print(f"# {host}; peak resident MiB, 1 thread, compile + 5 runs, one process per cell")
    for spec in args.models:
        path, name = resolve_model(spec)
        row = {"model": name, "weights_mb": round(weights_mb(path), 1)}
        for e in engines:
            row[e] = measure(path, e)
        rows.append(row)
        cells = "  ".join(f"{e} {row[e]['peak_mib']:7.0f} (imports {row[e]['imports_mib']:4.0f})"
                          if "peak_mib" in row[e] else f"{e} {row[e]['error']}" for e in engines)
        ratio = (row["glow"]["peak_mib"] / row["onnxruntime"]["peak_mib"]
                 if "peak_mib" in row.get("glow", {}) and "peak_mib" in row.get("onnxruntime", {}) else float("nan"))
        print(f"{name:22s} weights {row['weights_mb']:7.1f} MB  {cells}  glow/onnxruntime {ratio:.2f}", flush=True)
    if not args.no_write:
        print("wrote", write_results("memory", {"host": host, "rows": rows}))


if __name__ == "__main__":
    main()
