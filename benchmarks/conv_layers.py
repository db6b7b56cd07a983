"""GFLOP/s of the CPU backend's convolution kernels, layer by layer, for one model.

    python benchmarks/conv_layers.py resnet50 [--threads 1]

Each distinct ConvNHWC geometry of the compiled model (after layout.py and fusion) is compiled
alone with bias + Relu and timed on random data: best of 7 calls, so the figure is the kernel's
speed when it has the core, which a busy machine does not change much (whole-model latencies,
benchmarks/run_all.py, are inflated by other jobs instead).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import threading
import time

import numpy as np

FN = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4, ctypes.c_int64, ctypes.c_int64)


def geometries(spec: str):
    from glow.backends.cpu.kernels.conv import geometry
    from glow.bench import resolve_model
    from glow.flow import optimize_for_backend
    from glow.onnx_import import load_onnx
    from glow.plugins import registry

    graph = optimize_for_backend(load_onnx(resolve_model(spec)[0]), registry().get("cpu"))
    out = []
    for n in graph.nodes:
        head = n.attrs["body"].nodes[0] if n.op.name == "FusedKernel" else n
        if head.op.name == "ConvNHWC":
            x, w, y = head.inputs[0].type.shape, head.inputs[1].type.shape, head.outputs[0].type.shape
            out.append(geometry(x, w, y, head.attrs))
    return collections.Counter(out)


def time_layer(g, threads: int = 1, repeats: int = 7) -> float:
    """Best-of-`repeats` seconds of one call of the conv kernel for geometry g."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir
    from glow.backends.cpu.jit import CompiledModule
    from glow.backends.cpu.kernels.conv_emit import emit_conv, pack_conv_weights
    from glow.backends.cpu.kernels.gemm_emit import kernel_factory

    mod = ir.Module("layer")
    mod.triple = llvm.get_process_triple()
    emit_conv(kernel_factory(mod, "conv"), g, has_bias=True, activation="relu")
    cm = CompiledModule(str(mod))
    fn = FN(cm.address("conv"))
    rng = np.random.default_rng(0)
    x = rng.random((g.n, g.hp, g.wp, g.cin), np.float32)
    w = pack_conv_weights(rng.random((g.cout, g.cin_g, g.kh, g.kw), np.float32), g)
    b = np.zeros(g.cout, np.float32)
    y = np.zeros((g.n, g.ho, g.wo, g.cout), np.float32)
    args = [a.ctypes.data for a in (x, w, y, b)]

    def once():
        if threads == 1:
            fn(*args, 0, 1)
            return
        ts = [threading.Thread(target=fn, args=(*args, t, threads)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(spec: str, threads: int = 1, verbose: bool = True) -> dict:
    total_s, total_f, rows = 0.0, 0, []
    for g, count in geometries(spec).items():
        s = time_layer(g, threads)
        total_s += s * count
        total_f += g.flops * count
        rows.append((s * count, count, g, g.flops / s / 1e9))
    if verbose:
        for ms, count, g, gf in sorted(rows, key=lambda r: -r[0]):
            print(f"{ms * 1e3:7.2f} ms  x{count:<2d} {g.hp}x{g.wp}x{g.cin} -> {g.ho}x{g.wo}x{g.cout} "
                  f"k{g.kh} s{g.sh} g{g.groups}  tile {g.mr}x{16 * g.nv}  {gf:5.0f} GFLOP/s")
        print(f"{spec}: {len(rows)} distinct layers, {total_f / 1e9:.2f} GFLOP in {total_s * 1e3:.2f} ms: "
              f"{total_f / total_s / 1e9:.0f} GFLOP/s")
    return {"gflop": total_f / 1e9, "ms": total_s * 1e3, "gflops": total_f / total_s / 1e9}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    measure(args.model, args.threads)


if __name__ == "__main__":
    main()
