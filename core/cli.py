"""The `glow` command line. Bad input: exit code 2 and one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

from .cli_io import describe, input_shapes, load_inputs, parse_shapes, save_npz_atomic
from .errors import GlowError, InputError, InternalError, internal_errors
from .fileio import check_writable, write_atomic

EXIT_BAD_INPUT = 2


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "verbose", False):  # backends' build notes (PoCL's compiler output) too
        os.environ["GLOW_VERBOSE"] = "1"
        os.environ.setdefault("PYOPENCL_COMPILER_OUTPUT", "1")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        with internal_errors(f"glow {argv_command(args)}"), _warnings_as_lines():  # a bug says what it was doing
            return args.func(args) or 0
    except GlowError as e:
        print(f"glow: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("glow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `glow ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except Exception as e:  # a glow bug: one line, the traceback only on request
        if os.environ.get("GLOW_DEBUG", "") not in ("", "0"):
            raise
        detail = e.detail if isinstance(e, InternalError) else f"{type(e).__name__}: {e}"
        print(f"glow: internal error (glow bug): {' '.join(detail.split())} (set GLOW_DEBUG=1 for "
              "a traceback)", file=sys.stderr)
        return 1


@contextlib.contextmanager
def _warnings_as_lines():
    """glow's warnings (GlowWarning) as one `glow: warning: ...` line each on stderr, each said
    once; other libraries' warnings as Python shows them."""
    import warnings

    from .errors import GlowWarning

    shown = warnings.showwarning
    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, GlowWarning):
            return shown(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())
        if text not in said:
            said.add(text)
            print(f"glow: warning: {text}", file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def argv_command(args) -> str:
    return getattr(args.func, "__name__", "command").removeprefix("cmd_").replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="glow", description="Glow for Python: compile and run ONNX models "
                                "on pluggable backends.")
    p.add_argument("--version", action="version", version=f"glow {_version()}")
    p.add_argument("-v", "--verbose", action="store_true", default=False,
                   help="also show backends' build warnings (PoCL's compiler output)")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    r = sub.add_parser("run", help="run a model and print (or save) its outputs",
                       description="Run MODEL (once, or --repeat N times). Without --inputs, inputs are "
                       "made from a fixed seed. Reports the backend, the compile time and the run time "
                       "on stderr; the outputs' summary goes to stdout.")
    r.add_argument("model", help="path to an .onnx file (or a torch.export .pt2, with torch installed)")
    r.add_argument("--backend", "-b", default=None, help="backend name (default: best available)")
    r.add_argument("--native", choices=["floor", "all"], default=None,
                   help="restrict the backend's native ops ('floor': lower everything to primitives)")
    r.add_argument("--inputs", metavar="IN.npz", help="inputs keyed by graph input name")
    r.add_argument("--outputs", metavar="OUT.npz", help="write outputs here, keyed by output name")
    r.add_argument("--seed", type=int, default=0, help="seed for generated inputs (default 0)")
    r.add_argument("--shape", action="append", default=[], metavar="NAME=DxDx...",
                   help="shape of a generated input with symbolic dims, e.g. image=2x3x224x224; "
                   "repeatable (without it a symbolic dim is 1, with a warning)")
    r.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads for the cpu backend (default: $GLOW_CPU_THREADS, else every core)")
    r.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                   help="cpu: bf16 rounds the operands of matrix products and convolutions to bfloat16 "
                   "and accumulates in float32 (default: fp32, or $GLOW_PRECISION)")
    r.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run N times (fresh generated inputs each time; the same --inputs) and report "
                   "the median and min run time")
    r.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="also show backends' build warnings")
    _placement_args(r, required=False)
    r.set_defaults(func=cmd_run)

    pa = sub.add_parser("partition", help="place a model on several devices and report what goes where",
                        description="Place MODEL's nodes on several devices (by support, cost and memory), "
                        "cut it into partitions and print the placement report: per node its device and "
                        "why, per partition its memory and time, the transfers.")
    pa.add_argument("model", help="path to an .onnx file")
    _placement_args(pa, required=True)
    pa.add_argument("--report", metavar="OUT", help="also write the report: .txt, .json, .dot, or "
                    ".svg/.png (rendered with Graphviz `dot`)")
    pa.add_argument("--json", action="store_true", help="print the report as JSON")
    pa.set_defaults(func=cmd_partition)

    b = sub.add_parser("backends", help="list backends: available or not (and why), devices, ops",
                       description="List every backend glow found, available or not.")
    b.add_argument("--probe", action="store_true", help="ask each backend for its devices and native ops "
                   "(initialises platforms such as OpenCL's: can take a second or more)")
    b.add_argument("--json", action="store_true", help="machine-readable output, probed as with --probe")
    b.set_defaults(func=cmd_backends)

    c = sub.add_parser("compile", help="compile a model and dump what the compiler made",
                       description="Compile MODEL and print one of its intermediate forms.")
    c.add_argument("model", help="path to an .onnx file")
    c.add_argument("--dump", choices=["graph", "dot", "ir", "memory"], default="graph",
                   help="what to print: graph (the optimised graph the backend gets), dot (the same, "
                   "Graphviz), ir (instruction IR with buffer offsets), memory (the arena plan)")
    c.add_argument("--backend", "-b", default=None, help="backend whose lowering and fusions apply")
    c.add_argument("--native", choices=["floor", "all"], default=None,
                   help="restrict the backend's native ops ('floor': lower everything to primitives)")
    c.add_argument("--no-optimize", action="store_true", help="skip the graph optimiser (lower only)")
    c.add_argument("--json", action="store_true", help="machine-readable output (for ir/memory: "
                   "arena_bytes, lower_bound_bytes, no_reuse_bytes and the buffers)")
    c.add_argument("--profile", action="store_true", help="compile for the backend and print where "
                   "the time went, by phase, and the kernels LLVM took longest on (cpu); a model with "
                   "dynamic shapes is compiled for --shape (symbolic dims 1 where not given)")
    c.add_argument("--save", metavar="FILE", help="compile for the backend and save the executable to "
                   "FILE, which `glow run FILE` and glow.load(FILE) run without compiling (cpu backend; "
                   "a model with dynamic shapes is saved for --shape)")
    c.add_argument("--shape", action="append", default=[], metavar="NAME=DxD...",
                   help="with --profile or --save: an input's shape to compile for (repeatable)")
    c.set_defaults(func=cmd_compile)

    bd = sub.add_parser("bundle", help="compile a model ahead of time into an object file, a C header and "
                        "its weights", description="Write DIR/NAME.o, DIR/NAME.h and DIR/NAME.weights.bin: "
                        "the model as one C-callable function `int NAME(constant_weights, mutable_weights, "
                        "activations)` for this CPU or --target (see examples/bundle/main.c).")
    bd.add_argument("model", help="path to an .onnx file")
    bd.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the bundle's files")
    bd.add_argument("--target", default=None, metavar="TRIPLE",
                    help="LLVM target triple, e.g. aarch64-linux-gnu, riscv64-linux-gnu (default: this host)")
    bd.add_argument("--cpu", default=None, metavar="NAME", help="LLVM CPU name (default: this host's, or a "
                    "generic one for another target)")
    bd.add_argument("--name", default="net", help="the function's and files' name (a C identifier; default net)")
    bd.add_argument("--weights-c", action="store_true", help="also write NAME.weights.c (the weights as a C "
                    "array, for targets without a file system)")
    bd.add_argument("--shape", action="append", default=[], metavar="NAME=DxD...",
                    help="fixed shape for an input with symbolic dims (repeatable; others 1)")
    bd.add_argument("--native", choices=["floor", "all"], default=None,
                    help="restrict the backend's native ops ('floor': lower everything to primitives)")
    bd.add_argument("--json", action="store_true", help="print what was written as JSON")
    bd.set_defaults(func=cmd_bundle)

    bn = sub.add_parser("bench", help="time a model against onnxruntime and OpenVINO (interleaved, medians)",
                        description="Benchmark MODEL (a path, a light model name such as 'resnet50', or "
                        "'mlp', 'small_cnn', 'transformer') with glow and its peers in one process: each "
                        "round runs each once, in turn, on fresh inputs; the report gives medians, min-max, "
                        "the ratio glow / peer and the largest output difference. The peers are the bench "
                        "extra: pip install 'glow-compiler[bench]'.")
    bn.add_argument("model", help="an .onnx file, a light model of the onnx wheel (resnet50, vgg19, ...) or a "
                    "generated one (mlp, small_cnn, transformer)")
    bn.add_argument("--backend", "-b", default=None, help="glow backend to time (default: best available)")
    bn.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for glow and the peer (default: all cores)")
    bn.add_argument("--rounds", type=int, default=20, help="timed runs of each runtime (default 20)")
    bn.add_argument("--vs", default="onnxruntime", metavar="PEERS",
                    help="comma-separated peers: onnxruntime, openvino (pip install 'glow-compiler[bench]'), "
                    "or none (default onnxruntime)")
    bn.add_argument("--native", choices=["floor", "all"], default=None,
                    help="restrict the backend's native ops ('floor': lower everything to primitives)")
    bn.add_argument("--json", action="store_true", help="print the result as JSON (every timing and difference)")
    bn.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                    help="cpu: time glow at bf16 (OpenVINO then at its default precision) and print each "
                    "output's error and cosine against glow fp32 on the same inputs")
    bn.set_defaults(func=cmd_bench)

    from .cli_generate import add_parser as add_generate

    add_generate(sub)
    qz = sub.add_parser("quantize", help="quantize a float model: int8 QDQ from calibration data, or weights "
                        "only to int4/int8 blocks (--weights)",
                        description="Profile MODEL's float tensors on the calibration inputs (ranges and "
                        "histograms, on the reference interpreter) and write a standard QDQ ONNX model: "
                        "uint8/int8 activations, int8 weights (per channel), int32 biases. With --weights "
                        "int4|int8: no calibration; every MatMul with a constant weight becomes onnxruntime's "
                        "MatMulNBits (the weight in blocks along K, a scale and zero point per block) and "
                        "every embedding Gather GatherBlockQuantized, as onnxruntime-genai's builder writes "
                        "for -p int4. MODEL may be a folder "
                        "(onnxruntime-genai's or an optimum export): OUT is then a new folder with every "
                        ".onnx quantized and the other files copied.")
    qz.add_argument("model", help="the float model: an .onnx file, or a folder of them (onnxruntime-genai's "
                    "or an optimum export)")
    qz.add_argument("-o", "--output", required=True, metavar="OUT", help="the quantized model (or folder) to write")
    qz.add_argument("--weights", choices=["int4", "int8"], help="weight-only block quantization (no calibration)")
    qz.add_argument("--block", type=int, default=32, help="with --weights: values per block along K, a power "
                    "of 2 >= 16 (default 32)")
    qz.add_argument("--sym", action="store_true", help="with --weights: symmetric blocks (no zero points)")
    qz.add_argument("--skip", default="", metavar="NAMES", help="with --weights: comma-separated node, weight or "
                    "output names (wildcards allowed) to keep in float, e.g. lm_head")
    qz.add_argument("--accuracy-level", type=int, default=4, help="with --weights: the MatMulNBits accuracy_level "
                    "written (4, the default: int8 activations, as the builder writes; 0: float products)")
    qz.add_argument("--calibration", metavar="NPZ", help=".npz with one array per model input, the "
                    "calibration runs on its first axis (arr[i] is run i's input)")
    qz.add_argument("--profile", metavar="FILE", help="reuse this saved profile if it exists (its graph hash "
                    "must match the model's), else profile and save it here")
    qz.add_argument("--schema", choices=["asymmetric", "symmetric", "symmetric-unsigned"], default="asymmetric",
                    help="activations: uint8 with a zero point (asymmetric, the default), int8 with zero "
                    "point 0 (symmetric), or uint8 from 0 where a tensor is never negative and int8 elsewhere "
                    "(symmetric-unsigned)")
    qz.add_argument("--calibrate", choices=["minmax", "percentile"], default="minmax",
                    help="how a tensor's range is chosen from the calibration runs: minmax (default) or "
                    "percentile (see --percentile)")
    qz.add_argument("--percentile", type=float, default=99.999, help="with --calibrate percentile: the share "
                    "of values the range holds (default 99.999)")
    qz.add_argument("--per-tensor", action="store_true", help="one scale per weight, not per output channel")
    qz.add_argument("--reduce-range", action="store_true", help="7-bit weight codes (-64..64): onnxruntime's "
                    "uint8 x int8 kernels saturate on full-range weights on AVX2 hosts without VNNI")
    qz.add_argument("--keep", action="append", default=[], metavar="NAME_OR_OP",
                    help="keep this node (by name) or op type in float (repeatable)")
    qz.set_defaults(func=cmd_quantize)
    _backend_author_commands(sub)
    return p


