"""The placement search: which device runs each node.

Objective "latency" (default): minimise one request's estimated time, the sum of every node's
roofline time on its device plus every transfer the placement implies.
  1. Dynamic programming over the topological order (Viterbi): the state is the device of the
     last placed node; each state keeps its best path, so the transfer cost of every input, skip
     connections included, is priced exactly against that path, and so is memory (weights and the
     largest working set per device along the path must fit the cap).
  2. Local refinement with exact cost deltas: move single nodes and whole same-device runs of the
     topological order to another device while that lowers the total and fits memory. This
     undoes the DP's myopia (a choice that only pays off several nodes later).

Objective "priority": the peers' greedy rule, for comparison and to force work onto a device:
each node goes to the first listed device that can run it and still has room.

Objective "throughput": minimise the slowest pipeline stage. The topological order is cut into
contiguous stages, one per device (in every distinct device order), by a bottleneck DP; requests
then stream through the stages (see glow.runtime). Falls back to "latency" when no staged
placement exists (e.g. an accelerator that cannot run a whole stage).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from .cost import HANDOFF_S, CostTable, link_latency, value_bytes

HOST = -1


@dataclass(frozen=True)
class ValueUse:
    """A non-constant value: its size, producer (HOST for graph inputs), readers, output flag."""

    nbytes: int
    producer: int
    consumers: tuple
    is_output: bool


class Problem:
    """The graph as index arrays, and the exact objective with O(degree) move deltas."""

    def __init__(self, table: CostTable, allowed: np.ndarray):
        g: Graph = table.graph
        self.n, self.k = len(g.nodes), len(table.targets)
        self.targets = table.targets
        self.time = np.where(allowed, table.time, np.inf)
        self.allowed = allowed
        self.weight_bytes = table.weight_bytes
        self.work = table.work_bytes
        self.cap = np.array([t.memory_bytes if t.memory_bytes is not None else np.inf
                             for t in table.targets], dtype=float)
        self.link = np.array([1.0 / (t.device.transfer_gbs * 1e9) for t in table.targets])
        self.lat = np.array([link_latency(t) for t in table.targets])  # seconds per leg (a network's)
        index: dict[int, int] = {}
        uses: list[list] = []
        self.reads: list[list[int]] = [[] for _ in range(self.n)]
        self.writes: list[list[int]] = [[] for _ in range(self.n)]
        self.consts: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for v in g.inputs:
            index[id(v)] = len(uses)
            uses.append([value_bytes(v), HOST, [], False])
        for i, node in enumerate(g.nodes):
            for v in node.all_inputs:
                if v.is_constant:
                    if (id(v), value_bytes(v)) not in self.consts[i]:
                        self.consts[i].append((id(v), value_bytes(v)))
                    continue
                kx = index.get(id(v))
                if kx is None:  # a capture of an outer scope: treat as a graph input
                    kx = index[id(v)] = len(uses)
                    uses.append([value_bytes(v), HOST, [], False])
                if i not in uses[kx][2]:
                    uses[kx][2].append(i)
                    self.reads[i].append(kx)
            for o in node.outputs:
                index[id(o)] = len(uses)
                self.writes[i].append(len(uses))
                uses.append([value_bytes(o), i, [], False])
        for v in g.outputs:
            if id(v) in index:
                uses[index[id(v)]][3] = True
        self.values = [ValueUse(b, p, tuple(c), o) for b, p, c, o in uses]

    # -- the exact objective -------------------------------------------------------------------
    def value_cost(self, kx: int, a: np.ndarray) -> float:
        """Host staging: one download from the producer's device if anything reads it elsewhere,
        one upload (and hand-off) per other device reading it."""
        u = self.values[kx]
        src = HOST if u.producer == HOST else int(a[u.producer])
        dests = {int(a[c]) for c in u.consumers}
        up = sum(self.leg(u.nbytes, d) + (HANDOFF_S if src != HOST else 0.0) for d in dests if d != src)
        leaves = src != HOST and (u.is_output or any(d != src for d in dests))
        return up + (self.leg(u.nbytes, src) if leaves else 0.0)

    def leg(self, nbytes: int, d: int) -> float:
        """One transfer leg between device d and the host (cost.link_time)."""
        return nbytes * self.link[d] + self.lat[d]

    def total(self, a: np.ndarray) -> float:
        return float(self.time[np.arange(self.n), a].sum()
                     + sum(self.value_cost(kx, a) for kx in range(len(self.values))))

    def transfer_total(self, a: np.ndarray) -> float:
        return float(sum(self.value_cost(kx, a) for kx in range(len(self.values))))

    def delta(self, a: np.ndarray, group, j: int) -> float:
        """Change of the total when every node of `group` moves to device j."""
        affected = {kx for i in group for kx in self.reads[i] + self.writes[i]}
        before = sum(self.value_cost(kx, a) for kx in affected)
        b = a.copy()
        b[list(group)] = j
        after = sum(self.value_cost(kx, b) for kx in affected)
        compute = sum(self.time[i, j] - self.time[i, a[i]] for i in group)
        return float(compute + after - before)

    def load(self, a: np.ndarray) -> np.ndarray:
        """Busy time per device for one request: its nodes plus its transfer legs."""
        busy = np.zeros(self.k)
        for i in range(self.n):
            busy[a[i]] += self.time[i, a[i]]
        for u in self.values:
            src = HOST if u.producer == HOST else int(a[u.producer])
            dests = {int(a[c]) for c in u.consumers} - {src}
            for d in dests:
                busy[d] += self.leg(u.nbytes, d)
            if src != HOST and (dests or u.is_output):
                busy[src] += self.leg(u.nbytes, src)
        return busy


class Memory:
    """Per-device weights (each constant counted once per device) and largest working set."""

    def __init__(self, p: Problem, a: np.ndarray):
        self.p = p
        self.count = [dict() for _ in range(p.k)]
        self.weights = np.zeros(p.k)
        for i in range(p.n):
            self._add(i, int(a[i]))
        self.a = a

    def _add(self, i: int, d: int):
        for cid, nbytes in self.p.consts[i]:
            c = self.count[d].get(cid, 0)
            if c == 0:
                self.weights[d] += nbytes
            self.count[d][cid] = c + 1

    def _remove(self, i: int, d: int):
        for cid, nbytes in self.p.consts[i]:
            c = self.count[d][cid] - 1
            self.count[d][cid] = c
            if c == 0:
                self.weights[d] -= nbytes

    def max_work(self, d: int, extra=()) -> float:
        on = self.p.work[self.a == d]
        return float(max(on.max() if on.size else 0.0, max((self.p.work[i] for i in extra), default=0.0)))

    def need_after(self, group, j: int) -> float:
        """Device j's estimated need (weights + largest working set) once `group` moved there."""
        new = {cid: b for i in group if self.a[i] != j for cid, b in self.p.consts[i]
               if self.count[j].get(cid, 0) == 0}
        return self.weights[j] + sum(new.values()) + self.max_work(j, group)

    def fits(self, group, j: int) -> bool:
        return self.need_after(group, j) <= self.p.cap[j]

    def move(self, group, j: int):
        for i in group:
            self._remove(i, int(self.a[i]))
            self._add(i, j)
            self.a[i] = j


