"""The native half of the thread pool: workers that wait for the next call in machine code.

A pool's workers used to wait on a Python semaphore: each call woke them through the OS and
each had to take the GIL before it could join, while the caller held it until its own native
call began. On a 2-core VM that made a worker join an LLM decoding step of 2 ms about 0.5 ms
late, so 2 threads decoded no faster than 1. Here a worker runs `glow_pool_worker` for its
whole life, with the GIL released: it spins on the pool's job counter for WORKER_SPIN pauses
after each call (about half a millisecond), then sleeps on it (a futex), and it calls the
entry itself, so joining a call costs a cache line's transfer while it spins.

The state is one block of i64 slots, each group on its own cache line:

    SEQ       the job counter: the caller adds one per call (workers wait for it to change)
    FN, CTX, N, START, END     the current call: entry, its argument, threads; cycle counter
              at its start and when the caller's own call returned
    CLOSED    the number of the last call the caller finished: a worker that finds its job
              closed does not enter it (the sync state may be reset for the next one)
    INSIDE    workers inside an entry now
    JOINED, LAST_JOIN          workers that joined this call, and the cycle counter when the
              last of them did (`ThreadPool.helped`)
    SLEEPERS  set by a worker before it sleeps: the caller wakes the futex only then

x86-64 Linux only (pause, rdtsc, the futex syscall), like the phases' sync (sync.py).
"""
from __future__ import annotations

import ctypes
import re
import threading

import numpy as np

SEQ, FN, CTX, N, START, END, CLOSED, INSIDE, JOINED, LAST_JOIN, SLEEPERS = 0, 8, 9, 10, 11, 12, 16, 24, 32, 33, 40
STATE_SLOTS = 48  # 6 cache lines of i64
#: pause-spins a worker waits for the next call before it sleeps (`pause` is 40-140 cycles:
#: about 0.3-1 ms), long enough to span the Python between two decoding steps.
WORKER_SPIN = 20000
#: a sleeping worker looks at the counter at least this often (a safety net: wake-ups are not lost)
SLEEP_NS = 50_000_000

_IR = r"""
declare i64 @syscall(i64, ...)
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()

define internal ptr @slot(ptr %st, i64 %k) alwaysinline {
  %p = getelementptr i64, ptr %st, i64 %k
  ret ptr %p
}

; a worker's life: wait for the next call (spin, then sleep), join it unless it is closed
define void @glow_pool_worker(ptr %st, i64 %tid) {
entry:
  %ts = alloca [2 x i64]
  store [2 x i64] [i64 0, i64 SLEEP_NS], ptr %ts
  br label %next
next:
  ; from 0, the counter's first value: a call made before this thread got here is still seen
  %last = phi i64 [ 0, %entry ], [ %s, %skip ], [ %s, %ran ]
  br label %wait
wait:
  %spins = phi i64 [ 0, %next ], [ %spins1, %spin ], [ WORKER_SPIN_M, %slept ]
  %now = load atomic i64, ptr %st acquire, align 8
  %new = icmp ne i64 %now, %last
  br i1 %new, label %got, label %idle
idle:
  %spins1 = add i64 %spins, 1
  %more = icmp slt i64 %spins1, WORKER_SPIN
  br i1 %more, label %spin, label %sleep
spin:
  call void @llvm.x86.sse2.pause()
  br label %wait
sleep:
  %sl = call ptr @slot(ptr %st, i64 SLEEPERS)
  store atomic i64 1, ptr %sl seq_cst, align 8
  %again = load atomic i64, ptr %st seq_cst, align 8
  %moved = icmp ne i64 %again, %last
  br i1 %moved, label %slept, label %futex
futex:
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %st, i64 128, i64 %last, ptr %ts)
  br label %slept
slept:
  br label %wait
got:
  %s = phi i64 [ %now, %wait ]
  %in = call ptr @slot(ptr %st, i64 INSIDE)
  %i0 = atomicrmw add ptr %in, i64 1 seq_cst
  %t = call i64 @llvm.readcyclecounter()
  %jp = call ptr @slot(ptr %st, i64 JOINED)
  %j0 = atomicrmw add ptr %jp, i64 1 seq_cst
  %lj = call ptr @slot(ptr %st, i64 LAST_JOIN)
  %l0 = atomicrmw umax ptr %lj, i64 %t seq_cst
  %cl = call ptr @slot(ptr %st, i64 CLOSED)
  %c = load atomic i64, ptr %cl seq_cst, align 8
  %late = icmp sge i64 %c, %s
  br i1 %late, label %skip, label %run
skip:
  %i1 = atomicrmw sub ptr %in, i64 1 seq_cst
  br label %next
run:
  %fp = call ptr @slot(ptr %st, i64 FN)
  %fn = load ptr, ptr %fp, align 8
  %cp = call ptr @slot(ptr %st, i64 CTX)
  %ctx = load ptr, ptr %cp, align 8
  %np = call ptr @slot(ptr %st, i64 N)
  %n = load i64, ptr %np, align 8
  call void %fn(ptr %ctx, i64 %tid, i64 %n)
  %i2 = atomicrmw sub ptr %in, i64 1 seq_cst
  br label %ran
ran:
  br label %next
}

; a call: publish it, wake sleeping workers, run it on the caller (thread 0), close it
define void @glow_pool_share(ptr %st, ptr %fn, ptr %ctx, i64 %n) {
entry:
  %jp = call ptr @slot(ptr %st, i64 JOINED)
  store i64 0, ptr %jp, align 8
  %lj = call ptr @slot(ptr %st, i64 LAST_JOIN)
  store i64 0, ptr %lj, align 8
  %fp = call ptr @slot(ptr %st, i64 FN)
  store ptr %fn, ptr %fp, align 8
  %cp = call ptr @slot(ptr %st, i64 CTX)
  store ptr %ctx, ptr %cp, align 8
  %np = call ptr @slot(ptr %st, i64 N)
  store i64 %n, ptr %np, align 8
  %t0 = call i64 @llvm.readcyclecounter()
  %sp = call ptr @slot(ptr %st, i64 START)
  store i64 %t0, ptr %sp, align 8
  %old = atomicrmw add ptr %st, i64 1 seq_cst
  %s = add i64 %old, 1
  %sl = call ptr @slot(ptr %st, i64 SLEEPERS)
  %asleep = load atomic i64, ptr %sl seq_cst, align 8
  %any = icmp ne i64 %asleep, 0
  br i1 %any, label %wake, label %go
wake:
  store atomic i64 0, ptr %sl seq_cst, align 8
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %st, i64 129, i64 2147483647, ptr null)
  br label %go
go:
  call void %fn(ptr %ctx, i64 0, i64 %n)
  %t1 = call i64 @llvm.readcyclecounter()
  %ep = call ptr @slot(ptr %st, i64 END)
  store i64 %t1, ptr %ep, align 8
  %cl = call ptr @slot(ptr %st, i64 CLOSED)
  store atomic i64 %s, ptr %cl seq_cst, align 8
  ret void
}

; returns once no worker is inside an entry (spins, then yields the core: one is descheduled)
define void @glow_pool_quiesce(ptr %st) {
entry:
  %in = call ptr @slot(ptr %st, i64 INSIDE)
  br label %check
check:
  %k = phi i64 [ 0, %entry ], [ %k1, %spin ], [ %k1, %yield ]
  %v = load atomic i64, ptr %in acquire, align 8
  %zero = icmp eq i64 %v, 0
  br i1 %zero, label %done, label %wait
wait:
  %k1 = add i64 %k, 1
  %more = icmp slt i64 %k1, 2000
  br i1 %more, label %spin, label %yield
spin:
  call void @llvm.x86.sse2.pause()
  br label %check
yield:
  %r = call i64 (i64, ...) @syscall(i64 24)
  br label %check
done:
  ret void
}
"""