# -- backend authoring: new-backend, conformance ------------------------------------------------------
def _backend_author_commands(sub):
    nb = sub.add_parser("new-backend", help="scaffold a backend plugin package (glow-backend-NAME)",
                        description="Write glow-backend-NAME/: a pip-installable backend package with its "
                        "entry point, a support predicate, the floor kernels stubbed (each raising "
                        "glow.KernelNotWrittenError), tests wired to the conformance kit and a README.")
    nb.add_argument("name", help="backend name: lower-case letters and digits, words joined by - or _")
    nb.add_argument("--dir", default=".", help="folder to create the package in (default: here)")
    nb.set_defaults(func=cmd_new_backend)

    cf = sub.add_parser("conformance", help="check a backend against the reference: support manifest, "
                        "pass table", description="Run the conformance kit on BACKEND: the op records of "
                        "every op it claims (by element type, against the reference), the ONNX node cases "
                        "it can run alone or with lowering, and the light models (partitioned with "
                        "--fallback where it cannot run them alone). Exit code 1 when a check fails.")
    which = cf.add_mutually_exclusive_group(required=True)
    which.add_argument("--backend", "-b", help="backend to check")
    which.add_argument("--all", action="store_true", help="check every available backend, one after another, "
                       "and end with one table of them all (ray, whose devices run other backends, is left out)")
    cf.add_argument("--sections", default="records,nodes,models",
                    help="comma-separated: records, nodes, models (default: all three)")
    cf.add_argument("--filter", default=None, metavar="REGEX", help="only checks whose id matches")
    cf.add_argument("--native", choices=["floor"], default=None, help="restrict the backend to the floor")
    cf.add_argument("--fallback", default="reference", metavar="DEVICE",
                    help="device for the nodes of a light model the backend cannot run ('none': skip "
                    "such models; default: reference)")
    cf.add_argument("--strict", action="store_true", help="no fallback device: a light model the backend "
                    "cannot run alone fails (instead of running partitioned with --fallback)")
    cf.add_argument("--known-failures", metavar="FILE", help="expected failures: 'check id  # reason' lines "
                    "(added to the backend's own list, Backend.known_failures, and glow's)")
    cf.add_argument("--jobs", "-j", type=int, default=1, help="run the checks in this many processes")
    cf.add_argument("--json", action="store_true", help="print the report as JSON")
    cf.set_defaults(func=cmd_conformance)