# -- 1. dynamic programming over the topological order ---------------------------------------------
def viterbi(p: Problem) -> np.ndarray | None:
    """Best assignment with the last node's device as state; None when nothing fits in memory."""
    cost = np.zeros(1)
    paths = [np.full(p.n, -1, dtype=np.int64)]
    weights = [np.zeros(p.k)]
    works = [np.zeros(p.k)]
    for i in range(p.n):
        new_cost = np.full(p.k, np.inf)
        new_paths, new_w, new_mw = [None] * p.k, [None] * p.k, [None] * p.k
        for j in range(p.k):
            if not p.allowed[i, j]:
                continue
            best, arg = np.inf, -1
            for q in range(len(cost)):
                if not np.isfinite(cost[q]):
                    continue
                need = weights[q][j] + p.weight_bytes[i] + max(works[q][j], p.work[i])
                if need > p.cap[j]:
                    continue
                c = cost[q] + p.time[i, j] + _incoming(p, i, j, paths[q])
                if c < best:
                    best, arg = c, q
            if arg >= 0:
                new_cost[j] = best
                new_paths[j] = paths[arg].copy()
                new_paths[j][i] = j
                new_w[j], new_mw[j] = weights[arg].copy(), works[arg].copy()
                new_w[j][j] += p.weight_bytes[i]
                new_mw[j][j] = max(new_mw[j][j], p.work[i])
        if not np.isfinite(new_cost).any():
            return None
        cost, paths, weights, works = new_cost, new_paths, new_w, new_mw
    best = int(np.argmin(cost))
    return paths[best]


def _incoming(p: Problem, i: int, j: int, path: np.ndarray) -> float:
    """Transfers that placing node i on device j adds, given the devices of nodes before it."""
    t = 0.0
    for kx in p.reads[i]:
        u = p.values[kx]
        src = HOST if u.producer == HOST else int(path[u.producer])
        if src == j:
            continue
        earlier = [int(path[c]) for c in u.consumers if c < i]
        if j in earlier:
            continue  # already uploaded to j for an earlier reader
        t += p.leg(u.nbytes, j) + (HANDOFF_S if src != HOST else 0.0)
        if src != HOST and not u.is_output and all(d == src for d in earlier):
            t += p.leg(u.nbytes, src)  # first time it leaves its device: the download
    for kx in p.writes[i]:
        if p.values[kx].is_output:
            t += p.leg(p.values[kx].nbytes, j)
    return t


