"""Per-instruction times on the CPU backend: an instrumented twin of a compiled program.

`exe.profile(feeds)` must not make normal runs slower, so the module `run` calls has no timing
code at all. On the first `profile` call a `NativeProgram` gets a twin (`profiled(program)`,
kept on the program): the same IR function and memory plan generated again with
`Codegen(..., profile=True)`, which brackets the calls of every instruction in the entry with two
reads of the CPU's time-stamp counter (`llvm.readcyclecounter`, i.e. `rdtsc`) and adds their
difference to that instruction's 64-bit counter. Nothing is called for it: the object file
needs no symbol beyond what linking.py allows.

The twin runs on the calling thread alone (the entry's one-thread path, where an instruction's
calls run back to back), so each counter is exactly the time that instruction took, and the
counters add up to the run. These are single-thread times: a program whose normal runs use
several threads can take less in all than the profile's sum. (With several threads, phases of
independent instructions overlap on different threads, and no per-instruction time would add
up to the run.)

Ticks become seconds by the TSC rate, measured once per process against `time.perf_counter`
(x86-64 CPUs have had a constant-rate, never-stopping TSC for a decade: `constant_tsc` and
`nonstop_tsc` in /proc/cpuinfo). The twin shares the program's arena and sync state and runs under
the program's lock; it has its own weights blob, ctx array (one extra slot: the counters) and
index-error record.
"""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
from glow import ProfileRecord

from . import codegen, jit
from .abi import check_index_errors
from .irutil import I64, PTR, KernelBuilder

CYCLES = "glow_cycles"  # i64 glow_cycles(): the time-stamp counter, for measuring its rate
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_CYCLES = ctypes.CFUNCTYPE(ctypes.c_int64)
CALIBRATION_S = 0.02


def timed_instrs(fn) -> list:
    """The instructions the entry runs in order, each with a counter (alloc/dealloc have none)."""
    return [i for i in fn.instrs if i.kind not in ("alloc", "dealloc")]


# -- code generation (called by Codegen when profile=True) -------------------------------------

class InstrTimer:
    """Emits the timing in the entry `kb`: `t = start()` before an instruction's calls,
    `stop(index, t)` after them (counters[index] += now - t). `counters` is the i64 array the
    entry finds at ctx[slot]."""

    def __init__(self, kb: KernelBuilder, ctx, slot: int):
        self.kb = kb
        self.counters = kb.b.load(kb.ptr(ctx, slot, PTR), typ=PTR)
        self._read = kb.intrinsic("llvm.readcyclecounter", I64, [])
        cycles = KernelBuilder(kb.module, CYCLES, [], ret=I64)
        cycles.finish(cycles.b.call(self._read, []))

    def start(self):
        return self.kb.b.call(self._read, [])

    def stop(self, index: int, start) -> None:
        b = self.kb.b
        elapsed = b.sub(b.call(self._read, []), start)
        at = self.kb.ptr(self.counters, index, I64)
        b.store(b.add(b.load(at, typ=I64, align=8), elapsed), at, align=8)


# -- the twin ------------------------------------------------------------------------------------

_rate: float | None = None
_rate_lock = threading.Lock()


def tsc_rate(read) -> float:
    """Time-stamp counter ticks per second (measured once per process, over CALIBRATION_S)."""
    global _rate
    with _rate_lock:
        if _rate is None:
            t0, c0 = time.perf_counter(), read()
            time.sleep(CALIBRATION_S)
            c1, t1 = read(), time.perf_counter()
            _rate = (c1 - c0) / (t1 - t0)
        return _rate


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class ProfiledProgram:
    """A NativeProgram's instrumented twin: `run(feeds) -> (records, outputs, seconds)`, one
    ProfileRecord per instruction (name and op of the instruction) in program order."""

    def __init__(self, program):
        self.program = program
        self.fn = program.fn
        self.instrs = timed_instrs(self.fn)
        # the program's own level and precision: the twin times the code the program runs
        with jit.level(program.target["isa"]), jit.precision(getattr(program, "precision", None)):
            cg = codegen.Codegen(self.fn, program.plan, profile=True)
            self.module_text, self.weights = cg.build()
        self.held_weights = cg.held_weights  # the shared weights its value table points at: held while it lives
        self.module = jit.CompiledModule(self.module_text)
        self.entry = _ENTRY(self.module.address(codegen.ENTRY))
        self.rate = tsc_rate(_CYCLES(self.module.address(CYCLES)))
        self.counters = np.zeros(max(len(self.instrs), 1), np.int64)
        self.ctx = np.zeros(len(program.ctx) + 1, np.uint64)
        self.ctx[:-1] = program.ctx  # arena and sync state: the program's (runs hold its lock)
        self.ctx[codegen.CTX_WEIGHTS] = _address(self.weights)
        self.ctx[-1] = _address(self.counters)
        self._ctx_address = _address(self.ctx)

    def run(self, feeds: dict):
        p = self.program
        arrays = p.check(feeds)
        outs = [np.empty(shape, dtype) for _, dtype, shape in p.outputs]
        with p._lock:
            t0 = time.perf_counter()
            # solo: the caller alone, once no worker of an earlier run is inside an entry
            p.pool.share(self.entry, self._ctx_address, lambda: self._prepare(arrays + outs), keep=self,
                         solo=True)
            seconds = time.perf_counter() - t0
            check_index_errors(self)
            ticks = self.counters.copy()
        records = [ProfileRecord(i.name, i.opname, max(int(t), 0) / self.rate)
                   for i, t in zip(self.instrs, ticks)]
        return records, {name: out for (name, _, _), out in zip(p.outputs, outs)}, seconds

    def _prepare(self, arrays):
        k = codegen.CTX_FIRST_INPUT
        for a in arrays:
            self.ctx[k] = _address(a)
            k += 1
        self.counters.fill(0)


_build_lock = threading.Lock()


def profiled(program) -> ProfiledProgram:
    """The instrumented twin of `program`, compiled on first use and kept on the program."""
    with _build_lock:
        twin = program.__dict__.get("_profiled")
        if twin is None:
            twin = program.__dict__["_profiled"] = ProfiledProgram(program)
        return twin


__all__ = ["CYCLES", "InstrTimer", "ProfiledProgram", "profiled", "timed_instrs", "tsc_rate"]
