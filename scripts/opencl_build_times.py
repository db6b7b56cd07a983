"""Kernel build time per model on the OpenCL backend: cold (empty PoCL and pyopencl caches) and
cached (a second process over the same caches). Prints one markdown row per model.

    python scripts/opencl_build_times.py [model ...]      (default: the nine light models)

Each measurement runs in a fresh process, so the in-process program cache never answers. The
columns: distinct kernels / launches, render (IR + kernel text), program build, first run (PoCL
compiles each kernel's work-group function at its first launch), and a steady-state run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import glow
from glow.bench import resolve_model
from glow.inputs import make_inputs
model, _ = resolve_model(sys.argv[1])
graph = glow.load_onnx(model)
feeds = make_inputs(graph, seed=0)
t = time.perf_counter(); exe = glow.compile(graph, backend="opencl"); total = time.perf_counter() - t
t = time.perf_counter(); exe.run(feeds); first = time.perf_counter() - t
t = time.perf_counter(); exe.run(feeds); steady = time.perf_counter() - t
c = exe.compiled
print(json.dumps({"kernels": len(c.program.kernels), "launches": len(c.program.launches),
                  "render": c.render_seconds, "build": exe.build_seconds, "compile": total,
                  "first": first, "steady": steady}))
"""


def measure(model: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, model], env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(models):
    print("| model | kernels / launches | render s | cold: build s | cold: first run s | cached: build s "
          "| cached: first run s | steady run ms |")
    print("|---|---|---|---|---|---|---|---|")
    for m in models:
        with tempfile.TemporaryDirectory() as pocl, tempfile.TemporaryDirectory() as xdg:
            env = dict(os.environ, POCL_CACHE_DIR=pocl, XDG_CACHE_HOME=xdg, GLOW_VERIFY="0")
            cold, warm = measure(m, env), measure(m, env)
        print(f"| {m} | {cold['kernels']} / {cold['launches']} | {cold['render']:.2f} | {cold['build']:.2f} | "
              f"{cold['first']:.2f} | {warm['build']:.3f} | {warm['first']:.2f} | {warm['steady'] * 1e3:.0f} |",
              flush=True)


if __name__ == "__main__":
    from glow.testing.models import light_models

    main(sys.argv[1:] or [c.name for c in light_models()])
