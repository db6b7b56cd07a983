"""One large float32 MatMul on CUDA: glow's tiled kernel, glow routed to cuBLAS, cupy.matmul.

    python scripts/cuda_matmul_bench.py [N]        (default N = 4096)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h


def _model(n):
    g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                     [h.make_tensor_value_info("a", T.FLOAT, [n, n]), h.make_tensor_value_info("b", T.FLOAT, [n, n])],
                     [h.make_tensor_value_info("y", T.FLOAT, [n, n])])
    return h.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])


def _device_time(fn, rounds=20):
    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(rounds):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / rounds  # ms


def main(n: int) -> None:
    import cupy as cp
    import glow

    flop = 2 * n ** 3
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    for mode in ("kernel", "cublas"):
        os.environ["GLOW_CUDA_MATMUL"] = "cublas" if mode == "cublas" else ""
        exe = glow.compile(_model(n), backend="cuda")
        y = exe.run({"a": a, "b": b})["y"]
        # Device time of the executable's steps alone (inputs already on the device).
        ms = _device_time(lambda exe=exe: [s() for s in exe.steps])
        t = time.perf_counter()
        exe.run({"a": a, "b": b})
        wall = (time.perf_counter() - t) * 1e3
        err = float(np.max(np.abs(y - a @ b)))
        print(f"glow[{mode}] N={n}: {ms:.3f} ms device, {flop / ms / 1e9:.0f} GFLOP/s; "
              f"run() with transfers {wall:.1f} ms; max |err| {err:.2e}")
    da, db = cp.asarray(a), cp.asarray(b)
    ms = _device_time(lambda: cp.matmul(da, db))
    print(f"cupy.matmul (cuBLAS) N={n}: {ms:.3f} ms device, {flop / ms / 1e9:.0f} GFLOP/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
