"""The CPU runtime: a compiled program per static graph, run with one native call per inference.

A `NativeProgram` owns everything one inference touches: the arena (one 64-byte aligned block,
laid out by the static memory plan), the weights blob (packed once at compile time), the sync
state (counters per kernel call, zeroed before each inference: sync.py) and the ctx
pointer array the entry reads. Before the native call every input is checked against the
program's exact shapes and element types: the generated code has constant shapes baked in, so a
wrong input must never reach it.

Its threads come from the pool of its device (pool.py), so programs on two logical CPU devices
run at the same time; each call runs on all of them or on the caller alone, whichever has been
faster lately (`ThreadChoice`).

A graph with dynamic shapes is compiled on first run for each input signature by the core's
specialising executable (glow.flow), which calls the backend's static compile.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
import time

import numpy as np
from glow import Executable, Graph
from glow import dtypes as dt
from glow.errors import InputError
from glow.ir import build_ir, plan_memory
from glow.ir.instr import ALIGNMENT
from glow.ops.index import site_id

from . import abi, jit, shared_weights
from .abi import check_index_errors
from .pool import ThreadChoice, get_pool

ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def aligned_zeros(nbytes: int, alignment: int = ALIGNMENT) -> np.ndarray:
    raw = np.zeros(max(nbytes, 1) + alignment, np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift:shift + max(nbytes, 1)]


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _relocate(weights: np.ndarray, relocs: list, sections: dict) -> tuple[list, list]:
    """A loaded program's shared weights: each section (copied where it is not WEIGHT_ALIGN-
    aligned) and its value-table entries set to its address plus their offsets. Returns the
    program's `shared` list and the arrays to hold."""
    arrays: dict[int, np.ndarray] = {}
    for _, j, _ in relocs:
        if j not in arrays:
            a = sections[f"shared{j}"]
            if _address(a) % abi.WEIGHT_ALIGN:
                a = aligned_zeros(a.size, abi.WEIGHT_ALIGN)
                a[:] = sections[f"shared{j}"]
            arrays[j] = a
    if relocs:
        table = weights[int(weights[:8].view(np.int64)[0]):].view(np.uint8)
        entries = table[:8 * (max(k for k, _, _ in relocs) + 1)].view(np.int64)
        for k, j, d in relocs:
            entries[k] = _address(arrays[j]) + d
    return [(k, arrays[j], d) for k, j, d in relocs], list(arrays.values())


