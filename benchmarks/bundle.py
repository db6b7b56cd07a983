"""Ahead-of-time bundles and saved executables (issue 20's figures).

    python benchmarks/bundle.py                  # light ResNet-50 and the BERT-tiny-sized encoder
    python benchmarks/bundle.py --repeats 30 --no-write

For each model: the bundle (`glow bundle`) linked with examples/bundle/main.c by the system's cc,
timed by the C program itself (median of --repeats inferences, one thread: a bundle runs on its
caller's thread), next to the Python executable compiled with threads=1 run on the same input
values (median of --repeats; alternating rounds of both); the bundle's outputs against the
reference interpreter's for those inputs. Also `glow.load` of the model saved
with `exe.save`, timed in a fresh process (median of 3), and the saved file's size. Results go to
benchmarks/results-bundle.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model  # noqa: E402 (benchmarks/host.py, next to this script)

ROOT = os.path.dirname(HERE)


def models():
    import onnx
    from glow.testing import nlp_models
    from glow.testing.models import DATA, with_random_weights

    # random weights: the light model's are all 0.02, so its outputs would be uniform
    return {"resnet50": with_random_weights(onnx.load(os.path.join(DATA, "light", "light_resnet50.onnx"))),
            "encoder": nlp_models.encoder(dynamic=False)}


def pattern_feeds(exe):
    """The inputs main.c makes without an input file: floats (k % 7) * 0.1, integers k % 3."""
    import numpy as np

    out = {}
    for t in exe.inputs:
        k = np.arange(int(np.prod(t.shape)))
        out[t.name] = ((k % 7) * 0.1 if t.dtype.startswith("float") else k % 3).astype(t.np_dtype).reshape(t.shape)
    return out


def measure(name, model, repeats, work) -> dict:
    import glow
    from glow.plugins import registry

    out_dir = os.path.join(work, name)
    registry().get("cpu").bundle(glow.load_onnx(model.SerializeToString()), out_dir)
    cc = shutil.which("cc") or shutil.which("gcc")
    exe_path = os.path.join(out_dir, "run-net")
    subprocess.run([cc, "-O2", "-std=c11", "-I", out_dir, os.path.join(ROOT, "examples", "bundle", "main.c"),
                    os.path.join(out_dir, "net.o"), "-lm", "-o", exe_path], check=True)
    exe = glow.compile(model, backend="cpu", threads=1)
    feeds = pattern_feeds(exe)
    exe.run(feeds)
    c_rounds, py_rounds = [], []
    for _ in range(3):
        r = subprocess.run([exe_path, os.path.join(out_dir, "net.weights.bin"), "-", "-", str(repeats)],
                           capture_output=True, text=True, check=True)
        c_rounds.append(float(re.search(r"median ([\d.]+) ms", r.stdout).group(1)))
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            exe.run(feeds)
            ts.append(time.perf_counter() - t)
        py_rounds.append(statistics.median(ts) * 1e3)
    # the bundle's outputs for the same inputs, against the reference interpreter
    import numpy as np

    outs_path = os.path.join(out_dir, "out.bin")
    subprocess.run([exe_path, os.path.join(out_dir, "net.weights.bin"), "-", outs_path], capture_output=True,
                   check=True)
    raw, at, worst = open(outs_path, "rb").read(), 0, 0.0
    ref = glow.compile(model, backend="reference").run(feeds)
    for t in exe.outputs:
        want = ref[t.name]
        got = np.frombuffer(raw[at:at + want.nbytes], want.dtype).reshape(want.shape)
        at += want.nbytes
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want)) / (np.max(np.abs(want)) or 1.0)))
    saved = os.path.join(work, f"{name}.glowx")
    exe.save(saved)
    code = f"import time, glow; t = time.perf_counter(); glow.load({saved!r}); print(time.perf_counter() - t)"
    loads = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                   .stdout.split()[-1]) for _ in range(3)]
    return {"model": name, "max_rel_diff_vs_reference": worst,
            "bundle_ms": statistics.median(c_rounds), "python_ms": statistics.median(py_rounds),
            "load_s": statistics.median(loads), "saved_bytes": os.path.getsize(saved),
            "object_bytes": os.path.getsize(os.path.join(out_dir, "net.o"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    import llvmlite.binding as llvm

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, model in models().items():
            rows.append(measure(name, model, args.repeats, work))
    host = f"{cpu_model()} (LLVM host {llvm.get_host_cpu_name()}), {os.cpu_count()} CPUs"
    print(f"# bundles and saved executables on {host}")
    print("| model | bundle ms (C, 1 thread) | Python executable ms (threads=1) | bundle vs reference "
          "(max abs diff / max abs) | glow.load s | saved file MB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['bundle_ms']:.3f} | {r['python_ms']:.3f} | {r['max_rel_diff_vs_reference']:.1e} | "
              f"{r['load_s']:.3f} | {r['saved_bytes'] / 2**20:.1f} |")
    if not args.no_write:
        with open(os.path.join(HERE, "results-bundle.json"), "w") as f:
            json.dump({"host": host, "date": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
