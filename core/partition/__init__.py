"""The partitioner: one model over several devices (see docs/partitioner.md).

    placement = glow.partition.partition(model, ["accel", "reference"], pins={"fc1": "reference"})
    print(placement.to_text()); placement.write("placement.svg")
    exe = glow.compile(model, devices=["accel", "reference"])   # -> runtime.PartitionedExecutable
"""

from __future__ import annotations

from ..errors import GlowError
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
                        calibration_rounds: int = 1, replicas: int = 1):
    """Partition, compile every partition for its device, and return one executable.

    `calibrate={input: array}`: time each partition on these inputs, correct the cost estimates
    by what was measured and place again (calibrate.py), `calibration_rounds` times.
    `replicas=N`: N copies of the placed model, each with its own executables (on ray devices, its
    own actors), behind one load-balanced `submit` (runtime.ReplicatedExecutable)."""
    from ..interpreter import check_inputs
    from ..runtime import PartitionedExecutable, ReplicatedExecutable
    from .calibrate import measure_partitions, time_scale
    from .compile import compile_partitions, start_partitions

    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 1024:
        raise GlowError(f"replicas must be a whole number from 1 to 1024, got {replicas!r}")
    placement = partition(model, devices, pins=pins, bans=bans, strict=strict, objective=objective,
                          native=native, optimize=optimize)
    first = start_partitions(placement.partitions, threads=threads, optimize=optimize)
    # Copies of the model start their remote compiles before any is waited for, so N copies
    # take about one's time (after calibration, which may move nodes, they start then instead).
    pending = [start_partitions(placement.partitions, threads=threads, optimize=optimize)
               for _ in range(replicas - 1)] if calibrate is None else []
    exes = first()
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
    if replicas == 1:
        return PartitionedExecutable(placement, exes)
    if calibrate is not None:
        pending = [start_partitions(placement.partitions, threads=threads, optimize=optimize)
                   for _ in range(replicas - 1)]
    return ReplicatedExecutable([PartitionedExecutable(placement, exes)]
                                + [PartitionedExecutable(placement, finish()) for finish in pending])


__all__ = ["OBJECTIVES", "Partition", "PartitionError", "Placement", "Target", "Transfer",
           "compile_partitioned", "parse_size", "partition", "place", "resolve_devices"]