class NativeProgram:
    """One static graph as native code: `run({name: array}) -> {name: array}`."""

    def __init__(self, graph: Graph, threads: int, device: str | None = None):
        from . import codegen  # the generator and its kernels: only when compiling

        t0 = time.perf_counter()
        self.fn = fn = build_ir(graph)
        self.plan = plan = plan_memory(fn)
        t1 = time.perf_counter()
        self.module_text, weights, sync_bytes, shared = codegen.generate(fn, plan)
        t2 = time.perf_counter()
        module = jit.CompiledModule(self.module_text)
        shared_weights.trim_heap()
        t3 = time.perf_counter()
        # compile seconds by phase: IR (build_ir, memory plan), codegen (LLVM IR text), LLVM
        # (wall; llvm_*_s are summed over the objects compiled, on several threads), load
        stats = {"ir_s": t1 - t0, "codegen_s": t2 - t1, "llvm_s": t3 - t2 - module.load_s,
                 **module.stats(), "cached": module.cached,
                 "slowest_kernels": codegen.slowest_kernels(module, fn),
                 "arena_bytes": plan.arena_bytes, "weights_bytes": int(weights.nbytes),
                 "shared_weights_bytes": sum(h.array.nbytes for h in {id(h): h for _, h, _ in shared}.values())}
        self.shared = [(k, h.array, d) for k, h, d in shared]
        self._held = [h for _, h, _ in shared]  # the shared weights live while this program does
        self.sites = {site_id(i.name): f"node '{i.name}' ({i.opname})" for i in fn.instrs}
        self.target = jit.target()
        self.precision = "bf16" if jit.bf16() else "fp32"  # the profiled twin is made alike
        self._setup(module, weights, plan.arena_bytes, sync_bytes,
                    [(b.name, b.type.dtype.np, tuple(b.type.shape)) for b in fn.inputs],
                    [(b.name, b.type.dtype.np, tuple(b.type.shape)) for b in fn.outputs], threads, device, stats)

    @classmethod
    def restore(cls, state: dict, sections: dict, threads: int, device: str | None, where: str) -> NativeProgram:
        """A program saved by `saved_state` (glow.load): its objects checked and loaded as fresh
        ones are, its weights copied into an aligned blob. It has no IR: `fn` is None."""
        self = cls.__new__(cls)
        t0 = time.perf_counter()
        objects = [sections[f"object{k}"].tobytes() for k in range(int(state["objects"]))]
        module = jit.CompiledModule.from_objects(objects, where)
        weights = sections["weights"]  # mapped from the file, aligned: used where it lies (read only)
        relocs = [(int(k), int(j), int(d)) for k, j, d in state.get("shared", [])]
        if weights.ctypes.data % abi.WEIGHT_ALIGN or not weights.size or relocs:
            weights = aligned_zeros(weights.size, abi.WEIGHT_ALIGN)
            weights[:sections["weights"].size] = sections["weights"]
        self.shared, self._held = _relocate(weights, relocs, sections)
        self.fn = self.plan = self.module_text = None
        self.sites = {int(k): str(v) for k, v in state["sites"]}
        self.target = dict(state["target"])

        def io(specs):
            return [(str(n), dt.from_name(d).np, tuple(int(x) for x in shape)) for n, d, shape in specs]

        stats = {**state["stats"], "cached": True, "loaded": True, "load_s": time.perf_counter() - t0}
        self._setup(module, weights, int(state["arena_bytes"]), int(state["sync_bytes"]), io(state["inputs"]),
                    io(state["outputs"]), threads, device, stats)
        return self

    def saved_state(self) -> tuple[dict, dict]:
        """(JSON-able state, {section: array}) from which `restore` makes this program again."""
        def io(specs):
            return [[n, dt.from_numpy(np.dtype(d)).name, list(shape)] for n, d, shape in specs]

        stats = {k: v for k, v in self.stats.items() if k not in ("loaded", "cached")}
        state = {"target": self.target, "arena_bytes": int(self.arena.nbytes), "sync_bytes": self.sync_bytes,
                 "inputs": io(self.inputs), "outputs": io(self.outputs), "objects": len(self.module.objects),
                 "sites": [[k, v] for k, v in self.sites.items()], "stats": stats}
        sections = {"weights": self.weights, **{f"object{k}": np.frombuffer(o, np.uint8)
                                                for k, o in enumerate(self.module.objects)}}
        # shared weights (codegen.Codegen.held_weights): each array a section, its table entries
        # written again with the loaded section's address (restore)
        index: dict[int, int] = {}
        for _, a, _ in self.shared:
            if id(a) not in index:
                index[id(a)] = len(index)
                sections[f"shared{index[id(a)]}"] = a.reshape(-1).view(np.uint8)
        state["shared"] = [[k, index[id(a)], d] for k, a, d in self.shared]
        return state, sections

    def _setup(self, module, weights, arena_bytes: int, sync_bytes: int, inputs, outputs, threads, device, stats):
        """What a run needs, for a program compiled now or one loaded from a file (saved.py)."""
        self.module, self.weights, self.sync_bytes, self.stats = module, weights, sync_bytes, stats
        self.entry = ENTRY_TYPE(module.address(abi.ENTRY))
        self.arena = aligned_zeros(arena_bytes)
        self.sync = aligned_zeros(sync_bytes)
        self.inputs, self.outputs = inputs, outputs
        self.ctx = np.zeros(abi.CTX_FIRST_INPUT + len(self.inputs) + len(self.outputs), np.uint64)
        self.ctx[abi.CTX_ARENA] = _address(self.arena)
        self.ctx[abi.CTX_WEIGHTS] = _address(self.weights)
        self.ctx[abi.CTX_SYNC] = _address(self.sync)
        self._ctx_address = _address(self.ctx)
        self.threads, self.device = threads, device
        self.pool = get_pool(threads, device)
        self.choice = ThreadChoice()  # all threads, or the caller alone: whichever is faster now
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

    def run(self, feeds: dict, into: dict | None = None) -> dict:
        arrays = self.check(feeds)
        addrs = [_address(a) for a in arrays]  # once per array and run: a decoding step has dozens
        outs, later, out_addrs = self._outputs(arrays, addrs, into or {})
        self._call(addrs + out_addrs)
        for k, arr in later:  # outputs that may not be written over their inputs: copied after
            np.copyto(arr, outs[k])
            outs[k] = arr
        return {name: out for (name, _, _), out in zip(self.outputs, outs)}

    def bind_io(self, feeds: dict, into: dict | None = None):
        """`run` of these very arrays, prepared once (glow.Executable.bind_io): the checks, the
        addresses and the output arrays, which later calls write over."""
        arrays = self.check(feeds)
        if any(a is not feeds[name] for a, (name, _, _) in zip(arrays, self.inputs)):
            return lambda: self.run(feeds, into)  # a copy made contiguous would not see new values
        addrs = [_address(a) for a in arrays]
        outs, later, out_addrs = self._outputs(arrays, addrs, into or {})
        addrs = np.array(addrs + out_addrs, np.uint64)
        names = [name for name, _, _ in self.outputs]
        final = list(outs)
        for k, arr in later:
            final[k] = arr

        def bound(held=arrays) -> dict:  # the inputs live while the binding does: it holds addresses
            self._call(addrs)
            for k, arr in later:
                np.copyto(arr, outs[k])
            return dict(zip(names, final))
        return bound

    def _call(self, addrs) -> None:
        """One native run with ctx pointing at `addrs` (inputs, then outputs), on all threads or
        the caller alone (`ThreadChoice`)."""
        with self._lock:
            solo = self.pool.n > 1 and self.choice.pick()
            t0 = time.perf_counter()
            self.pool.share(self.entry, self._ctx_address, lambda: self._prepare(addrs, solo), keep=self,
                            solo=solo)
            if self.pool.n > 1:
                self.choice.record(solo, time.perf_counter() - t0, self.pool.helped)
            check_index_errors(self)  # a bad index a kernel met: InputError naming the node

    def _outputs(self, arrays, addrs, into: dict) -> tuple[list, list, list]:
        """The output arrays of a run: the caller's (`into`) or new ones, and their addresses. A
        caller's array that is also an input's is written in place only where the program allows
        it (`aliasable`) and the two are the same memory; where they only overlap, or the program
        does not allow it, the output goes to a new array, copied into the caller's after the run.
        The inputs' spans are sorted once, so each output finds the inputs it overlaps by bisection
        (a decoding step has 36 arrays: a pairwise test was 320 comparisons)."""
        outs, later, out_addrs = [], [], []
        if into:
            spans = sorted((a, a + arr.nbytes, i) for (i, _, _), arr, a in zip(self.inputs, arrays, addrs))
            starts = [sp[0] for sp in spans]
            reach, top = [], 0  # reach[j]: the furthest end among spans[: j + 1]
            for _, end, _ in spans:
                top = max(top, end)
                reach.append(top)
        for k, (name, dtype, shape) in enumerate(self.outputs):
            arr = into.get(name)
            if arr is not None and arr.shape != shape:
                raise InputError(f"into=: output '{name}' has shape {list(shape)}, the array {list(arr.shape)}")
            if arr is not None:
                lo = _address(arr)
                hi = lo + arr.nbytes
                j = bisect.bisect_left(starts, hi) - 1  # spans[: j + 1] start before hi
                while j >= 0 and reach[j] > lo:  # some of them may end past lo: the overlapping ones
                    a, b, i = spans[j]
                    # in place only over exactly the input's memory (what `aliasable` reasons
                    # about); a partial overlap would be read after it is written
                    if b > lo and a < hi and not (a == lo and b == hi and self.aliasable(i, name)):
                        later.append((k, arr))
                        arr = None
                        break
                    j -= 1
                if arr is not None:
                    outs.append(arr)
                    out_addrs.append(lo)
                    continue
            new = np.empty(shape, dtype)
            outs.append(new)
            out_addrs.append(_address(new))
        return outs, later, out_addrs

    def aliasable(self, input_name: str, output_name: str) -> bool:
        """Whether the output may be written over the input's memory (glow.ir.aliasable: every
        read of the input is in the instructions that write the output, each pointwise or a
        kernel that updates in place). A loaded program has no IR: never."""
        if self.fn is None:
            return False
        cache = self.__dict__.setdefault("_aliasable", {})
        key = (input_name, output_name)
        if key not in cache:
            from glow.ir import aliasable

            cache[key] = aliasable(self.fn, input_name, output_name)
        return cache[key]

    def profile(self, feeds: dict):
        """Run once on this program's instrumented twin, made on the first call and kept (normal
        runs never pay for it): (a ProfileRecord per instruction, outputs, seconds of the run).
        One thread: see profiling.py."""
        from .profiling import profiled

        return profiled(self).run(feeds)

    def _prepare(self, addrs, solo: bool):
        """Point ctx at this inference's arrays (their addresses) and zero the sync state (no
        thread is inside)."""
        self.ctx[abi.CTX_FIRST_INPUT:abi.CTX_FIRST_INPUT + len(addrs)] = addrs
        if not solo and self.pool.n > 1:
            self.sync.fill(0)


