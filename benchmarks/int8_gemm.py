"""Integer GEMM: MatMulInteger with constant int8 weights, glow cpu against onnxruntime (issue 19).

    python benchmarks/int8_gemm.py                  # BERT-base projection shapes, then an encoder
    python benchmarks/int8_gemm.py --rounds 5 --calls 40 --isa avx2 --no-write
    python benchmarks/int8_gemm.py --isa avx2 --reduce-range --no-write   # 7-bit weights

The shapes of a BERT-base layer quantized by onnxruntime's `quantize_dynamic` (uint8 activations
with a zero point, int8 weights): 128 tokens times the 768 x 768, 768 x 3072 and 3072 x 768
projections. Every call gets new activations, drawn before the timer and fed to both engines,
which alternate which runs first; each round's figure is the median of its calls, the table the
median of the rounds. Results must be equal (checked on the first input). Then a whole model: a
BERT-base-wide encoder (glow.testing.nlp_models: 2 layers, hidden 768, 12 heads, FFN 3072, one
sequence of 128 tokens, random weights) in fp32 and through onnxruntime's quantize_dynamic
(int8 weights; DynamicQuantizeLinear -> MatMulInteger -> scale per projection), each run by both
engines. `--isa` compiles glow for a lower instruction-set level (onnxruntime keeps the host's);
`--reduce-range` makes the weights 7-bit (quantize_dynamic's reduce_range), which lets glow use
`vpmaddubsw` where the code has no VNNI.
Results go to benchmarks/results-int8-gemm.json.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, interleaved, ort_session, write_results  # noqa: E402 (benchmarks/host.py, next to this script)

SHAPES = ((128, 768, 768), (128, 768, 3072), (128, 3072, 768))


def _model(m, k, n, rng, wmax=127):
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    inits = [nh.from_array(rng.integers(-wmax - 1 if wmax == 127 else -wmax, wmax + 1, (k, n)).astype(np.int8), "B"),
             nh.from_array(np.array(131, np.uint8), "a_zero_point")]
    g = h.make_graph([h.make_node("MatMulInteger", ["A", "B", "a_zero_point"], ["Y"])], "int8_gemm",
                     [h.make_tensor_value_info("A", T.UINT8, [m, k])], [h.make_tensor_value_info("Y", T.INT32, [m, n])],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def measure(m, k, n, rounds, calls, isa, rng, wmax=127) -> dict:
    import glow
    import numpy as np

    model = _model(m, k, n, rng, wmax)
    exe = glow.compile(model, "cpu", threads=1, options={"isa": isa} if isa else None)
    sess = ort_session(model.SerializeToString())
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    if not np.array_equal(exe.run({"A": a})["Y"], sess.run(None, {"A": a})[0]):
        raise SystemExit(f"{m}x{k}x{n}: glow and onnxruntime differ")
    gs, os_, _ = interleaved(exe, sess, lambda: {"A": rng.integers(0, 256, (m, k)).astype(np.uint8)}, rounds, calls)
    return {"shape": [m, k, n], "glow_ms": gs * 1e3, "ort_ms": os_ * 1e3, "ratio": gs / os_,
            "glow_gops": 2 * m * k * n / gs / 1e9}


def measure_encoder(rounds, calls, isa, rng, reduce_range=False) -> list[dict]:
    """The encoder in fp32 and through quantize_dynamic: glow and onnxruntime on each."""
    import logging
    import tempfile

    import glow
    import numpy as np
    import onnx
    from glow.testing.nlp_models import encoder, token_feeds
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = encoder(layers=2, hidden=768, heads=12, ffn=3072, vocab=1000, batch=1, seq=128, dynamic=False)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "fp32.onnx"), os.path.join(d, "int8.onnx")
        onnx.save(model, src)
        logging.getLogger().setLevel(logging.ERROR)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, reduce_range=reduce_range)
        for fmt, path in (("fp32", src), ("int8", dst)):
            exe = glow.compile(path, "cpu", threads=1, options={"isa": isa} if isa else None)
            sess = ort_session(path)
            feeds = token_feeds(model, 1, 128, rng)
            diff = float(np.max(np.abs(next(iter(exe.run(feeds).values())) - sess.run(None, feeds)[0])))
            g, o, _ = interleaved(exe, sess, lambda: token_feeds(model, 1, 128, rng), rounds, calls)
            rows.append({"model": f"encoder-768 {fmt}", "glow_ms": g * 1e3, "ort_ms": o * 1e3, "ratio": g / o,
                         "max_diff": diff})
    return rows


def main(argv=None) -> int:
    import numpy as np
    from glow.backends.cpu import jit
    from glow.backends.cpu.kernels.int8_gemm import vnni

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--isa", choices=jit.ISAS, default=None)
    ap.add_argument("--reduce-range", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    with jit.level(args.isa):
        level, uses_vnni = jit.isa(), vnni()
    wmax = 64 if args.reduce_range else 127
    rows = [measure(m, k, n, args.rounds, args.calls, args.isa, rng, wmax) for m, k, n in SHAPES]
    models = measure_encoder(max(1, args.rounds), max(4, args.calls // 4), args.isa, rng, args.reduce_range)
    cpu = cpu_model()
    print(f"CPU: {cpu}; glow level {level} (VNNI: {'yes' if uses_vnni else 'no'}); weights of "
          f"{7 if args.reduce_range else 8} bits; 1 thread; fresh inputs every call; medians of {args.rounds} rounds "
          f"x {args.calls} calls")
    print(f"{'M x K x N':<16} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'glow GOPS':>10}")
    for r in rows:
        print(f"{'x'.join(map(str, r['shape'])):<16} {r['glow_ms']:>8.3f} {r['ort_ms']:>8.3f} {r['ratio']:>6.2f} "
              f"{r['glow_gops']:>10.0f}")
    print(f"{'model':<18} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'max |diff|':>10}")
    for r in models:
        print(f"{r['model']:<18} {r['glow_ms']:>8.2f} {r['ort_ms']:>8.2f} {r['ratio']:>6.2f} {r['max_diff']:>10.3g}")
    if len(models) == 2:
        print(f"glow int8 / glow fp32: {models[1]['glow_ms'] / models[0]['glow_ms']:.2f}")
    if not args.no_write:
        write_results("int8-gemm", {"cpu": cpu, "isa": level, "vnni": uses_vnni, "reduce_range": args.reduce_range,
                                    "rows": rows, "models": models})
    return 0


if __name__ == "__main__":
    sys.exit(main())
