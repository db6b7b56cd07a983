"""LLVM JIT for the CPU backend: host target machine, O3 pipeline, on-disk object cache.

A program's module is compiled as one object per distinct kernel plus one for the entry
(linking.split_module), on a thread pool (each object on an LLVM context of its own, outside
llvmlite's process-wide lock: `_PrivateLock`), and the objects are loaded into one engine. Each
object is cached on disk keyed by its own IR text, the host CPU name and features, the llvmlite
version and PIPELINE: identical kernels compile once, a new input shape recompiles only the
kernels whose shapes changed, and models share the kernels they have in common. Every object
file, fresh or cached, is checked before it is loaded to call nothing outside itself but the
functions glow binds by address and the kernels its sibling objects define (linking.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm
from glow.fileio import cache_dir

from . import halfrt, linking

_lock = threading.Lock()
_initialized = False


def _initialize() -> None:
    """LLVM's targets and assembly printers, once per process (all of them: bundles are made for
    other targets too)."""
    global _initialized
    with _lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _install_private_lock()
            _initialized = True


class _PrivateLock:
    """Stands in for the lock llvmlite takes around every call into LLVM, so that a thread
    compiling a module on an LLVM context, target machine and pass builder of its own (see
    `compile_object`) does not take it: LLVM compiles in separate contexts concurrently (what
    its own multi-threaded JITs do), but one process-wide lock made the compile pool run one
    object at a time. Every other thread, and everything on the global context (the execution
    engine, numba), still takes the real lock."""

    def __init__(self, real):
        self.real = real
        self.mine = threading.local()

    def acquire(self, *args, **kwargs):
        return True if getattr(self.mine, "private", False) else self.real.acquire(*args, **kwargs)

    def release(self):
        if not getattr(self.mine, "private", False):
            self.real.release()

    def __enter__(self):  # as the RLock it replaces, for anyone using it directly
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


_private_lock: _PrivateLock | None = None


def _install_private_lock() -> None:
    # llvmlite keeps an RLock at lib._lock._lock (ffi.py, every version since 0.38); where it
    # does not, the pool simply stays serialised, as before.
    global _private_lock
    holder = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
    real = getattr(holder, "_lock", None)
    if real is not None and hasattr(real, "acquire") and hasattr(real, "release"):
        _private_lock = _PrivateLock(real)
        holder._lock = _private_lock


@contextlib.contextmanager
def _private_llvm():
    """LLVM calls in this block skip llvmlite's process-wide lock: they may only touch objects
    made in the block (a context, target machine, module and pass builder of the thread's own)."""
    mine = _private_lock.mine if _private_lock is not None else None
    if mine is None:
        yield
        return
    mine.private = True
    try:
        yield
    finally:
        mine.private = False


#: A target other than the host's, while a bundle is compiled for it (`for_target`).
_TARGET: contextvars.ContextVar[dict | None] = contextvars.ContextVar("glow_cpu_target", default=None)


@contextlib.contextmanager
def for_target(triple: str, cpu: str, features: str, level: str):
    """Code made inside is for this target (an ahead-of-time bundle, bundle.py), not the host:
    `isa()`, `cpu_name()`, `host_features()` and `target_machine()` answer for it."""
    token = _TARGET.set({"triple": triple, "cpu": cpu, "features": features, "isa": level})
    try:
        yield
    finally:
        _TARGET.reset(token)


def target_machine(opt: int = 3):
    """A new target machine for the host (e.g. znver5 with AVX-512); `opt`: the code
    generator's optimisation level (0: fast instruction selection).

    A new one per module: an MCJIT execution engine takes ownership of its target machine and
    frees it with itself, so sharing one between engines would leave the others dangling.
    """
    _initialize()
    other = _TARGET.get()
    if other is not None:  # a bundle: position-independent code for a static link
        return llvm.Target.from_triple(other["triple"]).create_target_machine(
            cpu=other["cpu"], features=other["features"], opt=opt, reloc="pic", codemodel="default")
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu_name(), features=host_features(),
                                        opt=opt, reloc="default", codemodel="jitdefault")