def cmd_new_backend(args) -> int:
    from .scaffold import new_backend

    written = new_backend(args.name, args.dir)
    root = os.path.commonpath(written)
    print(f"created {root}:")
    for path in written:
        print(f"  {os.path.relpath(path, root)}")
    print(f"next: pip install -e {root} && glow backends && (cd {root} && pytest --glow-sections records)")
    return 0


def cmd_conformance(args) -> int:
    from .testing.conformance import checkable_backends, read_known_failures
    from .testing.conformance_report import summary_table

    if args.jobs < 1:
        raise InputError("--jobs must be at least 1")
    if args.strict and args.fallback not in ("reference", "none"):
        raise InputError("--strict runs every model on the backend alone: no --fallback with it")
    known = read_known_failures(args.known_failures) if args.known_failures else None
    names, left_out = checkable_backends() if args.all else ([args.backend], {})
    reports = [_conformance_of(name, args, known) for name in names]
    if args.json:
        out = [r.to_json() for r in reports]
        print(json.dumps(out if args.all else out[0], indent=2))
    else:
        for r in reports:
            if args.all:
                print(f"== {r.backend}")
            print(r.to_text(), end="")
        if args.all:
            print("\nConformance of every available backend (passed/run; ops: claimed ops whose records all pass)")
            print(summary_table(reports, left_out), end="")
    return 0 if all(r.ok for r in reports) else 1


