"""The CPU backend against onnxruntime on the twelve benchmark models, at 1 and 2 threads.

    python benchmarks/run_all.py                      # everything; writes docs/performance.md
    python benchmarks/run_all.py --models resnet50 mlp --threads 1 --rounds 10 --no-write

Each model is measured with `glow.bench.bench` (glow and onnxruntime interleaved in one process,
alternating which runs first, medians with min-max). Compile times of ResNet-50 are measured cold
(an empty compile cache) and cached. Results also go to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conv_layers  # noqa: E402

ROOT = os.path.dirname(HERE)
LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
         "squeezenet", "vgg19", "zfnet512"]
GENERATED = ["mlp", "small_cnn", "transformer"]
MODELS = LIGHT + GENERATED


def model_flops(spec: str) -> int:
    """Multiply-adds x 2 of the Conv, Gemm and MatMul nodes (what GFLOP/s figures count)."""
    from glow.bench import resolve_model
    from glow.onnx_import import load_onnx
    from glow.passes import optimize_graph

    graph = optimize_graph(load_onnx(resolve_model(spec)[0]))
    total = 0
    for n in graph.nodes:
        out = n.outputs[0].type.shape
        if n.op.name == "Conv":
            w = n.inputs[1].type.shape
            total += 2 * math.prod(out) * math.prod(w[1:])
        elif n.op.name in ("Gemm", "MatMul"):
            a = n.inputs[0].type.shape
            k = a[0] if n.op.name == "Gemm" and n.attrs.get("transA") else a[-1]
            total += 2 * math.prod(out) * k
    return total


def compile_times(spec: str, threads: int) -> dict:
    """Cold (empty cache directory) and cached compile of one model, in seconds."""
    import glow

    old = os.environ.get("GLOW_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        os.environ["GLOW_CACHE_DIR"] = d
        try:
            out = {}
            for label in ("cold", "cached"):
                t = time.perf_counter()
                exe = glow.compile(_path(spec), "cpu", threads=threads)
                exe.run(_feeds(exe))  # the CPU backend compiles its program on first need
                out[label] = time.perf_counter() - t
            return out
        finally:
            if old is None:
                os.environ.pop("GLOW_CACHE_DIR", None)
            else:
                os.environ["GLOW_CACHE_DIR"] = old


def _path(spec):
    from glow.bench import resolve_model

    return resolve_model(spec)[0]


def _feeds(exe):
    from glow.inputs import make_inputs

    return make_inputs(exe.graph, seed=0)


def run(models, threads_list, rounds) -> dict:
    from glow.bench import bench

    results = []
    for threads in threads_list:
        for m in models:
            r = bench(m, backend="cpu", threads=threads, rounds=rounds)
            d = r.to_dict()
            results.append(d)
            print(f"{m:14s} {threads}T glow {r.glow.median_ms:9.3f} ms  ort {r.peer.median_ms:9.3f} ms  "
                  f"ratio {r.ratio:5.2f}  diff {r.max_abs_diff:.1e}", flush=True)
    return {"results": results}


def geomean(xs):
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def _ms(t):
    return f"{t['median_ms']:.3f} ({t['min_ms']:.3f}-{t['max_ms']:.3f})"


def markdown(data: dict) -> str:
    res = data["results"]
    threads_list = sorted({r["threads"] for r in res})
    lines = ["# CPU backend performance", "",
             "glow's CPU backend (`--backend cpu`) against onnxruntime's CPU execution provider on the "
             "nine light models shipped in the onnx wheel and three generated ones "
             "(`glow.testing.bench_models`). Latency of one inference, milliseconds: median "
             "(min-max) over the rounds; ratio = glow median / onnxruntime median (below 1: glow "
             "is faster).", ""]
    for t in threads_list:
        rows = [r for r in res if r["threads"] == t]
        lines += [f"## {t} thread{'s' if t > 1 else ''}", "",
                  "| model | glow ms | onnxruntime ms | ratio |", "|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['model']} | {_ms(r['glow'])} | {_ms(r['peer'])} | {r['ratio']:.2f} |")
        gm = geomean([r["ratio"] for r in rows])
        lines += ["", f"Geometric mean of the ratios at {t} thread{'s' if t > 1 else ''}: **{gm:.2f}** "
                  f"over {len(rows)} models.", ""]
    opencl = _opencl_section()
    if opencl:
        lines += opencl
    lines += MORE
    if data.get("gflops"):
        lines += ["## Throughput", "", "| model | threads | GFLOP | glow GFLOP/s | onnxruntime GFLOP/s |",
                  "|---|---|---|---|---|"]
        for m, flops in data["gflops"].items():
            for r in res:
                if r["model"].endswith(m):
                    g = flops / r["glow"]["median_ms"] / 1e6
                    p = flops / r["peer"]["median_ms"] / 1e6
                    lines.append(f"| {m} | {r['threads']} | {flops / 1e9:.2f} | {g:.0f} | {p:.0f} |")
        lines += ["", "FLOPs count 2 x multiply-adds of Conv, Gemm and MatMul only; whole-model latency "
                  "includes everything else and, on a busy machine, time without a core.", ""]
        for m, c in data.get("conv_layers", {}).items():
            lines.append(f"- {m}: its convolution kernels alone (`python benchmarks/conv_layers.py {m}`, "
                         f"each distinct layer best of 7 calls on one core): {c['gflop']:.2f} GFLOP in "
                         f"{c['ms']:.1f} ms, **{c['gflops']:.0f} GFLOP/s**.")
        lines.append("")
    if data.get("compile"):
        c = data["compile"]
        lines += ["## Compile time", "",
                  f"ResNet-50, whole model to a runnable program (graph passes, code generation, "
                  f"LLVM at O3 for the host CPU): **{c['cold']:.1f} s cold** (empty cache), "
                  f"**{c['cached']:.1f} s cached** (the object file comes from the on-disk cache; "
                  "graph passes and IR generation still run).", ""]
    lines += NOTES.splitlines() + [""]
    env = data.get("env", {})
    lines += ["## How this was measured", "",
              f"- `python benchmarks/run_all.py` ({env.get('rounds', '?')} interleaved rounds per model and "
              "thread count, after 3 warm-up runs each, every timed run preceded by at least 50 ms of "
              "untimed runs of the same runtime and fed fresh input values, the same for both runtimes "
              "in a round; `glow bench MODEL --backend cpu --threads N` "
              "measures one model the same way).",
              f"- Machine: {env.get('cpu', '?')}, {env.get('cores', '?')} cores; Python "
              f"{env.get('python', '?')}, onnxruntime {env.get('onnxruntime', '?')}, llvmlite "
              f"{env.get('llvmlite', '?')}.",
              "- onnxruntime: `intra_op_num_threads` = N, `inter_op_num_threads` = 1, default graph "
              "optimisations. glow: `glow.compile(model, 'cpu', threads=N)`.",
              "- Inputs: seeded random normal data (`glow run`'s generator); outputs of both are "
              "compared (max |diff| in benchmarks/results.json).",
              f"- Load average (1, 5, 15 min) when the run started: {env.get('loadavg_start', '?')}, "
              f"when it ended: {env.get('loadavg_end', '?')} (on {env.get('cores', '?')} cores). The "
              "machine is shared with other jobs: with more runnable threads than cores, absolute "
              "times are inflated for both runtimes and the ratios, measured side by side, are what "
              "to compare. Two threads suffer most: a second thread helps only when it has a core "
              "of its own.", ""]
    return "\n".join(lines)


def _opencl_section() -> list[str]:
    """The OpenCL backend's rows (benchmarks/opencl.py writes results-opencl.json), next to the
    CPU backend's: same models, same interleaved method."""
    path = os.path.join(HERE, "results-opencl.json")
    if not os.path.exists(path):
        return []
    from opencl import table

    with open(path) as f:
        data = json.load(f)
    return ["## OpenCL backend (PoCL's CPU device, both cores)", "",
            "`python benchmarks/opencl.py`: glow's OpenCL backend on PoCL against onnxruntime with "
            "as many threads as cores; details, kernel build times and where the time goes in "
            "[performance-opencl.md](performance-opencl.md).", "", *table(data), ""]