_lock = threading.Lock()
_native = None


def _module():
    """The compiled functions (one small module per process, from the object cache after the first)."""
    global _native
    with _lock:
        if _native is None:
            import llvmlite.binding as llvm

            from . import jit

            values = {"WORKER_SPIN_M": WORKER_SPIN - 1000, "WORKER_SPIN": WORKER_SPIN, "SLEEP_NS": SLEEP_NS,
                      "SLEEPERS": SLEEPERS, "INSIDE": INSIDE, "JOINED": JOINED, "LAST_JOIN": LAST_JOIN,
                      "CLOSED": CLOSED, "START": START, "END": END, "FN": FN, "CTX": CTX, "N": N}
            text = re.sub(r"\b[A-Z][A-Z_]*\b", lambda m: str(values[m.group()]), _IR)
            module = jit.CompiledModule(f'target triple = "{llvm.get_process_triple()}"\n' + text,
                                        what="thread pool", with_helpers=False)
            vp, i64 = ctypes.c_void_p, ctypes.c_int64
            _native = (module,
                       ctypes.CFUNCTYPE(None, vp, i64)(module.address("glow_pool_worker")),
                       ctypes.CFUNCTYPE(None, vp, vp, vp, i64)(module.address("glow_pool_share")),
                       ctypes.CFUNCTYPE(None, vp)(module.address("glow_pool_quiesce")))
        return _native


class PoolState:
    """One pool's state block and the native calls on it."""

    def __init__(self):
        raw = np.zeros(STATE_SLOTS + 8, np.int64)
        shift = (-raw.ctypes.data % 64) // 8
        self.slots = raw[shift:shift + STATE_SLOTS]  # 64-byte aligned
        self.address = self.slots.ctypes.data
        _, self._worker, self._share, self._quiesce = _module()

    def worker(self, tid: int) -> None:
        self._worker(self.address, tid)  # never returns; the GIL is released meanwhile

    def share(self, fn_address: int, ctx: int | None, n: int) -> None:
        self._share(self.address, fn_address, ctx, n)

    def quiesce(self) -> None:
        self._quiesce(self.address)

    def helped(self, workers: int, prompt: float) -> bool:
        """Whether `workers` joined the last call, the last within `prompt` of its time."""
        s = self.slots
        took = int(s[END]) - int(s[START])
        return int(s[JOINED]) >= workers and int(s[LAST_JOIN]) - int(s[START]) <= prompt * max(took, 1)
