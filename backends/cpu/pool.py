"""Persistent worker threads that run one native entry point together.

`ThreadPool(n).run(fn, ctx)` calls `fn(ctx, tid, n)` on n threads (the caller is thread 0) and
returns when all are done. ctypes releases the GIL during the native call, so the threads really
run in parallel; between kernels they meet at the native spin barrier (kernels/sync.py).
"""

from __future__ import annotations

import threading


class ThreadPool:
    def __init__(self, nthreads: int):
        self.n = max(1, int(nthreads))
        self._job = None
        self._start = [threading.Semaphore(0) for _ in range(self.n - 1)]
        self._done = threading.Semaphore(0)
        self._lock = threading.Lock()  # one inference at a time per pool
        self._errors: list = []
        for tid in range(1, self.n):
            t = threading.Thread(target=self._worker, args=(tid,), name=f"glow-cpu-{tid}", daemon=True)
            t.start()

    def _worker(self, tid: int):
        while True:
            self._start[tid - 1].acquire()
            fn, ctx = self._job
            try:
                fn(ctx, tid, self.n)
            except BaseException as e:  # noqa: BLE001 - reported by run()
                self._errors.append(e)
            finally:
                self._done.release()

    def run(self, fn, ctx):
        with self._lock:
            if self.n == 1:
                fn(ctx, 0, 1)
                return
            self._job = (fn, ctx)
            self._errors.clear()
            for s in self._start:
                s.release()
            fn(ctx, 0, self.n)
            for _ in range(self.n - 1):
                self._done.acquire()
            if self._errors:
                raise self._errors[0]


_pools: dict[int, ThreadPool] = {}
_pools_lock = threading.Lock()


def get_pool(nthreads: int) -> ThreadPool:
    """One shared pool per thread count (threads are daemons and live as long as the process)."""
    with _pools_lock:
        pool = _pools.get(nthreads)
        if pool is None:
            pool = _pools[nthreads] = ThreadPool(nthreads)
        return pool
