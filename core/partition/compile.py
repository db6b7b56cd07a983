"""Compiling each partition for its device: the single-device flow after the cut.

The whole graph was optimised once before placement, so a partition goes straight to lowering for
its device (the backend's predicate narrowed to the device's op list), the backend's own graph
transforms, clean-up, lowering again, fusion, and the backend's compile.
"""

from __future__ import annotations

from ..backend import CompileOptions, Executable
from ..flow import backend_graph, compile_lowered, lower_for_backend
from ..graph import Graph
from .cut import Partition
from .devices import DeviceBackend, Target


def compile_for_device(graph: Graph, target: Target, *, threads: int | None = None,
                       optimize: bool = True) -> Executable:
    be = DeviceBackend(target)
    native = target.native
    graph = backend_graph(graph, be, native) if optimize else lower_for_backend(graph, be, native)
    threads = target.device.extra.get("threads", threads) if threads is None else threads
    options = CompileOptions(native=native, threads=threads, device=target.device)
    return compile_lowered(graph, target.backend, options)


def compile_partitions(parts: list[Partition], *, threads: int | None = None,
                       optimize: bool = True) -> list[Executable]:
    for p in parts:  # every device's one-time set-up overlaps the partitions compiled before it
        p.target.backend.warm_up(p.target.device)
    return [compile_for_device(p.graph, p.target, threads=threads, optimize=optimize) for p in parts]