class CpuExecutable(Executable):
    """A static graph compiled to one native program (graphs with dynamic shapes get a
    glow.flow.SpecializingExecutable whose static compile makes these)."""

    def __init__(self, graph: Graph, program: NativeProgram):
        super().__init__(graph)
        self.program = program

    def _run(self, feeds):
        return self.program.run(feeds)

    def _run_into(self, feeds, into):
        return self.program.run(feeds, self._program_into(into))

    def _bind_io(self, feeds, into):
        return self.program.bind_io(feeds, self._program_into(into))

    def _program_into(self, into: dict) -> dict:
        # the program names its outputs after the IR's buffers: the graph's, by position
        names = [name for name, _, _ in self.program.outputs]
        return {names[k]: into[g] for k, g in enumerate(self.output_names) if g in into}

    def _profile(self, feeds):
        if self.program.fn is None:  # loaded from a file: no IR to build the instrumented twin from
            return super()._profile(feeds)
        records, outs, seconds = self.program.profile(feeds)
        return records, "kernel", outs, seconds

    def _saved_state(self):
        state, sections = self.program.saved_state()
        return "cpu", state, sections

    @property
    def stats(self) -> dict:
        return self.program.stats


__all__ = ["CpuExecutable", "NativeProgram", "aligned_zeros"]
