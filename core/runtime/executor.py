"""The DAG executor: one worker thread per device, partitions run as soon as their inputs are ready.

A request is one `run` (or `submit`): its own table of values and a count of unfinished parents
per partition. When a partition finishes, each child whose parents are all done is queued on its
device's worker. Workers take the oldest request first, so successive requests flow through the
partitions like a pipeline: while device B runs request k's second stage, device A already runs
request k+1's first. Only a device's own worker ever runs its executables, so a backend's
executable needs no locking of its own; `run` itself may be called from any number of threads.

Tensors cross devices through host memory. `Executable.run` takes and returns host arrays, so by
default the executable moves its own inputs in and outputs out (host staging). An executable that
also overrides `Executable.run_device({name: handle}) -> {name: handle}` gets its inputs through the backend's
`to_device` and gives its outputs back through `to_host`. Where its backend declares a
`handle_kind` (Ray's object references), its outputs stay handles (`Held`): one goes as it is to
the next executable of the same kind (node to node, never through this process) and is read
with `to_host` only where something else needs the array.
An exception in a partition fails that request only (its queued partitions are skipped); other
requests, and the workers, carry on.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from concurrent.futures import Future

import numpy as np

from ..errors import GlowError, InternalError

_STOP = (float("inf"), 0, None, None)


class PartitionRunError(GlowError):
    """A partition failed while running one request; the message names the partition and device."""


class Request:
    """One inference in flight: its values (host arrays, by name) and its remaining work."""

    def __init__(self, seq: int, feeds: dict, waiting: dict[int, int], readers: dict[str, int]):
        self.seq = seq
        self.values = dict(feeds)
        self.waiting = waiting  # partition index -> parents not finished yet
        self.readers = dict(readers)  # value name -> partitions still to read it
        self.left = len(waiting)
        self.future: Future = Future()
        self.lock = threading.Lock()
        self.failed = False
        self.timings: list | None = None  # (partition, seconds) per partition when profiled


class Held:
    """A partition's output left where its device put it (see `Backend.handle_kind`)."""

    __slots__ = ("backend", "device", "handle")

    def __init__(self, backend, device, handle):
        self.backend, self.device, self.handle = backend, device, handle

    def host(self) -> np.ndarray:
        return _to_host(self.backend, self.handle, self.device)


def _host(value):
    return value.host() if isinstance(value, Held) else value


def _as_handle(value, be, dev):
    """`value` (an array or a Held) as an input handle for an executable of backend `be`."""
    if isinstance(value, Held):
        kind = getattr(be, "handle_kind", None)
        if kind is not None and kind == getattr(value.backend, "handle_kind", None):
            return value.handle
        value = value.host()
    return be.to_device(value, dev) if isinstance(value, np.ndarray) else value


class DeviceWorker:
    """A thread that runs the partitions of one device, oldest request first."""

    def __init__(self, name: str, run_job):
        self.name = name
        self.queue: queue.PriorityQueue = queue.PriorityQueue()
        self.busy_s = 0.0
        self._run_job = run_job
        self.thread = threading.Thread(target=self._loop, name=f"glow-device-{name}", daemon=True)
        self.thread.start()

    def put(self, req: Request, part_index: int):
        self.queue.put((req.seq, part_index, id(req), req))

    def stop(self):
        self.queue.put(_STOP)

    def _loop(self):
        while True:
            _, part_index, _, req = self.queue.get()
            if req is None:
                return
            t0 = time.perf_counter()
            self._run_job(req, part_index)
            self.busy_s += time.perf_counter() - t0