def _conformance_of(backend: str, args, known):
    from .progress import bar
    from .testing.conformance import run_conformance

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    checks = bar(None, f"conformance {backend}", unit="check")  # drawn only on a terminal

    def progress(done, total, check):
        checks.total = total
        checks.set_postfix_str(f"{check.section}/{check.id}"[:50])
        checks.update(1)

    with checks:
        return run_conformance(backend, sections=sections, pattern=args.filter, native=args.native,
                               fallback=None if args.fallback == "none" else args.fallback,
                               known_failures=known, progress=progress, jobs=args.jobs, strict=args.strict)


def _placement_args(p, required: bool):
    p.add_argument("--devices", "-d", required=required, default=None, metavar="DEV,DEV,...",
                   help="devices to partition over: logical devices from plugins.toml, backend names, "
                   "'backend:device', each optionally '@SIZE' (memory cap) and 'alias=' (e.g. "
                   "r0=reference@40MiB); the first is the primary device")
    p.add_argument("--device-config", metavar="FILE", default=None,
                   help="a TOML file whose [[devices]] (as in plugins.toml) add to the logical devices")
    p.add_argument("--pin", action="append", default=[], metavar="NODE_OR_OP=DEV",
                   help="run matching nodes (name, op, or glob over names) on DEV; repeatable")
    p.add_argument("--ban", action="append", default=[], metavar="NODE_OR_OP=DEV",
                   help="never run matching nodes on DEV; repeatable")
    p.add_argument("--strict", action="store_true", help="error (naming every node) instead of running "
                   "what the backend (or the primary device) cannot run on the host")
    p.add_argument("--objective", choices=["latency", "throughput", "priority"], default="latency",
                   help="latency: fastest single request; throughput: balanced pipeline stages; "
                   "priority: first listed device that can run each node (what peers do)")


