"""Replicated serving: N copies of one compiled model behind one `submit`.

Each request goes to the copy with the fewest requests in flight (ties rotate), so a slow or busy
copy gets fewer. A copy whose last request failed is passed over for `cooldown_s` while another is
healthy (a ray device restarting its actor), then tried again. The copies are any executables of
the same graph: partitioned pipelines over ray devices (`glow.compile(..., devices=[...],
replicas=N)`), or ones you compiled yourself.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future

from ..backend import Executable
from ..errors import GlowError
from ..interpreter import check_inputs


class ReplicatedExecutable(Executable):
    """`submit` / `run` / `run_many` load-balanced over `replicas` (executables of one graph)."""

    def __init__(self, replicas, cooldown_s: float = 2.0):
        replicas = list(replicas)
        if not replicas:
            raise GlowError("ReplicatedExecutable needs at least one replica")
        super().__init__(replicas[0].graph)
        names = (replicas[0].input_names, replicas[0].output_names)
        for r in replicas[1:]:
            if (r.input_names, r.output_names) != names:
                raise GlowError("replicas must be executables of one graph (their inputs or outputs differ)")
        self.replicas = replicas
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._in_flight = [0] * len(replicas)
        self._served = [0] * len(replicas)
        self._failed = [0] * len(replicas)
        self._failed_at = [float("-inf")] * len(replicas)
        self._turn = itertools.count()

    @property
    def placement(self):
        """The first copy's placement (every copy of a partitioned model has the same one)."""
        return getattr(self.replicas[0], "placement", None)

    def _pick(self) -> int:
        now, n = time.monotonic(), len(self.replicas)
        healthy = [i for i in range(n) if now - self._failed_at[i] >= self.cooldown_s] or list(range(n))
        start = next(self._turn) % n
        return min(healthy, key=lambda i: (self._in_flight[i], (i - start) % n))

    def _submit(self, feeds: dict, wanted) -> Future:
        with self._lock:
            i = self._pick()
            self._in_flight[i] += 1
        try:
            fut = self.replicas[i].submit(feeds, wanted)
        except BaseException:
            with self._lock:
                self._in_flight[i] -= 1
            raise

        def done(f: Future):
            with self._lock:
                self._in_flight[i] -= 1
                self._served[i] += 1
                if f.exception() is not None:
                    self._failed[i] += 1
                    self._failed_at[i] = time.monotonic()
        fut.add_done_callback(done)
        return fut

    def submit(self, feeds: dict, outputs=None) -> Future:
        """Start a request on the least busy copy; the future resolves to {output: array}."""
        return self._submit(check_inputs(self.graph, feeds), self._wanted(outputs))

    def _run(self, feeds: dict) -> dict:
        return self._submit(feeds, None).result()

    def run_many(self, feeds_list) -> list[dict]:
        """Run several requests over the copies at once; outputs in the same order."""
        futures = [self.submit(f) for f in feeds_list]
        return [f.result() for f in futures]

    @property
    def stats(self) -> dict:
        """Requests served, failed and in flight, per copy."""
        with self._lock:
            return {"replicas": len(self.replicas), "served": list(self._served), "failed": list(self._failed),
                    "in_flight": list(self._in_flight)}

    def close(self):
        for r in self.replicas:
            close = getattr(r, "close", None)
            if close is not None:
                close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
