"""Quantized models from onnxruntime's tool: glow cpu against onnxruntime, fp32 and int8 (issue 19).

    python benchmarks/quantized.py                      # every model, QOperator and QDQ
    python benchmarks/quantized.py --models resnet vit --rounds 5 --calls 40 --threads 1 --no-write

Models: glow.testing.quant_models (a ResNet, a SqueezeNet, an EfficientNet and a ViT on 32 x 32
images, random weights), each as its fp32 original, as onnxruntime's quantize_static writes it in
the QOperator and QDQ formats (per-channel int8 weights, uint8 activations, min-max calibration),
and as `glow.quantize` writes it (glow-qdq: the same settings, glow's profile).
Every call gets a new random image, drawn before the timer and fed to both engines, which
alternate which runs first; each round's figure is the median of its calls, the table the median
of the rounds. Also the largest difference of glow's output from onnxruntime's on the last input.
Results go to benchmarks/results-quantized.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, interleaved, ort_session, write_results  # noqa: E402 (benchmarks/host.py, next to this script)

FORMATS = ("fp32", "qoperator", "qdq", "glow-qdq")


def measure(path, threads, rounds, calls, rng) -> dict:
    import glow

    sess = ort_session(path, threads)
    exe = glow.compile(str(path), backend="cpu", threads=threads)
    gm, om, (got, want) = interleaved(
        exe, sess, lambda: {"x": rng.standard_normal((1, 3, 32, 32)).astype("float32")}, rounds, calls)
    (got,), (want,) = got.values(), want
    return {"glow_ms": gm * 1e3, "ort_ms": om * 1e3, "ratio": gm / om,
            "max_abs_diff": float(abs(got.astype("float64") - want).max())}


def main(argv=None) -> int:
    import glow
    import numpy as np
    import onnx
    from glow.testing.quant_models import MODELS, inputs, ort_quantize

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=sorted(MODELS), choices=sorted(MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            fp32 = MODELS[name]()
            for fmt in FORMATS:
                folder = os.path.join(tmp, f"{name}-{fmt}")
                os.makedirs(folder)
                if fmt == "fp32":
                    path = os.path.join(folder, "fp32.onnx")
                    onnx.save(fp32, path)
                elif fmt == "glow-qdq":
                    path = os.path.join(folder, "int8.onnx")
                    onnx.save(glow.quantize(fp32, [{"x": x} for x in inputs(4, seed=7)]), path)
                else:
                    model, _ = ort_quantize(fp32, folder, per_channel=True, qdq=fmt == "qdq")
                    path = os.path.join(folder, "int8.onnx")
                    onnx.save(model, path)
                rows.append({"model": name, "format": fmt, "threads": args.threads,
                             **measure(path, args.threads, args.rounds, args.calls, rng)})
    cpu = cpu_model()
    print(f"CPU: {cpu}; threads {args.threads}; fresh inputs every call; medians of {args.rounds} rounds "
          f"x {args.calls} calls")
    print(f"{'model':<13} {'format':<10} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'max |diff|':>11}")
    for r in rows:
        print(f"{r['model']:<13} {r['format']:<10} {r['glow_ms']:>8.3f} {r['ort_ms']:>8.3f} {r['ratio']:>6.2f} "
              f"{r['max_abs_diff']:>11.3g}")
    if not args.no_write:
        write_results("quantized", {"cpu": cpu, "threads": args.threads, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