def _placement_kwargs(args) -> dict:
    if args.device_config:
        from .plugins import add_device_config

        add_device_config(args.device_config)
    devices = [d.strip() for d in (args.devices or "").split(",") if d.strip()]
    if args.devices is not None and not devices:
        raise InputError("--devices: no device named")
    if not devices and (args.pin or args.ban):
        raise InputError("--pin and --ban need --devices")
    pins = dict(_pattern_pair(x, "--pin") for x in args.pin)
    bans: dict[str, list[str]] = {}
    for x in args.ban:
        k, v = _pattern_pair(x, "--ban")
        bans.setdefault(k, []).append(v)
    return {"devices": devices, "pins": pins, "bans": bans, "strict": args.strict,
            "objective": args.objective}


def _pattern_pair(text: str, flag: str) -> tuple[str, str]:
    pattern, sep, device = text.rpartition("=")
    if not sep or not pattern or not device:
        raise InputError(f"{flag} {text!r}: expected NODE_OR_OP=DEVICE")
    return pattern, device


def cmd_partition(args) -> int:
    from .partition import partition

    kw = _placement_kwargs(args)
    if args.report:
        check_writable(args.report, "placement report")
    placement = partition(args.model, kw.pop("devices"), **kw)
    if args.report:
        placement.write(args.report)
    if args.json:
        print(json.dumps(placement.to_json(), indent=2))
    else:
        print(placement.to_text(), end="")
    if args.report:
        print(f"wrote the placement report to {args.report}", file=sys.stderr)
    return 0


def cmd_bench(args) -> int:
    from .bench import bench, format_result

    if args.threads < 1 or args.rounds < 1:
        raise InputError("--threads and --rounds must be at least 1")
    r = bench(args.model, backend=args.backend, threads=args.threads, rounds=args.rounds,
              vs=args.vs, native=args.native, precision=args.precision)
    print(json.dumps(r.to_dict(), indent=2) if args.json else format_result(r))
    return 0


# -- run -------------------------------------------------------------------------------------------
def _precision(args) -> dict | None:
    """The backend options `--precision` asks for (None: the backend's default)."""
    return None if args.precision is None else {"precision": args.precision}