#: Hand-written pages beside this generated one (this script never rewrites them).
MORE = ["## More", "",
        "- [performance-dynamic.md](performance-dynamic.md): token-id models with fresh inputs every call, "
        "symbolic shapes, new-shape latency (`python benchmarks/dynamic.py`).",
        "- [compile-time.md](compile-time.md): cold compiles by phase and what was done about them "
        "(`glow compile MODEL --profile`).", ""]

NOTES = """## Where the time goes

- **Convolutions** (most of every CNN) run NHWC as an implicit GEMM on a register-blocked AVX-512
  micro-kernel (backends/cpu/kernels/gemm_emit.py, conv_emit.py): weights packed at compile time into
  64-column panels, a 6 x 64 tile of accumulators (24 zmm registers) per k step, bias and the
  fused elementwise epilogue (Relu, Clip, the residual Add of ResNet, ...) applied in registers
  before the store. Measured per layer on one core: 215-255 GFLOP/s on ResNet-50's 56x56 to 14x14
  layers, 200-225 on its 7x7 ones (the core's fp32 peak is about 265). Depthwise convolutions
  vectorise over channels, 4 output pixels at a time.
- **Layout**: backends/cpu/layout.py rewrites Conv and pooling to NHWC ops and propagates the
  layout through elementwise ops, Concat, Pad/Slice, Transpose and Reshape, so a CNN has one
  transpose at its input and one before its classifier (ShuffleNet: one per channel shuffle, as
  in NCHW).
- **Gemm/MatMul** use the same micro-kernel (constant B packed once; alpha/beta/transB folded
  into the packing and the bias); the large fully connected layers of VGG-19 and AlexNet with
  batch 1 are matrix-vector products bound by memory bandwidth (VGG-19's fc6 reads 411 MB of
  weights per inference), for both runtimes.
- **Instruction-set levels**: the code is made for the host's richest level (avx512, avx2 or
  generic x86-64; `GLOW_CPU_ISA` forces a lower one). The GEMM/convolution register tile follows
  the register file: 6 x 64 or 14 x 32 on AVX-512's 32 zmm, 6 x 16 on AVX2's 16 ymm (a 16-lane
  vector is two ymm registers: the AVX-512 tile would spill), 3 x 16 on SSE2. Forced to avx2 on
  the Emerald Rapids session machine (1 thread), ResNet-50 went from 272 ms with the AVX-512 tile
  to 142 ms (82 ms at avx512), the MLP from 4.5 to 1.6 ms (0.9 at avx512).
- **Softmax, LayerNorm, pooling** are vector kernels (three passes over a row; windows clipped
  to the input, so padding is never materialised); exp/log/tanh/erf/sigmoid are vmath.py's
  polynomials, not libm calls.

## What limits speed now

- The convolution kernels themselves: 95 % of ResNet-50's native time (perf, with a symbol map
  of the JIT code); everything else (Pad, pooling, Softmax, Gemm) is about 1 %. The 6 x 64 tile
  reaches 85-95 % of the core's peak; what is left is in the layers with few output pixels
  (7x7: 200-225 GFLOP/s) and in tile padding (a 6-row tile over 49 pixels).
- Zero padding is an explicit Pad (one extra copy of each padded convolution's input); no
  packing of A (the input rows are read in place, 6 streams per tile).
- Two threads (backends/cpu/sync.py, pool.py): every kernel call is a phase whose
  chunks (4 per thread; one for a small kernel) any thread claims with an atomic counter; a
  thread waits only for the earlier phases whose memory the next one conflicts with, and only
  for chunks another thread has claimed (spinning, then asleep on a futex). The caller never
  waits for the second thread to arrive and may run a whole inference alone. What is left: a
  thread descheduled while it holds a chunk stalls the other until it runs again, so each
  program times its calls on both threads and on the caller alone and uses the faster
  (trying the other again after 2, 4 and 8 calls, then every 16).
- Two threads on this machine: the scheduler shares the CPU fairly between sessions
  (autogroups), not threads, so with another job running a second thread adds nothing for
  either runtime. onnxruntime's idle worker spins for about 30 ms after each run
  (`allow_spinning`, on by default): timed right after an onnxruntime run, glow's ResNet-50 at 2
  threads took 35-39 ms instead of 19-21. `glow.bench` therefore runs each runtime untimed for
  at least 50 ms before each timed run (`SETTLE_S`), so neither is timed while the other's idle
  threads still hold a core.
"""


