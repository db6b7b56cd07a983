"""The fraction of this core's measured fp32 peak that the CPU backend's GEMM micro-kernel reaches.

    python benchmarks/gemm_peak.py                        # the host's own level (avx512, avx2)
    GLOW_CPU_ISA=generic python benchmarks/gemm_peak.py   # a lower level, as glow compiles for it
    python benchmarks/gemm_peak.py --json                 # the results as JSON on stdout

Peak: a JIT-compiled loop of independent multiply-add chains on vectors as wide as the level's
registers, for the same target machine (CPU name and features) glow's code is made for, timed on
one thread, best of several calls. GEMM: a MatMul of a runtime A [M, K] by a constant B [K, N]
compiled with `glow.compile(..., "cpu", threads=1)`, best (and median) of 20 calls on fresh
inputs. Both count 2 flops per multiply-add.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host import cpu_model  # noqa: E402

#: Level: (lanes, chains). Chains cover the multiply-add's latency times the core's issue width
#: (Zen 3: FMA 4 cycles x 2 pipes = 8; generic's mul + add 6 cycles x 2 = 12) and fit the
#: registers with a and b.
SHAPES = {"avx512": (16, 24), "avx2": (8, 12), "generic": (4, 12)}
GEMMS = [(512, 512, 512), (192, 256, 256), (96, 256, 256)]
#: Vector multiply-adds per timed call: ~60 ms on a 4 GHz core issuing two a cycle.
VECTOR_OPS = 480_000_000


def peak_ir(level: str) -> str:
    """IR of `float glow_peak(i64 n, float a, float b)`: `chains` accumulators of `lanes` floats,
    each `acc = acc * a + b` n times from zero, returning the sum of every lane."""
    lanes, chains = SHAPES[level]
    v = f"<{lanes} x float>"
    fma = f"llvm.fma.v{lanes}f32"
    # x86-64 without FMA (generic) would lower llvm.fma to one libm fmaf call per lane, timing the
    # call; mulps + addps is what SSE2 hardware can do, so that is the generic peak.
    if level == "generic":
        step = "  %m{0} = fmul {v} %c{0}, %va\n  %d{0} = fadd {v} %m{0}, %vb\n"
    else:
        step = "  %d{0} = call {v} @{fma}({v} %c{0}, {v} %va, {v} %vb)\n"
    splat = ("  %{0}0 = insertelement {v} poison, float %{1}, i64 0\n"
             "  %{0} = shufflevector {v} %{0}0, {v} poison, <{n} x i32> zeroinitializer\n")
    text = [f"declare {v} @{fma}({v}, {v}, {v})\n", f"declare float @llvm.vector.reduce.fadd.v{lanes}f32(float, {v})\n",
            "define float @glow_peak(i64 %n, float %a, float %b) {\nentry:\n",
            splat.format("va", "a", v=v, n=lanes), splat.format("vb", "b", v=v, n=lanes),
            "  %go = icmp sgt i64 %n, 0\n  br i1 %go, label %loop, label %done\nloop:\n",
            "  %i = phi i64 [0, %entry], [%i1, %loop]\n"]
    text += [f"  %c{c} = phi {v} [zeroinitializer, %entry], [%d{c}, %loop]\n" for c in range(chains)]
    text += [step.format(c, v=v, fma=fma) for c in range(chains)]
    text.append("  %i1 = add i64 %i, 1\n  %more = icmp slt i64 %i1, %n\n  br i1 %more, label %loop, label %done\n")
    text.append("done:\n")
    text += [f"  %r{c} = phi {v} [zeroinitializer, %entry], [%d{c}, %loop]\n" for c in range(chains)]
    total = "%r0"
    for c in range(1, chains):
        text.append(f"  %s{c} = fadd {v} {total}, %r{c}\n")
        total = f"%s{c}"
    text.append(f"  %t = call float @llvm.vector.reduce.fadd.v{lanes}f32(float 0.0, {v} {total})\n"
                "  ret float %t\n}\n")
    return "".join(text)


class PeakLoop:
    """The peak loop compiled for the level glow's code is made for; call it as fn(n, a, b)."""

    def __init__(self):
        import llvmlite.binding as llvm
        from glow.backends.cpu import jit

        self.level, self.llvm_cpu = jit.isa(), jit.cpu_name()
        self.lanes, self.chains = SHAPES[self.level]
        tm = jit.target_machine()  # glow's host target: also what honours GLOW_CPU_ISA
        mod = llvm.parse_assembly(peak_ir(self.level))
        mod.verify()
        mod.triple, mod.data_layout = llvm.get_process_triple(), str(tm.target_data)
        self._engine = llvm.create_mcjit_compiler(mod, tm)  # the function lives as long as this
        self._engine.finalize_object()
        addr = self._engine.get_function_address("glow_peak")
        self.fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float, ctypes.c_float)(addr)

    def gflops(self, runs: int = 5) -> float:
        iters = VECTOR_OPS // self.chains
        best = float("inf")
        for _ in range(runs):
            # a < 1 keeps the accumulators near b / (1 - a): no overflow, no subnormal slow path
            t = time.perf_counter()
            self.fn(iters, 0.999, 0.001)
            best = min(best, time.perf_counter() - t)
        return 2 * self.lanes * self.chains * iters / best / 1e9