def priority(p: Problem) -> np.ndarray:
    """First listed device that can run the node and has room (weights so far + working set)."""
    a = np.zeros(p.n, dtype=np.int64)
    weights, works = np.zeros(p.k), np.zeros(p.k)
    for i in range(p.n):
        ok = [j for j in range(p.k) if p.allowed[i, j]]
        fits = [j for j in ok if weights[j] + p.weight_bytes[i] + max(works[j], p.work[i]) <= p.cap[j]]
        j = (fits or ok)[0]
        a[i] = j
        weights[j] += p.weight_bytes[i]
        works[j] = max(works[j], p.work[i])
    return a


# -- 2. local refinement --------------------------------------------------------------------------
def runs(a: np.ndarray) -> list[list[int]]:
    """Maximal stretches of the topological order placed on one device."""
    out, start = [], 0
    for i in range(1, len(a) + 1):
        if i == len(a) or a[i] != a[start]:
            out.append(list(range(start, i)))
            start = i
    return out


def refine(p: Problem, a: np.ndarray, rounds: int = 10) -> np.ndarray:
    a = a.copy()
    mem = Memory(p, a)
    for _ in range(rounds):
        improved = False
        groups = runs(a)
        groups += [[i] for g in groups if len(g) > 1 for i in g]
        for group in groups:
            cur = int(a[group[0]])
            if any(a[i] != cur for i in group):
                continue  # an earlier move in this round changed it
            for j in range(p.k):
                if j == cur or not p.allowed[group, j].all():
                    continue
                if p.delta(a, group, j) < -1e-12 and mem.fits(group, j):
                    mem.move(group, j)
                    improved = True
                    break
        if not improved:
            break
    return a


# -- objective "throughput": contiguous pipeline stages --------------------------------------------
def staged(p: Problem) -> np.ndarray | None:
    """Cut the topological order into one contiguous stage per device, minimising the slowest
    stage (compute + its transfer legs); ties go to the lower total. None if no order fits."""
    n = p.n
    cross = np.zeros(n + 1)  # bytes crossing a cut before position c (producer < c <= last reader)
    for u in p.values:
        if u.producer != HOST and u.consumers:
            cross[u.producer + 1:max(u.consumers) + 1] += u.nbytes
    best, best_key = None, (np.inf, np.inf)
    for order in _distinct_orders(p):
        a = _stage_dp(p, list(order), cross)
        if a is None:
            continue
        key = (float(p.load(a).max()), p.total(a))
        if key < best_key:
            best, best_key = a, key
    return best


def _distinct_orders(p: Problem, limit: int = 120):
    """Device orders, skipping those that only swap interchangeable devices."""
    sig = [(t.device.backend, t.device.peak_gflops, t.device.mem_bandwidth_gbs, t.device.transfer_gbs,
            p.lat[j], t.device.supported_ops, t.device.memory_bytes) for j, t in enumerate(p.targets)]
    seen = set()
    for order in itertools.permutations(range(p.k)):
        key = tuple(sig[j] for j in order)
        if key in seen:
            continue
        seen.add(key)
        yield order
        if len(seen) >= limit:
            return


def _stage_dp(p: Problem, order: list[int], cross: np.ndarray) -> np.ndarray | None:
    n = p.n
    big = np.inf
    prev = np.full(n + 1, big)
    prev[0] = 0.0
    back = []
    best_end, best_val = None, big
    for m, d in enumerate(order):
        pre_t = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(p.time[:, d]), p.time[:, d], 0.0))])
        bad = np.concatenate([[0], np.cumsum(~p.allowed[:, d])])
        pre_w = np.concatenate([[0.0], np.cumsum(p.weight_bytes)])
        cur = np.full(n + 1, big)
        arg = np.zeros(n + 1, dtype=np.int64)
        legs = cross * p.link[d] + np.where(cross > 0, p.lat[d], 0.0)
        for i in range(m + 1, n + 1):
            s = np.arange(m, i)
            ok = (bad[i] - bad[s] == 0) & np.isfinite(prev[s])
            if not ok.any():
                continue
            work = np.maximum.accumulate(p.work[s[0]:i][::-1])[::-1]
            mem = pre_w[i] - pre_w[s] + work
            ok &= mem <= p.cap[d]
            load = pre_t[i] - pre_t[s] + legs[s] + legs[i]
            val = np.where(ok, np.maximum(prev[s], load), big)
            x = int(np.argmin(val))
            cur[i], arg[i] = val[x], s[x]
        back.append(arg)
        if cur[n] < best_val - 1e-15:
            best_end, best_val = m, cur[n]
        prev = cur
    if best_end is None:
        return None
    a = np.zeros(n, dtype=np.int64)
    i = n
    for m in range(best_end, -1, -1):
        s = int(back[m][i])
        a[s:i] = order[m]
        i = s
    return a
