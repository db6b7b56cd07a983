"""The ray backend: devices that are Ray actors, each running another backend on a cluster node.

A ray device names the backend its node runs and, optionally, where it may run:

    ray:cpu                 the cpu backend in an actor on any node with a free CPU
    ray:cpu/node_a          ... on a node offering the Ray resource `node_a` (a custom resource
                            the node was started with, `ray start --resources='{"node_a": 1}'`,
                            or Ray's own `node:<ip>`); several names: ray:cpu/gpu_box/rack2
    [[devices]] backend = "ray" in plugins.toml, with remote_backend = "cpu", resources = {...},
                            num_cpus, num_gpus, memory_mb, transfer_gbs, latency_us, timeout_s,
                            compile_timeout_s, max_restarts, runtime_env (Ray's: env_vars, pip, ...),
                            measure_link (true: latency_us and transfer_gbs measured, link.py)

Placement happens in the calling process, with the named backend's own support predicate (so that
backend must be installed here too); each node then optimises nothing again: it lowers and compiles
its partitions itself, for its own CPU or device (actor.py). The proxy backend (`RemoteBackend`, one
per device, from `RayBackend.bind`) answers every question about ops with the named backend's
answer and replaces only compiling, running and moving tensors.
"""

from __future__ import annotations

from dataclasses import replace

from glow.backend import BACKEND_API, Backend, Device
from glow.errors import BackendError

#: Figures of a network link when the device does not give its own: 10 Gbit/s Ethernet and a
#: round trip of a few hundred microseconds through Ray's object store (measure_link measures yours).
DEFAULT_LINK_GBS = 1.25
DEFAULT_LATENCY_US = 300.0
#: A resource named after the slash is a node selector, not a count: an actor asks for this much of
#: it, so any number of devices can share a node that offers 1.
SELECTOR_AMOUNT = 0.001


class RayBackend(Backend):
    name = "ray"
    api_version = BACKEND_API
    priority = -10  # never the default: a remote device is always named
    description = "remote devices: Ray actors that compile and run partitions with another backend on cluster nodes"
    handle_kind = "ray"

    def check_available(self) -> None:
        # Cheap: is ray installed? (Importing it takes half a second; it happens when a ray device
        # is used.)
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise BackendError("needs the 'ray' package (pip install 'glow-compiler[ray]'): No module named 'ray'")

    def devices(self) -> list[Device]:
        return [remote_device("cpu")]

    def native_ops(self) -> list[str]:
        return []  # a ray device runs what its named backend runs (RemoteBackend.native_ops)

    def find_device(self, name: str) -> Device | None:
        backend, *selectors = name.split("/")
        if not backend or any(not s for s in selectors):
            raise BackendError(f"ray device 'ray:{name}': expected ray:BACKEND or ray:BACKEND/RESOURCE[/RESOURCE...]")
        return remote_device(backend, {s: SELECTOR_AMOUNT for s in selectors}, name)

    def bind(self, device: Device) -> tuple[Backend, Device]:
        from glow.plugins import registry

        inner_name = device.extra.get("remote_backend")
        if not isinstance(inner_name, str) or not inner_name or inner_name == self.name:
            raise BackendError(f"ray device '{device.name}': remote_backend must name the backend its node "
                               f"runs, such as 'cpu' (got {inner_name!r})")
        reg = registry()
        try:
            inner = reg.get(inner_name)
        except BackendError as e:
            raise BackendError(f"ray device '{device.name}': {e} (placement asks that backend here, so it "
                               "must be installed in this process too)") from None
        base = reg.records[inner.name].devices[0]
        # Compute figures the device left open are those of the backend's own device here: a
        # first guess at the node's (calibrate= measures the real ones).
        device = replace(device, peak_gflops=device.peak_gflops or base.peak_gflops,
                         mem_bandwidth_gbs=device.mem_bandwidth_gbs or base.mem_bandwidth_gbs)
        _check_extras(device)
        if device.extra.get("measure_link"):  # the link's figures, measured now, win over configured ones
            from .link import measure

            fig = measure(device, device.name)
            device = replace(device, transfer_gbs=fig["transfer_gbs"],
                             extra={**device.extra, "latency_us": fig["latency_us"], "measured_link": fig})
        return RemoteBackend(inner, device), device

    def compile(self, graph, options):
        raise BackendError("backend 'ray' runs remote devices: name them in devices=[...] (e.g. "
                           "devices=['ray:cpu'] or 'ray:cpu/NODE_RESOURCE'; see docs/distributed.md)")


