"""Integer GEMM: MatMulInteger with constant int8 weights, glow cpu against onnxruntime (issue 19).

    python benchmarks/int8_gemm.py                  # BERT-base projection shapes, 1 thread
    python benchmarks/int8_gemm.py --rounds 5 --calls 40 --isa avx2 --no-write

The shapes of a BERT-base layer quantized by onnxruntime's `quantize_dynamic` (uint8 activations
with a zero point, int8 weights): 128 tokens times the 768 x 768, 768 x 3072 and 3072 x 768
projections. Every call gets new activations, drawn before the timer and fed to both engines,
which alternate which runs first; each round's figure is the median of its calls, the table the
median of the rounds. Results must be equal (checked on the first input). `--isa` compiles glow
for a lower instruction-set level (onnxruntime keeps the host's). Results go to
benchmarks/results-int8-gemm.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, write_results  # noqa: E402 (benchmarks/host.py, next to this script)

SHAPES = ((128, 768, 768), (128, 768, 3072), (128, 3072, 768))


def _model(m, k, n, rng):
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    inits = [nh.from_array(rng.integers(-128, 128, (k, n)).astype(np.int8), "B"),
             nh.from_array(np.array(131, np.uint8), "a_zero_point")]
    g = h.make_graph([h.make_node("MatMulInteger", ["A", "B", "a_zero_point"], ["Y"])], "int8_gemm",
                     [h.make_tensor_value_info("A", T.UINT8, [m, k])], [h.make_tensor_value_info("Y", T.INT32, [m, n])],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def measure(m, k, n, rounds, calls, isa, rng) -> dict:
    import glow
    import numpy as np
    import onnxruntime as ort

    model = _model(m, k, n, rng)
    exe = glow.compile(model, "cpu", threads=1, options={"isa": isa} if isa else None)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    if not np.array_equal(exe.run({"A": a})["Y"], sess.run(None, {"A": a})[0]):
        raise SystemExit(f"{m}x{k}x{n}: glow and onnxruntime differ")
    glow_r, ort_r = [], []
    for r in range(rounds):
        g, o = [], []
        for c in range(calls):
            feeds = {"A": rng.integers(0, 256, (m, k)).astype(np.uint8)}
            for first in ((0, 1) if (r + c) % 2 == 0 else (1, 0)):
                t = time.perf_counter()
                if first == 0:
                    exe.run(feeds)
                    g.append(time.perf_counter() - t)
                else:
                    sess.run(None, feeds)
                    o.append(time.perf_counter() - t)
        glow_r.append(statistics.median(g))
        ort_r.append(statistics.median(o))
    gs, os_ = statistics.median(glow_r), statistics.median(ort_r)
    return {"shape": [m, k, n], "glow_ms": gs * 1e3, "ort_ms": os_ * 1e3, "ratio": gs / os_,
            "glow_gops": 2 * m * k * n / gs / 1e9}


def main(argv=None) -> int:
    import numpy as np
    from glow.backends.cpu import jit
    from glow.backends.cpu.kernels.int8_gemm import vnni

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--isa", choices=jit.ISAS, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    with jit.level(args.isa):
        level, uses_vnni = jit.isa(), vnni()
    rows = [measure(m, k, n, args.rounds, args.calls, args.isa, rng) for m, k, n in SHAPES]
    cpu = cpu_model()
    print(f"CPU: {cpu}; glow level {level} (VNNI: {'yes' if uses_vnni else 'no'}); 1 thread; fresh inputs every "
          f"call; medians of {args.rounds} rounds x {args.calls} calls")
    print(f"{'M x K x N':<16} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'glow GOPS':>10}")
    for r in rows:
        print(f"{'x'.join(map(str, r['shape'])):<16} {r['glow_ms']:>8.3f} {r['ort_ms']:>8.3f} {r['ratio']:>6.2f} "
              f"{r['glow_gops']:>10.0f}")
    if not args.no_write:
        write_results("int8-gemm", {"cpu": cpu, "isa": level, "vnni": uses_vnni, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
