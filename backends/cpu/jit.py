"""LLVM JIT for the CPU backend: host target machine, O3 pipeline, on-disk object cache.

The cache key is the module's IR text, the host CPU name and features, and the llvmlite version,
so a second compile of the same model skips LLVM's optimiser and code generator entirely. Every
object file, fresh or cached, is checked before it is loaded to call nothing outside itself but
the functions glow binds by address (linking.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading

import llvmlite
import llvmlite.binding as llvm

from . import halfrt, linking

_lock = threading.Lock()
_initialized = False


def target_machine():
    """A new target machine for the host (e.g. znver5 with AVX-512).

    A new one per module: an MCJIT execution engine takes ownership of its target machine and
    frees it with itself, so sharing one between engines would leave the others dangling.
    """
    global _initialized
    with _lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=host_features(),
                                        opt=3, reloc="default", codemodel="jitdefault")


def host_features() -> str:
    """The host CPU's features for LLVM, then $GLOW_CPU_FEATURES (e.g. "-f16c"), which win: how
    tests make the code a CPU without some extension gets (tests/test_cpu_selfcontained.py)."""
    features = llvm.get_host_cpu_features().flatten()
    extra = os.environ.get("GLOW_CPU_FEATURES", "").strip(" ,")
    return f"{features},{extra}" if extra else features


def host_description() -> str:
    target_machine()
    return f"{llvm.get_process_triple()} {llvm.get_host_cpu_name()} {host_features()}"


def cache_dir() -> str | None:
    """$GLOW_CACHE_DIR, else ~/.cache/glow; GLOW_CACHE_DIR=off disables the cache."""
    d = os.environ.get("GLOW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "glow")
    return None if d.lower() in ("off", "0", "none") else d


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


class CompiledModule:
    """A JIT-compiled module; keeps its execution engine alive and hands out function addresses."""

    def __init__(self, ir_text: str, *, use_cache: bool = True, what: str | None = None,
                 with_helpers: bool = True):
        tm = target_machine()
        self.key = hashlib.sha256("\0".join([ir_text, host_description(), llvmlite.__version__])
                                  .encode()).hexdigest()
        obj = self._load_cached() if use_cache else None
        self.cached = obj is not None
        if obj is None:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=3)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
            obj = tm.emit_object(mod)
        # One path for fresh and cached code: the object file is checked to call nothing but
        # what glow binds by address (linking.py), then loaded; so code never links to whatever
        # else the process happens to have loaded.
        undefined = linking.undefined_symbols(obj)
        if with_helpers and any(n in halfrt.NAMES for n in undefined):
            helpers()
        linking.check(undefined, what or _module_name(ir_text))
        if use_cache and not self.cached:
            self._store(obj)
        empty = llvm.parse_assembly(f'target triple = "{llvm.get_process_triple()}"')
        self.engine = llvm.create_mcjit_compiler(empty, tm)
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise KeyError(f"function {name} not found in the compiled module")
        return addr

    def _path(self) -> str | None:
        d = cache_dir()
        return None if d is None else os.path.join(d, "cpu", self.key[:2], self.key + ".o")

    def _load_cached(self) -> bytes | None:
        p = self._path()
        if p is None or not os.path.exists(p):
            return None
        try:
            with open(p, "rb") as f:
                return f.read()
        except OSError:
            return None

    def _store(self, obj: bytes):
        p = self._path()
        if p is None:
            return
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            tmp = f"{p}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(obj)
            os.replace(tmp, p)
        except OSError:
            pass  # a read-only cache is not an error: compile next time too
