"""The devices a model is partitioned over: each a `Device` (figures, cap, op set) and its backend.

A device is named in one of these ways (`resolve_devices`):

    Device(...)                 a Device object (its backend is looked up by `Device.backend`)
    "accel"                     a logical device declared in plugins.toml `[[devices]]`
    "reference"                 a backend: its first device
    "cpu:1"                     a backend's device by name (`Device.id`)
    "...@40MiB"                 any of the above with a memory cap (B, KiB, MiB, GiB; bare = MiB)
    "r0=reference@40MiB"        any of the above under another name (pins and reports use it)

Names must be unique; a repeated one gets "#1", "#2", ... appended.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..backend import Backend, Device
from ..errors import BackendError, GlowError
from ..graph import Node
from ..lowering import supports_floor


class PartitionError(GlowError):
    """A model cannot be placed as asked (strict mode, pins, bans, memory caps), every cause named."""


#: Renaming is free and every backend can alias a value; lowering itself adds Identity nodes to keep
#: value names, so a device restricted to a list of ops still runs Identity.
ALWAYS_SUPPORTED = frozenset({"Identity"})


@dataclass(frozen=True, eq=False)
class Target:
    """One device of the placement: its unique name, the Device, and the backend that drives it."""

    name: str
    device: Device
    backend: Backend
    native: str | None = None  # "floor": the backend is restricted to the primitive floor
    #: the backend's own options for this device's partitions (`glow.compile(..., options=)`, kept
    #: when nodes the backend cannot run go to the host: glow.partition.host)
    options: dict = field(default_factory=dict, compare=False, hash=False)

    def supports(self, node: Node) -> bool:
        """Runs `node` natively: the backend's predicate, narrowed to the device's op list."""
        ops = self.device.supported_ops
        if ops is not None and node.op.name not in ops and node.op.name not in ALWAYS_SUPPORTED:
            return False
        if self.native == "floor" and not supports_floor(node):
            return False
        return self.backend.supports(node)

    @property
    def memory_bytes(self) -> int | None:
        return self.device.memory_bytes

    def describe(self) -> str:
        cap = "no cap" if self.memory_bytes is None else f"cap {fmt_bytes(self.memory_bytes)}"
        ops = "" if self.device.supported_ops is None else f", ops {sorted(self.device.supported_ops)}"
        return f"{self.name} ({self.device.backend}, {cap}{ops})"


class DeviceBackend:
    """The backend as one device sees it: `supports` narrowed to the device, the rest delegated.
    Lets the single-device compile flow (lower, transform, fuse, compile) run per partition."""

    def __init__(self, target: Target):
        self._target = target

    @property
    def name(self) -> str:
        return self._target.name

    def supports(self, node: Node) -> bool:
        return self._target.supports(node)

    def __getattr__(self, attr):
        return getattr(self._target.backend, attr)




def parse_size(text: str) -> int:
    """'40MiB' -> bytes; a bare number is MiB (as `memory_mb` in plugins.toml)."""
    from ..limits import parse_bytes

    return parse_bytes(text, default_unit="MiB")  # exact; absurd sizes are a GlowError


def resolve_devices(specs, native: str | None = None, registry=None) -> list[Target]:
    """Targets for a list of device specs (see the module docstring)."""
    from ..plugins import registry as get_registry

    reg = registry or get_registry()
    if isinstance(specs, (str, Device)):
        specs = [specs]
    targets: list[Target] = []
    seen: dict[str, int] = {}
    for spec in specs:
        name, device = _resolve_one(spec, reg)
        if name in seen:
            seen[name] += 1
            name = f"{name}#{seen[name]}"
        else:
            seen[name] = 0
        backend, device = reg.get(device.backend).bind(device)
        targets.append(Target(name, device, backend, native))
    if not targets:
        raise GlowError("no devices given")
    return targets


def _resolve_one(spec, reg) -> tuple[str, Device]:
    """(label, device): the label is the alias, else the name as written (without the cap)."""
    if isinstance(spec, Device):
        return spec.name, spec
    if not isinstance(spec, str):
        raise GlowError(f"a device is a name or a glow.Device, got {type(spec).__name__}")
    alias, _, rest = spec.rpartition("=") if "=" in spec else ("", "", spec)
    base, _, size = rest.partition("@")
    device = _lookup(base.strip(), reg)
    if size:
        device = replace(device, memory_bytes=parse_size(size))
    return alias.strip() or base.strip(), device


def _lookup(name: str, reg) -> Device:
    if any(e.get("name") == name for e in reg.logical_devices()):
        return reg.logical_device(name)
    backend, _, dev = name.partition(":")
    if backend in reg.records:
        be = reg.get(backend)  # raises with the reason when unavailable
        devices = reg.records[be.name].devices
        if not dev:
            return devices[0]
        for d in devices:
            if d.name == dev:
                return d
        found = be.find_device(dev)
        if found is not None:
            return found
        raise BackendError(f"backend '{backend}' has no device '{dev}' "
                           f"(it has {', '.join(d.name for d in devices)})")
    logical = ", ".join(str(e.get("name")) for e in reg.logical_devices()) or "none"
    raise BackendError(f"unknown device '{name}': not a logical device (plugins.toml declares "
                       f"{logical}) nor a backend (known: {', '.join(sorted(reg.records))})")


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if seconds >= 1e-7:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e9:.1f} ns"
