"""The public entry points: load, compile, list backends."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .backend import CompileOptions, Executable
from .errors import BackendError, GlowError, InputError, ModelLoadError, internal_errors
from .plugins import registry

if TYPE_CHECKING:
    from .graph import Graph

# The compile flow (and with it the op table) is imported where a compile starts: `glow run` of a
# model in the executable cache, and glow.load, need neither.


def available_backends() -> list[str]:
    """Names of the backends that can run here (see `glow backends` for the others and why)."""
    return registry().available()


def as_graph(model) -> Graph:
    from .graph import Graph

    if isinstance(model, Graph):
        return model
    # torch (seconds to import) is only looked at if the caller has loaded it: an ExportedProgram means it is
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.export.ExportedProgram):
        from .torch.export import import_exported

        return import_exported(model)
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(".pt2"):
        return load_pt2(model)
    # onnx (over a second to import) loads only with a model to read; a ModelProto means it is loaded
    onnx = sys.modules.get("onnx")
    if isinstance(model, (str, os.PathLike, bytes)) or (onnx is not None and isinstance(model, onnx.ModelProto)):
        from .onnx_import import load_onnx

        return load_onnx(model)
    raise TypeError(f"expected a Graph, an ONNX ModelProto, a torch.export.ExportedProgram or a path, "
                    f"got {type(model).__name__}")


def load_pt2(path) -> Graph:
    """A torch.export `.pt2` file as a Graph; needs torch (the `[torch]` extra)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ModelLoadError(f"{os.fspath(path)}: a torch.export program; reading it needs torch "
                             "(pip install glow-compiler[torch])") from None
    from .torch.export import load_pt2 as load

    return load(path)


def load(path, *, threads: int | None = None) -> Executable:
    """An executable saved with `exe.save(path)`, ready to run without compiling. A file from
    another glow build, or compiled for another CPU or instruction-set level, is refused with a
    one-line error. The file holds machine code: load only files you trust (glow.saved)."""
    from .saved import load as load_saved

    with internal_errors(f"loading saved executable {path}"):
        return load_saved(path, threads=threads)


def compile(model, backend: str | None = None, *, native: str | None = None,
            threads: int | None = None, devices=None, optimize: bool = True, pins=None, bans=None,
            strict: bool = False, objective: str = "latency", progress=None,
            options: dict | None = None, cache: bool = False, replicas: int = 1,
            precision: str | None = None) -> Executable:
    """Compile a model (Graph, ModelProto or path) for a backend; returns an executable.

    `cache=True`: open the executable an earlier compile of the same model file with the same
    settings saved, if there is one, else compile and save it (glow.compile_cache: cpu
    executables of static graphs; the loaded one's `graph` is the interface only).

    `options` are the backend's own (`Backend.options` lists them; `glow backends --json` too),
    e.g. `options={"isa": "avx2"}` for cpu: code for a lower instruction-set level than the host's.

    `precision="bf16"` (the cpu backend's option of that name; $GLOW_PRECISION): matrix products
    and convolutions with constant weights round their operands to bfloat16 and accumulate in
    float32 (AVX512-BF16's vdpbf16ps where the CPU has it, the same bits emulated elsewhere);
    everything else stays float32. "fp32" (the default) is exact float32.

    `native="floor"` restricts the backend to the primitive floor (everything else is lowered).
    `optimize=False` skips the graph optimiser (and the backend's fusions): the graph is only lowered.

    Nodes the backend cannot run (no kernel and no lowering to its ops: NonZero, strings), at
    compile time or for the shapes a run brings, run on the host (the `reference` interpreter)
    as partitions of their own: one `glow.GlowWarning` line says which, and the executable's
    `.placement` says what runs where and why (glow.partition.host). `strict=True` refuses
    instead, with a LoweringError naming every op.

    `devices=[...]` (logical device names, backend names, glow.Device objects; see
    glow.partition) partitions the model over those devices and returns one executable running
    the partitions together (`.placement` says what runs where and why). `pins` ({node name, op
    or glob: device}), `bans` ({pattern: device or [devices]}), `strict` (error instead of
    falling back from the first device) and `objective` ("latency" or "throughput") steer it.
    `replicas=N` (with `devices=`) compiles N copies behind one load-balanced `submit`; with ray
    devices ("ray:cpu", "ray:cpu/NODE_RESOURCE"; docs/distributed.md) each copy has its own actors.

    `progress`, a callable, is called with each phase's name as it starts: "optimise", "lower",
    "compile" (for `devices=`, one "partition" phase); the CLI draws these on a terminal.
    """
    if precision is not None:
        options = {**(options or {}), "precision": precision}
    return compile_imported(model, None, backend, native=native, threads=threads, devices=devices,
                            optimize=optimize, pins=pins, bans=bans, strict=strict, objective=objective,
                            progress=progress, options=options, cache=cache, replicas=replicas)