def check_host() -> None:
    """Raise unless llvmlite can make code for this CPU (what `glow backends` reports); unlike
    `target_machine`, independent of $GLOW_CPU_ISA, whose bad value is an error when compiling."""
    _initialize()
    llvm.Target.from_default_triple().create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                            features=llvm.get_host_cpu_features().flatten())


#: The instruction-set levels glow's code is made for, richest first.
ISAS = ("avx512", "avx2", "generic")
#: Features an `avx2` build turns off on a richer host (each implies AVX-512 registers).
_WIDER_THAN_AVX2 = ("+avx512", "+avx10", "+amx", "+evex512")


@functools.cache
def _host_features_raw() -> str:
    # asking LLVM costs ~5 ms (it reads /proc/cpuinfo), and every kernel's cache key asks
    return llvm.get_host_cpu_features().flatten()


def host_isa() -> str:
    """The richest level this CPU runs: avx512 (F, BW, DQ, VL), avx2 (with FMA) or generic."""
    f = set(_host_features_raw().split(","))
    if {"+avx512f", "+avx512bw", "+avx512dq", "+avx512vl"} <= f:
        return "avx512"
    return "avx2" if {"+avx2", "+fma"} <= f else "generic"


#: The level a compile option asked for (`glow.compile(..., options={"isa": ...})`), while that
#: executable's code is made (`level`).
_LEVEL: contextvars.ContextVar[str | None] = contextvars.ContextVar("glow_cpu_isa", default=None)


@contextlib.contextmanager
def level(name: str | None):
    """Code made inside is for this instruction-set level (the compile option `isa`; it wins over
    $GLOW_CPU_ISA). None: no change. A level the host cannot execute is an InputError."""
    if name is None:
        yield
        return
    from glow.errors import InputError

    _check_level(str(name).strip().lower(), "compile option isa", InputError)
    token = _LEVEL.set(str(name).strip().lower())
    try:
        yield
    finally:
        _LEVEL.reset(token)


def _check_level(want: str, where: str, error) -> str:
    host = host_isa()
    if want not in ISAS:
        raise error(f"{where} must be one of {', '.join(ISAS)}, got {want!r}")
    if ISAS.index(want) < ISAS.index(host):
        raise error(f"{where}={want}: this CPU ({llvm.get_host_cpu_name()}) runs at most {host}")
    return want


def isa() -> str:
    """The level the code is made for: the compile option `isa` (`level`), else $GLOW_CPU_ISA
    (avx512, avx2 or generic: a lower level than the host's, so every path runs and is tested on
    one machine), else the host's own. A level the host cannot execute is a BackendError."""
    if _TARGET.get() is not None:
        return _TARGET.get()["isa"]
    if _LEVEL.get() is not None:
        return _LEVEL.get()
    want = os.environ.get("GLOW_CPU_ISA", "").strip().lower()
    if not want:
        return host_isa()
    from glow.errors import BackendError

    return _check_level(want, "GLOW_CPU_ISA", BackendError)


#: Arithmetic precisions of matrix products and convolutions (the compile option `precision`).
PRECISIONS = ("fp32", "bf16")
_PRECISION: contextvars.ContextVar[str | None] = contextvars.ContextVar("glow_cpu_precision", default=None)


@contextlib.contextmanager
def precision(name: str | None):
    """Code made inside multiplies matrices at this precision (the compile option `precision`; it
    wins over $GLOW_PRECISION). None: no change. An unknown name is an InputError."""
    if name is None:
        yield
        return
    from glow.errors import InputError

    token = _PRECISION.set(_check_precision(name, "compile option precision", InputError))
    try:
        yield
    finally:
        _PRECISION.reset(token)


def _check_precision(name, where: str, error) -> str:
    want = str(name).strip().lower()
    if want not in PRECISIONS:
        raise error(f"{where} must be one of {', '.join(PRECISIONS)}, got {name!r}")
    return want


