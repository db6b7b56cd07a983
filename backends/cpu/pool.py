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

The workers wait for calls in native code (dispatch.py): they spin on the pool's job counter for
about half a millisecond after each call, then sleep on it, and call the entry themselves, never
taking the GIL (a Python function given to `share` or `run` is called back through ctypes,
which takes it). Waiting on a Python semaphore instead, a worker joined a 2 ms LLM decoding step
about 0.5 ms late on a 2-core VM. ctypes releases the GIL during the caller's native call, so
the threads really run in parallel. One call at a time per pool; `get_pool` keeps one pool per
(device, thread count), so two logical CPU devices run at the same time.

The workers are kept off the caller's CPU (`Placement`). Woken after a pause, a worker was put on
the CPU of the caller that woke it, on a 2-vCPU KVM guest (Zen 5, Linux 6.18) with the other CPU
idle, and waited there for the load balancer: a Llama prefill of 10 ms on 2 threads took 15-19 ms
in 8 of 10 calls made a quarter-second apart. With the worker's affinity excluding the caller's CPU
the wake-up has to place it elsewhere: 10.3-12.6 ms in every call. Only the workers' affinity
changes (the caller's thread is the user's), and only when the caller is seen on another CPU.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from .dispatch import PoolState

#: A worker "helped" a shared call when it joined within this fraction of the call's time.
PROMPT_JOIN = 0.1
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class ThreadPool:
    def __init__(self, nthreads: int, name: str = "glow-cpu"):
        self.n = max(1, int(nthreads))
        self._lock = threading.Lock()  # one call at a time per pool
        #: after a `share` on the workers: whether every worker joined within the first
        #: PROMPT_JOIN of the call (they had cores of their own); None after a solo call
        self.helped: bool | None = None
        self._keep = None  # what the last call's entry belongs to: alive while a worker may be inside
        if self.n > 1:
            self._state = PoolState()
            workers = [threading.Thread(target=self._state.worker, args=(tid,), name=f"{name}-{tid}", daemon=True)
                       for tid in range(1, self.n)]
            for w in workers:
                w.start()
            self._placement = Placement([w.native_id for w in workers])

    def run(self, fn, ctx):
        """fn(ctx, tid, n) on every thread; returns when all have returned. `fn` is a Python
        function (the peak measurement's): the caller waits until every worker has joined."""
        if self.n == 1:
            return fn(ctx, 0, 1)
        arrived = threading.Semaphore(0)

        def each(ctx, tid, n):
            if tid:
                arrived.release()
            else:
                for _ in range(n - 1):
                    arrived.acquire()
            fn(ctx, tid, n)
        self.share(each, ctx)
        with self._lock:
            self._state.quiesce()

    def share(self, fn, ctx, before=None, keep=None, solo: bool = False):
        """fn(ctx, 0, n) on the caller, joined by the workers that are waiting or wake up in time
        (`solo`: fn(ctx, 0, 1), no workers). `before()` runs first, when no worker is inside fn
        any more. `fn` is an entry (a ctypes function of (ctx, tid, n)) or a Python function of
        the same arguments. `keep`: the object that owns fn's code and memory, referenced until
        the next call, by when every worker has left fn."""
        if self.n == 1:
            if before is not None:
                before()
            return fn(ctx, 0, 1)
        with self._lock:
            self._state.quiesce()  # a worker that joined the last call may still be on its way out
            self._keep = None
            if before is not None:
                before()
            self.helped = None
            if solo:
                return fn(ctx, 0, 1)
            errors: list = []
            if not isinstance(fn, ctypes._CFuncPtr):  # not a ctypes function (an entry): a Python one
                fn, ctx = _callback(fn, ctx, errors), None
            self._keep = (keep, fn)
            self._placement.follow()
            self._state.share(ctypes.cast(fn, ctypes.c_void_p).value, ctx, self.n)
            self.helped = self._state.helped(self.n - 1, PROMPT_JOIN)
            if errors:
                raise errors[0]


class Placement:
    """Keeps a pool's workers off the CPU its caller runs on (see the module's docstring): before
    each shared call, if the caller is on another CPU than last time, each worker's affinity
    becomes the CPUs the process may use less the caller's. Nothing is done where that would leave
    a worker fewer CPUs than there are workers, where the process may use one CPU, or once the
    system refuses (a cpuset changed under us): the scheduler places them as it likes."""

    def __init__(self, workers: list[int]):
        self.workers = workers
        self.caller_cpu = -1
        try:
            self.cpus = frozenset(os.sched_getaffinity(0))
            self._getcpu = ctypes.CDLL(None).sched_getcpu
        except (AttributeError, OSError):  # not Linux/glibc: leave placement to the system
            self.cpus = frozenset()
        self.active = len(self.cpus) > len(workers)

    def follow(self) -> None:
        if not self.active:
            return
        cpu = self._getcpu()
        if cpu == self.caller_cpu:
            return
        self.caller_cpu = cpu
        others = self.cpus - {cpu}
        try:
            for w in self.workers:
                os.sched_setaffinity(w, others)
        except OSError:
            self.active = False


def _callback(fn, ctx, errors: list):
    """`fn(ctx, tid, n)` as an entry the native workers can call (ctypes takes the GIL for it); what
    it raises is kept in `errors`, since a callback cannot raise into the code that called it."""
    def call(_, tid, n):
        try:
            fn(ctx, tid, n)
        except BaseException as e:  # noqa: BLE001 - raised by share() once the call is over
            errors.append(e)
    return _ENTRY(call)


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
