"""Plugin discovery, for real: fake plugin distributions on sys.path, found through entry points."""

import json
import os
import subprocess
import sys
import textwrap

import glow
import pytest
from glow import plugins

GOOD = '''
import glow
from glow.backends.reference.backend import ReferenceBackend

class FakeBackend(ReferenceBackend):
    name = "fakedev"
    description = "a fake device for tests"

@glow.hookimpl
def glow_backends():
    return [FakeBackend()]
'''

BROKEN = '''
raise ImportError("libfakedevice.so: cannot open shared object file")
'''

NODEVICE = '''
import glow

class NoDevice(glow.Backend):
    name = "nodevice"
    def check_available(self):
        raise glow.BackendError("no NoDevice card found on the PCI bus")

@glow.hookimpl
def glow_backends():
    return [NoDevice()]
'''

OLDAPI = '''
import glow
from glow.backends.reference.backend import ReferenceBackend

class Old(ReferenceBackend):
    name = "oldapi"
    api_version = "0.3"

@glow.hookimpl
def glow_backends():
    return [Old()]
'''


def make_dist(root, dist, module, source):
    """A minimal installed distribution: module + dist-info with an entry point in glow.backends."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[glow.backends]\n{dist} = {module}\n")


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    make_dist(tmp_path, "glow_backend_fakedev", "fakedev_plugin", GOOD)
    make_dist(tmp_path, "glow_backend_broken", "broken_plugin", BROKEN)
    make_dist(tmp_path, "glow_backend_nodevice", "nodevice_plugin", NODEVICE)
    make_dist(tmp_path, "glow_backend_oldapi", "oldapi_plugin", OLDAPI)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    plugins.reload()


def test_installed_plugins_are_discovered(plugin_path):
    reg = plugins.reload({})
    assert "fakedev" in reg.available()
    assert "reference" in reg.available()
    broken = reg.records["glow_backend_broken"]
    assert not broken.available and "libfakedevice.so" in broken.reason
    nodev = reg.records["nodevice"]
    assert not nodev.available and "PCI bus" in nodev.reason
    old = reg.records["oldapi"]
    assert not old.available and old.reason.startswith("built for backend API 0, glow has 2: this glow runs "
                                                       "plugins built for API 1 to 2")


VERSIONS = '''
import glow
from glow.backends.reference.backend import ReferenceBackend


class Base(ReferenceBackend):
    api_version = None


def make(name, version):
    return type(name, (Base,), {"name": name, "api_version": version})()


class NotABackend:
    name = "duck"
    def compile(self, graph, options):
        return None


@glow.hookimpl
def glow_backends():
    return [make("v-none", None), make("v1", "1.0"), make("v2", 2), make("v3", 3), make("v-bad", "new"),
            NotABackend()]
'''


def test_backend_api_versions_are_checked_at_discovery(tmp_path, monkeypatch):
    (tmp_path / "versions_plugin.py").write_text(textwrap.dedent(VERSIONS))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        reg = plugins.reload({"plugins": {"modules": ["versions_plugin"]}})
        rec = reg.records
        assert glow.BACKEND_API == 2 and glow.API_VERSION == "2.0"
        assert rec["v2"].available and rec["v2"].api == 2 and not rec["v2"].api_note
        # API 1 (what glow wrote before versions were whole numbers) still runs, said so
        assert rec["v1"].available and rec["v1"].api_note == "built for backend API 1, glow has 2 (still supported)"
        none = rec["v-none"]
        assert none.available and none.api == 1 and "declares no backend API" in none.api_note
        assert not rec["v3"].available
        assert rec["v3"].reason == "built for backend API 3, glow has 2: this glow is older than the plugin; " \
            "upgrade glow-compiler"
        assert not rec["v-bad"].available and "api_version 'new' is not a backend API version" in rec["v-bad"].reason
        assert not rec["duck"].available and "NotABackend is not a glow.Backend" in rec["duck"].reason
        with pytest.raises(glow.BackendError, match="backend 'v3' is unavailable: built for backend API 3"):
            glow.compile(_relu_model(), backend="v3")
        r = subprocess.run([sys.executable, "-m", "glow.cli", "backends"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(tmp_path), GLOW_PLUGINS_TOML=str(_toml(tmp_path))))
        assert "v3           unavailable: built for backend API 3, glow has 2: this glow is older" in r.stdout
        assert "built for backend API 1, glow has 2 (still supported)" in r.stdout
    finally:
        plugins.reload()


def _toml(tmp_path):
    path = tmp_path / "plugins.toml"
    path.write_text('[plugins]\nmodules = ["versions_plugin"]\n')
    return path


def test_every_hook_glow_calls_is_declared_on_backend():
    """Nothing is looked up by hasattr: compile_remote has a declared default, and a backend says
    whether it overrides it."""
    from glow.backends.ray.backend import RemoteBackend

    assert not glow.Backend().compiles_remotely and RemoteBackend.compile_remote is not glow.Backend.compile_remote
    with pytest.raises(glow.BackendError, match="compiles in this process"):
        glow.Backend().compile_remote(None, [])
    for hook in ("compile_remote", "known_failures", "api_version", "find_device", "bind", "warm_up", "bundle",
                 "load_saved", "handle_kind", "specialises_shapes", "options", "priority"):
        assert hasattr(glow.Backend, hook), hook


def test_named_unavailable_backend_fails_loudly(plugin_path):
    plugins.reload({})
    with pytest.raises(glow.BackendError, match="nodevice.*PCI bus"):
        glow.compile(_relu_model(), backend="nodevice")
    with pytest.raises(glow.BackendError, match="unknown backend 'nosuch'"):
        glow.compile(_relu_model(), backend="nosuch")


def test_fake_backend_runs_a_model(plugin_path):
    plugins.reload({})
    import numpy as np

    out = glow.compile(_relu_model(), backend="fakedev").run({"x": np.array([-1, 2], np.float32)})
    assert out["y"].tolist() == [0, 2]


def test_cli_lists_plugins(plugin_path):
    env = dict(os.environ, PYTHONPATH=str(plugin_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "glow.cli", "backends", "--json"], env=env,
                       capture_output=True, text=True, cwd=plugin_path)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert rows["fakedev"]["available"] and rows["reference"]["available"]
    assert not rows["glow_backend_broken"]["available"]
    text = subprocess.run([sys.executable, "-m", "glow.cli", "backends"], env=env,
                          capture_output=True, text=True, cwd=plugin_path).stdout
    assert "fakedev" in text and "unavailable: plugin failed to load" in text


def test_plugins_toml_modules_and_disabled(plugin_path, tmp_path):
    (tmp_path / "devplugin.py").write_text(textwrap.dedent(GOOD).replace("fakedev", "indevelopment"))
    reg = plugins.reload({"plugins": {"modules": ["devplugin"], "disabled": ["fakedev"]}})
    assert "indevelopment" in reg.available()
    assert "fakedev" not in reg.records


def test_duplicate_backend_names_raise(plugin_path, tmp_path):
    (tmp_path / "dupplugin.py").write_text(textwrap.dedent(GOOD))
    with pytest.raises(glow.GlowError, match="registered twice"):
        plugins.reload({"plugins": {"modules": ["dupplugin"]}})


def _relu_model():
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])
    return h.make_model(g)


SPECNAME = '''
import glow
from glow.backends.reference.backend import ReferenceBackend

class Renamed(ReferenceBackend):
    name = "renamed"

@glow.hookimpl(specname="glow_backends")
def provide_my_backends():
    return [Renamed()]
'''


def test_hookimpl_under_another_name_is_found(tmp_path, monkeypatch):
    """pluggy lets an implementation carry another name (specname=): glow calls hooks through
    pluggy, so it counts (looking up `module.glow_backends` by attribute would miss it)."""
    make_dist(tmp_path, "glow_backend_renamed", "renamed_plugin", SPECNAME)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        reg = plugins.reload({})
        assert "renamed" in reg.available(), reg.records.get("renamed")
        assert reg.records["renamed"].source.startswith("entry point renamed_plugin")
    finally:
        plugins.reload()


def _fake(name, priority):
    return plugins.BackendRecord(name, type(name, (glow.Backend,), {"name": name, "priority": priority})(),
                                 True)


@pytest.mark.parametrize("fakes, want", [
    ([("zeta", 1), ("alpha", 7), ("mid", 3)], "alpha"),     # highest priority, wherever it is listed
    ([("b", 5), ("a", 5), ("c", 1)], "a"),                  # a tie goes to the first name
    ([("late", 2), ("early", 2), ("top", 9)], "top"),
])
def test_default_backend_follows_declared_priority(monkeypatch, fakes, want):
    reg = plugins.registry()
    monkeypatch.setattr(reg, "records", {n: _fake(n, p) for n, p in fakes})
    assert reg.default().name == want
    # an unavailable backend is never the default, however high its priority
    monkeypatch.setitem(reg.records, "gone", plugins.BackendRecord("gone", _fake("gone", 99).backend, False, "x"))
    assert reg.default().name == want


def test_builtin_priorities_rank_cuda_cpu_opencl_reference():
    """The order core/backend.py documents (Backend.priority) is the one the built-ins declare."""
    from glow.backends.cpu.backend import CpuBackend
    from glow.backends.cuda.backend import CudaBackend
    from glow.backends.opencl.backend import OpenCLBackend
    from glow.backends.reference.backend import ReferenceBackend

    ranked = sorted([CpuBackend, CudaBackend, OpenCLBackend, ReferenceBackend], key=lambda b: -b.priority)
    assert [b.name for b in ranked] == ["cuda", "cpu", "opencl", "reference"]