def environment(rounds) -> dict:
    import llvmlite
    import onnxruntime

    cpu = "?"
    try:
        from glow.backends.cpu import jit

        cpu = jit.host_description().split()[1]
    except Exception:  # noqa: BLE001
        pass
    return {"rounds": rounds, "cpu": cpu, "cores": len(os.sched_getaffinity(0)),
            "loadavg_end": [round(x, 1) for x in os.getloadavg()],
            "python": platform.python_version(), "onnxruntime": onnxruntime.__version__,
            "llvmlite": llvmlite.__version__}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-compile-times", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ and results.json")
    args = ap.parse_args(argv)
    load_start = [round(x, 1) for x in os.getloadavg()]
    data = run(args.models, args.threads, args.rounds)
    data["env"] = environment(args.rounds)
    data["env"]["loadavg_start"] = load_start
    data["gflops"] = {m: model_flops(m) for m in ("resnet50", "vgg19") if m in args.models}
    data["conv_layers"] = {m: conv_layers.measure(m, verbose=False) for m in data["gflops"]}
    if not args.no_compile_times and "resnet50" in args.models:
        data["compile"] = compile_times("resnet50", args.threads[0])
        print(f"resnet50 compile: cold {data['compile']['cold']:.1f} s, cached {data['compile']['cached']:.1f} s")
    for t in args.threads:
        ratios = [r["ratio"] for r in data["results"] if r["threads"] == t]
        print(f"geometric mean ratio at {t} thread(s): {geomean(ratios):.3f}")
    if not args.no_write:
        with open(os.path.join(HERE, "results.json"), "w") as f:
            json.dump(data, f, indent=1)
        with open(os.path.join(ROOT, "docs", "performance.md"), "w") as f:
            f.write(markdown(data))
    return data


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