def bf16() -> bool:
    """Whether matrix products and convolutions with constant weights take bfloat16 operands
    (rounded to nearest even) and accumulate in float32: the compile option `precision`, else
    $GLOW_PRECISION; float32 by default."""
    if _PRECISION.get() is not None:
        return _PRECISION.get() == "bf16"
    want = os.environ.get("GLOW_PRECISION", "").strip()
    if not want:
        return False
    from glow.errors import BackendError

    return _check_precision(want, "GLOW_PRECISION", BackendError) == "bf16"


def bf16_native() -> bool:
    """Whether the code may use AVX512-BF16's vdpbf16ps and vcvtneps2bf16; elsewhere bf16 kernels
    emulate them bit for bit with float32 FMAs (a product of two bfloat16 values is exact)."""
    return isa() == "avx512" and has_feature("avx512bf16")


def has_feature(name: str) -> bool:
    """Whether the code may use LLVM feature `name` (e.g. "avx512bf16"): the last of "+name" or
    "-name" in `host_features()` wins, so $GLOW_CPU_FEATURES="-avx512bf16" turns it off."""
    on = False
    for f in host_features().split(","):
        if f[1:] == name:
            on = f[0] == "+"
    return on


def cpu_name() -> str:
    """LLVM's CPU name for the code: the host's, or plain x86-64 for the generic level."""
    if _TARGET.get() is not None:
        return _TARGET.get()["cpu"]
    return "x86-64" if isa() == "generic" else llvm.get_host_cpu_name()


def host_features() -> str:
    """The features for LLVM: the host's (an avx2 level turns off everything AVX-512; generic
    starts from none), then $GLOW_CPU_FEATURES (e.g. "-f16c"), which win: how tests make the code a
    CPU without some extension gets (tests/test_cpu_selfcontained.py, tests/test_cpu_isa.py)."""
    if _TARGET.get() is not None:
        return _TARGET.get()["features"]
    level = isa()
    features = _host_features_raw()
    if level == "avx2":
        features = ",".join("-" + f[1:] if f.startswith(_WIDER_THAN_AVX2) else f for f in features.split(","))
    elif level == "generic":
        features = ""
    extra = os.environ.get("GLOW_CPU_FEATURES", "").strip(" ,")
    return ",".join(x for x in (features, extra) if x)


def host_description() -> str:
    target_machine()
    return f"{llvm.get_process_triple()} {cpu_name()} {host_features()}"


def target() -> dict:
    """What code compiled now is made for (a saved program records it): LLVM's triple, the CPU
    name, the instruction-set level and the feature string."""
    target_machine()
    return {"triple": llvm.get_process_triple(), "cpu": cpu_name(), "isa": isa(), "features": host_features()}


def check_target(t: dict, where: str) -> None:
    """A BackendError (one line, naming `where`) unless code made for `t` runs on this host:
    the same triple, the same CPU (any x86-64 for the generic level), a level the host runs
    and every feature the code may use."""
    from glow.errors import BackendError

    _initialize()
    host = {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(), "isa": host_isa()}
    have = set(_host_features_raw().split(","))
    wants = [f for f in str(t.get("features", "")).split(",") if f.startswith("+")]
    problem = None
    if t.get("triple") != host["triple"]:
        problem = f"target {t.get('triple')}, this machine is {host['triple']}"
    elif t.get("cpu") not in (host["cpu"], "x86-64"):
        problem = f"CPU {t.get('cpu')}, this one is {host['cpu']}"
    elif t.get("isa") not in ISAS or ISAS.index(t["isa"]) < ISAS.index(host["isa"]):
        problem = f"instruction-set level {t.get('isa')}, this CPU runs at most {host['isa']}"
    elif any(f not in have for f in wants):
        problem = f"CPU features {', '.join(f for f in wants if f not in have)}, which this CPU lacks"
    if problem:
        raise BackendError(f"{where}: compiled for {problem}: compile the model again here")


_helpers = None
_helpers_lock = threading.Lock()


