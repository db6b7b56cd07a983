"""glow at precision="bf16" against OpenVINO's default precision (bf16 on AVX512-BF16 and AMX hosts)
and its f32 hint, with glow fp32 beside them: latency, interleaved in one process.

    python benchmarks/precision.py                          # the twelve models, 1 and 2 threads
    python benchmarks/precision.py --models resnet50 --threads 1 --rounds 10 --no-write

Each round feeds every engine the same fresh random inputs, engines in turn (the order rotating),
each timed run right after an untimed one of the same engine on other inputs; medians over
--rounds. Accuracy: cosine and top-1 agreement of glow
bf16's first output (and OpenVINO default's) with glow fp32's on the same inputs. The nine light
models' weights are all 0.02, so their cosines say little; the generated ones and resnet50_random
(the light ResNet-50 with random He-scaled weights, as benchmarks/int8_resnet.py makes it) have
random weights. Inputs: standard normal.
Top-1: of the rows of a [batch, classes] output, the share whose class is glow fp32's, for glow
bf16 and for OpenVINO's default (n/a for other outputs). Results: benchmarks/results-precision.json
(under the host's CPU and its ISA).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, write_results  # noqa: E402
from run_all import MODELS  # noqa: E402

#: The light ResNet-50 with random He-scaled weights (benchmarks/int8_resnet.py), beside the twelve.
RANDOM_RESNET = "resnet50_random"


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den else float(np.array_equal(a, b))


def measure(spec: str, threads: int, rounds: int) -> dict:
    import glow
    import onnx
    import openvino as ov
    from glow.bench import resolve_model

    if spec == RANDOM_RESNET:  # real-looking weights: a classifier whose top-1 means something
        from int8_resnet import random_resnet50

        proto, name = random_resnet50(np.random.default_rng(0)), spec
    else:
        model, name = resolve_model(spec)
        proto = onnx.load(model) if isinstance(model, str) else model
    engines = {"glow fp32": glow.compile(proto, "cpu", threads=threads),
               "glow bf16": glow.compile(proto, "cpu", threads=threads, precision="bf16")}
    core = ov.Core()
    ovm = core.read_model(proto.SerializeToString(), b"")
    ov_default = core.compile_model(ovm, "CPU", {"INFERENCE_NUM_THREADS": threads})
    ov_f32 = core.compile_model(ovm, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"})
    requests = {"OpenVINO default": ov_default.create_infer_request(), "OpenVINO f32": ov_f32.create_infer_request()}
    inits = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in inits]
    rng = np.random.default_rng(0)

    def feeds():
        return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
                for i in inputs}

    def runner(label):
        if label in engines:
            return lambda f: list(engines[label].run(f).values())[0]
        req = requests[label]
        return lambda f: list(req.infer([f[i.name] for i in inputs]).values())[0]

    labels = list(engines) + list(requests)
    run = {k: runner(k) for k in labels}
    times = {k: [] for k in labels}
    cos16, cos_ov, top1 = [], [], []
    for r in range(rounds + 1):
        f = feeds()
        outs = {}
        warm = feeds()
        for k in labels[r % len(labels):] + labels[:r % len(labels)]:
            run[k](warm)  # the engine's threads awake (the last one's spinning ones have stopped)
            t0 = time.perf_counter()
            outs[k] = np.asarray(run[k](f))
            dt = time.perf_counter() - t0
            if r:
                times[k].append(dt * 1e3)
        ref = outs["glow fp32"]
        cos16.append(_cos(outs["glow bf16"], ref))
        cos_ov.append(_cos(outs["OpenVINO default"], ref))
        if ref.ndim == 2:  # [batch, classes]: a classifier (a transformer's hidden states are not)
            top1.append([(ref.argmax(-1) == outs[k].argmax(-1)).mean() for k in ("glow bf16", "OpenVINO default")])
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"model": name, "threads": threads, "ms": med,
            "ov_default_precision": str(ov_default.get_property("INFERENCE_PRECISION_HINT")),
            "bf16_vs_ov_default": med["glow bf16"] / med["OpenVINO default"],
            "bf16_vs_fp32": med["glow bf16"] / med["glow fp32"],
            "cos_bf16_fp32_min": min(cos16), "cos_ov_default_fp32_min": min(cos_ov),
            # the share of rows whose top-1 class is glow fp32's: glow bf16, OpenVINO default
            "top1_agree": [float(np.mean([t[i] for t in top1])) for i in (0, 1)] if top1 else None}


def _top1(agree) -> str:
    return "n/a" if agree is None else f"{agree[0]:.2%} / {agree[1]:.2%}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS + [RANDOM_RESNET])
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    from glow.backends.cpu import jit

    host = {"cpu": cpu_model(), "isa": jit.host_isa(), "bf16_native": jit.host_isa() == "avx512" and
            "+avx512bf16" in jit.host_features().split(",")}
    print(f"host: {host['cpu']}, glow ISA {host['isa']}, AVX512-BF16: {host['bf16_native']}")
    rows = []
    print("| model | threads | glow fp32 ms | glow bf16 ms | OpenVINO default ms | OpenVINO f32 ms | "
          "bf16 / OV default | bf16 / fp32 | cosine bf16-fp32 (min) | top-1 as fp32 (glow bf16 / OV default) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in args.threads:
        for m in args.models:
            r = measure(m, t, args.rounds)
            rows.append(r)
            ms = r["ms"]
            print(f"| {r['model']} | {t} | {ms['glow fp32']:.3f} | {ms['glow bf16']:.3f} | "
                  f"{ms['OpenVINO default']:.3f} | {ms['OpenVINO f32']:.3f} | {r['bf16_vs_ov_default']:.2f} | "
                  f"{r['bf16_vs_fp32']:.2f} | {r['cos_bf16_fp32_min']:.6f} | {_top1(r['top1_agree'])} |",
                  flush=True)
    for t in args.threads:
        sel = [r["bf16_vs_ov_default"] for r in rows if r["threads"] == t and r["model"] != RANDOM_RESNET]
        if sel:
            geo = math.exp(statistics.fmean(map(math.log, sel)))
            print(f"{t} thread(s): geomean glow bf16 / OpenVINO default {geo:.2f} over {len(sel)} models "
                  f"(not {RANDOM_RESNET}, the light ResNet-50 again)")
    if not args.no_write:
        print("wrote", write_results("precision", {"host": host, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
