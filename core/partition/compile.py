"""Compiling each partition for its device: the single-device flow after the cut.

The whole graph was optimised once before placement, so a partition goes straight to lowering for
its device (the backend's predicate narrowed to the device's op list), the backend's own graph
transforms, clean-up, lowering again, fusion, and the backend's compile.
"""

from __future__ import annotations

from collections.abc import Callable

from ..backend import CompileOptions, Executable
from ..flow import backend_graph, compile_lowered, lower_for_backend
from ..graph import Graph
from .cut import Partition
from .devices import DeviceBackend, Target


def compile_for_device(graph: Graph, target: Target, *, threads: int | None = None,
                       optimize: bool = True) -> Executable:
    if target.backend.compiles_remotely:
        return target.backend.compile_remote(target, [Partition(0, target, 0, [], [], [], graph)],
                                             threads=threads, optimize=optimize)()[0]
    node = _by_branches(graph, target)
    if node is not None:  # an If the device runs by running its compiled branches
        from ..runtime.control import IfExecutable
        from .control import BRANCHES, branch_graph, compile_on

        then_exe, else_exe = (compile_on(branch_graph(node, attr), target, threads=threads, optimize=optimize)
                              for attr in BRANCHES)
        return IfExecutable(graph, then_exe, else_exe)
    be = DeviceBackend(target)
    native = target.native
    graph = backend_graph(graph, be, native) if optimize else lower_for_backend(graph, be, native)
    threads = target.device.extra.get("threads", threads) if threads is None else threads
    options = CompileOptions(native=native, threads=threads, device=target.device,
                             backend_options=dict(target.options))
    return compile_lowered(graph, target.backend, options)


def _by_branches(graph: Graph, target: Target):
    """The graph's one node, when it is control flow that `target` runs only by its branches."""
    from .control import BY_BRANCHES
    from .support import _try_lowering

    if len(graph.nodes) != 1 or graph.nodes[0].op.name not in BY_BRANCHES:
        return None
    node = graph.nodes[0]
    return None if target.supports(node) or _try_lowering(node, target) is None else node


def compile_partitions(parts: list[Partition], *, threads: int | None = None,
                       optimize: bool = True) -> list[Executable]:
    """Every partition's executable. A device whose backend has `compile_remote(target, parts,
    threads=, optimize=) -> wait` (a ray device: glow.backends.ray) compiles all its partitions
    itself, on its node; those start first, so they compile while this process does the rest."""
    return start_partitions(parts, threads=threads, optimize=optimize)()


def start_partitions(parts: list[Partition], *, threads: int | None = None,
                     optimize: bool = True) -> Callable[[], list[Executable]]:
    """`compile_partitions` in two halves: start the remote compiles and do the local ones now;
    the callable returned waits for the remote ones. Copies of a model (replicas) start all
    their remote compiles before waiting for any."""
    for p in parts:  # every device's one-time set-up overlaps the partitions compiled before it
        p.target.backend.warm_up(p.target.device)
    remote: dict[str, list[int]] = {}
    for k, p in enumerate(parts):
        if p.target.backend.compiles_remotely:
            remote.setdefault(p.target.name, []).append(k)
    started = [(ks, parts[ks[0]].target.backend.compile_remote(
        parts[ks[0]].target, [parts[k] for k in ks], threads=threads, optimize=optimize))
        for ks in remote.values()]
    exes: dict[int, Executable] = {}
    for k, p in enumerate(parts):
        if p.target.name not in remote:
            exes[k] = compile_for_device(p.graph, p.target, threads=threads, optimize=optimize)

    def finish() -> list[Executable]:
        for ks, wait in started:
            exes.update(zip(ks, wait()))
        return [exes[k] for k in range(len(parts))]
    return finish