def helpers() -> dict[str, int]:
    """glow's float16 conversion helpers (halfrt.py), compiled once per process when a module
    needs them and bound by address; name -> address. Compiled without them, so their own object
    is checked to need nothing but libm and libc."""
    global _helpers
    with _helpers_lock:
        if _helpers is None:
            cm = CompiledModule(halfrt.module_text(llvm.get_process_triple()), with_helpers=False,
                                what="glow's float16 helpers")
            table = {n: cm.address(n) for n in halfrt.NAMES}
            linking.provide(table)
            _helpers = (cm, table)  # the engine lives as long as the process: code calls into it
        return _helpers[1]


def _module_name(ir_text: str) -> str:
    """'module "name"' from the IR text's `; ModuleID = "name"` line (for messages)."""
    m = re.match(r'; ModuleID = "?([^"\n]*)', ir_text)
    return f'module "{m.group(1)}"' if m else "a module"


#: Bump when the pipeline below changes what an object holds: part of every cache key.
PIPELINE = "split-O3-glueO1-1"


def compile_threads() -> int:
    """Threads that compile kernels at once: $GLOW_COMPILE_THREADS, else the CPUs this process
    may use (LLVM runs outside the GIL: llvmlite calls it through ctypes)."""
    env = os.environ.get("GLOW_COMPILE_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            from glow.errors import BackendError

            raise BackendError(f"GLOW_COMPILE_THREADS must be a positive integer, got {env!r}")
        return int(env)
    return max(1, min(len(os.sched_getaffinity(0)), 16))


@dataclass
class PartResult:
    """One object of a module: its text's part, object bytes, seconds spent and whether cached."""

    part: linking.Part
    obj: bytes
    cached: bool
    parse_s: float = 0.0
    opt_s: float = 0.0
    emit_s: float = 0.0

    @property
    def llvm_s(self) -> float:
        return self.parse_s + self.opt_s + self.emit_s


def compile_object(text: str, glue: bool = False) -> tuple[bytes, float, float, float]:
    """Object code of one module's IR text, on a context of its own (safe on any thread):
    (object, parse seconds, optimise seconds, emit seconds). O3 for the host CPU; `glue` (a
    program's entry, which only sequences kernel calls): O1 and fast instruction selection, half
    the time on a large entry."""
    _initialize()
    with _private_llvm():
        tm = target_machine(0 if glue else 3)
        t0 = time.perf_counter()
        ctx = llvm.create_context()
        mod = llvm.parse_assembly(text, ctx)
        mod.verify()
        t1 = time.perf_counter()
        pto = llvm.create_pipeline_tuning_options(speed_level=1 if glue else 3)
        pb = llvm.create_pass_builder(tm, pto)
        mpm = pb.getModulePassManager()
        mpm.run(mod, pb)
        t2 = time.perf_counter()
        obj = tm.emit_object(mod)
        t3 = time.perf_counter()
        # every object freed here, in this thread and the block, not whenever its last reference goes
        for o in (mpm, pb, pto, mod, tm, ctx):
            o.close()
    return obj, t1 - t0, t2 - t1, t3 - t2


def _key(part: linking.Part) -> str:
    return hashlib.sha256("\0".join([part.text, host_description(), llvmlite.__version__, PIPELINE,
                                     "glue" if part.glue else ""]).encode()).hexdigest()


class CompiledModule:
    """A JIT-compiled module; keeps its execution engine alive and hands out function addresses.

    The module is cut into one object per distinct kernel and one for the entry
    (`linking.split_module`); each is looked up in the on-disk cache by its own text, the
    missing ones compiled on a thread pool, and all are loaded into one engine, where the entry
    calls the kernels by name. `parts` lists them (PartResult); `stats()` sums their times."""

    def __init__(self, ir_text: str, *, use_cache: bool = True, what: str | None = None,
                 with_helpers: bool = True):
        t0 = time.perf_counter()
        try:  # GLOW_CPU_SPLIT=0: one object for the whole module, as before (for comparisons)
            parts = (linking.split_module(ir_text) if os.environ.get("GLOW_CPU_SPLIT", "1") != "0"
                     else [linking.Part(ir_text)])
        except ValueError:  # text this splitter does not know: one object, as it is
            parts = [linking.Part(ir_text)]
        self.split_s = time.perf_counter() - t0
        self.parts = self._objects(parts, use_cache)
        self.cached = all(r.cached for r in self.parts)
        t1 = time.perf_counter()
        self.objects = [r.obj for r in self.parts]
        self._check(what or _module_name(ir_text), with_helpers)
        if use_cache:
            for r in self.parts:
                if not r.cached:
                    _store(_key(r.part), r.obj)
        self._load()
        self.load_s = time.perf_counter() - t1

    @classmethod
    def from_objects(cls, objects: list[bytes], what: str) -> CompiledModule:
        """A module from object files compiled before (a saved executable's), checked and loaded
        exactly as fresh ones are."""
        self = cls.__new__(cls)
        t0 = time.perf_counter()
        self.split_s, self.parts, self.cached, self.objects = 0.0, [], True, list(objects)
        self._check(what, True)
        self._load()
        self.load_s = time.perf_counter() - t0
        return self

    def _check(self, what: str, with_helpers: bool) -> None:
        # One path for fresh, cached and saved code: every object file is checked to call nothing
        # but what glow binds by address and the kernels its sibling objects define (linking.py)
        # before it is loaded; so code never links to whatever else the process has loaded.
        undefined = [linking.undefined_symbols(o) for o in self.objects]
        if with_helpers and any(n in halfrt.NAMES for u in undefined for n in u):
            helpers()
        linking.check_objects(undefined, [linking.defined_symbols(o) for o in self.objects], what)

    def _load(self) -> None:
        empty = llvm.parse_assembly(f'target triple = "{llvm.get_process_triple()}"')
        self.engine = llvm.create_mcjit_compiler(empty, target_machine())
        for o in self.objects:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(o))
        self.engine.finalize_object()

    @staticmethod
    def _objects(parts: list[linking.Part], use_cache: bool) -> list[PartResult]:
        results: list[PartResult | None] = []
        missing = []
        for p in parts:
            obj = _load_cached(_key(p)) if use_cache else None
            results.append(None if obj is None else PartResult(p, obj, True))
            if obj is None:
                missing.append(len(results) - 1)

        missing.sort(key=lambda k: -len(parts[k].text))  # longest first: the pool ends together
        threads = min(compile_threads(), len(missing)) if len(missing) > 1 else len(missing)
        if threads > 1:
            # each task in a copy of the caller's context: the level and target it compiles for
            # are context variables, which a pool thread would not see otherwise
            contexts = [contextvars.copy_context() for _ in missing]
            with ThreadPoolExecutor(threads, thread_name_prefix="glow-llvm") as pool:
                done = list(pool.map(lambda k, ctx: ctx.run(_fresh, parts[k]), missing, contexts))
        else:
            done = [_fresh(parts[k]) for k in missing]
        for k, r in zip(missing, done):
            results[k] = r
        return results

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise KeyError(f"function {name} not found in the compiled module")
        return addr

    def stats(self) -> dict:
        """Seconds by phase (LLVM's summed over the objects compiled, on however many threads),
        and how many objects were compiled or found in the cache."""
        fresh = [r for r in self.parts if not r.cached]
        return {"llvm_parse_s": sum(r.parse_s for r in fresh), "llvm_opt_s": sum(r.opt_s for r in fresh),
                "llvm_emit_s": sum(r.emit_s for r in fresh), "load_s": self.load_s,
                "objects": len(self.parts), "objects_compiled": len(fresh),
                "objects_cached": len(self.parts) - len(fresh)}


def _fresh(part: linking.Part) -> PartResult:
    obj, parse_s, opt_s, emit_s = compile_object(part.text, part.glue)
    return PartResult(part, obj, False, parse_s, opt_s, emit_s)


def _path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, "cpu", key[:2], key + ".o")


def _load_cached(key: str) -> bytes | None:
    p = _path(key)
    if p is None or not os.path.exists(p):
        return None
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError:
        return None


def _store(key: str, obj: bytes):
    p = _path(key)
    if p is None:
        return
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        tmp = f"{p}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(obj)
        os.replace(tmp, p)
    except OSError:
        pass  # a read-only cache is not an error: compile next time too
