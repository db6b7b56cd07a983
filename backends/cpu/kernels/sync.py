"""A spin barrier between kernels, for the threads that run one inference together.

State: two i64 counters 64 bytes apart (arrival count, generation) so they never share a cache
line. The last thread to arrive resets the count and bumps the generation (release); the others
spin on the generation (acquire) with `pause`. All threads are busy with the same inference, so
spinning costs nothing that sleeping would save, and it wakes in nanoseconds. After SPIN_LIMIT
spins the partner is evidently not running (more runnable threads than cores): the waiter then
calls sched_yield on every spin, so the thread it waits for gets the core.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ..irutil import I64, KernelBuilder

GEN_OFFSET = 8  # i64 elements: 64 bytes
#: pause-spins (about 40 ns each on Zen 5) before a waiting thread starts yielding its core.
SPIN_LIMIT = 2000


def emit_barrier(kb: KernelBuilder, state, nth):
    b = kb.b
    count_ptr = kb.ptr(state, 0, I64)
    gen_ptr = kb.ptr(state, GEN_OFFSET, I64)
    with b.if_then(b.icmp_signed(">", nth, kb.i64(1))):
        gen = b.load_atomic(gen_ptr, "acquire", 8, typ=I64)
        old = b.atomic_rmw("add", count_ptr, kb.i64(1), "acq_rel")
        last = b.icmp_signed("==", old, b.sub(nth, kb.i64(1)))
        with b.if_else(last) as (then, other):
            with then:
                _store_atomic(b, kb.i64(0), count_ptr, "monotonic")
                _store_atomic(b, b.add(gen, kb.i64(1)), gen_ptr, "release")
            with other:
                pause = kb.intrinsic("llvm.x86.sse2.pause", ir.VoidType(), [])
                yield_ = kb.intrinsic("sched_yield", ir.IntType(32), [])
                spins = kb.var(I64, kb.i64(0))
                head = kb.fn.append_basic_block("spin")
                done = kb.fn.append_basic_block("spin.done")
                b.branch(head)
                b.position_at_end(head)
                b.call(pause, [])
                n = b.add(b.load(spins), kb.i64(1))
                b.store(n, spins)
                with b.if_then(b.icmp_signed(">", n, kb.i64(SPIN_LIMIT))):
                    b.call(yield_, [])  # the partner is not running (a busy machine): let it
                now = b.load_atomic(gen_ptr, "acquire", 8, typ=I64)
                b.cbranch(b.icmp_signed("==", now, gen), head, done)
                b.position_at_end(done)


def _store_atomic(b: ir.IRBuilder, value, ptr, ordering: str):
    """An atomic i64 store (IRBuilder.store_atomic insists on typed pointers; these are opaque)."""
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, ordering, 8))
