"""Compile time: glow's cpu backend, cold and cached, beside onnxruntime's and OpenVINO's session set-up.

    python benchmarks/compile_time.py                  # every model; writes benchmarks/results-compile.json
    python benchmarks/compile_time.py --models resnet50 squeezenet encoder --no-write
    python benchmarks/compile_time.py --models core/data/tiny_cnn.onnx --native floor --no-write
    python benchmarks/compile_time.py --backend opencl --models resnet50 --no-write
    python benchmarks/compile_time.py --floor-ratio 5 --models resnet50 densenet121 encoder

Models: the nine light CNNs of the onnx wheel (with seeded random weights, as benchmarks/bundle.py
loads them: theirs are all 0.02), the BERT-tiny-sized encoder and GPT-style decoder of
glow.testing.nlp_models with static shapes (batch 2, sequence 32), and the generated mlp,
small_cnn and transformer of benchmarks/run_all.py; a path to an .onnx file works too. Each model
is written to one file that every runtime reads.

Every figure comes from a fresh Python process, so nothing warm in one runtime's process counts:

- glow cold: `glow compile FILE --profile --json` (core/cli.py) with GLOW_CACHE_DIR a new empty
  folder: ONNX import, graph passes, lowering, then the backend's IR, codegen, LLVM and load (cpu
  compiles a static graph in glow.compile; a specialising executable would compile on its first
  run, which the profile includes). `import glow` and the discovery of the backends (which imports
  onnx) are timed apart and not counted.
- glow cached: the same in a second process with that folder, now holding the object files.
- `--backend opencl`: glow cold is `glow.compile(FILE, backend="opencl")` plus the first run
  (PoCL builds each kernel at its first launch; glow starts those builds at compile time), with
  GLOW_CACHE_DIR and POCL_CACHE_DIR new empty folders; glow cached the same in a second process
  with both folders full. There is no executable cache for opencl.
- glow executable cache: `glow.compile(FILE, "cpu", cache=True)` in a fourth process, after a third
  one saved the executable (core/compile_cache.py; what `glow run` does).
- onnxruntime: `InferenceSession(bytes, so, providers=["CPUExecutionProvider"])`, default graph
  optimisations (the file is read before the timer starts).
- OpenVINO: `core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})`
  (n/a where openvino does not import).

- `--floor-ratio N`: glow cold with the default lowering and with `--native floor` (every op
  outside the primitive floor lowered first), alternating, N rounds of fresh processes and empty
  caches; the medians and their ratio (results-compile-floor.json).

Python's own compile of glow's source is not timed: before the first child, glow's modules are
compiled to bytecode in place (`compileall`, as pip does when it installs a wheel), and children
run without PYTHONDONTWRITEBYTECODE. Where that variable was set (these sandboxes set it), every
child had compiled each module it imported from source: 0.1-0.3 s more per process, more on the
floor path, which imports more lowering rules.

Each process has a time limit (--timeout); a runtime that fails or overruns has the reason in its
cell and the other models still run. Results go to benchmarks/results-compile.json with the host.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model  # noqa: E402 (benchmarks/host.py, next to this script)
from run_all import GENERATED, LIGHT  # noqa: E402

NLP = ["encoder", "decoder"]
MODELS = LIGHT + NLP + GENERATED
RUNTIMES = ["glow_cold", "glow_cached", "glow_exe_cache", "onnxruntime", "openvino"]


# ---- the child processes: one runtime, one model file, one JSON line on stdout


def child_glow(path: str, native: str | None) -> dict:
    t0 = time.perf_counter()
    import glow  # noqa: F401
    from glow import cli
    from glow.plugins import registry

    t1 = time.perf_counter()
    registry().get("cpu")  # discovers every backend (and imports onnx): once per process
    t2 = time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["compile", path, "--profile", "--json", "--backend", "cpu",
                       *(["--native", native] if native else [])])
    if rc:
        raise RuntimeError(f"glow compile --profile exited {rc}")
    prof = json.loads(out.getvalue())
    slowest = [{"kernel": k["kernel"], "llvm_s": k["llvm_s"], "node": k["instrs"][0]["node"] if k["instrs"] else "?"}
               for k in prof.get("slowest_kernels", [])[:5]]
    return {"compile_s": prof["total_s"], "seconds": prof["seconds"], "import_s": t1 - t0, "backends_s": t2 - t1,
            **{k: prof[k] for k in ("objects", "objects_compiled", "objects_cached") if k in prof},
            "slowest_kernels": slowest}


def child_glow_opencl(path: str) -> dict:
    t0 = time.perf_counter()
    import glow
    from glow.inputs import make_inputs
    from glow.plugins import registry

    t1 = time.perf_counter()
    registry().get("opencl")  # discovers every backend (and imports onnx): once per process
    t2 = time.perf_counter()
    exe = glow.compile(path, backend="opencl")
    t3 = time.perf_counter()
    feeds = make_inputs(exe.graph, seed=0)  # drawn before the timer starts
    t4 = time.perf_counter()
    exe.run(feeds)
    t5 = time.perf_counter()
    return {"compile_s": (t3 - t2) + (t5 - t4), "seconds": {"compile": t3 - t2, "first_run": t5 - t4},
            "import_s": t1 - t0, "backends_s": t2 - t1}


def child_glow_exe(path: str, native: str | None) -> dict:
    import glow
    from glow.plugins import registry

    registry().get("cpu")
    t = time.perf_counter()
    exe = glow.compile(path, backend="cpu", native=native, cache=True)
    return {"compile_s": time.perf_counter() - t, "loaded": bool(exe.stats.get("loaded"))}


def child_onnxruntime(path: str) -> dict:
    t0 = time.perf_counter()
    import onnxruntime as ort

    t1 = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    t2 = time.perf_counter()
    ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return {"compile_s": time.perf_counter() - t2, "import_s": t1 - t0, "version": ort.__version__}


def child_openvino(path: str) -> dict:
    t0 = time.perf_counter()
    try:
        import openvino as ov
    except ImportError as e:
        return {"na": f"openvino does not import: {e}"}
    core = ov.Core()
    t1 = time.perf_counter()
    core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return {"compile_s": time.perf_counter() - t1, "import_s": t1 - t0, "version": ov.__version__.split("-")[0]}


def child(kind: str, path: str, native: str | None) -> int:
    if kind == "glow":
        row = child_glow(path, native)
    elif kind == "glow-exe":
        row = child_glow_exe(path, native)
    elif kind == "glow-opencl":
        row = child_glow_opencl(path)
    elif kind == "onnxruntime":
        row = child_onnxruntime(path)
    else:
        row = child_openvino(path)
    print(json.dumps(row))
    return 0


# ---- the parent: models to files, one process per runtime


def model_file(spec: str, folder: str) -> tuple[str, str]:
    """(name, path of an .onnx file) for a model name or path; named models are written to folder."""
    if os.path.exists(spec):
        return os.path.splitext(os.path.basename(spec))[0], spec
    import onnx
    from glow.bench import resolve_model
    from glow.testing import nlp_models
    from glow.testing.models import with_random_weights

    if spec in NLP:
        name, model = spec, getattr(nlp_models, spec)(dynamic=False)
    else:
        model, name = resolve_model(spec)
        if isinstance(model, str):  # a light model: random weights instead of its uniform 0.02
            model = with_random_weights(onnx.load(model))
    path = os.path.join(folder, f"{name}.onnx")
    onnx.save(model, path)
    return name, path


@functools.cache
def child_env() -> dict:
    """The children's environment, after glow's modules are compiled to bytecode as an installed
    package's are (see the module docstring); once per run."""
    import glow
    import glow.backends

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    folders = sorted({*glow.__path__, *glow.backends.__path__})
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, stdout=subprocess.DEVNULL,
                   check=False)
    return env