class DagExecutor:
    """Runs a DAG of compiled partitions. `parts[i]` has `.index`, `.target`, `.inputs`,
    `.outputs`, `.parents`, `.children`; `exes[i]` is its compiled executable."""

    def __init__(self, parts, exes, graph):
        self.parts, self.exes, self.graph = parts, exes, graph
        self._seq = itertools.count()
        self._closed = False
        self.workers = {}
        for p in parts:
            if p.target.name not in self.workers:
                self.workers[p.target.name] = DeviceWorker(p.target.name, self._run_partition)
        readers: dict[str, int] = {}
        for p in parts:
            for v in p.inputs:
                readers[v.name] = readers.get(v.name, 0) + 1
        self._readers = readers
        self._keep = set(graph.output_names)
        self._roots = [p.index for p in parts if not p.parents]

    # -- requests ------------------------------------------------------------------------------
    def submit(self, feeds: dict, timings: list | None = None) -> Future:
        """Start one request (feeds already checked); its future resolves to {output: array}.
        With `timings` (a list), each partition's (partition, seconds) is appended to it."""
        if self._closed:
            raise GlowError("this executable was closed")
        req = Request(next(self._seq), feeds, {p.index: len(p.parents) for p in self.parts},
                      self._readers)
        req.timings = timings
        if not self.parts:
            self._finish(req)
            return req.future
        for i in self._roots:
            self._queue(req, i)
        return req.future

    def _queue(self, req: Request, i: int):
        self.workers[self.parts[i].target.name].put(req, i)

    def _run_partition(self, req: Request, i: int):
        if req.failed:
            return
        part, exe = self.parts[i], self.exes[i]
        be, dev = part.target.backend, part.target.device
        try:
            with req.lock:
                feeds = {v.name: req.values[v.name] for v in part.inputs}
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                if exe.uses_device_handles:  # Executable.run_device overridden (core/backend.py)
                    outs = exe.run_device({k: _as_handle(v, be, dev) for k, v in feeds.items()})
                    if getattr(be, "handle_kind", None) is not None:  # stays on its device for now
                        outs = {v.name: Held(be, dev, outs[v.name]) for v in part.outputs}
                    else:
                        outs = {v.name: _to_host(be, outs[v.name], dev) for v in part.outputs}
                else:
                    outs = exe.run({k: _host(v) for k, v in feeds.items()})
                    outs = {v.name: outs[v.name] for v in part.outputs}
            if req.timings is not None:
                with req.lock:
                    req.timings.append((part, time.perf_counter() - t0))
        except Exception as e:  # noqa: BLE001 - any failure fails this request, not the executor
            self._fail(req, part, e)
            return
        ready = []
        with req.lock:
            if req.failed:
                return
            req.values.update(outs)
            for v in part.inputs:  # drop what no later partition needs (keeps pipelined memory low)
                req.readers[v.name] -= 1
                if req.readers[v.name] == 0 and v.name not in self._keep:
                    req.values.pop(v.name, None)
            for c in sorted(part.children):
                req.waiting[c] -= 1
                if req.waiting[c] == 0:
                    ready.append(c)
            req.left -= 1
            done = req.left == 0
        for c in ready:
            self._queue(req, c)
        if done:
            self._finish(req)

    def _fail(self, req: Request, part, e: Exception):
        with req.lock:
            if req.failed:
                return
            req.failed = True
            req.values.clear()
        if isinstance(e, InternalError):  # a glow bug stays one (not bad input), with the partition named
            err = InternalError(f"partition {part.name} on {part.target.name}: {e.detail}")
        else:
            err = PartitionRunError(f"partition {part.name} on {part.target.name} failed: "
                                    f"{type(e).__name__}: {e}")
        err.__cause__ = e
        req.future.set_exception(err)

    def _finish(self, req: Request):
        out = {}
        try:
            for v in self.graph.outputs:
                if v.is_constant:
                    out[v.name] = v.data
                else:
                    out[v.name] = _host(req.values[v.name])
        except Exception as e:  # noqa: BLE001 - reading a held output back can fail (a lost node)
            part = next(p for p in self.parts if any(o.name == v.name for o in p.outputs))
            self._fail(req, part, e)
            return
        req.values = {}
        req.future.set_result(out)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        for w in self.workers.values():
            w.stop()
        for w in self.workers.values():
            if w.thread is not threading.current_thread():
                w.thread.join(timeout=5)

    def busy_seconds(self) -> dict[str, float]:
        return {name: w.busy_s for name, w in self.workers.items()}


def _to_host(be, value, dev):
    if value is None or isinstance(value, list):
        return value
    return be.to_host(value, dev)
