"""Compiling each partition for its device: the single-device flow after the cut.

The whole graph was optimised once before placement, so a partition goes straight to lowering for
its device (the backend's predicate narrowed to the device's op list), the backend's own graph
transforms, clean-up, lowering again, fusion, and the backend's compile.
"""

from __future__ import annotations

from ..api import prepare_for_backend
from ..backend import CompileOptions, Executable
from ..graph import Graph
from .cut import Partition
from .devices import DeviceBackend, Target


def compile_for_device(graph: Graph, target: Target, *, threads: int | None = None,
                       optimize: bool = True) -> Executable:
    be = DeviceBackend(target)
    native = target.native
    graph = prepare_for_backend(graph, be, native)
    if optimize:
        from ..passes import cleanup_graph, fuse_for_backend

        graph = be.transform_graph(graph)
        graph = prepare_for_backend(cleanup_graph(graph), be, native)
        graph = fuse_for_backend(graph, be)
    threads = target.device.extra.get("threads", threads) if threads is None else threads
    options = CompileOptions(native=native, threads=threads, device=target.device)
    exe = target.backend.compile(graph, options)
    if not isinstance(exe, Executable):  # the runtime relies on Executable's declared contract
        from ..errors import BackendError

        raise BackendError(f"backend '{target.backend.name}': compile() returned "
                           f"{type(exe).__name__}, not a glow.Executable")
    return exe


def compile_partitions(parts: list[Partition], *, threads: int | None = None,
                       optimize: bool = True) -> list[Executable]:
    return [compile_for_device(p.graph, p.target, threads=threads, optimize=optimize) for p in parts]