def cmd_run(args) -> int:
    from . import api
    from .inputs import make_inputs
    from .plugins import registry
    from .progress import Phases

    placement = _placement_kwargs(args)
    if args.backend and placement["devices"]:
        raise InputError("pass either --backend or --devices, not both")
    if args.threads is not None and args.threads < 1:
        raise InputError("--threads must be at least 1")
    if args.repeat < 1:
        raise InputError("--repeat must be at least 1")
    shapes = parse_shapes(args.shape)
    if shapes and args.inputs:
        raise InputError("--shape sets generated inputs; with --inputs the arrays' shapes count")
    saved = _is_saved(args.model)
    if saved and (args.backend or args.native or placement["devices"] or args.precision):
        raise InputError(f"{args.model} is a saved executable, compiled already: --backend, --native, "
                         "--precision and --devices apply to ONNX models")
    be_name = args.backend
    if args.backend:
        registry().get(args.backend)  # an unknown or unavailable backend fails before any work
    elif not placement["devices"] and not saved:
        be_name = registry().default().name
    if args.outputs:
        check_writable(args.outputs, "outputs")  # so does an output file that cannot be written
    with Phases(["import", "optimise", "lower", "compile"], desc="glow run") as ph:
        ph.start("import")
        t0 = time.perf_counter()
        exe = api.load(args.model, threads=args.threads) if saved else None  # nothing to compile
        if exe is None and not placement["devices"]:  # run before: no ONNX import (a second), no compile
            exe = api.cached(args.model, args.backend, native=args.native, threads=args.threads,
                             options=_precision(args))
        compile_s = time.perf_counter() - t0
        graph = exe.graph if exe is not None else api.as_graph(args.model)  # ONNX, or a torch.export .pt2
        if args.inputs:
            feeds = load_inputs(args.inputs, graph)
        else:
            dims = input_shapes(graph, shapes, warn=report)  # bad --shape before the long compile
            feeds = make_inputs(graph, args.seed, dims)
        t0 = time.perf_counter()
        if saved:
            be_name = f"{graph.meta['backend']} (loaded from {args.model})"
        elif exe is not None:
            pass  # from the executable cache (its stats say so below)
        elif placement["devices"]:
            exe = api.compile(graph, native=args.native, threads=args.threads, progress=ph.start,
                              options=_precision(args), **placement)
        else:
            exe = api.compile_imported(args.model, graph, backend=args.backend, native=args.native,
                                       threads=args.threads, progress=ph.start, cache=True,
                                       strict=placement["strict"], options=_precision(args))
        if not saved and "loaded" not in (getattr(exe, "stats", None) or {}):
            compile_s = time.perf_counter() - t0
    if placement["devices"]:
        print(f"partitioned over {', '.join(t.name for t in exe.placement.targets)}: "
              f"{len(exe.placement.partitions)} partition(s) (see `glow partition` for the report)")
        be_name = None
    cached = (getattr(exe, "stats", None) or {}).get("cached")
    loaded = (getattr(exe, "stats", None) or {}).get("loaded")
    how = ("" if cached is None else " (from the executable cache)" if loaded else " (from the object cache)"
           if cached else " (fresh: not in the object cache)")
    where = f"backend {be_name}" if be_name else f"devices {', '.join(t.name for t in exe.placement.targets)}"
    # said once the run worked: an error stays one line
    compiled = f"{where}; loaded in {compile_s:.3f} s" if saved else f"{where}; compiled in {compile_s:.3f} s{how}"
    # Symbolic dims: the code-generating backends compile for the shapes seen on the first run.
    first_note = "" if graph.is_static() else " (a first run with new shapes includes compiling for them)"
    times, outs = [], None
    for i in range(args.repeat):
        if i and not args.inputs:
            feeds = make_inputs(graph, args.seed + i, dims)
        t = time.perf_counter()
        got = exe.run(feeds)
        times.append(time.perf_counter() - t)
        # What is shown and saved is the first run's: the outputs of --inputs, or of --seed's inputs
        # (later runs draw fresh ones, only to be timed).
        outs = got if outs is None else outs
    report(compiled)
    if len(times) == 1:
        report(f"ran in {times[0] * 1e3:.3f} ms{first_note}")
    else:
        report(f"{len(times)} runs: median {statistics.median(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
               f"(first {times[0] * 1e3:.3f} ms){first_note}")
    for name, v in outs.items():
        print(f"{name}: {describe(v)}")
    if args.outputs:
        save_npz_atomic(args.outputs, outs)
        print(f"wrote {len(outs)} output(s) to {args.outputs}")
    return 0


def _is_saved(path: str) -> bool:
    """Whether `path` is a file `exe.save` wrote (glow.saved), by its first bytes."""
    from .saved import MAGIC

    if not os.path.isfile(path):  # a FIFO or device is never opened here: the model reader refuses it
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def report(line: str):
    """`glow run`'s timings and choices: stderr, so stdout stays the outputs' summary."""
    print(f"glow: {line}", file=sys.stderr)


def _version() -> str:
    from . import __version__  # the package's own: no distribution metadata to read (a second's scan)

    return __version__


