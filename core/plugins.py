"""Plugin discovery: entry points in group ``glow.backends`` plus plugins.toml.

A plugin that fails to import, or whose library/device is missing, is recorded as unavailable with
its reason; the others keep working. Naming an unavailable backend explicitly raises that reason.

plugins.toml (first found: $GLOW_PLUGINS_TOML, ./plugins.toml, the copy shipped in the package,
which declares the example devices cpu0, cpu1, ref0, ref1 and accel; `add_device_config` adds
devices from another file)::

    [plugins]
    modules = ["my_pkg.my_plugin"]   # extra plugin modules by dotted path (backends in development)
    disabled = ["opencl"]            # backend or plugin names to skip

    [[devices]]                      # logical devices (used by the partitioner)
    name = "cpu-small"
    backend = "cpu"
    memory_mb = 64
    ops = ["MatMul", "Conv"]         # optional: restrict to these ops (+ whatever lowers to them)
    peak_gflops = 100.0              # optional cost figures; default: the backend's first device's
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
from dataclasses import replace

import pluggy

from . import hookspecs
from .backend import BACKEND_API, OLDEST_BACKEND_API, Backend, Device
from .errors import BackendError, GlowError
from .fileio import read_regular_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENTRY_POINT_GROUP = "glow.backends"


class BackendRecord:
    """One backend glow found. `found`: its plugin loaded, its API fits and `check_available()`
    (cheap: is the library there?) passed; else `reason` says why not. Its devices are probed
    (`Backend.devices()`, which may initialise a platform: PyOpenCL's, CUDA's) only when first
    needed: `available` and `devices` probe, and a probe that fails makes the backend unavailable
    with that reason. `glow backends` shows what is known without probing unless asked.
    `devices=[...]` gives the devices up front (no probe)."""

    def __init__(self, name: str, backend: Backend | None, found: bool, reason: str = "", source: str = "",
                 devices: list[Device] | None = None, api: int | None = None, api_note: str = ""):
        self.name, self.backend, self.found, self.reason, self.source = name, backend, found, reason, source
        #: The backend API it was built for (None: undeclared, taken as 1) and, when that is not
        #: this glow's own, what `glow backends` says about it.
        self.api, self.api_note = api, api_note
        self._devices = None if devices is None else list(devices)

    def __repr__(self):
        return f"BackendRecord({self.name!r}, found={self.found}, probed={self.probed}, reason={self.reason!r})"

    def probe(self) -> bool:
        """Ask the backend for its devices (once); whether it is available."""
        with _probe_lock:
            if self.found and self._devices is None:
                try:
                    devices = list(self.backend.devices())
                    if not devices:
                        raise BackendError("no devices found")
                except Exception as e:  # noqa: BLE001 - a missing device is a reason, not a crash
                    self.found, self.reason, devices = False, str(e) or type(e).__name__, []
                self._devices = devices
        return self.found

    @property
    def probed(self) -> bool:
        return self._devices is not None or not self.found

    @property
    def available(self) -> bool:
        return self.probe()

    @available.setter
    def available(self, value: bool) -> None:  # a test (or a plugin's glow_configure) turning it off
        self.found = bool(value)

    @property
    def devices(self) -> list[Device]:
        self.probe()
        return self._devices or []

    @devices.setter
    def devices(self, devices: list[Device]) -> None:
        self._devices = list(devices)


_probe_lock = threading.RLock()  # a backend's devices() may ask the registry (ray's bind)


def config_path() -> str:
    env = os.environ.get("GLOW_PLUGINS_TOML")
    if env:
        return env
    if os.path.exists("plugins.toml"):
        return os.path.abspath("plugins.toml")
    return os.path.join(os.path.dirname(__file__), "default_plugins.toml")


#: plugins.toml is a few lines; the cap keeps a wrong path (a device, a huge file) from being read.
MAX_CONFIG_BYTES = 2**20


def load_config(path: str | None = None) -> dict:
    """The parsed plugins.toml, its value types checked (BackendError naming the key and file)."""
    path = path or config_path()
    if not os.path.exists(path):
        if path.endswith("default_plugins.toml"):
            return {}
        raise GlowError(f"{path}: plugin config not found")
    data = read_regular_file(path, MAX_CONFIG_BYTES, "a plugin config", error=BackendError)
    try:
        config = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise GlowError(f"{path}: invalid TOML ({e})") from None
    check_config(config, path)
    return config


def check_config(config: dict, where: str = "plugins config") -> None:
    """Raise BackendError naming the key and `where` for a value of the wrong type that discovery
    or device lookup would trip over (a string where a list belongs would be read letter by
    letter). A logical device's figures are checked when it is used (logical_device_from_entry),
    so that one bad entry does not stop every other use of glow."""
    def bad(key, want, got):
        raise BackendError(f"{where}: {key} must be {want}, got {type(got).__name__} {got!r:.60}")

    def names(key, v):
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            bad(key, "a list of strings", v)

    plugins = config.get("plugins", {})
    if not isinstance(plugins, dict):
        bad("[plugins]", "a table", plugins)
    for k in ("modules", "disabled"):
        if k in plugins:
            names(f"[plugins] {k}", plugins[k])
    devices = config.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(e, dict) for e in devices):
        bad("[[devices]]", "an array of tables", devices)
    for i, e in enumerate(devices):  # the rest of an entry is checked when it is used
        for k in ("name", "backend"):
            if k in e and not (isinstance(e[k], str) and e[k]):
                bad(f"[[devices]] #{i + 1} {k}", "a non-empty string", e[k])


def _priority(be) -> float:
    """`be.priority` as a number; a plugin's non-numeric value counts as 0 (not a TypeError in
    every default-backend lookup)."""
    p = getattr(be, "priority", 0)
    return p if isinstance(p, (int, float)) and not isinstance(p, bool) and p == p else 0


def backend_api(be) -> tuple[int | None, str, bool]:
    """(the backend API `be` was built for, a note on it, whether this glow runs it).

    `api_version` is a whole number; API 1's "major.minor" text ("1.0") is read by its major part.
    None (not declared) is taken as API 1, the last one in which declaring was optional."""
    declared = getattr(be, "api_version", None)
    if declared is None:
        version, note = 1, f"declares no backend API version (api_version): taken as 1, glow has {BACKEND_API}"
    else:
        text = str(declared).strip()
        major = text.split(".")[0]
        if isinstance(declared, bool) or not major.isdigit():
            return None, f"api_version {declared!r} is not a backend API version (glow has {BACKEND_API})", False
        version, note = int(major), ""
    built = f"built for backend API {version}, glow has {BACKEND_API}"
    if version > BACKEND_API:
        return version, f"{built}: this glow is older than the plugin; upgrade glow-compiler", False
    if version < OLDEST_BACKEND_API:
        return version, (f"{built}: this glow runs plugins built for API {OLDEST_BACKEND_API} to {BACKEND_API}; "
                         "port it (docs/backends.md, 'Backend API versions') or install an older glow"), False
    if version < BACKEND_API and not note:
        note = f"{built} (still supported)"
    return version, note, True


class Registry:
    """All backends glow knows, available or not, built once per process (or per `reload()`)."""

    def __init__(self, config: dict | None = None, only: str | None = None):
        #: Where the config came from, for error messages.
        self.config_source = config_path() if config is None else "plugins config"
        if config is None:
            config = load_config()
        else:
            check_config(config)
        self.config = config
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.records: dict[str, BackendRecord] = {}
        self.failed_plugins: dict[str, str] = {}
        self._discover(only)

    # -- discovery ---------------------------------------------------------------------------------
    def _discover(self, only: str | None = None):
        """Load every plugin (`only`: just the one of that name, see `backend`)."""
        plugins_cfg = self.config.get("plugins", {})
        disabled = set(plugins_cfg.get("disabled", []))
        sources = []
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in disabled:
                continue
            sources.append((ep.name, f"entry point {ep.value}", ep.load))
        for mod in plugins_cfg.get("modules", []):
            sources.append((mod, f"plugins.toml module {mod}", lambda m=mod: importlib.import_module(m)))
        if only is not None:
            sources = [s for s in sources if s[0] == only]
        for name, source, load in sources:
            try:
                plugin = load()
                if self.pm.is_registered(plugin):
                    continue
                self.pm.register(plugin, name=name)
            except Exception as e:  # noqa: BLE001 - any import failure makes the plugin unavailable
                reason = f"plugin failed to load: {type(e).__name__}: {e}"
                self.failed_plugins[name] = reason
                self.records[name] = BackendRecord(name, None, False, reason, source)
                continue
            try:
                results = self._call_for(plugin, "glow_backends")
            except Exception as e:  # noqa: BLE001
                self.records[name] = BackendRecord(name, None, False,
                                                   f"glow_backends() raised {type(e).__name__}: {e}", source)
                continue
            for be in (b for result in results for b in (result or [])):
                self._add_backend(be, source, disabled)
        self.pm.hook.glow_configure(config=self.config)

    def _call_for(self, plugin, hook: str) -> list:
        """`hook` called through pluggy on `plugin`'s implementations only (one result per hookimpl).

        Going through pluggy (not `plugin.<hook>` by attribute) honours what pluggy allows: an
        implementation under another name (`@glow.hookimpl(specname="glow_backends")`), several
        per plugin, wrappers. Calling one plugin at a time keeps a plugin that raises from taking
        the others' backends down with it. (A private manager, not `pm.subset_hook_caller`: that
        one decides which plugins to leave out by `hasattr(plugin, hook)`, so it would keep
        another plugin's renamed implementation in.)"""
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        pm.register(plugin)
        return getattr(pm.hook, hook)()

    def _add_backend(self, be, source, disabled):
        if isinstance(be, type):
            be = be()
        name = getattr(be, "name", "") or ""
        if not name:
            self.failed_plugins[source] = "backend without a name"
            return
        if name in disabled:
            return
        if name in self.records and self.records[name].backend is not None:
            prev = self.records[name]
            raise GlowError(f"backend name '{name}' registered twice ({prev.source} and {source})")
        rec = BackendRecord(name, be, True, "", source)
        rec.api, note, runs = backend_api(be)
        if not isinstance(be, Backend):  # every hook glow calls is declared there, with its default
            rec.found = False
            rec.reason = f"{type(be).__name__} is not a glow.Backend (subclass glow.Backend)"
        elif not runs:
            rec.found, rec.reason = False, note
        else:
            rec.api_note = note
            try:
                be.check_available()  # cheap; the devices are probed when first needed (BackendRecord)
            except Exception as e:  # noqa: BLE001 - a missing library or device is a reason, not a crash
                rec.found = False
                rec.reason = str(e) or type(e).__name__
        self.records[name] = rec

    # -- queries -----------------------------------------------------------------------------------
    def available(self) -> list[str]:
        return sorted(n for n, r in self.records.items() if r.available)

    def get(self, name: str) -> Backend:
        rec = self.records.get(name)
        if rec is None:
            known = ", ".join(sorted(self.records)) or "none"
            raise BackendError(f"unknown backend '{name}' (known: {known})")
        if not rec.available:
            raise BackendError(f"backend '{name}' is unavailable: {rec.reason}")
        return rec.backend

    def default(self) -> Backend:
        """The backend used when none is named: the available one with the highest declared
        `Backend.priority` (see core/backend.py for the built-ins' order and why); equal
        priorities go to the alphabetically first name, so the choice never depends on the order
        in which entry points happen to be listed. Only candidates down to the one chosen are
        probed for devices."""
        found = sorted((r for r in self.records.values() if r.found), key=lambda r: (-_priority(r.backend), r.name))
        for rec in found:
            if rec.available:
                return rec.backend
        raise BackendError("no backend is available (see `glow backends`)")

    def logical_devices(self) -> list[dict]:
        return list(self.config.get("devices", []))

    def logical_device(self, name: str) -> Device:
        """The `[[devices]]` entry called `name` as a Device of its backend. Raises BackendError when
        there is no such entry or its backend is unavailable (with the backend's reason)."""
        entries = [e for e in self.logical_devices() if e.get("name") == name]
        if not entries:
            known = ", ".join(str(e.get("name")) for e in self.logical_devices()) or "none"
            raise BackendError(f"unknown logical device '{name}' (plugins.toml declares: {known})")
        if len(entries) > 1:
            raise GlowError(f"plugins.toml declares logical device '{name}' {len(entries)} times")
        entry = entries[0]
        backend = entry.get("backend")
        if not backend:
            raise GlowError(f"plugins.toml: logical device '{name}' has no backend")
        be = self.get(str(backend))
        try:
            return logical_device_from_entry(entry, self.records[be.name].devices[0])
        except BackendError:
            raise
        except GlowError as e:  # a value of the wrong type: name the file it is in
            raise BackendError(f"{self.config_source}: {str(e).removeprefix('plugins.toml: ')}") from None


