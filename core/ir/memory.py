"""Static memory planning: every activation gets an offset in one arena.

Time is the instruction index. A buffer is live from its `alloc` to its `dealloc` mark; two
buffers whose lifetimes overlap must not overlap in memory. The most bytes live at any one time
is a lower bound on the arena size. Like Glow's MemoryAllocator, several orders of placement are
tried and the smallest arena kept, stopping early when one reaches the lower bound:

  max-live/size   repeatedly take the moment with the most unplaced bytes live, and place the
                  largest buffer live then (Glow's first strategy)
  max-live/time   the same moment, the longest-lived buffer
  size            all buffers, largest first
  order           program order
  shuffled        a few seeded random orders, only when none of the above reached the bound
                  (first-fit by any fixed rule can paint itself into a corner; a different order
                  often finds the way around it)

Each buffer goes at the lowest offset that collides with no placed buffer live at the same time.
Offsets and sizes are multiples of 64 bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..limits import ENV, check_bytes, format_bytes, memory_budget
from .instr import ACTIVATION, ALIGNMENT, OUTPUT, IRFunction, aligned


@dataclass(frozen=True)
class Interval:
    key: int  # id of the buffer
    name: str
    size: int  # aligned bytes
    start: int  # alloc position
    end: int  # dealloc position (inclusive)


@dataclass
class MemoryPlan:
    offsets: dict  # id(buffer) -> byte offset in the arena
    arena_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int
    intervals: list = field(default_factory=list)
    strategy: str = ""
    alignment: int = ALIGNMENT
    boxed: int = 0

    def to_json(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "lower_bound_bytes": self.lower_bound_bytes,
                "no_reuse_bytes": self.no_reuse_bytes, "activations": len(self.intervals),
                "strategy": self.strategy, "alignment": self.alignment, "boxed_activations": self.boxed,
                "buffers": [{"name": iv.name, "offset": self.offsets[iv.key], "bytes": iv.size,
                             "live": [iv.start, iv.end]} for iv in self.intervals]}


def live_intervals(fn: IRFunction) -> list[Interval]:
    start: dict[int, int] = {}
    out = []
    acts = {id(b): b for b in fn.activations()}
    for p, i in enumerate(fn.instrs):
        if i.kind == "alloc" and id(i.outputs[0]) in acts:
            start[id(i.outputs[0])] = p
        elif i.kind == "dealloc" and id(i.outputs[0]) in acts:
            b = i.outputs[0]
            out.append(Interval(id(b), b.name, aligned(b.nbytes), start[id(b)], p))
    return sorted(out, key=lambda iv: iv.start)


def live_profile(intervals, length: int) -> np.ndarray:
    """Bytes live at each position (exact: Python ints should int64 not hold the sum)."""
    exact = sum(iv.size for iv in intervals) >= 1 << 62
    delta = np.zeros(length + 2, object if exact else np.int64)
    for iv in intervals:
        delta[iv.start] += iv.size
        delta[iv.end + 1] -= iv.size
    return np.cumsum(delta)[:length + 1]


def _place(iv: Interval, placed: list) -> int:
    """Lowest aligned offset for `iv` that collides with no time-overlapping placed buffer."""
    busy = sorted((off, off + p.size) for p, off in placed if p.start <= iv.end and iv.start <= p.end)
    at = 0
    for lo, hi in busy:
        if lo - at >= iv.size:
            break
        at = max(at, hi)
    return at


def _by_max_live(intervals, length, prefer):
    totals = live_profile(intervals, length).copy()
    todo = list(intervals)
    placed = []
    while todo:
        t = int(np.argmax(totals))
        live = [iv for iv in todo if iv.start <= t <= iv.end] or todo
        pick = max(live, key=prefer)
        todo.remove(pick)
        placed.append((pick, _place(pick, placed)))
        totals[pick.start:pick.end + 1] -= pick.size
    return placed


STRATEGIES = {
    "max-live/size": lambda ivs, n: _by_max_live(ivs, n, lambda iv: (iv.size, iv.end - iv.start, -iv.start)),
    "max-live/time": lambda ivs, n: _by_max_live(ivs, n, lambda iv: (iv.end - iv.start, iv.size, -iv.start)),
    "size": lambda ivs, n: _in_order(sorted(ivs, key=lambda iv: (-iv.size, iv.start))),
    "order": lambda ivs, n: _in_order(ivs),
}


def _in_order(intervals):
    placed = []
    for iv in intervals:
        placed.append((iv, _place(iv, placed)))
    return placed


#: How many seeded random orders to try after the fixed strategies miss the lower bound (fewer for
#: big functions: each try costs about n^2 steps).
SHUFFLES = 32
SHUFFLE_BUDGET = 4_000_000


def _shuffled(intervals, seed):
    order = list(intervals)
    random.Random(seed).shuffle(order)
    return _in_order(order)


def plan_arena(intervals: list[Interval], length: int) -> tuple[dict, int, str]:
    """(offsets, arena size, strategy name) of the best strategy."""
    bound = int(live_profile(intervals, length).max()) if intervals else 0
    best = None
    shuffles = min(SHUFFLES, SHUFFLE_BUDGET // max(1, len(intervals) ** 2))
    tries = list(STRATEGIES.items()) + [
        (f"shuffled/{k}", lambda ivs, n, k=k: _shuffled(ivs, k)) for k in range(shuffles)]
    for name, strategy in tries:
        placed = strategy(intervals, length)
        size = max((off + iv.size for iv, off in placed), default=0)
        if best is None or size < best[1]:
            best = ({iv.key: off for iv, off in placed}, size, name)
        if size <= bound:
            break
    return best


def plan_memory(fn: IRFunction, *, budget: bool = True) -> MemoryPlan:
    """The arena plan of `fn`; with `budget`, an InputError naming the node unless its arena plus
    its outputs fit the memory budget (glow.limits), raised before anything is allocated."""
    if budget:
        _check_buffers(fn)  # each tensor first: a plan over absurd sizes is pointless
    intervals = live_intervals(fn)
    n = len(fn.instrs)
    offsets, arena, strategy = plan_arena(intervals, n)
    bound = int(live_profile(intervals, n).max()) if intervals else 0
    boxed = sum(1 for b in fn.buffers if b.kind == ACTIVATION and b.boxed)
    plan = MemoryPlan(offsets, arena, bound, sum(iv.size for iv in intervals), intervals, strategy,
                      boxed=boxed)
    check_plan(plan)
    if budget:
        _check_total(fn, plan)
    return plan


def _allocated(fn: IRFunction) -> list:
    """The buffers a run allocates: activations (in the arena) and outputs."""
    return [b for b in fn.buffers if b.kind in (ACTIVATION, OUTPUT) and not b.boxed]


def writer_of(fn: IRFunction, buf) -> str:
    """'node N (Op)' of the first instruction writing `buf` (its node's name), else the graph."""
    for i in fn.instrs:
        if any(w.root is buf for w in i.writes()):
            return f"node '{i.name}' ({i.opname})"
    return f"graph '{fn.name}'"


def _check_buffers(fn: IRFunction) -> None:
    budget = memory_budget()
    for b in _allocated(fn):
        if b.nbytes > budget:  # named only then: finding the writer walks the instructions
            check_bytes(writer_of(fn, b), f"{b.kind} '{b.name}'", b.nbytes, b.type.shape, budget)


def _check_total(fn: IRFunction, plan: MemoryPlan) -> None:
    budget = memory_budget()
    bufs = _allocated(fn)
    outputs = sum(b.nbytes for b in bufs if b.kind == OUTPUT)
    if plan.arena_bytes + outputs <= budget:
        return
    big = max(bufs, key=lambda b: b.nbytes)
    raise InputError(f"{writer_of(fn, big)}: graph '{fn.name}' needs {format_bytes(plan.arena_bytes)} of "
                     f"activations and {format_bytes(outputs)} of outputs, over the memory budget of "
                     f"{format_bytes(budget)} (set {ENV} to change it); its largest tensor is "
                     f"'{big.name}' ({format_bytes(big.nbytes)})")


def check_plan(plan: MemoryPlan) -> None:
    """Raise if two buffers live at the same time share bytes (a planner bug, caught early)."""
    ivs = sorted(plan.intervals, key=lambda iv: plan.offsets[iv.key])
    for k, a in enumerate(ivs):
        oa = plan.offsets[a.key]
        if oa % plan.alignment:
            raise AssertionError(f"buffer %{a.name} at unaligned offset {oa}")
        for b in ivs[k + 1:]:
            ob = plan.offsets[b.key]
            if ob >= oa + a.size:
                break
            if a.start <= b.end and b.start <= a.end:
                raise AssertionError(f"buffers %{a.name} and %{b.name} overlap in time and memory")
