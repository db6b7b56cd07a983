"""The CPU backend against onnxruntime and OpenVINO on the twelve benchmark models, at 1 and 2 threads.

    python benchmarks/run_all.py                      # everything; writes docs/performance.md
    python benchmarks/run_all.py --models resnet50 mlp --threads 1 --rounds 10 --no-write

Each model is measured with `glow.bench.bench` (glow, onnxruntime and OpenVINO interleaved in one
process, rotating which runs first, medians with min-max, busy threads per runtime). Compile times
of ResNet-50 are measured cold (an empty compile cache) and cached. Results go to
benchmarks/results.json under the instruction-set level glow compiled for (avx512, avx2,
generic), so docs/performance.md keeps one table per level measured, each from its own machine.
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


def run(models, threads_list, rounds, peers) -> dict:
    from glow.bench import bench

    results = []
    for threads in threads_list:
        for m in models:
            r = bench(m, backend="cpu", threads=threads, rounds=rounds, vs=peers)
            results.append(r.to_dict())
            cols = "  ".join(f"{n} {t.median_ms:9.3f} ms" for n, t in r.peers.items())
            print(f"{m:14s} {threads}T glow {r.glow.median_ms:9.3f} ms  {cols}  ratio(ort) {r.ratio:5.2f}  "
                  f"ratio(fastest) {r.ratio_fastest:5.2f}  busy {r.glow.busy_threads}  "
                  f"diff {r.max_abs_diff:.1e}", flush=True)
    return {"results": results}


def geomean(xs):
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def _ms(t):
    return f"{t['median_ms']:.3f} ({t['min_ms']:.3f}-{t['max_ms']:.3f})"


def _peers(r: dict) -> dict:
    """A result's peers by name (results written before OpenVINO was measured hold one 'peer')."""
    return r.get("peers") or {r["peer_name"]: r["peer"]}


def _fastest_ratio(r: dict) -> float:
    return r["glow"]["median_ms"] / min(t["median_ms"] for t in _peers(r).values())


PEER_TITLES = {"onnxruntime": "onnxruntime", "openvino": "OpenVINO"}


