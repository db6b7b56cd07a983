"""What the user asked for: pins, bans and strict mode, turned into an allowed[node, device] matrix.

Patterns name nodes by exact node name, by op name, or by a glob over node names ("layer3*").
When several pins match a node, the most specific wins (name, then op, then glob); two pins of
the same specificity that disagree are an error.

Strict mode: every node must run on the primary device (the first one listed) unless it is
pinned elsewhere; the error names every node that would otherwise fall back, with the reason.
Strict mode forbids *support* fallback only: other devices may still take nodes for memory or cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase

import numpy as np

from ..graph import Graph, Node
from .devices import PartitionError, Target


def _specificity(pattern: str, node: Node) -> int:
    """3: the node's name, 2: its op, 1: a glob over its name, 0: no match."""
    if pattern == node.name:
        return 3
    if pattern == node.op.name:
        return 2
    if any(c in pattern for c in "*?[") and fnmatchcase(node.name, pattern):
        return 1
    return 0


def _device_index(targets: list[Target], name: str, what: str) -> int:
    for j, t in enumerate(targets):
        if t.name == name:
            return j
    raise PartitionError(f"{what}: unknown device '{name}' (devices: {', '.join(t.name for t in targets)})")


def resolve_pins(graph: Graph, targets: list[Target], pins: Mapping[str, str] | None) -> dict[str, tuple]:
    """node name -> (device index, pattern) for every pinned node."""
    out: dict[str, tuple] = {}
    if not pins:
        return out
    chosen: dict[str, tuple[int, int, str]] = {}  # node -> (specificity, device, pattern)
    for pattern, device in pins.items():
        j = _device_index(targets, device, f"pin '{pattern}'")
        matched = False
        for node in graph.nodes:
            s = _specificity(pattern, node)
            if not s:
                continue
            matched = True
            prev = chosen.get(node.name)
            if prev is None or s > prev[0]:
                chosen[node.name] = (s, j, pattern)
            elif s == prev[0] and j != prev[1]:
                raise PartitionError(f"node '{node.name}' is pinned to both {targets[prev[1]].name} "
                                     f"(by '{prev[2]}') and {targets[j].name} (by '{pattern}')")
        if not matched:
            raise PartitionError(f"pin '{pattern}' matches no node name or op of the model")
    for name, (_, j, pattern) in chosen.items():
        out[name] = (j, pattern)
    return out


def resolve_bans(graph: Graph, targets: list[Target], bans) -> dict[str, set[int]]:
    """node name -> indices of the devices it may not use. `bans`: pattern -> device name(s)."""
    out: dict[str, set[int]] = {}
    for pattern, devices in (bans or {}).items():
        devices = [devices] if isinstance(devices, str) else list(devices)
        idx = [_device_index(targets, d, f"ban '{pattern}'") for d in devices]
        matched = False
        for node in graph.nodes:
            if _specificity(pattern, node):
                matched = True
                out.setdefault(node.name, set()).update(idx)
        if not matched:
            raise PartitionError(f"ban '{pattern}' matches no node name or op of the model")
    return out


def allowed_matrix(graph: Graph, targets: list[Target], feas: dict, pins: dict, bans: dict,
                   strict: bool) -> np.ndarray:
    """allowed[i, j]: node i may be placed on device j. Raises naming every node left without one."""
    n, k = len(graph.nodes), len(targets)
    allowed = np.zeros((n, k), dtype=bool)
    problems, fallbacks = [], []
    for i, node in enumerate(graph.nodes):
        why_not = feas[node.name]
        banned = bans.get(node.name, set())
        if node.name in pins:
            j, pattern = pins[node.name]
            if why_not[targets[j].name] is not None:
                problems.append(f"'{node.name}' ({node.op.name}) is pinned to {targets[j].name} by "
                                f"'{pattern}', but {why_not[targets[j].name]}")
            elif j in banned:
                problems.append(f"'{node.name}' ({node.op.name}) is both pinned to and banned from "
                                f"{targets[j].name}")
            allowed[i, j] = True
            continue
        for j, t in enumerate(targets):
            allowed[i, j] = why_not[t.name] is None and j not in banned
        if strict and not allowed[i, 0]:
            reason = "banned there" if 0 in banned else why_not[targets[0].name]
            fallbacks.append(f"'{node.name}' ({node.op.name}: {reason})")
        if not allowed[i].any():
            reasons = "; ".join("banned" if j in banned else why_not[t.name]
                                for j, t in enumerate(targets))
            problems.append(f"'{node.name}' ({node.op.name}) can run on no allowed device ({reasons})")
    if problems:
        raise PartitionError(f"cannot place {len(problems)} node(s): " + "; ".join(problems))
    if fallbacks:
        raise PartitionError(f"strict placement: {len(fallbacks)} node(s) cannot run on the primary "
                             f"device {targets[0].name} and would fall back: " + ", ".join(fallbacks))
    return allowed
