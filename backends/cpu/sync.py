"""How the threads of one inference share its kernels: phases, chunk claiming, done counters.

Every kernel call of the entry is a *phase* with one 64-byte slot of state: i64 counters `claim`
and `done` and a `sleepers` flag. A phase is cut into chunks (one for a small kernel,
CHUNKS_PER_THREAD per thread for a large one); a thread takes the next chunk with an atomic add
on `claim`, runs the kernel on it (the kernel sees the chunk as its (tid, nthreads) share) and
adds one to `done`. Before it claims a chunk, a thread waits until every phase this one depends
on has all its chunks done. Dependencies come from memory (`Phases`): a phase waits for an
earlier one only when one writes bytes the other reads or writes, arena reuse included, and not
when that earlier phase is already implied by another wait.

So no thread waits for another to *arrive*: a worker the OS does not run leaves its share to
the others (the caller may run the whole inference alone), a small kernel runs on whichever
thread gets to it first while another thread works on an independent one, and a thread waits
only for chunks that another thread has actually claimed. Waiting spins with `pause`; after
SPIN_LIMIT spins the thread waited for is evidently not running (more runnable threads than
cores), and the waiter sleeps on a futex instead: its core goes idle, so the scheduler can run
the thread it waits for there (a sched_yield would keep the core busy). A thread that finishes a
chunk wakes the sleepers of that phase, if the flag says there are any (no syscall otherwise).

The counters only grow during an inference; the runtime zeroes them before the next one, once
no thread is inside the entry any more (pool.py). x86-64 Linux only (pause, the futex syscall).
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from .irutil import I64, PTR, VOID, KernelBuilder

SLOT_BYTES = 64  # one cache line per phase
CLAIM, DONE, SLEEPERS = 0, 1, 2  # i64 index of each counter in a slot
#: chunks per thread of a phase split across threads: a thread the OS deschedules leaves at
#: most one chunk behind, and the last chunks even out the threads' speeds.
CHUNKS_PER_THREAD = 4
#: pause-spins (about 40 ns each on Zen 5) before a waiting thread goes to sleep.
SPIN_LIMIT = 2000
#: a sleeper re-checks its counter at least this often (a safety net: wake-ups are not lost).
SLEEP_NS = 2_000_000
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129  # x86-64 Linux


# -- which phases wait for which -----------------------------------------------------------------

class Phases:
    """The phases of one entry, in program order, and the earlier phases each must wait for.

    An access is (space, start, end, writes): a byte range of one memory space (the arena, an
    input or output array). `add` returns the phases to wait for: every earlier phase with a
    conflicting access (one of the two writes), less those already implied by another wait (a
    phase's chunks start only after its own waits are over, so its completion implies theirs).
    """

    def __init__(self):
        self.accesses: list[tuple] = []
        self.single: list[bool] = []
        self._before: list[int] = []  # per phase: bit set of the phases known done when it starts

    def __len__(self):
        return len(self.accesses)

    def add(self, accesses, single: bool, after: int | None = None) -> list[int]:
        """Register the next phase; `after`: a phase it must follow whatever its accesses."""
        waits, known = self._waits(lambda q: q == after or _conflict(self.accesses[q], accesses))
        self.accesses.append(tuple(accesses))
        self.single.append(single)
        self._before.append(known)
        return waits

    def final(self) -> list[int]:
        """The phases to wait for so that every phase is done (the end of an inference)."""
        return self._waits(lambda q: True)[0]

    def _waits(self, depends) -> tuple[list[int], int]:
        waits, known = [], 0
        for q in reversed(range(len(self.accesses))):
            if known >> q & 1 or not depends(q):
                continue
            waits.append(q)
            known |= self._before[q] | 1 << q
        return waits, known


def _conflict(xs, ys) -> bool:
    return any(a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and (a[3] or b[3]) for a in xs for b in ys)


# -- the native side -----------------------------------------------------------------------------

class PhaseEmitter:
    """Emits the phases of the entry `kb` (`void (ptr ctx, i64 tid, i64 nthreads)`): with one
    thread a phase is a plain call of its kernel, with more the claim loop above. `state` is the
    pointer to the slots; `tid`, `nth` are the entry's arguments.

    The entry holds one call per phase, to a *runner*: an internal function, one per kernel
    signature, that takes the kernel's address, its arguments, the phase's slot and its waits
    (an array placed with the weights), and does the above. Inlined into the entry, the claim loop and its waits
    were about 45 lines of IR per phase: ResNet-50 lowered to the primitive floor (368 phases)
    had a megabyte of entry IR, the longest object to compile. A runner calls its kernel through
    a pointer, once per chunk: nanoseconds against a kernel's microseconds.
    """

    def __init__(self, kb: KernelBuilder, state, tid, nth, value, array):
        """`value(int, type)`: an integer the entry reads from data rather than its code;
        `array(np.ndarray, align)`: a pointer to an array placed with the weights."""
        self.kb, self.state, self.tid, self.nth = kb, state, tid, nth
        self._value, self._array = value, array
        self.phases = Phases()
        b = kb.b
        self.serial = b.icmp_signed("==", nth, kb.i64(1))
        self.chunks = b.mul(nth, kb.i64(CHUNKS_PER_THREAD))
        self._wait = _wait_function(kb.module)
        self._wake = _wake_function(kb.module)
        self._runners: dict[tuple, ir.Function] = {}

    @property
    def state_bytes(self) -> int:
        return max(len(self.phases), 1) * SLOT_BYTES

    def phase(self, accesses, single: bool, after: int | None, fn: ir.Function, args, one_chunk: bool = False):
        """The next phase: a call of kernel `fn` with `args`; unless `single`, its last two
        arguments are (tid, nthreads), which a chunk replaces with (chunk, nchunks);
        `one_chunk`: such a kernel run as one chunk (too little work to share). `accesses` and
        `after` as for Phases.add.

        Everything here that depends on sizes is data, not code: the kernel's integer
        arguments, `one_chunk` and the waits (`value`, `array`), so two shapes with the same
        sequence of kernels get the same entry text."""
        kb = self.kb
        index = len(self.phases)
        waits = self.phases.add(accesses, single or one_chunk, after)
        fixed = [self._value(a.constant, a.type) if isinstance(a, ir.Constant) and isinstance(a.type, ir.IntType)
                 else a for a in (args if single else args[:-2])]
        runner = self._runner(fn.function_type, single)
        one = [] if single else [self._value(int(one_chunk))]
        kb.b.call(runner, [_address(fn), *fixed, self.state, kb.i64(index), self.tid, self.nth, *one,
                           *self._waits_of(waits)])

    def finish(self):
        """At the end of the entry: thread 0 (the caller) returns only when every phase is done."""
        b = self.kb.b
        waits = self._waits_of(self.phases.final())
        with b.if_then(b.and_(b.not_(self.serial), b.icmp_signed("==", self.tid, self.kb.i64(0)))):
            _wait_all(self.kb, self._wait, self.state, *waits, self.chunks)

    def _waits_of(self, phases: list[int]) -> tuple[ir.Value, ir.Value]:
        """(pointer to an i64 array of phase << 1 | single, its length) for waiting on `phases`."""
        codes = [q << 1 | self.phases.single[q] for q in phases]
        return self._array(np.array(codes or [0], np.int64), 8), self._value(len(codes))

    def _runner(self, kernel: ir.FunctionType, single: bool) -> ir.Function:
        """`void runner(ptr kernel, <kernel's arguments but (tid, nth)>, ptr state, i64 phase,
        i64 tid, i64 nth, ptr waits, i64 nwaits)`: one phase as the module docstring says."""
        fixed = list(kernel.args) if single else list(kernel.args[:-2])
        key = (tuple(str(t) for t in fixed), single)
        runner = self._runners.get(key)
        if runner is not None:
            return runner
        kb = KernelBuilder(self.kb.module, f"glow_phase.{len(self._runners)}",
                           [PTR, *fixed, PTR, I64, I64, I64, *([] if single else [I64]), PTR, I64], internal=True)
        kb.fn.attributes.add("nounwind")
        b = kb.b
        target, args = _Callee(kb.args[0], kernel), list(kb.args[1:1 + len(fixed)])
        state, index, tid, nth, *one, waits, nwaits = kb.args[1 + len(fixed):]
        with b.if_else(b.icmp_signed("==", nth, kb.i64(1))) as (alone, many):
            with alone:
                b.call(target, args if single else args + [tid, nth])
            with many:
                chunks = b.mul(nth, kb.i64(CHUNKS_PER_THREAD))
                n = kb.i64(1) if single else b.select(b.icmp_signed("!=", one[0], kb.i64(0)), kb.i64(1), chunks)
                slot = b.mul(index, kb.i64(SLOT_BYTES // 8))
                claim, done = kb.ptr(state, slot, I64), kb.ptr(state, b.add(slot, kb.i64(DONE)), I64)
                with b.if_then(b.icmp_signed("<", b.load_atomic(claim, "monotonic", 8, typ=I64), n)):
                    _wait_all(kb, self._wait, state, waits, nwaits, chunks)
                    head = kb.fn.append_basic_block("claim")
                    body = kb.fn.append_basic_block("run")
                    end = kb.fn.append_basic_block("end")
                    b.branch(head)
                    b.position_at_end(head)
                    chunk = b.atomic_rmw("add", claim, kb.i64(1), "monotonic")
                    b.cbranch(b.icmp_signed("<", chunk, n), body, end)
                    b.position_at_end(body)
                    b.call(target, args if single else args + [chunk, n])
                    b.atomic_rmw("add", done, kb.i64(1), "seq_cst")
                    sleepers = b.load_atomic(kb.ptr(state, b.add(slot, kb.i64(SLEEPERS)), I64), "seq_cst", 8,
                                             typ=I64)
                    with b.if_then(b.icmp_signed("!=", sleepers, kb.i64(0)), likely=False):
                        b.call(self._wake, [done])
                    b.branch(head)
                    b.position_at_end(end)
        runner = self._runners[key] = kb.finish()
        return runner


class SerialEmitter:
    """PhaseEmitter's interface for an entry that one thread runs (an ahead-of-time bundle): a
    phase is a plain call; no sync state, no atomics, no pause, no syscall."""

    state_bytes = 0

    def __init__(self, kb: KernelBuilder):
        self.kb = kb
        self.phases = Phases()

    def phase(self, accesses, single: bool, after: int | None, fn: ir.Function, args, one_chunk: bool = False):
        self.phases.add(accesses, single or one_chunk, after)
        self.kb.b.call(fn, args)  # (tid, nthreads) are the entry's (0, 1)

    def finish(self):
        pass


def _wait_all(kb: KernelBuilder, wait: ir.Function, state, waits, nwaits, chunks):
    """Wait until each phase of the array `waits` (nwaits codes phase << 1 | single) has all its
    chunks (1 if single, else `chunks`) done."""
    b = kb.b
    with kb.loop(0, nwaits, name="w", unroll=False) as w:
        code = kb.load(waits, w, I64, align=8)
        q = b.mul(b.ashr(code, kb.i64(1)), kb.i64(SLOT_BYTES // 8))
        short = b.select(b.trunc(code, ir.IntType(1)), kb.i64(1), chunks)
        _wait_for(kb, wait, kb.ptr(state, b.add(q, kb.i64(DONE)), I64), short)


def _wait_for(kb: KernelBuilder, wait: ir.Function, done, target):
    """Unless *done >= target already (acquire), call glow_wait(done, target)."""
    b = kb.b
    with b.if_then(b.icmp_signed("<", b.load_atomic(done, "acquire", 8, typ=I64), target), likely=False):
        b.call(wait, [done, target])


def _address(g) -> ir.Value:
    """A function's or global's address as a `ptr` operand (llvmlite would print a typed pointer,
    which LLVM's parser no longer reads)."""
    return ir.FormattedConstant(PTR, g.get_reference())


class _Callee:
    """A `ptr` value called as a function of type `fnty`: what IRBuilder.call needs of its callee
    (llvmlite has no indirect call through an opaque pointer)."""

    def __init__(self, value: ir.Value, fnty: ir.FunctionType):
        self.value, self.type, self.function_type = value, value.type, fnty

    def get_reference(self) -> str:
        return self.value.get_reference()


def _futex(kb: KernelBuilder, word, op: int, value, timeout):
    try:
        syscall = kb.module.get_global("syscall")
    except KeyError:
        syscall = ir.Function(kb.module, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
    # every argument a full register: syscall() reads them as longs (the kernel takes the low 32
    # bits of op and value)
    return kb.b.call(syscall, [kb.i64(SYS_FUTEX), word, kb.i64(op), value, timeout])


def _wake_function(module: ir.Module) -> ir.Function:
    """`void glow_wake(ptr done)`: wake every thread asleep on a done counter."""
    try:
        return module.get_global("glow_wake")
    except KeyError:
        pass
    kb = KernelBuilder(module, "glow_wake", [PTR], internal=True)
    kb.fn.attributes.add("noinline")
    kb.fn.attributes.add("nounwind")
    kb.fn.attributes.add("cold")
    _futex(kb, kb.args[0], FUTEX_WAKE_PRIVATE, kb.i64(2**31 - 1), ir.Constant(PTR, None))
    return kb.finish()


def _wait_function(module: ir.Module) -> ir.Function:
    """`void glow_wait(ptr done, i64 target)`: returns once *done >= target (acquire). Spins,
    then sleeps on the counter's low 32 bits (a futex) with the slot's sleepers flag set."""
    try:
        return module.get_global("glow_wait")
    except KeyError:
        pass
    kb = KernelBuilder(module, "glow_wait", [PTR, I64], internal=True)
    kb.fn.attributes.add("noinline")
    kb.fn.attributes.add("nounwind")
    counter, target = kb.args
    b = kb.b
    pause = kb.intrinsic("llvm.x86.sse2.pause", VOID, [])
    timeout = kb.var(ir.ArrayType(I64, 2))
    b.store(ir.Constant(ir.ArrayType(I64, 2), [SLEEP_NS // 10**9, SLEEP_NS % 10**9]), timeout)
    spins = kb.var(I64, kb.i64(0))
    head = kb.fn.append_basic_block("spin")
    done = kb.fn.append_basic_block("spin.done")
    b.branch(head)
    b.position_at_end(head)
    n = b.add(b.load(spins), kb.i64(1))
    b.store(n, spins)
    with b.if_else(b.icmp_signed("<", n, kb.i64(SPIN_LIMIT))) as (spin, sleep):
        with spin:
            b.call(pause, [])
        with sleep:  # the thread waited for is not running (a busy machine): free the core
            _store_atomic(b, kb.i64(1), kb.ptr(counter, SLEEPERS - DONE, I64), "seq_cst")
            now = b.load_atomic(counter, "seq_cst", 8, typ=I64)
            with b.if_then(b.icmp_signed("<", now, target)):
                _futex(kb, counter, FUTEX_WAIT_PRIVATE, now, timeout)  # asleep while *counter == now
    now = b.load_atomic(counter, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_signed("<", now, target), head, done)
    b.position_at_end(done)
    return kb.finish()


def _store_atomic(b: ir.IRBuilder, value, ptr, ordering: str):
    """An atomic i64 store (IRBuilder.store_atomic insists on typed pointers; these are opaque)."""
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, ordering, 8))