#: `[[devices]]` keys that map onto Device fields (memory in MiB there, bytes here); other keys go
#: to `Device.extra` so that a backend or the runtime can read them (e.g. `threads`).
_DEVICE_KEYS = {"kind", "peak_gflops", "mem_bandwidth_gbs", "transfer_gbs"}


def logical_device_from_entry(entry: dict, base: Device) -> Device:
    """A logical device: the backend's own device `base` with the entry's name, cap, ops and figures."""
    name = str(entry["name"])
    fields = {k: entry[k] for k in _DEVICE_KEYS if k in entry}
    if "kind" in fields and not (isinstance(fields["kind"], str) and fields["kind"]):
        raise GlowError(f"plugins.toml: logical device '{name}': kind must be a name such as 'cpu', "
                        "'gpu' or 'accelerator'")
    for k in ("peak_gflops", "mem_bandwidth_gbs", "transfer_gbs"):
        if k in fields and (isinstance(fields[k], bool) or not (isinstance(fields[k], (int, float))
                                                                  and fields[k] > 0)):
            raise GlowError(f"plugins.toml: logical device '{name}': {k} must be a positive number")
    if "memory_mb" in entry:
        mb = entry["memory_mb"]
        from .limits import MAX_MEMORY_BYTES

        # NaN, inf and absurd caps fail this too (int(inf) would raise OverflowError below)
        if not isinstance(mb, (int, float)) or isinstance(mb, bool) or not 0 < mb <= MAX_MEMORY_BYTES >> 20:
            raise GlowError(f"plugins.toml: logical device '{name}': memory_mb must be a positive number "
                            f"(at most {MAX_MEMORY_BYTES >> 20})")
        fields["memory_bytes"] = int(mb * 2**20)
    if "ops" in entry:
        ops = entry["ops"]
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise GlowError(f"plugins.toml: logical device '{name}': ops must be a list of op names")
        fields["supported_ops"] = frozenset(ops)
    # Extras the core itself reads (glow.partition): wrong types fail here, not deep inside a run.
    t = entry.get("threads", 1)
    if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 4096:
        raise GlowError(f"plugins.toml: logical device '{name}': threads must be a whole number from 1 "
                        "to 4096")
    for key in ("launch_us", "latency_us"):  # a node's fixed cost; a link's, per transfer leg
        us = entry.get(key, 0)
        if isinstance(us, bool) or not isinstance(us, (int, float)) or not 0 <= us < float("inf"):
            raise GlowError(f"plugins.toml: logical device '{name}': {key} must be a number >= 0")
    known = _DEVICE_KEYS | {"name", "backend", "memory_mb", "ops"}
    extra = {**base.extra, **{k: v for k, v in entry.items() if k not in known}}
    return replace(base, name=name, extra={**extra, "logical": True}, **fields)


