"""The OpenCL runtime: devices, one context and queue per device, program cache, executables.

An executable owns one device buffer holding weights, the activation arena, inputs and outputs
(core/render/layout.py); weights are uploaded once, at compile time. A run writes the inputs,
enqueues one kernel per instruction (arguments set once: the buffer and operand offsets) and
reads the outputs back, with one wait at the end. `profile` runs the same commands on a second
queue of the device that records event timestamps (made on first use). Programs are built once per (device, source)
in this process; PoCL also keeps built binaries on disk (POCL_CACHE_DIR), so a second process
builds the same program in a few tens of milliseconds instead of a few hundred.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import warnings
from concurrent.futures import Future

import numpy as np
from glow import Executable
from glow.render import DeviceParams
from glow.render.indexing import IndexRecord
from glow.render.layout import launch_args
from glow.render.program import kernel_records

from . import build_helper


class ClDevice:
    """One OpenCL device with its own context and in-order queue."""

    def __init__(self, cl, device, index: int):
        self.cl, self.device, self.index = cl, device, index
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.programs: dict[str, object] = {}
        self.lock = threading.Lock()
        self._profiling_queue = None
        self._warm = None  # the compiler's start-up under way (warm_up), once per process
        self.helper = None  # build_helper.BuildHelper, started by warm_up where it can help

    def profiling_queue(self):
        """A second in-order queue with event timestamps, made on first use and used only by
        `profile` (timestamps cost a little on every command of the queue that records them)."""
        with self.lock:
            if self._profiling_queue is None:
                props = self.cl.command_queue_properties.PROFILING_ENABLE
                self._profiling_queue = self.cl.CommandQueue(self.context, properties=props)
            return self._profiling_queue

    @property
    def is_cpu(self) -> bool:
        return bool(self.device.type & self.cl.device_type.CPU)

    def params(self) -> DeviceParams:
        """Kernel shapes from the device's properties: CPU devices get vectorised, register-blocked
        kernels and small work-groups; GPUs work-group tiling with local memory."""
        d = self.device
        if self.is_cpu:
            return DeviceParams(kind="cpu", compute_units=d.max_compute_units,
                                max_local=d.max_work_group_size, local_mem=d.local_mem_size,
                                simd=max(d.preferred_vector_width_float, 1), flat_local=64)
        simd = 64 if "AMD" in d.vendor.upper() else 32
        return DeviceParams(kind="gpu", compute_units=d.max_compute_units,
                            max_local=d.max_work_group_size, local_mem=d.local_mem_size, simd=simd,
                            flat_local=min(256, d.max_work_group_size))

    def warm_up(self) -> None:
        """Start the device compiler once per process in the background: PoCL's first build
        loads its kernel library and LLVM (0.7 s), which then overlaps glow's graph passes.
        Where it can help, also start the kernel build helper (build_helper.py). Best effort:
        a failure here shows up, with its reason, in the real build."""
        with self.lock:
            if self._warm is not None:
                return
            self._warm = in_background(self._warm_compiler)
            try:
                if build_helper.enabled() and build_helper.worth_starting(self):
                    self.helper = build_helper.BuildHelper(self.index, self.device.name)
            except Exception:  # noqa: BLE001 - a bad $GLOW_OPENCL_HELPER is said by the compile;
                pass  # a helper that cannot start only costs time

    def _warm_compiler(self):
        _quiet_compiler_output(self.cl)
        build_helper.warm_compiler(self.cl, self.context)

    def built(self, source: str) -> bool:
        """Whether this process has built `source` (and so, on PoCL, its kernels) already."""
        with self.lock:
            return _key(source) in self.programs

    def build(self, source: str):
        """The built program for `source` (cached per device for the life of the process)."""
        key = _key(source)
        with self.lock:
            prg = self.programs.get(key)
            if prg is None:
                _quiet_compiler_output(self.cl)
                prg = self.cl.Program(self.context, source).build()
                self.programs[key] = prg
            return prg


class ClExecutable(Executable):
    def __init__(self, graph, compiled, dev: ClDevice):
        super().__init__(graph)
        cl = dev.cl
        self.dev, self.compiled = dev, compiled
        layout = compiled.layout
        t = time.perf_counter()
        built_before = dev.built(compiled.program.source)  # and so its kernels (PoCL builds them once)
        # The device compiler builds the program while the weights are laid out and uploaded
        # (both release the GIL).
        building = in_background(lambda: dev.build(compiled.program.source) if compiled.program.launches else None)
        if dev.is_cpu:
            # A CPU device works in host memory: it uses this array, weights in place (PoCL: no
            # upload, which cost VGG-19 a second pass over 600 MB of freshly mapped pages).
            self._host = layout.weight_blob(max(layout.total, 1))
            self.mem = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR,
                                 hostbuf=self._host)
        else:
            self.mem = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, layout.total)
            blob = layout.weight_blob()
            if blob.nbytes:
                cl.enqueue_copy(dev.queue, self.mem, blob, dst_offset=0, is_blocking=True)
        prg = building.result()
        self.build_seconds = time.perf_counter() - t
        self.program_built = bool(compiled.program.launches) and not built_before
        warm = [(k, *_warm_launch(k, layout)) for k in compiled.program.kernels.values()]
        job = None
        if dev.helper is not None and len(warm) >= build_helper.MIN_KERNELS and not built_before:
            # The build helper builds the program too, now a hit of PoCL's disk cache (the same
            # source, just built), and then the kernels from the far end.
            job = dev.helper.submit(compiled.program.source, layout.total, build_helper.job_kernels(warm))
        self.launches = []
        self.launch_instrs = [k.instr for k in compiled.program.launches]  # for profiles
        for k in compiled.program.launches:
            kern = cl.Kernel(prg, k.name)
            kern.set_args(self.mem, *launch_args(k, layout))
            self.launches.append((kern, *k.launch))
        self.index_record = IndexRecord(compiled.program, layout)  # bad indices kernels met
        self._lock = threading.Lock()
        self._profiled = False
        # PoCL compiles each kernel at its first launch: start that now, in the background, so
        # the first run waits only for what is not done by then.
        #: distinct kernels the build helper built for this executable (known once warmed)
        self.helper_kernels = 0
        self._kernels_ready = (in_background(lambda: self._warm_kernels(prg, warm, job))
                               if prg is not None and dev.is_cpu else None)

    def _warm_kernels(self, prg, warm, job):
        """Launch each distinct kernel once, one work-group, on the executable's own memory with
        everything but the weights zeroed: PoCL builds it for that work-group size, which the
        real launches share. Zeroed operands are safe for every kernel (index 0 is in range,
        integer division by zero gives 0); the bad-index record is cleared after. With a build
        helper's `job`, this thread takes kernels from the first up until it meets the helper's,
        waits for the helper's, then launches those too (from PoCL's disk cache). Best effort:
        a failure shows up in the real run, which waits for this first."""
        cl, dev, layout = self.dev.cl, self.dev, self.compiled.layout
        queue = cl.CommandQueue(dev.context)
        start = layout.weights_end
        if layout.total > start and not dev.is_cpu:  # a CPU device's host array is zero after the weights
            cl.enqueue_fill_buffer(queue, self.mem, np.uint8(0), start, layout.total - start)

        def launch(i):
            k, args, gsize, local = warm[i]
            kern = cl.Kernel(prg, k.name)
            kern.set_args(self.mem, *args)
            cl.enqueue_nd_range_kernel(queue, kern, gsize, local)

        i = 0
        while job is not None and i < job.first_claimed():
            job.take(i)
            launch(i)
            queue.finish()  # built: the helper's next look at what is taken sees it
            i += 1
        if job is not None and i < len(warm):
            self.helper_kernels = job.wait(i)
        for j in range(i, len(warm)):
            launch(j)
        if self.index_record.offset is not None:
            cl.enqueue_copy(queue, self.mem, np.zeros(4, np.int64), dst_offset=self.index_record.offset)
        queue.finish()

    def _run(self, feeds):
        return self._enqueue(feeds, self.dev.queue)[0]

    @property
    def stats(self) -> dict:
        """`programs_built`: 1 when this executable's program text was new to the process (a
        device-compiler build), 0 when an executable before it had built the same text;
        `weights_bytes` and `arena_bytes`: its one device buffer, weights and the rest."""
        layout = self.compiled.layout
        weights = layout.weights_end
        return {"programs_built": int(self.program_built), "kernels": len(self.compiled.program.kernels),
                "weights_bytes": weights, "arena_bytes": max(layout.total - weights, 0)}

    def _profile(self, feeds):
        """Run once on the device's profiling queue: each launch's device time (its event's
        start to end), summed per instruction, plus one record per input and output copy. The
        first profile runs once untimed before (first launches build kernels on PoCL)."""
        q = self.dev.profiling_queue()
        if not self._profiled:  # the first launches build kernels (PoCL): not what is timed
            self._enqueue(feeds, q)
            self._profiled = True
        t0 = time.perf_counter()
        outs, events = self._enqueue(feeds, q, timed=True)
        seconds = time.perf_counter() - t0
        timed = [(what, max(evt.profile.end - evt.profile.start, 0) * 1e-9) for what, evt in events]
        return kernel_records(self.compiled.ir.fn, timed), "kernel", outs, seconds

    def _enqueue(self, feeds, q, timed: bool = False):
        """Run on queue `q`: (outputs, [(instruction or (op, name) of a copy, event)] when
        `timed`, else [])."""
        cl, layout = self.dev.cl, self.compiled.layout
        events = []
        with self._lock:
            if self._kernels_ready is not None:
                try:
                    self._kernels_ready.result()
                except Exception:  # noqa: BLE001 - warming is best effort; this run says what fails
                    pass
                self._kernels_ready = None
            keep = []
            for name, off, _ in layout.inputs:
                if off is None:
                    continue
                a = np.ascontiguousarray(feeds[name])
                keep.append(a)
                evt = cl.enqueue_copy(q, self.mem, a, dst_offset=off, is_blocking=False)
                if timed:
                    events.append((("(to device)", name), evt))
            for (kern, gsize, lsize), instr in zip(self.launches, self.launch_instrs):
                evt = cl.enqueue_nd_range_kernel(q, kern, gsize, lsize)
                if timed:
                    events.append((instr, evt))
            outs = {}
            for name, off, buf in layout.outputs:
                a = np.empty(buf.type.shape, _np_dtype(buf))
                if off is not None:
                    evt = cl.enqueue_copy(q, a, self.mem, src_offset=off, is_blocking=False)
                    if timed:
                        events.append((("(to host)", name), evt))
                outs[name] = a
            rec, at = np.zeros(4, np.int64), self.index_record.offset
            if at is not None:
                cl.enqueue_copy(q, rec, self.mem, src_offset=at, is_blocking=False)
            q.finish()
            err = self.index_record.error(rec)
            if err is not None:  # clear the record for the next run, then name the bad index
                cl.enqueue_copy(q, self.mem, np.zeros(4, np.int64), dst_offset=at, is_blocking=True)
                raise err
        return outs, events


def _key(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


def _warm_launch(kernel, layout) -> tuple:
    """(arguments after `mem`, global size, local size) of a kernel's one warming launch: one
    work-group of the size the real launches use."""
    local = kernel.launch[1]
    return launch_args(kernel, layout), local or (1,) * len(kernel.global_size), local


def in_background(fn) -> Future:
    """`fn()` started on a thread of its own, as a Future. Not a daemon: the interpreter waits
    for it at exit rather than unloading the OpenCL driver under a compile in progress."""
    fut = Future()
    fut.set_running_or_notify_cancel()

    def target():
        try:
            fut.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            fut.set_exception(e)

    threading.Thread(target=target, name="glow-opencl").start()
    return fut


def _quiet_compiler_output(cl):
    """PoCL reports harmless notes for glow's kernels; pyopencl turns any such output into a
    CompilerWarning on stderr. Shown only with GLOW_VERBOSE=1 (`glow -v`): a build that fails
    still raises, with the log in the error."""
    if os.environ.get("GLOW_VERBOSE", "") in ("", "0"):
        warnings.filterwarnings("ignore", category=cl.CompilerWarning)


def _np_dtype(buf):
    return buf.type.dtype.np
