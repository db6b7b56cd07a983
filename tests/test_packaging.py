"""The wheel: the right files, the entry points, and a working install outside the source tree."""

import os
import subprocess
import sys
import zipfile

import pytest
from plugin_env import create_layered_venv

ROOT = os.path.join(os.path.dirname(__file__), "..")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(out), ROOT], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (whl,) = [p for p in os.listdir(out) if p.endswith(".whl")]
    return out / whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for path in ["glow/__init__.py", "glow/ops/registry.py", "glow/lowering/driver.py",
                 "glow/backends/reference/plugin.py", "glow/data/tiny_cnn.onnx",
                 "glow/default_plugins.toml", "glow/testing/node_suite.py"]:
        assert path in names, path
    assert not any(n.startswith(("core/", "backends/", "tests/")) for n in names)
    (ep,) = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(ep).decode()
    assert "[glow.backends]" in text and "reference = glow.backends.reference.plugin" in text
    assert "glow = glow.cli:main" in text


@pytest.mark.slow
def test_wheel_installs_and_runs(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    create_layered_venv(env_dir, with_pip=True)
    py = str(env_dir / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    code = ("import glow, os; print(os.path.dirname(glow.__file__)); print(glow.available_backends());"
            "import glow.cli, sys; sys.exit(glow.cli.main(['run', os.path.join(os.path.dirname(glow.__file__),"
            " 'data', 'tiny_cnn.onnx')]))")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "site-packages" in r.stdout.splitlines()[0]
    assert "'reference'" in r.stdout and "probs: shape=[1, 10]" in r.stdout
