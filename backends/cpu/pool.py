"""Persistent worker threads that run one native entry point together.

Two ways to run `fn(ctx, tid, n)` on a pool of n threads (the caller is thread 0):

    pool.run(fn, ctx)            every thread calls it once; returns when all have returned
                                 (fork-join, for code that splits its work by thread id)
    pool.share(fn, ctx, before)  the caller calls it and each worker joins in if it wakes up
                                 before the caller is done; returns when the caller's call does
    pool.share(..., solo=True)   the caller alone: fn(ctx, 0, 1)

`share` is for the generated entries, whose threads claim chunks of work and wait only for work
another thread has claimed (sync.py): the caller can finish an inference alone, so a
worker the OS does not run (a busy machine) costs nothing. A worker that joined may still be on
its way out of the entry when the caller returns; the next call waits for it before `before()`
resets the shared state (and before the ctx array changes).

Helpers pay only when they get a core of their own. A worker descheduled while it holds a chunk
stalls everyone who needs that chunk until it runs again (milliseconds on a busy machine, or
right after another runtime whose idle threads spin); the caller alone never stalls. No signal
inside the inference tells the two apart reliably, so `ThreadChoice` measures: each program
times its calls in both ways and uses the faster, trying the other again now and then.

ctypes releases the GIL during the native call, so the threads really run in parallel. One call
at a time per pool; `get_pool` keeps one pool per (device, thread count), so two logical CPU
devices run at the same time.
"""

from __future__ import annotations

import threading
import time


class _Job:
    __slots__ = ("fn", "ctx", "keep", "closed", "ran", "errors", "started", "joined", "last_join")

    def __init__(self, fn, ctx, keep=None):
        self.fn, self.ctx = fn, ctx
        self.keep = keep  # what fn's code and memory belong to: alive while a worker runs fn
        self.closed = False  # share: no worker may join any more
        self.ran = 0  # workers that have returned from fn
        self.errors: list = []
        self.started = time.perf_counter()
        self.joined = 0  # workers that entered fn
        self.last_join = 0.0  # seconds after the start when the last of them did


#: A worker "helped" a shared call when it joined within this fraction of the call's time.
PROMPT_JOIN = 0.1


class ThreadPool:
    def __init__(self, nthreads: int, name: str = "glow-cpu"):
        self.n = max(1, int(nthreads))
        self._job: _Job | None = None
        self._wake = [threading.Semaphore(0) for _ in range(self.n - 1)]
        self._state = threading.Condition()  # guards _job, _inside and each job's fields
        self._inside = 0  # workers inside fn now
        self._lock = threading.Lock()  # one call at a time per pool
        #: after a `share` on the workers: whether every worker joined within the first
        #: PROMPT_JOIN of the call (they had cores of their own); None after a solo call
        self.helped: bool | None = None
        for tid in range(1, self.n):
            threading.Thread(target=self._worker, args=(tid,), name=f"{name}-{tid}", daemon=True).start()

    def _worker(self, tid: int):
        last = None
        while True:
            self._wake[tid - 1].acquire()
            with self._state:
                job = self._job
                if job is None or job is last or job.closed:
                    continue  # a late wake-up: the job it was for is over
                last = job
                self._inside += 1
                job.joined += 1
                job.last_join = time.perf_counter() - job.started
            try:
                job.fn(job.ctx, tid, self.n)
            except BaseException as e:  # noqa: BLE001 - reported by run()
                job.errors.append(e)
            finally:
                with self._state:
                    self._inside -= 1
                    job.ran += 1
                    self._state.notify_all()

    def _start(self, fn, ctx, keep=None) -> _Job:
        with self._state:
            self._state.wait_for(lambda: self._inside == 0)
            job = self._job = _Job(fn, ctx, keep)
        for wake in self._wake:
            wake.release()
        return job

    def run(self, fn, ctx):
        """fn(ctx, tid, n) on every thread; returns when all have returned."""
        if self.n == 1:
            return fn(ctx, 0, 1)
        with self._lock:
            job = self._start(fn, ctx)
            try:
                fn(ctx, 0, self.n)
            finally:
                with self._state:
                    self._state.wait_for(lambda: job.ran == self.n - 1)
                    job.closed, self._job = True, None
            if job.errors:
                raise job.errors[0]

    def share(self, fn, ctx, before=None, keep=None, solo: bool = False):
        """fn(ctx, 0, n) on the caller, joined by the workers that wake up in time (`solo`:
        fn(ctx, 0, 1), no workers). `before()` runs first, when no worker is inside fn any more.
        `keep`: the object that owns fn's code and memory, referenced until the last worker has
        left fn (it may outlive this call)."""
        if self.n == 1:
            if before is not None:
                before()
            return fn(ctx, 0, 1)
        with self._lock:
            with self._state:
                self._state.wait_for(lambda: self._inside == 0)
                if before is not None:
                    before()
            self.helped = None
            if solo:
                return fn(ctx, 0, 1)
            job = self._start(fn, ctx, keep)
            try:
                fn(ctx, 0, self.n)
            finally:
                with self._state:
                    job.closed = True
                    self._job = None  # a worker inside holds the job (and `keep`) itself
                    took = time.perf_counter() - job.started
                    self.helped = job.joined == self.n - 1 and job.last_join <= PROMPT_JOIN * took
            if job.errors:
                raise job.errors[0]


