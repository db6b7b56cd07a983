"""A partitioned model as one `Executable`: `run` from any thread, `submit` for futures."""

from __future__ import annotations

import weakref
from concurrent.futures import Future

from ..backend import Executable
from ..interpreter import check_inputs
from .executor import DagExecutor


class PartitionedExecutable(Executable):
    """Runs a `Placement`'s partitions on their devices. `.placement` is the report."""

    def __init__(self, placement, exes):
        super().__init__(placement.graph)
        self.placement = placement
        self.executables = list(exes)
        self._executor = DagExecutor(placement.partitions, self.executables, placement.graph)
        # Stop the device threads when the executable is dropped (they hold no reference to it).
        self._finalizer = weakref.finalize(self, _close, self._executor, self.executables)

    def _run(self, feeds: dict) -> dict:
        return self._executor.submit(feeds).result()

    def submit(self, feeds: dict, outputs=None) -> Future:
        """Start a request and return at once; the future resolves to {output name: array}
        (only `outputs`, when named)."""
        wanted = self._wanted(outputs)
        fut = self._executor.submit(check_inputs(self.graph, feeds))
        if wanted is None:
            return fut
        picked: Future = Future()

        def done(f):
            if f.exception() is not None:
                picked.set_exception(f.exception())
            else:
                picked.set_result({n: f.result()[n] for n in wanted})
        fut.add_done_callback(done)
        return picked

    def _profile(self, feeds: dict):  # each partition timed on its device's worker
        from ..backend import ProfileRecord

        timings: list = []
        outs = self._executor.submit(feeds, timings).result()
        return [ProfileRecord(f"{p.name} on {p.target.name}", "partition", sec) for p, sec in timings], \
            "partition", outs

    def run_many(self, feeds_list) -> list[dict]:
        """Run several requests, pipelined through the partitions; outputs in the same order."""
        futures = [self.submit(f) for f in feeds_list]
        return [f.result() for f in futures]

    def busy_seconds(self) -> dict[str, float]:
        """Seconds each device's worker has spent running partitions so far."""
        return self._executor.busy_seconds()

    def close(self):
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _close(executor, exes):
    """Stop the device threads, then release what the executables hold elsewhere (a ray
    device's actor and the resources it reserved on its node)."""
    executor.close()
    for e in exes:
        close = getattr(e, "close", None)
        if close is not None:
            close()