def run_child(kind: str, path: str, cache: str, native: str | None, timeout: float) -> dict:
    """One runtime in a fresh process: its JSON line, or {"error": why}."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, path]
    if native:
        cmd += ["--native", native]
    env = {**child_env(), "GLOW_CACHE_DIR": cache, "POCL_CACHE_DIR": os.path.join(cache, "pocl")}
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = p.stdout.strip().splitlines()
    if p.returncode or not lines:
        err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return {"error": err[:200]}
    return {**json.loads(lines[-1]), "process_s": time.perf_counter() - t}


def measure(spec: str, native: str | None, timeout: float, backend: str = "cpu") -> dict:
    with tempfile.TemporaryDirectory(prefix="glow-compile-time-") as work:
        try:
            name, path = model_file(spec, work)
        except Exception as e:  # a model that cannot be made: its row says why
            return {"model": spec, **{r: {"error": f"{type(e).__name__}: {e}"[:200]} for r in RUNTIMES}}
        cache = os.path.join(work, "cache")
        os.mkdir(cache)  # empty: the cold compile; the same folder, now full: the cached one
        row = {"model": name}
        if backend == "opencl":
            row["glow_cold"] = run_child("glow-opencl", path, cache, None, timeout)
            row["glow_cached"] = run_child("glow-opencl", path, cache, None, timeout)
            row["glow_exe_cache"] = {"na": "no executable cache for opencl"}
        else:
            row["glow_cold"] = run_child("glow", path, cache, native, timeout)
            row["glow_cached"] = run_child("glow", path, cache, native, timeout)
            run_child("glow-exe", path, cache, native, timeout)  # saves the executable
            row["glow_exe_cache"] = run_child("glow-exe", path, cache, native, timeout)
            if "loaded" in row["glow_exe_cache"] and not row["glow_exe_cache"]["loaded"]:
                row["glow_exe_cache"] = {"error": "not found in the executable cache"}
        row["onnxruntime"] = run_child("onnxruntime", path, cache, None, timeout)
        row["openvino"] = run_child("openvino", path, cache, None, timeout)
    return row


def floor_ratio(specs: list[str], rounds: int, timeout: float) -> list[dict]:
    """Median cold compile, default lowering against `--native floor`, alternating per round."""
    import statistics

    rows = []
    print("| model | glow cold s (median) | --native floor cold s (median) | ratio | rounds |\n|---|---|---|---|---|",
          flush=True)
    for spec in specs:
        with tempfile.TemporaryDirectory(prefix="glow-compile-time-") as work:
            times: dict = {"default": [], "floor": []}
            errors = []
            try:
                name, path = model_file(spec, work)
            except Exception as e:  # a model that cannot be made: its row says why
                name, path = spec, None
                errors.append(f"{type(e).__name__}: {e}"[:200])
            for k in range(rounds if path else 0):
                for mode in ("default", "floor"):
                    cache = os.path.join(work, f"cache-{mode}-{k}")
                    os.mkdir(cache)
                    r = run_child("glow", path, cache, None if mode == "default" else "floor", timeout)
                    if "error" in r:
                        errors.append(f"{mode}: {r['error']}")
                    else:
                        times[mode].append(r["compile_s"])
        row = {"model": name, **{m: [round(t, 3) for t in v] for m, v in times.items()}, "errors": errors}
        if times["default"] and times["floor"]:
            row["median_default"] = statistics.median(times["default"])
            row["median_floor"] = statistics.median(times["floor"])
            row["ratio"] = row["median_floor"] / row["median_default"]
            print(f"| {name} | {row['median_default']:.2f} | {row['median_floor']:.2f} | {row['ratio']:.2f} | "
                  f"{rounds} |", flush=True)
        else:
            print(f"| {name} | failed: {'; '.join(errors)[:200]} | | | {rounds} |", flush=True)
        rows.append(row)
    return rows


def _cell(r: dict, value=lambda r: r["compile_s"]) -> str:
    if "error" in r:
        return "failed: " + r["error"].replace("|", "/")  # a pipe would split the markdown cell
    if "na" in r:
        return "n/a"
    return f"{value(r):.2f}"


def table(rows: list[dict], backend: str = "cpu") -> list[str]:
    """Markdown rows; with `backend` "opencl" glow's columns are compile plus first run, and its
    part in the first run (the kernels PoCL had not built by the end of the compile)."""
    if backend == "opencl":
        glow_cols, part = ["glow opencl cold: compile + first run s", "of which first run s"], "first_run"
    else:
        glow_cols, part = ["glow cold s", "of which LLVM s"], "llvm"
    head = ["model", *glow_cols, "glow cached s", "glow executable cache s",
            "onnxruntime session s", "OpenVINO compile s", "glow import + backends s (not counted)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cold = r["glow_cold"]
        cells = [r["model"], _cell(cold), _cell(cold, lambda c: c["seconds"].get(part, 0.0)),
                 _cell(r["glow_cached"]), _cell(r["glow_exe_cache"]), _cell(r["onnxruntime"]), _cell(r["openvino"]),
                 _cell(cold, lambda c: c["import_s"] + c["backends_s"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def host() -> dict:
    import llvmlite
    from glow.backends.cpu import jit

    return {"cpu_model": cpu_model(), "cpu": jit.cpu_name(), "isa": jit.isa(), "cores": len(os.sched_getaffinity(0)),
            "python": sys.version.split()[0], "llvmlite": llvmlite.__version__, "date": time.strftime("%Y-%m-%d")}


def _rounds(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"ROUNDS must be a positive integer, got {text!r}")
    return int(text)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS, help="names (see above) or .onnx paths")
    ap.add_argument("--native", choices=["floor", "all"], default=None, help="glow.compile(native=...)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds each process may take")
    ap.add_argument("--backend", choices=["cpu", "opencl"], default="cpu", help="glow's backend (default cpu)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave the results file")
    ap.add_argument("--floor-ratio", type=_rounds, metavar="ROUNDS", default=0,
                    help="cold compiles, default lowering against --native floor, alternating ROUNDS times")
    args = ap.parse_args(argv)
    env = {**host(), "backend": args.backend, "native": args.native,
           "loadavg_start": [round(x, 1) for x in os.getloadavg()]}
    if args.floor_ratio:
        print(f"# cold compiles, default against --native floor, on {env['cpu_model']} (LLVM {env['cpu']}, "
              f"level {env['isa']}), {env['cores']} cores", flush=True)
        data = {"env": env, "rows": floor_ratio(args.models, args.floor_ratio, args.timeout)}
        data["env"]["loadavg_end"] = [round(x, 1) for x in os.getloadavg()]
        if not args.no_write:
            with open(os.path.join(HERE, "results-compile-floor.json"), "w") as f:
                json.dump(data, f, indent=1)
        return data
    print(f"# compile times on {env['cpu_model']} (LLVM {env['cpu']}, level {env['isa']}), "
          f"{env['cores']} cores, backend {args.backend}", flush=True)
    rows = []
    for spec in args.models:
        rows.append(measure(spec, args.native, args.timeout, args.backend))
        print(table(rows, args.backend)[-1], flush=True)
    env["loadavg_end"] = [round(x, 1) for x in os.getloadavg()]
    for r in RUNTIMES[3:]:
        env[r] = next((row[r]["version"] for row in rows if "version" in row[r]), None)
    data = {"env": env, "rows": rows}
    print("\n" + "\n".join(table(rows, args.backend)))
    if not args.no_write:  # opencl's figures apart: run_all.py renders the cpu file's table
        out = "results-compile.json" if args.backend == "cpu" else f"results-compile-{args.backend}.json"
        with open(os.path.join(HERE, out), "w") as f:
            json.dump(data, f, indent=1)
    return data


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        ap = argparse.ArgumentParser()
        ap.add_argument("--child", choices=["glow", "glow-exe", "glow-opencl", "onnxruntime", "openvino"])
        ap.add_argument("path")
        ap.add_argument("--native", default=None)
        a = ap.parse_args()
        sys.exit(child(a.child, a.path, a.native))
    sys.exit(0 if main() else 1)
