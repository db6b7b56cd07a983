"""The CPU backend: native code through LLVM (llvmlite) for the host CPU, all cores.

    supports(node)    the kernel table's predicates (codegen.KERNELS), over types and attributes;
                      everything else is lowered by the core toward the primitive floor
    fusions()         elementwise chains, and activations into the kernels that take epilogues
    transform_graph   layout changes (layout.py, e.g. NHWC convolutions) when present
    compile()         runtime.CpuExecutable: one LLVM module per (static) graph, compiled on
                      first need and cached on disk; dynamic graphs are specialised per input
                      signature at run time
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import TYPE_CHECKING

from glow.backend import BACKEND_API, Backend, CompileOptions, Device, Executable
from glow.errors import BackendError

if TYPE_CHECKING:
    from glow import Graph

# NumPy, the op table, lowering and the code generator are imported where used: discovery
# (`glow backends`, the default backend's choice) loads this module and should cost next to nothing.


def _kernels() -> dict:
    """The kernel table (codegen.KERNELS, every kernel module imported): on first need, so that
    loading the backend (glow.load, `glow backends`) does not import the code generator."""
    from . import codegen

    return codegen.load_kernels()

def boxed_types() -> tuple:
    """Element types no CPU kernel holds (strings and complex numbers are moved only)."""
    from glow import dtypes as dt

    return (dt.string, dt.complex64, dt.complex128)


def _deferred(node) -> bool:
    """glow.specialize's deferral rule, with this backend's code: a kernel or a lowering rule."""
    from glow.lowering import rule_for
    from glow.specialize import deferrable

    has_code = ((node.op.domain, node.op.name) in _kernels()
                or rule_for(node.op.name, node.op.domain) is not None)
    return deferrable(node, has_code)


def _plain_node(node) -> bool:
    if node.captures or node.op.has_subgraphs:
        return False
    return all(_plain(v.type) for v in node.outputs + node.inputs if v is not None)


def _plain(t) -> bool:
    from glow import dtypes as dt

    return isinstance(t, dt.TensorType) and t.dtype not in boxed_types() and not isinstance(
        t.dtype, dt.QuantizedDType)


class CpuBackend(Backend):
    name = "cpu"
    api_version = BACKEND_API
    priority = 10  # below cuda, above opencl and reference: native code on every core
    description = "native code for this CPU through LLVM (llvmlite): one module per model, all cores"
    options = {"isa": "instruction-set level to make code for: avx512, avx2 or generic, at most the "
                      "host's (default: the host's, or $GLOW_CPU_ISA)",
               "precision": "fp32 or bf16: matrix products and convolutions with constant weights take "
                            "bfloat16 operands and accumulate in float32 (default: fp32, or $GLOW_PRECISION)"}

    def check_available(self) -> None:
        import platform
        import sys

        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            # The generated code spins with x86's pause and sleeps with the Linux futex syscall.
            raise BackendError(f"the cpu backend generates x86-64 Linux code; this is "
                               f"{platform.machine()} {sys.platform}")
        import importlib.util

        if importlib.util.find_spec("llvmlite") is None:
            raise BackendError("llvmlite is not installed (pip install llvmlite)")
        # Whether LLVM can target this CPU is asked by devices(), when first needed: loading LLVM
        # costs a tenth of a second that `glow backends` and --version need not pay.

    specialises_shapes = True  # one program per input signature for dynamic graphs

    # -- what runs natively ----------------------------------------------------------------------
    #: Leave nodes that specialisation will settle for later (off for specialised graphs).
    defer = True

    def supports(self, node) -> bool:
        return self.runs_now(node) or (self.defer and _plain_node(node) and _deferred(node))

    def defers(self, node) -> bool:
        return self.defer and not self.runs_now(node) and _plain_node(node) and _deferred(node)

    def specialised(self) -> CpuBackend:
        """This backend for graphs already specialised: nothing is deferred any more."""
        b = copy.copy(self)
        b.defer = False
        return b

    def runs_now(self, node) -> bool:
        """Whether a kernel takes `node` as it is (no specialisation needed)."""
        from glow.passes.fusion import FUSED_OPS

        if node.op in FUSED_OPS:  # made for this backend by its own fusions
            return True
        if not _plain_node(node):
            return False
        kd = _kernels().get((node.op.domain, node.op.name))
        return kd is not None and kd.accepts(node)

    def native_ops(self) -> list[str]:
        return sorted({op for _, op in _kernels()})

    def fusions(self):
        from glow.ops import get_op
        from glow.ops.registry import EPILOGUE_PRODUCER
        from glow.passes.fusion import FuseActivation, FuseElementwise

        from .kernels.elementwise import emits

        producers = frozenset(op for (dom, op), kd in _kernels().items()
                              if get_op(op, dom).in_group(EPILOGUE_PRODUCER) and any(k.epilogue for k in kd.variants()))
        # Only what the expression emitter computes goes into a fused body: `supports` also
        # accepts nodes deferred to run time, which have no code yet.
        from .kernels.int8_conv import epilogue_fits

        ew = FuseElementwise(accepts=emits)
        return [ew, FuseActivation(producers, accepts=emits, epilogue_ok=epilogue_fits)] if producers else [ew]

    def transform_graph(self, graph: Graph) -> Graph:
        try:
            from . import gated, layout
        except ImportError:
            return graph
        transform = getattr(layout, "transform_graph", None)
        graph = gated.transform_graph(graph)
        return graph if transform is None else transform(graph)

    # -- compiling -------------------------------------------------------------------------------
    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        """One native program for a static graph; a glow.flow.SpecializingExecutable (one program
        per input signature) for a graph with dynamic shapes or deferred nodes."""
        from glow.flow import SpecializingExecutable

        from . import codegen, jit
        from .runtime import CpuExecutable, NativeProgram

        threads = options.threads or default_threads()
        device = None if options.device is None else options.device.id  # whose thread pool
        isa = options.backend_options.get("isa")
        precision = options.backend_options.get("precision")
        with jit.level(isa), jit.precision(precision):  # a bad value fails now, not on a first run
            pass

        def compile_static(g: Graph) -> Executable:
            # also for the programs a specialising executable makes later
            with jit.level(isa), jit.precision(precision):
                return CpuExecutable(g, NativeProgram(g, threads, device))

        static = self.specialised()
        if graph.is_static() and all(self.runs_now(n) for n in graph.nodes):
            try:
                return compile_static(graph)
            except codegen.NeedsConstant:  # a kernel argument fed as an input: specialise on values
                return SpecializingExecutable(graph, static, compile_static, options, all_values=True)
        return SpecializingExecutable(graph, static, compile_static, options)

    def load_saved(self, graph: Graph, state: dict, sections: dict, options: CompileOptions,
                   where: str) -> Executable:
        """A CpuExecutable saved by `exe.save` (glow.load): refused unless its code runs on this
        CPU (jit.check_target), then loaded without compiling."""
        from . import jit
        from .runtime import CpuExecutable, NativeProgram

        jit.check_target(state.get("target") or {}, where)
        threads = options.threads or default_threads()
        device = None if options.device is None else options.device.id
        return CpuExecutable(graph, NativeProgram.restore(state, sections, threads, device, where))

    def bundle(self, graph: Graph, out_dir: str, *, name: str = "net", target: str | None = None,
               cpu: str | None = None, weights_c: bool = False, native: str | None = None) -> dict:
        """An ahead-of-time bundle (bundle.py) of a graph with static shapes: optimised and
        lowered as for a compile, then generated with a serial entry for the target."""
        from glow.flow import optimize_for_backend

        from . import bundle

        static = self.specialised()
        g = optimize_for_backend(graph, static, native)
        left = sorted({n.op.name for n in g.nodes if not static.runs_now(n)})
        if left or not g.is_static():
            raise BackendError(f"graph '{graph.name}' cannot be bundled: " + (
                f"no cpu kernel for {', '.join(left)}" if left else "shapes are not static (give --shape)"))
        return bundle.write(g, out_dir, name, target, cpu, weights_c)

    def devices(self) -> list[Device]:
        try:
            from . import jit

            jit.check_host()
        except Exception as e:  # noqa: BLE001 - the reason is what `glow backends --probe` shows
            raise BackendError(f"llvmlite cannot target this CPU: {e}") from e
        try:
            f = host_figures()
        except BackendError as e:  # a bad GLOW_CPU_ISA: said when compiling, not "unavailable"
            return [Device(self.name, "0", kind="cpu", extra={"threads": _threads_or_none(), "error": str(e)})]
        return [Device(self.name, "0", kind="cpu", peak_gflops=f["peak_gflops"],
                       mem_bandwidth_gbs=f["bandwidth_gbs"], transfer_gbs=f["bandwidth_gbs"],
                       extra={"threads": _threads_or_none(), "cpu": f["cpu"]})]  # no kernel table:
        # listing devices must not import every kernel (glow.load, `glow backends` ask for it)


def _threads_or_none() -> int | None:
    try:
        return default_threads()
    except BackendError:  # a bad GLOW_CPU_THREADS: said when compiling
        return None


def default_threads() -> int:
    """All cores this process may run on ($GLOW_CPU_THREADS overrides)."""
    env = os.environ.get("GLOW_CPU_THREADS")
    if env:
        if not env.strip().isdigit() or int(env) < 1:
            # loud at compile time, not a reason to call the backend unavailable (which would make
            # the default quietly another backend)
            raise BackendError(f"GLOW_CPU_THREADS must be a positive integer, got {env!r}")
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# -- measured device figures --------------------------------------------------------------------

_figures: dict | None = None


def host_figures() -> dict:
    """Peak GFLOP/s (all cores, a register-blocked FMA loop) and copy bandwidth, measured once
    per machine and remembered in the cache directory."""
    global _figures
    if _figures is not None:
        return _figures
    from . import jit

    host = jit.host_description()
    path = None if jit.cache_dir() is None else os.path.join(jit.cache_dir(), "cpu", "device.json")
    try:
        with open(path) as f:
            saved = json.load(f)
        if saved.get("host") == host:
            _figures = saved
            return saved
    except (OSError, TypeError, ValueError):
        pass
    _figures = {"host": host, "cpu": host.split()[1], "peak_gflops": round(_measure_peak(), 1),
                "bandwidth_gbs": round(_measure_bandwidth(), 1)}
    if path:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump(_figures, f)
        except OSError:
            pass
    return _figures


def _measure_bandwidth() -> float:
    import numpy as np

    a = np.ones(1 << 23, np.float32)  # 32 MiB
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best / 1e9


def _measure_peak() -> float:
    """FLOP/s of 28 independent FMA chains on 16 lanes, on every thread at once."""
    import ctypes

    import llvmlite.binding as llvm
    import llvmlite.ir as ir
    import numpy as np

    from . import jit
    from .irutil import I64, PTR, KernelBuilder, vec
    from .pool import get_pool

    mod = ir.Module("peak")
    mod.triple = llvm.get_process_triple()
    kb = KernelBuilder(mod, "peak", [PTR, I64, I64])
    out, iters = kb.args[0], 1 << 17
    accs = [kb.var(vec(), ir.Constant(vec(), [float(k)] * 16)) for k in range(28)]
    x = kb.b.load(out, typ=vec(), align=4)
    with kb.loop(0, iters):
        for a in accs:
            kb.b.store(kb.fma(kb.b.load(a), x, x), a)
    total = kb.b.load(accs[0])
    for a in accs[1:]:
        total = kb.b.fadd(total, kb.b.load(a))
    kb.b.store(total, out, align=4)
    kb.finish()
    cm = jit.CompiledModule(str(mod))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(cm.address("peak"))
    n = default_threads()
    bufs = np.full((n, 64), 0.5, np.float32)

    def run(ctx, tid, nth):
        fn(bufs[tid].ctypes.data, tid, nth)

    pool = get_pool(n)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(20):
            pool.run(run, None)
        best = min(best, time.perf_counter() - t)
    return 20 * n * iters * 28 * 16 * 2 / best / 1e9