# -- backends --------------------------------------------------------------------------------------
def cmd_backends(args) -> int:
    """Every backend found. Devices are probed (which may initialise a platform: PyOpenCL's,
    CUDA's; a second or more) only with --probe or --json; without, the list says what the cheap
    checks found (the plugin loads, its library is installed)."""
    from .backend import Backend
    from .plugins import registry

    reg = registry()
    probe = args.probe or args.json
    rows = []
    for name, rec in sorted(reg.records.items()):
        if probe:
            rec.probe()
        native = rec.backend.native_ops() if probe and rec.found else []
        rows.append({
            "name": name, "available": rec.found, "probed": rec.probed, "reason": rec.reason or None,
            "source": rec.source, "backend_api": rec.api, "api_note": rec.api_note or None,
            "devices": [{"id": d.id, "kind": d.kind, "memory_bytes": d.memory_bytes,
                         "peak_gflops": d.peak_gflops} for d in (rec.devices if probe else [])],
            "native_op_count": len(native), "native_ops": sorted(native),
            # glow.compile(options=...); not for an object discovery refused as no glow.Backend
            "options": dict(rec.backend.options or {}) if isinstance(rec.backend, Backend) else {},
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        status = "available" if r["available"] else f"unavailable: {r['reason']}"
        print(f"{r['name']:<12} {status}")
        if r["available"] and probe:
            print(f"{'':<12} devices: {', '.join(d['id'] for d in r['devices'])}; native ops: {r['native_op_count']}")
        if r["api_note"]:
            print(f"{'':<12} {r['api_note']}")
    if not probe and any(r["available"] for r in rows):
        print("(installed and loadable; `glow backends --probe` asks each for its devices and ops)")
    return 0


# -- compile ---------------------------------------------------------------------------------------
def cmd_compile(args) -> int:
    if args.profile and args.save:
        raise InputError("pass either --profile or --save, not both")
    if args.profile:
        return compile_profile(args)
    if args.save:
        return compile_save(args)
    if args.shape:
        raise InputError("--shape applies with --profile or --save")
    from . import flow
    from .onnx_import import load_onnx
    from .plugins import registry
    from .printer import format_graph, to_dot
    from .verify import verify_graph

    reg = registry()
    be = reg.get(args.backend) if args.backend else reg.default()
    imported = load_onnx(args.model)
    verify_graph(imported)
    graph = (flow.lower_for_backend(imported, be, args.native) if args.no_optimize
             else flow.optimize_for_backend(imported, be, args.native))
    summary = {"name": graph.name, "backend": be.name, "imported_nodes": len(imported.nodes),
               "nodes": len(graph.nodes), "ops": graph.op_counts(),
               "inputs": {v.name: str(v.type) for v in graph.inputs},
               "outputs": {v.name: str(v.type) for v in graph.outputs}}
    if args.dump in ("graph", "dot"):
        if args.dump == "dot":
            print(to_dot(graph), end="")
        elif args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(format_graph(graph))
        return 0
    from .ir import format_instr, format_ir, format_memory_plan, lower_to_ir

    program = lower_to_ir(graph, optimize=not args.no_optimize)
    fn, plan = program.fn, program.plan
    if args.json:
        out = {**summary, **plan.to_json()}
        if args.dump == "ir":
            out["instructions"] = [format_instr(i) for i in fn.instrs]
        print(json.dumps(out, indent=2))
    elif args.dump == "ir":
        print(format_ir(fn, plan))
    else:
        print(format_memory_plan(fn, plan))
    return 0


def compile_save(args) -> int:
    """`glow compile MODEL --save FILE`: compile as `glow run` does and write the executable. A
    model with symbolic dims is first made static for --shape (1 where not given)."""
    from . import api
    from .inputs import make_inputs
    from .onnx_import import load_onnx
    from .specialize import specialize

    if args.dump != "graph" or args.no_optimize or args.json:
        raise InputError("--save compiles as `glow run` does: no --dump, --json or --no-optimize with it")
    check_writable(args.save, "saved executable")
    graph = load_onnx(args.model)
    shapes = parse_shapes(args.shape)
    if shapes or not graph.is_static():
        graph, _ = specialize(graph, make_inputs(graph, 0, input_shapes(graph, shapes, warn=report)))
    t0 = time.perf_counter()
    exe = api.compile(graph, backend=args.backend, native=args.native)
    compile_s = time.perf_counter() - t0
    exe.save(args.save)
    report(f"compiled in {compile_s:.3f} s; saved to {args.save} ({os.path.getsize(args.save)} bytes)")
    return 0


def cmd_bundle(args) -> int:
    from .inputs import make_inputs
    from .onnx_import import load_onnx
    from .plugins import registry
    from .specialize import specialize

    be = registry().get("cpu")
    graph = load_onnx(args.model)
    shapes = parse_shapes(args.shape)
    if shapes or not graph.is_static():
        graph, _ = specialize(graph, make_inputs(graph, 0, input_shapes(graph, shapes, warn=report)))
    info = be.bundle(graph, args.output, name=args.name, target=args.target, cpu=args.cpu,
                     weights_c=args.weights_c, native=args.native)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        t = info["target"]
        print(f"wrote {', '.join(os.path.join(args.output, f) for f in info['files'])}")
        print(f"target {t['triple']} ({t['cpu']}); constant weights {info['constant_weights_bytes']} B, "
              f"mutable {info['mutable_weights_bytes']} B, activations {info['activations_bytes']} B; "
              f"the object calls {', '.join(info['external']) or 'nothing'}")
    return 0


def cmd_quantize(args) -> int:
    import numpy as np

    if args.weights:
        return _quantize_weights(args)
    from .quantizer import quantize

    check_writable(args.output, "quantized model")
    reuse = args.profile if args.profile and os.path.exists(args.profile) else None
    calibration = None
    if reuse is None:
        if not args.calibration:
            raise InputError("--calibration NPZ is needed (or --profile FILE naming a saved profile)")
        try:
            with np.load(args.calibration, allow_pickle=False) as data:
                calibration = {k: data[k] for k in data.files}
        except (OSError, ValueError) as e:
            raise InputError(f"{args.calibration}: cannot read the calibration data: {e}") from None
    t = time.perf_counter()
    qmodel = quantize(args.model, calibration, profile=reuse, schema=args.schema, calibrate=args.calibrate,
                      percentile=args.percentile, per_channel=not args.per_tensor, keep=args.keep,
                      save_profile=None if reuse or not args.profile else args.profile,
                      reduce_range=args.reduce_range)
    write_atomic(args.output, lambda f: f.write(qmodel.SerializeToString()), what="quantized model")
    qdq = sum(n.op_type == "QuantizeLinear" for n in qmodel.graph.node)
    print(f"wrote {args.output}: {qdq} quantized tensors, {args.schema} {args.calibrate}"
          f"{' from the saved profile ' + reuse if reuse else ''} ({time.perf_counter() - t:.2f} s)")
    return 0


def _quantize_weights(args) -> int:
    from .weight_quant import quantize_weights_to

    if args.calibration or args.profile or args.reduce_range:
        raise InputError("--weights quantizes weights only: --calibration, --profile and --reduce-range do not apply")
    t = time.perf_counter()
    counts = quantize_weights_to(args.model, args.output, bits=int(args.weights[3:]), block_size=args.block,
                                 symmetric=args.sym, skip=[p.strip() for p in args.skip.split(",") if p.strip()],
                                 accuracy_level=args.accuracy_level)
    done = ", ".join(f"{f}: {n} MatMuls" for f, n in counts.items())
    print(f"wrote {args.output}: {done} as MatMulNBits, {args.weights} in blocks of {args.block}, "
          f"{'symmetric' if args.sym else 'asymmetric'} ({time.perf_counter() - t:.2f} s)")
    return 0


def compile_profile(args) -> int:
    """`glow compile MODEL --profile`: compile as `glow run` does and print seconds by phase:
    import, optimise, lower (timed here), then the backend's own (its executable's stats: on cpu
    ir, codegen, llvm, load) and the slowest kernels."""
    from . import api
    from .inputs import make_inputs
    from .onnx_import import load_onnx
    from .plugins import registry

    if args.dump != "graph" or args.no_optimize:
        raise InputError("--profile compiles as `glow run` does: no --dump or --no-optimize with it")
    shapes = parse_shapes(args.shape)
    be = registry().get(args.backend) if args.backend else registry().default()
    times: dict[str, float] = {}
    mark = [None, time.perf_counter()]

    def phase(name):
        now = time.perf_counter()
        if mark[0] is not None:
            times[mark[0]] = times.get(mark[0], 0.0) + now - mark[1]
        mark[0], mark[1] = name, now

    phase("import")
    graph = load_onnx(args.model)
    dims = input_shapes(graph, shapes, warn=report) if shapes or not graph.is_static() else None
    exe = api.compile(graph, backend=be.name, native=args.native, progress=phase)
    if not graph.is_static() or "compiles" in (getattr(exe, "stats", None) or {}):
        phase("compile")  # a specialising executable compiles for the first input shapes
        exe.run(make_inputs(graph, 0, dims))
    phase(None)
    stats = dict(getattr(exe, "stats", None) or {})
    backend_phases = [(k[:-2], stats[k]) for k in ("ir_s", "codegen_s", "llvm_s", "load_s") if k in stats]
    if backend_phases:  # the backend's breakdown of its compile phase; "other": specialising
        rest = times.pop("compile", 0.0) - sum(s for _, s in backend_phases)
        times.update(backend_phases)
        if rest > 0.0005:
            times["other"] = rest
    out = {"model": args.model, "backend": be.name, "seconds": times, "total_s": sum(times.values()),
           **{k: stats[k] for k in ("llvm_parse_s", "llvm_opt_s", "llvm_emit_s", "objects", "objects_compiled",
                                   "objects_cached", "slowest_kernels") if k in stats}}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"compile profile: {args.model} on backend {be.name}")
    for name, s in times.items():
        print(f"  {name:9s} {s:8.3f} s")
    print(f"  {'total':9s} {out['total_s']:8.3f} s")
    if "objects" in stats:
        print(f"llvm: {stats['objects_compiled']} of {stats['objects']} objects compiled, "
              f"{stats['objects_cached']} from the cache; summed over threads: parse "
              f"{stats['llvm_parse_s']:.3f} s, optimise {stats['llvm_opt_s']:.3f} s, "
              f"emit {stats['llvm_emit_s']:.3f} s")
    if stats.get("slowest_kernels"):
        print("slowest kernels (LLVM seconds, kernel, functions merged, first instruction and its shapes):")
        for k in stats["slowest_kernels"]:
            first = k["instrs"][0] if k["instrs"] else {"node": "?", "shapes": ""}
            print(f"  {k['llvm_s']:7.3f}  {k['kernel']:14s} x{k['functions']}  {first['node']}: {first['shapes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