def _table(rows: list[dict], t: int) -> list[str]:
    names = list(dict.fromkeys(n for r in rows for n in _peers(r)))
    head = ["model", "glow ms", *(f"{PEER_TITLES.get(n, n)} ms" for n in names), "glow / onnxruntime"]
    if len(names) > 1:
        who = " / ".join(["glow"] + [PEER_TITLES.get(n, n) for n in names])
        head += ["glow / fastest peer", f"busy threads ({who})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        p = _peers(r)
        cells = [r["model"], _ms(r["glow"]), *(_ms(p[n]) if n in p else "-" for n in names),
                 f"{r['glow']['median_ms'] / p['onnxruntime']['median_ms']:.2f}"]
        if len(names) > 1:
            busy = [r["glow"].get("busy_threads")] + [p[n].get("busy_threads") if n in p else None for n in names]
            cells += [f"{_fastest_ratio(r):.2f}", " / ".join("-" if b is None else f"{b:.1f}" for b in busy)]
        lines.append("| " + " | ".join(cells) + " |")
    ort = geomean([r["glow"]["median_ms"] / _peers(r)["onnxruntime"]["median_ms"] for r in rows])
    plural = "s" if t > 1 else ""
    lines += ["", f"Geometric mean at {t} thread{plural}, glow / onnxruntime: **{ort:.2f}**"
              + (f"; glow / the fastest peer per model: **{geomean([_fastest_ratio(r) for r in rows]):.2f}**"
                 if len(names) > 1 else "") + f" over {len(rows)} models.", ""]
    return lines


ISA_TITLES = {"avx512": "AVX-512", "avx2": "AVX2", "generic": "generic x86-64"}


def compile_section() -> list[str]:
    """The table of `python benchmarks/compile_time.py` (benchmarks/results-compile.json, its own
    run and host), so that rewriting this page keeps it."""
    path = os.path.join(HERE, "results-compile.json")
    if not os.path.exists(path):
        return []
    import compile_time

    with open(path) as f:
        data = json.load(f)
    env = data["env"]
    return [f"`python benchmarks/compile_time.py` ({env['cpu_model']}, LLVM `{env['cpu']}`, level {env['isa']}, "
            f"{env['cores']} cores, load {env['loadavg_start'][0]} at the start; onnxruntime "
            f"{env.get('onnxruntime')}, OpenVINO {env.get('openvino')}; {env['date']}). Every figure is from a "
            "fresh process: glow cold has an empty `GLOW_CACHE_DIR` (ONNX import, graph passes, code "
            "generation, LLVM at O3, load); glow cached finds every kernel object in that folder (graph "
            "passes and code generation still run); the executable cache is `glow.compile(path, \"cpu\", "
            "cache=True)`, what `glow run` does, after an earlier compile saved the executable "
            "([user-guide.md](user-guide.md#caching)). `import glow` and finding the backends are not "
            "counted, for any runtime; glow's modules are compiled to bytecode beforehand, as an installed "
            "package's are. Seconds:", "", *compile_time.table(data["rows"]), "",
            *_floor_section(), "[compile-time.md](compile-time.md) has the phases and what was done about them.", ""]


def _floor_section() -> list[str]:
    """The table of `compile_time.py --floor-ratio` (benchmarks/results-compile-floor.json)."""
    path = os.path.join(HERE, "results-compile-floor.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = json.load(f)
    env, rows = data["env"], [r for r in data["rows"] if "ratio" in r]
    rounds = max((len(r["default"]) for r in rows), default=0)
    lines = [f"`python benchmarks/compile_time.py --floor-ratio {rounds}` ({env['cpu_model']}, LLVM `{env['cpu']}`, "
             f"{env['cores']} cores; {env['date']}): cold compiles with the default lowering and with "
             "`--native floor` (every op outside the primitive floor lowered first), alternating in fresh "
             "processes, medians in seconds:", "",
             "| model | default s | --native floor s | floor / default |", "|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['median_default']:.2f} | {r['median_floor']:.2f} | {r['ratio']:.2f} |"
              for r in rows]
    failed = [r["model"] for r in data["rows"] if "ratio" not in r]
    return lines + (["", f"Failed: {', '.join(failed)} (see the json file)."] if failed else []) + [""]


def markdown(by_isa: dict) -> str:
    """docs/performance.md: one section per instruction-set level measured (newest data of each),
    the richest first; the throughput, compile-time and environment notes of the newest run."""
    lines = ["# CPU backend performance", "",
             "glow's CPU backend (`--backend cpu`) against onnxruntime's CPU execution provider and "
             "OpenVINO's CPU plugin on the nine light models shipped in the onnx wheel and three "
             "generated ones (`glow.testing.bench_models`). Latency of one inference, milliseconds: "
             "median (min-max) over the rounds; ratios are of medians (below 1: glow is faster). "
             "The code glow makes depends on the host's instruction set, so each level measured has "
             "its own tables, from the machine named in its heading.", ""]
    levels = sorted(by_isa, key=lambda k: list(ISA_TITLES).index(k) if k in ISA_TITLES else 9)
    for isa in levels:
        data = by_isa[isa]
        env = data.get("env", {})
        res = data["results"]
        lines += [f"## {ISA_TITLES.get(isa, isa)}: {env.get('cpu_model', '?')} ({env.get('cpu', '?')}), "
                  f"{env.get('cores', '?')} cores, measured {env.get('date', 'before 2026-12')}", ""]
        if data.get("gemm_peak"):
            gp = data["gemm_peak"]
            best = max(gp["gemm"], key=lambda g: g["fraction"])
            lines += [f"GEMM micro-kernel on one core: {best['gflops']:.0f} GFLOP/s on a "
                      f"{best['m']}x{best['k']}x{best['n']} MatMul, **{100 * best['fraction']:.0f} %** of "
                      f"the core's fp32 peak of {gp['peak_gflops']:.0f} GFLOP/s measured by an FMA loop "
                      "(`python benchmarks/gemm_peak.py`).", ""]
        for t in sorted({r["threads"] for r in res}):
            lines += [f"### {t} thread{'s' if t > 1 else ''}", "", *_table([r for r in res if r["threads"] == t], t)]
    data = by_isa[_newest(by_isa)]
    res = data["results"]
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
                    p = flops / _peers(r)["onnxruntime"]["median_ms"] / 1e6
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
                  f"ResNet-50 in this run, whole model to a runnable program (graph passes, code generation, "
                  f"LLVM at O3 for the host CPU): **{c['cold']:.1f} s cold** (empty cache), "
                  f"**{c['cached']:.1f} s cached** (the object file comes from the on-disk cache; "
                  "graph passes and IR generation still run).", ""]
    lines += compile_section()
    lines += NOTES.splitlines() + [""]
    env = data.get("env", {})
    lines += ["## How this was measured", "",
              f"- `python benchmarks/run_all.py` ({env.get('rounds', '?')} interleaved rounds per model and "
              "thread count, after 3 warm-up runs each, every timed run preceded by at least 50 ms of "
              "untimed runs of the same runtime and fed fresh input values, the same for every runtime "
              "in a round; `glow bench MODEL --backend cpu --threads N --vs onnxruntime,openvino` "
              "measures one model the same way). Busy threads: the process's CPU time over the wall "
              "time of the second half of the settling runs and the timed run after them, median (a "
              "spinning idle thread counts as busy; over one short run alone Linux's tick-by-tick "
              "accounting of the other threads read 1.0 at 2 threads).",
              f"- This section, the throughput and compile-time figures: the newest run, on "
              f"{env.get('cpu_model', '?')} ({env.get('cpu', '?')}, glow at level {env.get('isa', '?')}), "
              f"{env.get('cores', '?')} cores; Python {env.get('python', '?')}, onnxruntime "
              f"{env.get('onnxruntime', '?')}, OpenVINO {env.get('openvino', '-')}, llvmlite "
              f"{env.get('llvmlite', '?')}.",
              "- onnxruntime: `intra_op_num_threads` = N, `inter_op_num_threads` = 1, default graph "
              "optimisations. OpenVINO: CPU plugin, `INFERENCE_NUM_THREADS` = N, one stream, latency "
              "hint, fp32 inference precision (on CPUs with bf16 its default would compute something "
              "else). glow: `glow.compile(model, 'cpu', threads=N)`.",
              "- Inputs: seeded random normal data (`glow run`'s generator); glow's outputs are "
              "compared with onnxruntime's (max |diff| in benchmarks/results.json).",
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
        "(`glow compile MODEL --profile`).",
        "- [performance-llm.md](performance-llm.md): LLM decoding, fp32 and int4, against onnxruntime-genai and "
        "openvino-genai (`python benchmarks/decode.py`).",
        "- [performance-bf16.md](performance-bf16.md): `precision=\"bf16\"` against OpenVINO's default precision "
        "(`python benchmarks/precision.py`).", ""]

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
  the register file: 6 x 64 or 14 x 32 on AVX-512's 32 zmm, 6 x 16 on AVX2's 16 ymm (12
  accumulators, two B vectors, one broadcast of A; a 16-lane vector is two ymm registers, so the
  AVX-512 tile would spill), 3 x 16 on SSE2. Below AVX-512 a masked store is slow (vmaskmovps),
  so loops run whole vectors unmasked and mask only the last step, and a tile whose column count
  is known only at run time branches to a plain store for its whole vectors; multiply-adds are
  `llvm.fmuladd` (an FMA instruction where there is one, a multiply and an add on generic
  x86-64, never a libm call per lane).
- **LRN** (AlexNet, ZFNet, Inception-v1): its `(bias + alpha/size * sum) ** -beta` has a
  constant exponent that is a multiple of 1/4, computed with square roots in vector code; as
  libm `pow` per lane it had been a quarter of Inception-v1's time on Zen 3.
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
    from glow.backends.cpu import jit
    from host import cpu_model

    env = {"rounds": rounds, "cpu": jit.cpu_name(), "cpu_model": cpu_model(), "isa": jit.isa(),
           "cores": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d"),
           "loadavg_end": [round(x, 1) for x in os.getloadavg()],
           "python": platform.python_version(), "onnxruntime": onnxruntime.__version__,
           "llvmlite": llvmlite.__version__}
    try:
        import openvino

        env["openvino"] = openvino.__version__.split("-")[0]
    except ImportError:
        pass
    return env


def _newest(by_isa: dict) -> str:
    return max(by_isa, key=lambda k: by_isa[k].get("env", {}).get("date", ""))


def load_results() -> dict:
    """benchmarks/results.json by instruction-set level (a file from before the levels were kept
    apart holds one run, made on an AVX-512 machine)."""
    path = os.path.join(HERE, "results.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    if "by_isa" in data:
        return data["by_isa"]
    # the one run before: a Zen 5 machine (LLVM znver5) whose model name was not recorded,
    # against onnxruntime only
    data["env"].setdefault("cpu_model", "AMD Zen 5, model name not recorded; onnxruntime only")
    return {"avx512": data}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--vs", default="onnxruntime,openvino", help="peers, comma-separated (glow bench --vs)")
    ap.add_argument("--no-compile-times", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ and results.json")
    args = ap.parse_args(argv)
    load_start = [round(x, 1) for x in os.getloadavg()]
    data = run(args.models, args.threads, args.rounds, args.vs)
    data["env"] = environment(args.rounds)
    data["env"]["loadavg_start"] = load_start
    import gemm_peak

    data["gemm_peak"] = gemm_peak.measure(verbose=False)
    data["gflops"] = {m: model_flops(m) for m in ("resnet50", "vgg19") if m in args.models}
    data["conv_layers"] = {m: conv_layers.measure(m, verbose=False) for m in data["gflops"]}
    if not args.no_compile_times and "resnet50" in args.models:
        data["compile"] = compile_times("resnet50", args.threads[0])
        print(f"resnet50 compile: cold {data['compile']['cold']:.1f} s, cached {data['compile']['cached']:.1f} s")
    for t in args.threads:
        rows = [r for r in data["results"] if r["threads"] == t]
        print(f"geometric mean at {t} thread(s): glow/onnxruntime {geomean([r['ratio'] for r in rows]):.3f}, "
              f"glow/fastest peer {geomean([_fastest_ratio(r) for r in rows]):.3f}")
    if not args.no_write:
        by_isa = load_results()
        by_isa[data["env"]["isa"]] = data
        with open(os.path.join(HERE, "results.json"), "w") as f:
            json.dump({"by_isa": by_isa}, f, indent=1)
        page = os.path.join(ROOT, "docs", "performance.md")
        old = open(page).read() if os.path.exists(page) else None
        with open(page, "w") as f:
            f.write(splice(old, markdown(by_isa)))
    return data


#: The sections of docs/performance.md this script writes (headings starting so); every other
#: "## " section of the page is prose kept as it stands (`splice`).
GENERATED_SECTIONS = (*(f"## {t}:" for t in ISA_TITLES.values()), "## OpenCL backend", "## Throughput",
             "## Compile time", "## How this was measured")


def _sections(text: str) -> list[tuple[str | None, str]]:
    """(heading line or None for the page's head, text) of each "## " section, in order."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            out.append((line.rstrip("\n"), []))
        out[-1][1].append(line)
    return [(h, "".join(lines)) for h, lines in out]


def _generated_key(heading: str | None) -> str | None:
    """The GENERATED_SECTIONS prefix a heading starts with (the page's head is generated too), else None."""
    if heading is None:
        return ""
    return next((g for g in GENERATED_SECTIONS if heading.startswith(g)), None)


def splice(old: str | None, new: str) -> str:
    """The page `new` with the prose of the page `old` kept: a section of `old` this script does
    not generate (its heading is not in GENERATED_SECTIONS: "Memory", "What limits speed now", ...) stands
    as written there, in its place after the same generated section as before; `new`'s own
    version of it (run_all's NOTES) is used only where `old` has none."""
    if old is None:
        return new
    after: dict[str | None, list[tuple[str, str]]] = {}
    last = None
    for h, text in _sections(old):
        key = _generated_key(h)
        if key is None:
            after.setdefault(last, []).append((h, text))
        else:
            last = key
    kept = {h for texts in after.values() for h, _ in texts}
    out, placed = [], set()
    for h, text in _sections(new):
        key = _generated_key(h)
        if key is None and h in kept:
            continue  # the old page's version is placed where it stood
        out.append(text)
        for ph, ptext in after.get(key, []) if key is not None else []:
            if ph not in placed:
                out.append(ptext)
                placed.add(ph)
    out += [text for texts in after.values() for h, text in texts if h not in placed]
    return "".join(out)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
