"""The partitioner: one model over several devices (see docs/partitioner.md).

    placement = glow.partition.partition(model, ["accel", "reference"], pins={"fc1": "reference"})
    print(placement.to_text()); placement.write("placement.svg")
    exe = glow.compile(model, devices=["accel", "reference"])   # -> runtime.PartitionedExecutable
"""

from __future__ import annotations

from .cut import Partition, Transfer
from .devices import PartitionError, Target, parse_size, resolve_devices
from .placement import OBJECTIVES, Placement, place


def partition(model, devices, *, pins=None, bans=None, strict: bool = False, objective: str = "latency",
              native: str | None = None, optimize: bool = True) -> Placement:
    """Optimise `model` (Graph, ModelProto or path) and place it on `devices` (see devices.py)."""
    from ..api import _as_graph

    graph = _as_graph(model)
    if optimize:
        from ..passes import optimize_graph

        graph = optimize_graph(graph)
    return place(graph, resolve_devices(devices, native), pins=pins, bans=bans, strict=strict,
                 objective=objective)


def compile_partitioned(model, devices, *, pins=None, bans=None, strict: bool = False,
                        objective: str = "latency", native: str | None = None,
                        threads: int | None = None, optimize: bool = True):
    """Partition, compile every partition for its device, and return one executable."""
    from ..runtime import PartitionedExecutable
    from .compile import compile_partitions

    placement = partition(model, devices, pins=pins, bans=bans, strict=strict, objective=objective,
                          native=native, optimize=optimize)
    return PartitionedExecutable(placement, compile_partitions(placement.partitions, threads=threads,
                                                               optimize=optimize))


__all__ = ["OBJECTIVES", "Partition", "PartitionError", "Placement", "Target", "Transfer",
           "compile_partitioned", "parse_size", "partition", "place", "resolve_devices"]