class ThreadChoice:
    """Per program: run the next call on the whole pool or on the caller alone (`pick() -> solo`),
    by a moving average of the measured time of each (`record(solo, seconds, helped)`). The pool comes
    first, then the caller alone, except where that is unlikely to pay: after a call of over EXPLORE_S
    on the pool, or of over EXPLORE_HELPED_S that every worker joined at once (they had cores of their
    own), the caller alone is tried only once the budget below allows (a prefill of seconds run alone
    would cost a generation its first token, and one of 30 ms its second). The slower way is
    tried again after 2, 4 and 8 calls and then every EXPLORE calls while that is cheap: while that
    many slow calls take under EXPLORE_S seconds (calls of microseconds), or while the two are
    within 30 % (a first call, or a moment when another process's threads held the other core, may
    have misled: the way that lost is soon looked at again). Otherwise so that it costs a small
    share of the time: when this program has run SHARE times the slower way's time, and at least
    EXPLORE_S seconds and EXPLORE_MIN calls have passed; its stale average is then replaced by the new time, so that a
    machine that gets idle or busy is followed soon. The clock matters for calls of some
    milliseconds: a second thread stalled for a while (another process's spinning threads) made
    ShuffleNet run alone at 8 ms for the next 16 calls, where both threads, free again, took 6. And
    the share matters for calls of some milliseconds that run many times (an LLM's decoding steps):
    trying the slower way on one call in four cost a 2-thread decoder a tenth of its rate."""

    EXPLORE = 16
    EXPLORE_MIN = 4
    EXPLORE_S = 0.05
    EXPLORE_HELPED_S = 0.002  # calls this long whose workers join promptly are not tried alone early
    SHARE = 32  # the slower way is tried once per this many times its own time, at most
    WEIGHT = 0.5  # of a new time in the average of the way in use

    def __init__(self, clock=time.perf_counter):
        self.avg: dict[bool, float | None] = {False: None, True: None}
        self.calls = 0
        self.clock = clock
        self.explored_at = (0, clock())  # (calls, time) when the slower way last ran
        self.helped: bool | None = None  # whether the workers joined the last call on the pool promptly
        self.busy = 0.0  # seconds this program ran since then (not the wall clock: a prefill
        # that runs once per generation would otherwise try the slower way every few calls)

    def pick(self) -> bool:
        if self.avg[False] is None:
            return False
        if self.avg[True] is None:  # the caller alone is tried second, except after a long call
            # (work that keeps every thread busy for EXPLORE_S is looked at alone only when due)
            # or while the workers join at once: they have cores, so alone is slower; a prefill of
            # 30 ms on 2 threads took 48 ms alone, the second generation's first token
            if self.helped and self.avg[False] >= self.EXPLORE_HELPED_S:
                return self.busy >= self.SHARE * self.avg[False]
            return self.avg[False] < self.EXPLORE_S or self.busy >= self.SHARE * self.avg[False]
        faster = self.avg[True] < self.avg[False]
        slow = self.avg[not faster]
        n = self.calls
        since_n, since_t = n - self.explored_at[0], self.clock() - self.explored_at[1]
        cheap = slow * self.EXPLORE <= self.EXPLORE_S
        close = slow < 1.3 * self.avg[faster]  # the first times may mislead: look again soon
        if ((cheap or close) and (n & (n - 1) == 0 and n <= 8 or n % self.EXPLORE == 0)
                or since_n >= self.EXPLORE_MIN and min(since_t, self.busy) >= max(self.EXPLORE_S, self.SHARE * slow)):
            self.explored_at = (n, self.clock())
            self.busy = 0.0
            return not faster
        return faster

    def record(self, solo: bool, seconds: float, helped: bool | None = None):
        """`helped` (a call on the pool): whether every worker joined it promptly (ThreadPool.helped)."""
        if not solo:
            self.helped = helped
        old, other = self.avg[solo], self.avg[not solo]
        stale = old is None or other is not None and old > other
        self.avg[solo] = seconds if stale else old + (seconds - old) * self.WEIGHT
        self.calls += 1
        self.busy += seconds


_pools: dict[tuple, ThreadPool] = {}
_pools_lock = threading.Lock()


def get_pool(nthreads: int, device: str | None = None) -> ThreadPool:
    """The pool of `device` (a Device.id; None: the default device) with `nthreads` threads, made
    on first use. Threads are daemons and live as long as the process."""
    key = (device, max(1, int(nthreads)))
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            name = "glow-cpu" if device is None else f"glow-{device}"
            pool = _pools[key] = ThreadPool(key[1], name)
        return pool