def remote_device(backend: str, resources: dict | None = None, name: str | None = None) -> Device:
    """A ray device running `backend` on a node offering `resources`; compute figures left open
    (None) until `bind` fills them from that backend."""
    return Device("ray", name or backend, kind="remote", peak_gflops=None, mem_bandwidth_gbs=None,
                  transfer_gbs=DEFAULT_LINK_GBS,
                  extra={"remote_backend": backend, "resources": dict(resources or {}),
                         "latency_us": DEFAULT_LATENCY_US})


def _check_extras(device: Device):
    """The keys a plugins.toml entry may give a ray device, checked before any actor starts."""
    ex, where = device.extra, f"ray device '{device.name}'"
    res = ex.get("resources", {})
    if not isinstance(res, dict) or not all(isinstance(k, str) and _positive(v) for k, v in res.items()):
        raise BackendError(f"{where}: resources must be a table of resource name = positive amount, got {res!r}")
    for key in ("num_cpus", "num_gpus"):
        if key in ex and not (_positive(ex[key]) or ex[key] == 0):
            raise BackendError(f"{where}: {key} must be a number >= 0, got {ex[key]!r}")
    for key in ("timeout_s", "compile_timeout_s", "latency_us"):
        if key in ex and not (_positive(ex[key]) or (key == "latency_us" and ex[key] == 0)):
            raise BackendError(f"{where}: {key} must be a positive number, got {ex[key]!r}")
    if not isinstance(ex.get("runtime_env", {}), dict):
        raise BackendError(f"{where}: runtime_env must be a table (Ray's runtime_env: env_vars, pip, ...)")
    if not isinstance(ex.get("measure_link", False), bool):
        raise BackendError(f"{where}: measure_link must be true or false, got {ex['measure_link']!r}")
    r = ex.get("max_restarts", 3)
    if isinstance(r, bool) or not isinstance(r, int) or r < -1:
        raise BackendError(f"{where}: max_restarts must be a whole number >= -1 (-1: no limit), got {r!r}")


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


class RemoteBackend(Backend):
    """One ray device as a backend: the named backend's answers about ops (placement and lowering
    run here), and compiling, running and tensors through Ray (server.py)."""

    handle_kind = "ray"
    api_version = BACKEND_API

    def __init__(self, inner: Backend, device: Device):
        self.inner, self.device = inner, device
        self.name = f"ray:{inner.name}"
        self.description = f"{inner.name} on a Ray node"

    # -- questions about ops: the named backend's answers --------------------------------------
    def supports(self, node) -> bool:
        return self.inner.supports(node)

    def defers(self, node) -> bool:
        return self.inner.defers(node)

    def native_ops(self) -> list[str]:
        return self.inner.native_ops()

    def fusions(self) -> list:
        return self.inner.fusions()

    def transform_graph(self, graph):
        return self.inner.transform_graph(graph)

    # -- compiling: on the node ----------------------------------------------------------------
    def compile_remote(self, target, parts, *, threads=None, optimize=True):
        """Start an actor that compiles `parts` (partitions of `target`) on its node; returns a
        callable that waits for it and gives their executables (glow.partition.compile)."""
        from .server import Server

        server = Server(target, [(p.graph, target.native) for p in parts], threads=threads, optimize=optimize)
        return lambda: server.executables([p.graph for p in parts])

    def compile(self, graph, options):
        raise BackendError(f"ray device '{self.device.name}': partitions compile on their node "
                           "(glow.partition.compile_partitions), not through Backend.compile")

    # -- tensors: Ray's object store -----------------------------------------------------------
    def to_device(self, array, device):
        return array  # Ray puts an argument into its object store itself, once

    def to_host(self, handle, device):
        from .server import fetch

        return fetch(handle, device)