def add_device_config(path: str) -> Registry:
    """Add the `[[devices]]` of the TOML file `path` to this process's logical devices (the CLI's
    `--device-config FILE`). Its entries come first: one with the name of a device the plugins
    config already declares replaces that one. Only `[[devices]]` is read; which plugins load
    stays as the plugins config says. Bad types are a BackendError naming the file."""
    extra = load_config(path).get("devices", [])
    reg = registry()
    names = {e.get("name") for e in extra}
    with _lock:
        reg.config = {**reg.config, "devices": list(extra) + [e for e in reg.logical_devices()
                                                              if e.get("name") not in names]}
        reg.config_source = f"{path} or {reg.config_source}"
    return reg


_lock = threading.Lock()
_registry: Registry | None = None


def registry() -> Registry:
    global _registry
    with _lock:
        if _registry is None:
            _registry = Registry()
        return _registry


def backend(name: str):
    """The available backend called `name`. Before this process has built the registry, only
    the plugin of that name is imported (glow.load names its backend: importing every plugin,
    the GPU ones' libraries included, would cost it a second); a backend another plugin
    provides is found through the whole registry."""
    with _lock:
        built = _registry is not None
    if not built:
        try:
            rec = Registry(only=name).records.get(name)
        except GlowError:
            rec = None
        if rec is not None and rec.available:
            return rec.backend
    return registry().get(name)


def reload(config: dict | None = None) -> Registry:
    """Rebuild the registry (after installing a plugin, or with another config)."""
    global _registry
    with _lock:
        _registry = Registry(config)
        return _registry