def compile_imported(model, graph: Graph | None, backend: str | None = None, *, native=None, threads=None,
                     devices=None, optimize=True, pins=None, bans=None, strict=False, objective="latency",
                     progress=None, options=None, cache=False, replicas=1) -> Executable:
    """`compile`, where `graph` (if not None) is `model` already imported (`glow run` has it for
    its inputs): a miss of the executable cache, keyed by `model`, does not import it again."""
    key = None
    if cache and not devices:
        key, exe = _cache_lookup(model, backend, native=native, threads=threads, optimize=optimize,
                                 options=options)
        if exe is not None:
            return exe
    if graph is None and not devices:
        _warm_up(backend)
    graph = graph if graph is not None else as_graph(model)
    what = f"compiling graph '{graph.name}' for " + (f"devices {devices}" if devices else
                                                     f"backend '{backend or 'default'}'")
    from .flow import compiling

    with internal_errors(what), compiling():  # a non-GlowError from here on is a glow bug
        exe = _compile(graph, backend, native=native, threads=threads, devices=devices,
                       optimize=optimize, pins=pins, bans=bans, strict=strict, objective=objective,
                       phase=progress or (lambda name: None), options=options or {}, replicas=replicas)
        if key is not None:
            from . import compile_cache

            compile_cache.store(key, exe)
    return exe


def cached(model, backend: str | None = None, *, native=None, threads=None, optimize=True,
           options=None) -> Executable | None:
    """The executable `compile(model, backend, ..., cache=True)` would open from the executable
    cache without compiling (or importing the model), or None. `glow run` asks first, so that a
    model it ran before does not pay for importing ONNX (a second) to run again."""
    return _cache_lookup(model, backend, native=native, threads=threads, optimize=optimize, options=options)[1]


def _cache_lookup(model, backend, *, native, threads, optimize, options):
    """(the cache key of the compile, or None when it cannot be cached; the cached executable or None)."""
    from . import compile_cache

    compile_cache.limit_bytes()  # a bad GLOW_EXE_CACHE_MB fails now, not after the compile
    be_name = registry().get(backend).name if backend else registry().default().name
    key = compile_cache.key(model, be_name, {"native": native, "threads": threads, "optimize": optimize,
                                             "options": options or {}})
    return key, (None if key is None else compile_cache.lookup(key, threads))


def _warm_up(backend: str | None) -> None:
    """The backend's `warm_up` before the model is read, so a device compiler's start-up overlaps
    the import too (ResNet-50's takes 0.3 s). Errors are the compile's to say."""
    try:
        reg = registry()
        be = reg.get(backend) if backend else reg.default()
    except GlowError:
        return
    be.warm_up(None)


def _compile(graph, backend, *, native, threads, devices, optimize, pins, bans, strict,
             objective, phase, options, replicas=1) -> Executable:
    if native not in (None, "floor", "all"):
        raise BackendError(f"unknown --native set '{native}' (expected 'floor' or 'all')")
    if devices:
        if backend is not None:
            raise BackendError("pass either backend= or devices=, not both")
        if options:
            raise InputError("options= apply to one backend (backend=...), not to devices=[...]")
        from .partition import compile_partitioned

        phase("partition")
        return compile_partitioned(graph, devices, pins=pins, bans=bans, strict=strict,
                                   objective=objective, native=native, threads=threads,
                                   optimize=optimize, replicas=replicas)
    if replicas != 1:
        raise BackendError("replicas= applies to devices=[...] (e.g. devices=['ray:cpu'], replicas=2)")
    if pins or bans:
        raise BackendError("pins and bans apply to multi-device compilation (devices=[...])")
    reg = registry()
    be = reg.get(backend) if backend else reg.default()
    unknown = sorted(set(options) - set(be.options))
    if unknown:
        known = ", ".join(sorted(be.options)) or "none"
        raise InputError(f"backend '{be.name}' has no option '{unknown[0]}' (its options: {known})")
    from .flow import compile_for_backend

    return compile_for_backend(graph, be, CompileOptions(native=native, threads=threads, strict=strict,
                                                         backend_options=dict(options)),
                               optimize=optimize, phase=phase)