def gemm(m: int, k: int, n: int, calls: int = 20) -> tuple[dict, object]:
    """GFLOP/s of glow's one-thread MatMul [m, k] x constant [k, n], best and median of `calls`,
    and a function that checks the last result against NumPy. Call it after all timing: NumPy's
    BLAS leaves threads spinning that would share glow's core."""
    import glow
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    b = rng.standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(b, "B")])
    exe = glow.compile(helper.make_model(graph), "cpu", threads=1)
    exe.run({"A": np.zeros((m, k), np.float32)})  # the first run compiles the program
    times = []
    for _ in range(calls):
        # float32 straight away: a float64 temporary would push the packed B out of L2
        a = rng.standard_normal((m, k), dtype=np.float32)
        t = time.perf_counter()
        got = exe.run({"A": a})["C"]
        times.append(time.perf_counter() - t)
    flops = 2 * m * n * k
    result = {"m": m, "k": k, "n": n, "gflops": flops / min(times) / 1e9,
              "median_gflops": flops / statistics.median(times) / 1e9}
    return result, lambda: np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4,
                                                      atol=1e-4 * np.sqrt(k), err_msg=f"MatMul {m}x{k}x{n}")


def measure(verbose: bool = True) -> dict:
    """Peak and GEMM GFLOP/s for this host at glow's instruction-set level (see the docstring)."""
    loop = PeakLoop()
    peak = loop.gflops()
    out = {"cpu": cpu_model(), "llvm_cpu": loop.llvm_cpu, "isa": loop.level, "peak_gflops": peak, "gemm": []}
    say = print if verbose else (lambda *a: None)
    say(f"CPU {out['cpu']} (LLVM {loop.llvm_cpu}), ISA level {loop.level}")
    say(f"peak: {peak:.1f} GFLOP/s on one core ({loop.chains} chains of {loop.lanes}-lane multiply-adds)")
    checks = []
    for m, k, n in GEMMS:
        r, check = gemm(m, k, n)
        checks.append(check)
        r["fraction"] = r["gflops"] / peak
        out["gemm"].append(r)
        say(f"MatMul {m}x{k} @ {k}x{n}: {r['gflops']:.1f} GFLOP/s best, {r['median_gflops']:.1f} median, "
            f"{r['fraction']:.0%} of peak")
    for check in checks:
        check()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    args = p.parse_args(argv)
    out = measure(verbose=not args.json)
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()


if __name__ == "__main__":
    main()
