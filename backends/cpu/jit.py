"""LLVM JIT for the CPU backend: host target machine, O3 pipeline, on-disk object cache.

The cache key is the module's IR text, the host CPU name and features, and the llvmlite version,
so a second compile of the same model skips LLVM's optimiser and code generator entirely.
"""

from __future__ import annotations

import hashlib
import os
import threading

import llvmlite
import llvmlite.binding as llvm

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
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, reloc="default", codemodel="jitdefault")


def host_description() -> str:
    target_machine()
    return f"{llvm.get_process_triple()} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"


def cache_dir() -> str | None:
    """$GLOW_CACHE_DIR, else ~/.cache/glow; GLOW_CACHE_DIR=off disables the cache."""
    d = os.environ.get("GLOW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "glow")
    return None if d.lower() in ("off", "0", "none") else d


class CompiledModule:
    """A JIT-compiled module; keeps its execution engine alive and hands out function addresses."""

    def __init__(self, ir_text: str, *, use_cache: bool = True):
        tm = target_machine()
        self.key = hashlib.sha256("\0".join([ir_text, host_description(), llvmlite.__version__])
                                  .encode()).hexdigest()
        self.cached = False
        obj = self._load_cached() if use_cache else None
        if obj is not None:
            self.cached = True
            empty = llvm.parse_assembly(f'target triple = "{llvm.get_process_triple()}"')
            self.engine = llvm.create_mcjit_compiler(empty, tm)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        else:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
            pto = llvm.create_pipeline_tuning_options(speed_level=3)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
            if use_cache:
                self._store(tm.emit_object(mod))
            self.engine = llvm.create_mcjit_compiler(mod, tm)
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
