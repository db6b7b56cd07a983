"""Host fallback: what a backend cannot run goes to the host, as partitions of their own.

A single-backend compile (`glow.compile(model)`, `backend="cpu"`) whose graph has nodes the
backend cannot run (no kernel and no lowering to its ops: a NonZero, whose output shape data
decides), or, at run time, cannot run for the shapes at hand, becomes a placement over two
devices: the backend and the host (the `reference` backend's NumPy interpreter, which runs every
op). The partitioner places it as it places any model, by support and cost: what the backend
cannot run must go to the host; cheap neighbours follow when that saves transfers; and nodes whose
shapes tensor data decides go too where the backend compiles per shape, since every run would
compile them again (glow.partition.cost.RESPECIALISE_S). One GlowWarning line says what went to
the host and why; `exe.placement` holds the whole report. `strict=True` (`--strict`) refuses
instead, with the lowering's own error naming every op.
"""

from __future__ import annotations

from collections import Counter

from ..backend import CompileOptions, Executable
from ..errors import GlowError, warn
from ..graph import Graph
from .devices import Target, resolve_devices

#: The backend that runs what others cannot: the NumPy interpreter, which has every op.
HOST = "reference"


def host_target() -> Target:
    return resolve_devices([HOST])[0]


def compile_with_host(graph: Graph, be, options: CompileOptions, why: GlowError, *,
                      optimize: bool = True, when: str = "", avoid=()) -> Executable:
    """`graph` (optimised) placed over `be` and the host, each partition compiled for its device;
    `why` is the backend's error (a LoweringError naming the ops), raised as it is under
    `options.strict`. `when` says for which inputs, for a fallback decided at run time; `avoid`
    names ops that failed on `be` for them, kept off it."""
    from ..runtime import PartitionedExecutable
    from .compile import compile_partitions
    from .placement import place

    if options.strict or be.name == HOST:
        raise why
    device = options.device or be.devices()[0]
    here = Target(be.name, device, be, options.native, dict(options.backend_options))
    present = {n.op.name for n in graph.nodes}
    bans = {op: [be.name] for op in sorted(set(avoid) & present)}
    placement = place(graph, [here, host_target()], bans=bans)
    exes = compile_partitions(placement.partitions, threads=options.threads, optimize=optimize)
    if any(p.target.name == HOST for p in placement.partitions):  # else: control flow run by branches
        warn(summary(placement, why, when))
    return PartitionedExecutable(placement, exes)


def summary(placement, why: GlowError, when: str = "") -> str:
    """One line: which ops the backend cannot run, and what runs on the host."""
    primary, host = placement.targets[0].name, placement.targets[1].name
    ops = getattr(why, "ops", None) or {}
    lacks = ", ".join(f"{op} (x{n})" for op, n in sorted(ops.items())) or str(why)
    moved = Counter(n.op.name for n in placement.graph.nodes if placement.device_of[n.name] == host)
    ops = ", ".join(f"{op} x{n}" for op, n in moved.most_common(6))
    more = len(moved) - 6
    parts = sum(1 for p in placement.partitions if p.target.name == host)
    return (f"graph '{placement.graph.name}'{when}: backend '{primary}' cannot run {lacks}; "
            f"{sum(moved.values())} of {len(placement.graph.nodes)} nodes run on the host ({host}) in "
            f"{parts} partition(s): {ops}{f' and {more} more op types' if more > 0 else ''} "
            f"(exe.placement says why each; strict=True refuses instead)")
