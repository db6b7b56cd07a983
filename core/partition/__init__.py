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
    from ..api import as_graph

    graph = as_graph(model)
    if optimize:
        from ..passes import optimize_graph

        graph = optimize_graph(graph)
    return place(graph, resolve_devices(devices, native), pins=pins, bans=bans, strict=strict,
                 objective=objective)


def compile_partitioned(model, devices, *, pins=None, bans=None, strict: bool = False,
                        objective: str = "latency", native: str | None = None,
                        threads: int | None = None, optimize: bool = True, calibrate: dict | None = None,
                        calibration_rounds: int = 1):
    """Partition, compile every partition for its device, and return one executable.

    `calibrate={input: array}`: time each partition on these inputs, correct the cost estimates
    by what was measured and place again (calibrate.py), `calibration_rounds` times."""
    from ..interpreter import check_inputs
    from ..runtime import PartitionedExecutable
    from .calibrate import measure_partitions, time_scale
    from .compile import compile_partitions

    placement = partition(model, devices, pins=pins, bans=bans, strict=strict, objective=objective,
                          native=native, optimize=optimize)
    exes = compile_partitions(placement.partitions, threads=threads, optimize=optimize)
    if calibrate is not None:
        feeds = check_inputs(placement.graph, calibrate)
        for _ in range(calibration_rounds):
            measured = measure_partitions(placement.partitions, exes, feeds)
            new = place(placement.graph, placement.targets, pins=pins, bans=bans, strict=strict,
                        objective=objective, time_scale=time_scale(placement, measured))
            new.meta["measured_before_s"] = measured
            moved = new.device_of != placement.device_of
            placement = new
            if not moved:
                break
            exes = compile_partitions(placement.partitions, threads=threads, optimize=optimize)
    return PartitionedExecutable(placement, exes)


__all__ = ["OBJECTIVES", "Partition", "PartitionError", "Placement", "Target", "Transfer",
           "compile_partitioned", "parse_size", "partition", "place", "resolve_devices"]
