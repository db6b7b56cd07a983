"""The example backend package (examples/glow-backend-example), installed with pip exactly as a user
installs a third-party backend, and the package `glow new-backend` writes.

Installed: `glow backends` lists it; the conformance kit passes for everything it claims; every
light model runs partitioned across it and the CPU (the reference where the CPU backend is not
available) equal to the expected outputs; uninstalling it removes it. Scaffolded: `glow
new-backend demo`, `pip install`, then the package's own tests run, reporting the stubbed kernels
as failures that name them.
"""

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys

import glow
import pytest
from glow import plugins

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "glow-backend-example")
PACKAGE = os.path.join(EXAMPLE, "glow_backend_example")
#: lines of the example backend's package (tests excluded); the issue's target is under 250
LINE_BUDGET = 250


def run(args, cwd, timeout=900):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("GLOW_PLUGINS_TOML", None)  # an installed user's view: entry points, shipped defaults
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def pip(*args, cwd=ROOT):
    r = run([sys.executable, "-m", "pip", *args], cwd)
    assert r.returncode == 0, f"pip {' '.join(args)}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def glow_cli(*args, cwd):
    return run([sys.executable, "-m", "glow.cli", *args], cwd)


def backends_json(cwd) -> dict:
    r = glow_cli("backends", "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return {row["name"]: row for row in json.loads(r.stdout)}


def example_sources() -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name)) as f:
                out[name] = f.read()
    return out


# -- the package itself ----------------------------------------------------------------------------
def test_example_is_small():
    lines = sum(src.count("\n") for src in example_sources().values())
    assert lines < LINE_BUDGET, f"the example backend has {lines} lines (budget {LINE_BUDGET})"


def test_example_uses_only_the_public_glow_api():
    """An outsider's package: `import glow`, never `glow.<module>` (everything it needs is exported)."""
    for name, src in example_sources().items():
        for node in ast.walk(ast.parse(src, name)):
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "glow" or a.name == "glow" for a in node.names), name
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] != "glow", f"{name}: from {node.module} import ..."


# -- installed with pip ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("user")
    leftovers = [p for p in (os.path.join(EXAMPLE, "build"), os.path.join(EXAMPLE, "glow_backend_example.egg-info"))
                 if not os.path.exists(p)]
    pip("install", "--no-deps", "-q", EXAMPLE)
    importlib.invalidate_caches()
    yield cwd
    run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "glow-backend-example"], ROOT)
    for path in leftovers:  # what the in-tree build left behind
        shutil.rmtree(path, ignore_errors=True)
    importlib.invalidate_caches()
    plugins.reload()


@pytest.mark.slow
def test_glow_backends_lists_it(installed):
    row = backends_json(installed)["example"]
    assert row["available"], row["reason"]
    assert row["source"] == "entry point glow_backend_example.plugin"
    (dev,) = row["devices"]
    assert dev["id"] == "example:0" and dev["kind"] == "accelerator" and dev["memory_bytes"] == 8 * 2**20
    assert row["native_ops"] == ["Add", "Conv", "Identity", "MatMul", "Relu"]


@pytest.fixture(scope="module")
def conformance(installed):
    """One full run of the kit: records, node cases, light models partitioned with the CPU."""
    rows = backends_json(installed)
    fallback = "cpu" if rows.get("cpu", {}).get("available") else "reference"
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    r = glow_cli("conformance", "--backend", "example", "--fallback", fallback, "--jobs", jobs, "--json",
                 cwd=installed)
    assert r.stdout, r.stderr
    return fallback, r.returncode, json.loads(r.stdout)


@pytest.mark.slow
def test_conformance_passes_for_everything_it_declares(conformance):
    _, rc, report = conformance
    fails = [f"{x['section']}/{x['id']}: {x['detail']}" for x in report["results"] if x["status"] == "fail"]
    assert rc == 0 and report["ok"] and not fails, "\n".join(fails[:20])
    manifest = {row["op"]: row for row in report["manifest"]}
    assert set(manifest) == {"Add", "Conv", "Identity", "MatMul", "Relu"}
    assert all(row["pass"] for row in manifest.values())
    assert set(manifest["Conv"]["dtypes"]) == {"float32"}
    assert set(manifest["MatMul"]["dtypes"]) == {"float32", "float64"}
    table = report["table"]
    assert table["records"]["pass"] >= 50 and table["records"]["fail"] == 0
    assert table["nodes"]["pass"] >= 40 and table["nodes"]["fail"] == 0  # Add, Relu, MatMul, Conv cases
    assert set(table["nodes"]["skipped"]) <= {"needs another device", "the reference fails it too"}


@pytest.mark.slow
def test_every_light_model_runs_partitioned_across_it_and_the_cpu(conformance):
    fallback, _, report = conformance
    models = [x for x in report["results"] if x["section"] == "models"]
    assert len(models) == 9
    for m in models:
        assert m["status"] == "pass", f"{m['id']}: {m['detail']}"
        # "partitioned with cpu: 46/123 nodes on example": both devices ran part of the model
        on_example, total = map(int, m["detail"].split(": ")[1].split(" ")[0].split("/"))
        assert m["detail"].startswith(f"partitioned with {fallback}:") and 0 < on_example < total, m


@pytest.mark.slow
def test_runs_partitioned_in_process(installed):
    import numpy as np

    plugins.reload()
    model = os.path.join(os.path.dirname(glow.__file__), "data", "tiny_cnn.onnx")
    image = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    with glow.compile(model, devices=["example", "reference"]) as exe:
        got = exe.run({"image": image})["probs"]
        devices = set(exe.placement.device_of.values())
    want = glow.compile(model, backend="reference").run({"image": image})["probs"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert devices == {"example", "reference"}


@pytest.mark.slow
def test_its_own_tests_pass(installed):
    r = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--glow-sections", "records",
             os.path.join(EXAMPLE, "tests")], installed)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "conformance of 'example': PASS" in r.stdout


@pytest.mark.slow
def test_uninstalling_removes_it(installed):
    pip("uninstall", "-y", "-q", "glow-backend-example")
    importlib.invalidate_caches()
    rows = backends_json(installed)
    assert "example" not in rows and rows["reference"]["available"]
    assert "example" not in plugins.reload().records


# -- glow new-backend ------------------------------------------------------------------------------
@pytest.mark.slow
def test_new_backend_demo_installs_and_its_tests_run(tmp_path):
    r = glow_cli("new-backend", "demo", "--dir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pkg = tmp_path / "glow-backend-demo"
    try:
        pip("install", "--no-deps", "-q", str(pkg))
        assert backends_json(tmp_path)["demo"]["available"]
        # Its tests, as generated (the op records section keeps this quick): every floor kernel but
        # Identity is a stub, so those checks fail, each naming the kernel to write.
        r = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--glow-sections", "records"],
                pkg)
        out = r.stdout
        assert r.returncode == 1, out[-3000:] + r.stderr[-2000:]
        summary = out.strip().splitlines()[-1]
        assert " failed" in summary and " passed" in summary and "error" not in summary, summary
        assert ("NotImplementedError: glow-backend-demo: the kernel for 'MatMul' is not implemented yet "
                "(write it in glow_backend_demo/kernels.py)") in out
        assert "glow conformance: demo" in out and "conformance of 'demo': FAIL" in out
        assert "ok   Identity" in out  # the one kernel written for you passes
    finally:
        run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "glow-backend-demo"], ROOT)
        importlib.invalidate_caches()
        plugins.reload()
