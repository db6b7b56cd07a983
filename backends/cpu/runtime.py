"""The CPU runtime: a compiled program per static graph, run with one native call per inference.

A `NativeProgram` owns everything one inference touches: the arena (one 64-byte aligned block,
laid out by the static memory plan), the weights blob (packed once at compile time), the barrier
state and the ctx pointer array the entry reads. Before the native call every input is checked
against the program's exact shapes and element types: the generated code has constant shapes
baked in, so a wrong input must never reach it.

A graph with dynamic shapes is compiled on first run for each input signature (shapes, dtypes,
and the values of small integer inputs that decide shapes; see glow.specialize).
"""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
from glow import Executable, Graph
from glow.errors import InputError
from glow.ir import lower_to_ir
from glow.ir.instr import ALIGNMENT

from . import codegen, jit
from .pool import get_pool

ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def aligned_zeros(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    raw = np.zeros(max(nbytes, 1) + alignment, np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift:shift + max(nbytes, 1)]


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class NativeProgram:
    """One static graph as native code: `run({name: array}) -> {name: array}`."""

    def __init__(self, graph: Graph, threads: int):
        t0 = time.perf_counter()
        self.ir = lower_to_ir(graph)
        fn, plan = self.ir.fn, self.ir.plan
        self.module_text, self.weights = codegen.generate(fn, plan)
        t1 = time.perf_counter()
        self.module = jit.CompiledModule(self.module_text)
        self.entry = ENTRY_TYPE(self.module.address(codegen.ENTRY))
        self.stats = {"codegen_s": t1 - t0, "llvm_s": time.perf_counter() - t1,
                      "cached": self.module.cached, "arena_bytes": plan.arena_bytes,
                      "weights_bytes": int(self.weights.nbytes)}
        self.arena = aligned_zeros(plan.arena_bytes)
        self.barrier = aligned_zeros(codegen.BARRIER_BYTES)
        self.inputs = [(b.name, b.type.dtype.np, tuple(b.type.shape)) for b in fn.inputs]
        self.outputs = [(b.name, b.type.dtype.np, tuple(b.type.shape)) for b in fn.outputs]
        self.ctx = np.zeros(codegen.CTX_FIRST_INPUT + len(self.inputs) + len(self.outputs), np.uint64)
        self.ctx[codegen.CTX_ARENA] = _address(self.arena)
        self.ctx[codegen.CTX_WEIGHTS] = _address(self.weights)
        self.ctx[codegen.CTX_BARRIER] = _address(self.barrier)
        self._ctx_address = _address(self.ctx)
        self.pool = get_pool(threads)
        self._lock = threading.Lock()

    def check(self, feeds: dict) -> list[np.ndarray]:
        """The inputs in order, C-contiguous; InputError unless each matches exactly."""
        arrays = []
        for name, dtype, shape in self.inputs:
            if name not in feeds:
                raise InputError(f"missing input '{name}'")
            a = feeds[name]
            if not isinstance(a, np.ndarray):
                raise InputError(f"input '{name}': expected an array, got {type(a).__name__}")
            if a.dtype != dtype:
                raise InputError(f"input '{name}': expected element type {dtype}, got {a.dtype}")
            if a.shape != shape:
                raise InputError(f"input '{name}': expected shape {list(shape)}, got {list(a.shape)}")
            arrays.append(np.ascontiguousarray(a))
        return arrays

    def run(self, feeds: dict) -> dict:
        arrays = self.check(feeds)
        outs = [np.empty(shape, dtype) for _, dtype, shape in self.outputs]
        with self._lock:
            k = codegen.CTX_FIRST_INPUT
            for a in arrays + outs:
                self.ctx[k] = _address(a)
                k += 1
            self.pool.run(self.entry, self._ctx_address)
        return {name: out for (name, _, _), out in zip(self.outputs, outs)}


class CpuExecutable(Executable):
    """A compiled graph; static graphs compile at once, dynamic ones per input signature."""

    def __init__(self, graph: Graph, backend, options):
        super().__init__(graph)
        from .backend import default_threads

        self.backend, self.native = backend, options.native
        self.threads = options.threads or default_threads()
        self._programs: dict = {}
        self._lock = threading.Lock()
        self.program = NativeProgram(graph, self.threads) if graph.is_static() else None

    def _run(self, feeds):
        if self.program is not None:
            return self.program.run(feeds)
        program, rest = self._specialized(feeds)
        return program.run(rest)

    def _specialized(self, feeds):
        from glow.api import optimize_for_backend
        from glow.specialize import signature, specialize_static

        key = signature(self.graph, feeds, values=False)
        with self._lock:
            hit = self._programs.get(key)
            if hit == "values":
                key = signature(self.graph, feeds, values=True)
                hit = self._programs.get(key)
            if hit is not None:
                names = {n for n, _, _ in hit.inputs}
                return hit, {k: v for k, v in feeds.items() if k in names}
            g, rest, used_values = specialize_static(self.graph, feeds)
            g = optimize_for_backend(g, self.backend, self.native)
            program = NativeProgram(g, self.threads)
            if used_values:
                self._programs[key] = "values"
                key = signature(self.graph, feeds, values=True)
            self._programs[key] = program
            return program, rest

    @property
    def stats(self) -> dict:
        return {} if self.program is None else self.program.stats


__all__ = ["CpuExecutable", "NativeProgram", "aligned_zeros"]
