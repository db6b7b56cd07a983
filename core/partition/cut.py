"""Cutting a placed graph into a DAG of partitions, each a sub-graph for one device.

Every node gets a stage: the largest stage of its producers, plus one where a producer sits on
another device. Nodes of one device and one stage form a partition. An edge between two
partitions always goes to a strictly larger stage, so the partitions form a DAG (no cycles,
whatever the placement), and nodes are merged as early as their inputs allow.

Values keep their names across the cut: a partition's inputs are placeholders named like the
values they stand for, and control-flow sub-graphs, which find outer values by name, still work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, GraphBuilder, Node, Value
from ..rewrite import more_precise
from .cost import node_time, transfer_time, value_bytes
from .devices import Target


@dataclass
class Partition:
    index: int
    target: Target
    stage: int
    nodes: list[Node]
    inputs: list[Value]  # graph inputs and other partitions' outputs, in first-use order
    outputs: list[Value]  # read by other partitions, or graph outputs
    graph: Graph | None = None
    parents: set = field(default_factory=set)
    children: set = field(default_factory=set)
    weight_ids: dict = field(default_factory=dict)  # id(constant) -> bytes
    peak_activation_bytes: int = 0
    est_time_s: float = 0.0

    @property
    def name(self) -> str:
        return f"p{self.index}"

    @property
    def weight_bytes(self) -> int:
        return int(sum(self.weight_ids.values()))

    @property
    def memory_bytes(self) -> int:
        return self.weight_bytes + self.peak_activation_bytes


@dataclass(frozen=True)
class Transfer:
    value: str
    nbytes: int
    src: int | None  # partition index; None: the host (a graph input)
    dst: int | None  # partition index; None: the host (a graph output)
    est_time_s: float


def cut(graph: Graph, targets: list[Target], assign: np.ndarray, build: bool = True,
        times: np.ndarray | None = None, alone=frozenset()) -> tuple[list[Partition], list[Transfer]]:
    """Partitions (with their sub-graphs when `build`) and the transfers between them.
    `times[i]`: node i's time on its device (default: the roofline estimate). `alone`: (node
    name, device name) pairs that form a partition of their own (control flow a device runs by
    its branches: glow.partition.control), as if on a device of their own."""
    where = {id(n): int(assign[i]) for i, n in enumerate(graph.nodes)}
    solo = {id(n): i + 1 for i, n in enumerate(graph.nodes) if (n.name, targets[where[id(n)]].name) in alone}
    producer = {id(o): n for n in graph.nodes for o in n.outputs}
    stage: dict[int, int] = {}
    for n in graph.nodes:
        s = 0
        for v in n.all_inputs:
            p = producer.get(id(v))
            if p is not None:
                apart = where[id(p)] != where[id(n)] or solo.get(id(p), 0) != solo.get(id(n), 0)
                s = max(s, stage[id(p)] + apart)
        stage[id(n)] = s

    def key(n):
        return stage[id(n)], where[id(n)], solo.get(id(n), 0)

    keys = sorted({key(n) for n in graph.nodes})
    index = {k: i for i, k in enumerate(keys)}
    parts = [Partition(i, targets[d], s, [], [], []) for i, (s, d, _) in enumerate(keys)]
    part_of: dict[int, int] = {}
    for i, n in enumerate(graph.nodes):
        pi = index[key(n)]
        parts[pi].nodes.append(n)
        part_of[id(n)] = pi
        parts[pi].est_time_s += float(times[i]) if times is not None else node_time(n, targets[where[id(n)]])
    _connect(graph, parts, part_of, producer)
    for p in parts:
        if build:
            p.graph = _subgraph(graph, p)
        _measure(p)
    return parts, _transfers(graph, parts, part_of, producer)


def _connect(graph, parts, part_of, producer):
    """Fill each partition's inputs, outputs, parents and children."""
    outs = {id(v) for v in graph.outputs}
    for p in parts:
        seen, mine = set(), {id(o) for n in p.nodes for o in n.outputs}
        for n in p.nodes:
            for v in n.all_inputs:
                if v.is_constant or id(v) in mine or id(v) in seen:
                    continue
                seen.add(id(v))
                p.inputs.append(v)
                src = producer.get(id(v))
                if src is not None:
                    q = part_of[id(src)]
                    p.parents.add(q)
                    parts[q].children.add(p.index)
    read_elsewhere = {id(v) for p in parts for v in p.inputs}
    for p in parts:
        p.outputs = [o for n in p.nodes for o in n.outputs if id(o) in read_elsewhere or id(o) in outs]


def _subgraph(graph: Graph, p: Partition) -> Graph:
    b = GraphBuilder(f"{graph.name}.{p.name}")
    m: dict[int, Value] = {id(v): b.input(v.name, v.type) for v in p.inputs}

    def get(v):
        return v if v is None or v.is_constant else m[id(v)]

    for n in p.nodes:
        outs = b.add(n.op, [get(v) for v in n.inputs], dict(n.attrs), name=n.name,
                     num_outputs=len(n.outputs), output_names=[o.name for o in n.outputs],
                     captures=[get(v) for v in n.captures])
        for o, new in zip(n.outputs, outs):
            new.type = more_precise(new.type, o.type)  # keep what the model declared (as copy_node)
            m[id(o)] = new
    return b.build([m[id(v)] for v in p.outputs], doc=f"partition {p.name} of {graph.name} on {p.target.name}")


def _measure(p: Partition):
    """Weights and peak live activations (inputs freed after their last reader, outputs kept to
    the end) of one partition."""
    last: dict[int, int] = {}
    for i, n in enumerate(p.nodes):
        for v in n.all_inputs:
            if v.is_constant:
                p.weight_ids[id(v)] = value_bytes(v)
            else:
                last[id(v)] = i
    keep = {id(v) for v in p.outputs}
    live = {id(v): value_bytes(v) for v in p.inputs}
    peak = sum(live.values())
    for i, n in enumerate(p.nodes):
        for o in n.outputs:
            live[id(o)] = value_bytes(o)
        peak = max(peak, sum(live.values()))
        for v in n.all_inputs:
            if not v.is_constant and last.get(id(v)) == i and id(v) not in keep:
                live.pop(id(v), None)
        for o in n.outputs:  # an output nobody reads is dead at once
            if id(o) not in last and id(o) not in keep:
                live.pop(id(o), None)
    p.peak_activation_bytes = int(peak)


def _transfers(graph, parts, part_of, producer) -> list[Transfer]:
    out = []
    for p in parts:
        for v in p.inputs:
            src = producer.get(id(v))
            sp = None if src is None else part_of[id(src)]
            st = None if sp is None else parts[sp].target
            out.append(Transfer(v.name, value_bytes(v), sp, p.index, transfer_time(value_bytes(v), st, p.target)))
    for v in graph.outputs:
        src = producer.get(id(v))
        if src is not None:
            sp = part_of[id(src)]
            nbytes = value_bytes(v)
            out.append(Transfer(v.name, nbytes, sp, None, transfer_time(nbytes, parts[sp].target, None)))
    return out


def device_usage(parts: list[Partition], targets: list[Target]) -> list[dict]:
    """Per device: weights (each constant once), the largest partition peak, and the total."""
    out = []
    for t in targets:
        mine = [p for p in parts if p.target is t]
        weights: dict[int, int] = {}
        for p in mine:
            weights.update(p.weight_ids)
        w = int(sum(weights.values()))
        act = max((p.peak_activation_bytes for p in mine), default=0)
        out.append({"device": t.name, "weights": w, "activations": act, "total": w + act,
                    "cap": t.memory_bytes, "partitions": [p.index for p in mine]})
    return out
