"""The CUDA runtime over CuPy: devices, a module cache, executables.

An executable owns one device allocation from CuPy's memory pool (weights, the activation arena,
inputs and outputs: core/render/layout.py) and one non-blocking stream; weights are uploaded once.
A run copies the inputs in, launches one kernel per instruction on the stream (arguments: the
allocation and operand offsets, fixed at compile time), copies the outputs out and synchronises
once; `profile` records a pair of CUDA events around each launch and copy of such a run. Modules
(CuPy RawModule, compiled by NVRTC) are cached per (device, source) in the process; CuPy also
caches compiled kernels on disk (~/.cupy/kernel_cache).

MatMul: by default the renderer's tiled kernel (shared memory, 4 x 4 register blocks). With
`GLOW_CUDA_MATMUL=cublas` plain float32 MatMul instructions (no fused epilogue) call
`cupy.matmul` on views of the arena instead, i.e. cuBLAS.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time

import numpy as np
from glow import Executable
from glow.render import DeviceParams
from glow.render.indexing import IndexRecord
from glow.render.layout import launch_args
from glow.render.program import kernel_records


class CudaDevice:
    def __init__(self, cp, index: int):
        self.cp, self.index = cp, index
        self.props = cp.cuda.runtime.getDeviceProperties(index)
        self.modules: dict[str, object] = {}
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        n = self.props.get("name", b"cuda")
        return n.decode() if isinstance(n, bytes) else str(n)

    def params(self) -> DeviceParams:
        p = self.props
        return DeviceParams(kind="gpu", compute_units=int(p["multiProcessorCount"]),
                            max_local=int(p["maxThreadsPerBlock"]), local_mem=int(p["sharedMemPerBlock"]),
                            simd=int(p["warpSize"]), flat_local=256)

    def module(self, source: str):
        key = hashlib.sha1(source.encode()).hexdigest()
        with self.lock:
            mod = self.modules.get(key)
            if mod is None:
                with self.cp.cuda.Device(self.index):
                    mod = self.cp.RawModule(code=source, options=("--std=c++17",))
                    mod.compile()
                self.modules[key] = mod
            return mod


def _cublas_view(cp, mem, layout, operand):
    off = layout.operand_offset(operand)
    return mem[off:off + operand.nbytes].view(cp.float32).reshape(operand.type.shape)


class CudaExecutable(Executable):
    def __init__(self, graph, compiled, dev: CudaDevice):
        super().__init__(graph)
        cp = dev.cp
        self.dev, self.compiled = dev, compiled
        layout = compiled.layout
        use_cublas = os.environ.get("GLOW_CUDA_MATMUL", "").lower() == "cublas"
        with cp.cuda.Device(dev.index):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.mem = cp.zeros(layout.total, dtype=cp.uint8)
            blob = layout.weight_blob()
            if blob.nbytes:
                self.mem[:blob.nbytes].set(blob)
            mod = dev.module(compiled.program.source) if compiled.program.launches else None
            self.steps = []
            self.step_instrs = [k.instr for k in compiled.program.launches]  # for profiles
            for k in compiled.program.launches:
                if use_cublas and _cublas_ok(k):
                    a, b = (_cublas_view(cp, self.mem, layout, o) for o in k.instr.inputs[:2])
                    c = _cublas_view(cp, self.mem, layout, k.instr.outputs[0])
                    self.steps.append(lambda a=a, b=b, c=c: cp.matmul(a, b, out=c))
                    continue
                fn = mod.get_function(k.name)
                gsize, lsize = k.launch
                lsize = tuple(lsize or (1,)) + (1,) * (3 - len(lsize or (1,)))
                grid = tuple(g // l for g, l in zip(tuple(gsize) + (1,) * (3 - len(gsize)), lsize))
                args = (self.mem, *launch_args(k, layout))
                self.steps.append(lambda fn=fn, grid=grid, lsize=lsize, args=args: fn(grid, lsize, args))
            # The zero fill and the weight upload ran on the legacy default stream, which a
            # non-blocking stream does not wait for: finish them before the first launch.
            cp.cuda.runtime.deviceSynchronize()
        self.index_record = IndexRecord(compiled.program, layout)  # bad indices kernels met
        self._lock = threading.Lock()
        self._profiled = False

    def _run(self, feeds):
        return self._launch(feeds)[0]

    def _profile(self, feeds):
        """Run once with a pair of CUDA events around every launch and copy on the stream: each
        launch's time (cupy.cuda.get_elapsed_time) summed per instruction, plus one record per
        input and output copy. The first profile runs once untimed before (module loads)."""
        cp = self.dev.cp
        if not self._profiled:
            self._launch(feeds)
            self._profiled = True
        t0 = time.perf_counter()
        outs, events = self._launch(feeds, timed=True)
        seconds = time.perf_counter() - t0
        timed = [(what, max(cp.cuda.get_elapsed_time(start, end), 0.0) * 1e-3) for what, start, end in events]
        return kernel_records(self.compiled.ir.fn, timed), "kernel", outs, seconds

    def _launch(self, feeds, timed: bool = False):
        """Run on the stream: (outputs, [(instruction or (op, name) of a copy, start event, end
        event)] when `timed`, else [])."""
        cp, layout = self.dev.cp, self.compiled.layout
        events = []

        def timing(what):
            if not timed:
                return contextlib.nullcontext()
            return _Timed(cp, self.stream, what, events)

        with self._lock, cp.cuda.Device(self.dev.index), self.stream:
            for name, off, _ in layout.inputs:
                if off is None:
                    continue
                a = np.ascontiguousarray(feeds[name]).reshape(-1).view(np.uint8)
                with timing(("(to device)", name)):
                    self.mem[off:off + a.nbytes].set(a, stream=self.stream)
            for step, instr in zip(self.steps, self.step_instrs):
                with timing(instr):
                    step()
            outs = {}
            for name, off, buf in layout.outputs:
                a = np.empty(buf.type.shape, buf.type.dtype.np)
                if off is not None:
                    with timing(("(to host)", name)):
                        raw = self.mem[off:off + a.nbytes].get(stream=self.stream)
                    a.reshape(-1).view(np.uint8)[:] = raw
                outs[name] = a
            at = self.index_record.offset
            rec = None if at is None else self.mem[at:at + 32].get(stream=self.stream)
            self.stream.synchronize()
            err = None if rec is None else self.index_record.error(rec.view(np.int64))
            if err is not None:  # clear the record for the next run, then name the bad index
                self.mem[at:at + 32].fill(0)
                self.stream.synchronize()
                raise err
        return outs, events


class _Timed:
    """Records a CUDA event on `stream` before and after the block: (what, start, end) in `events`."""

    def __init__(self, cp, stream, what, events):
        self.cp, self.stream, self.what, self.events = cp, stream, what, events

    def __enter__(self):
        self.start = self.cp.cuda.Event()
        self.start.record(self.stream)

    def __exit__(self, *exc):
        end = self.cp.cuda.Event()
        end.record(self.stream)
        self.events.append((self.what, self.start, end))


def _cublas_ok(k) -> bool:
    from glow import dtypes as dt

    i = k.instr
    return (i is not None and i.kind == "kernel" and i.op.name == "MatMul" and i.expr is None
            and all(o.type.dtype == dt.float32 for o in (*i.inputs[:2], i.outputs[0]))
            and len(i.inputs[0].type.shape) >= 2 and len(i.inputs[1].type.shape) >= 2)
