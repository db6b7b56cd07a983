"""What a backend is: the base classes a plugin subclasses (Backend, Device, Executable).

A backend says which ops it runs natively (`supports`, a predicate over op, types and attributes),
lists its devices with rough cost figures for the partitioner, and compiles a graph into an
`Executable`. Everything it does not support natively is lowered for it by the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import BackendError, InternalError, internal_errors
from .graph import Graph, Node
from .interpreter import check_inputs

#: The plugin API version this glow speaks. A backend states the version it was written for in
#: `Backend.api_version`; one with a different major version is listed unavailable.
API_VERSION = "1.0"


@dataclass(frozen=True)
class Device:
    """One device of a backend, with the figures the partitioner's cost model uses."""

    backend: str
    name: str
    kind: str = "cpu"  # cpu | gpu | accelerator
    memory_bytes: int | None = None  # None: no cap
    peak_gflops: float = 50.0
    mem_bandwidth_gbs: float = 20.0
    transfer_gbs: float = 10.0  # to/from host
    supported_ops: frozenset | None = None  # None: whatever the backend supports
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def id(self) -> str:
        return f"{self.backend}:{self.name}"


@dataclass(frozen=True)
class CompileOptions:
    native: str | None = None  # "floor": restrict the backend's native set to the primitive floor
    threads: int | None = None
    device: Device | None = None
    verify: bool = False


class Executable:
    """A compiled graph. `run({name: array}) -> {name: array}`, inputs checked against the graph.

    Subclasses implement `_run(feeds)`, returning the outputs in the graph's output order keyed
    by the graph's output names or by the names of the IR's output buffers (which differ where
    an output is also an input or a weight: IR buffer names are unique, so `x` out is `x_1`).
    `run` keys them by the graph's output names either way, and turns any exception other
    than a GlowError into an InternalError (a glow bug, with the node it was working on).
    """

    def __init__(self, graph: Graph):
        self.graph = graph

    @property
    def input_names(self) -> list[str]:
        return self.graph.input_names

    @property
    def output_names(self) -> list[str]:
        return self.graph.output_names

    def run(self, feeds: dict) -> dict:
        feeds = check_inputs(self.graph, feeds)
        with internal_errors(f"running graph '{self.graph.name}' on {type(self).__name__}"):
            return _by_output_name(self._run(feeds), self.output_names)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- optional: device-resident runs (the partitioner's runtime, core/runtime/executor.py) ----
    def run_device(self, handles: dict) -> dict:
        """Optional. Run on device handles: `{input name: what Backend.to_device returned}` in,
        `{output name: handle}` out (handles `Backend.to_host` can read). Override it when
        values can stay on the device between the partitions of a multi-device run; the runtime
        then moves inputs with `to_device` and outputs with `to_host` around this call. When not
        overridden, the runtime calls `run` with host arrays instead."""
        raise NotImplementedError(f"{type(self).__name__} does not run on device handles")

    @property
    def uses_device_handles(self) -> bool:
        """Whether this executable overrides `run_device` (what the runtime asks before a run)."""
        return getattr(type(self), "run_device", None) is not Executable.run_device


def _by_output_name(outs: dict, names: list[str]) -> dict:
    if list(outs) == names:
        return outs
    if set(outs) == set(names):
        return {n: outs[n] for n in names}
    if len(outs) == len(names):  # keyed by IR buffer names, in graph output order (see above)
        return dict(zip(names, outs.values()))
    raise InternalError(f"executable returned outputs {sorted(outs)}, the graph has {names}")


class Backend:
    """Subclass this to add a device type. Only `name` and `compile` are required.

    The whole contract glow relies on is declared here (nothing else is looked up by name):
    `name`, `api_version`, `priority`, `description`; `check_available`, `devices`, `supports`,
    `defers`, `native_ops`, `fusions`, `transform_graph`, `compile`; and for multi-device runs
    `to_device` / `to_host` (with `Executable.run_device`)."""

    name: str = ""
    api_version: str = API_VERSION
    #: The default backend (no backend named: `glow.compile(model)`, `glow run model.onnx`) is the
    #: available one with the highest priority; equal priorities go to the first name
    #: alphabetically. The built-ins rank by what serves a user on this machine best: cuda 20
    #: (a working GPU is the fastest device there is), cpu 10 (native LLVM code, every core),
    #: opencl 5 (through PoCL it is a slower CPU path; a real OpenCL GPU is named explicitly),
    #: reference 0 (the NumPy oracle: always there, slow), reference-ir -1 (a test vehicle).
    #: A third-party plugin picks its place on that scale: above 20 to become the default.
    priority: int = 0
    description: str = ""

    def check_available(self) -> None:
        """Raise `BackendError("why")` when the library or device is missing."""

    def devices(self) -> list[Device]:
        return [Device(self.name, "0")]

    def supports(self, node: Node) -> bool:
        """The support predicate: can this backend run `node` (its op, types, attributes) natively?"""
        return True

    def defers(self, node: Node) -> bool:
        """Whether `supports` accepts `node` only to decide it once inputs are seen (shapes or
        index operands known at run time, settled by shape specialisation). Such nodes stay
        under `native="floor"` too: after specialisation the graph is lowered to the floor again."""
        return False

    def native_ops(self) -> list[str]:
        """Names of the ops this backend claims natively (for reports; `supports` decides)."""
        from .ops import all_ops

        return [o.name for o in all_ops()]

    def fusions(self) -> list:
        """Fusion requests (glow.passes.fusion: FuseElementwise(), FuseActivation({...})) applied
        to the lowered graph; none by default."""
        return []

    def transform_graph(self, graph: Graph) -> Graph:
        """Backend graph transforms after lowering (layout changes, backend-private ops); the
        result is cleaned up and lowered again, so it may use any op with a lowering rule."""
        return graph

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:  # pragma: no cover
        raise BackendError(f"backend '{self.name}' does not implement compile()")

    # Transfers for the partitioner's runtime: host staging by default.
    def to_device(self, array: np.ndarray, device: Device):
        """A host array as a handle on `device`, for `Executable.run_device` (default: the array)."""
        return array

    def to_host(self, handle, device: Device) -> np.ndarray:
        """A handle `Executable.run_device` returned, as a host array (default: the handle)."""
        return handle
