"""The example backend package (examples/glow-backend-example), installed with pip exactly as a user
installs a third-party backend, and the package `glow new-backend` writes.

Both are pip-installed into a throwaway venv layered on the test environment (tests/plugin_env.py),
so nothing leaks into the environment the rest of the suite, or another run, uses.

Installed: `glow backends` lists it; the conformance kit passes for everything it claims; every
light model runs partitioned across it and the CPU (the reference where the CPU backend is not
available) equal to the expected outputs; uninstalling it removes it. Scaffolded: `glow
new-backend demo`, `pip install`, then the package's own tests run, reporting the stubbed kernels
grouped by kernel (never as glow bugs); and a scaffolded backend whose kernels are all written
(glow's references) passes the whole `glow conformance` with exit code 0.
"""

import ast
import json
import os

import pytest
from plugin_env import PluginEnv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "glow-backend-example")
PACKAGE = os.path.join(EXAMPLE, "glow_backend_example")
TINY_CNN = os.path.join(ROOT, "core", "data", "tiny_cnn.onnx")
#: lines of the example backend's package (tests excluded); the issue's target is under 250
LINE_BUDGET = 250


def backends_json(env: PluginEnv, cwd) -> dict:
    r = env.python_m("glow.cli", "backends", "--json", cwd=cwd)
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
def user(tmp_path_factory):
    """A user's environment (a venv over the test environment) with the example pip-installed."""
    work = tmp_path_factory.mktemp("user")
    env = PluginEnv(work / "venv")
    env.install_copy(EXAMPLE, work)
    return env, work


@pytest.mark.slow
def test_glow_backends_lists_it(user):
    env, work = user
    row = backends_json(env, work)["example"]
    assert row["available"], row["reason"]
    assert row["source"] == "entry point glow_backend_example.plugin"
    (dev,) = row["devices"]
    assert dev["id"] == "example:0" and dev["kind"] == "accelerator" and dev["memory_bytes"] == 8 * 2**20
    assert row["native_ops"] == ["Add", "Conv", "Identity", "MatMul", "Relu"]


@pytest.fixture(scope="module")
def conformance(user):
    """One full run of the kit: records, node cases, light models partitioned with the CPU."""
    env, work = user
    fallback = "cpu" if backends_json(env, work).get("cpu", {}).get("available") else "reference"
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    r = env.python_m("glow.cli", "conformance", "--backend", "example", "--fallback", fallback, "--jobs", jobs,
                     "--json", cwd=work)
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
def test_glow_run_partitioned_equals_the_reference(user):
    import numpy as np

    env, work = user
    runs = {"split": ["--devices", "example,reference"], "ref": ["--backend", "reference"]}
    stdout = {}
    for name, how in runs.items():
        r = env.python_m("glow.cli", "run", TINY_CNN, *how, "--outputs", str(work / f"{name}.npz"), cwd=work)
        assert r.returncode == 0, r.stderr
        stdout[name] = r.stdout
    assert "partitioned over example, reference" in stdout["split"]
    with np.load(work / "split.npz") as a, np.load(work / "ref.npz") as b:
        np.testing.assert_allclose(a["probs"], b["probs"], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_its_own_tests_pass(user):
    env, work = user
    r = env.python_m("pytest", "-q", "-p", "no:cacheprovider", "--glow-sections", "records",
                     os.path.join(work, "glow-backend-example", "tests"), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "conformance of 'example': PASS" in r.stdout


@pytest.mark.slow
def test_uninstalling_removes_it(user):
    env, work = user
    env.pip("uninstall", "-y", "-q", "glow-backend-example", cwd=work)
    rows = backends_json(env, work)
    assert "example" not in rows and rows["reference"]["available"]


# -- glow new-backend ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def author(tmp_path_factory):
    """A backend author's environment: a venv over the test environment where `glow new-backend`
    runs. Packages are installed with `pip install --no-deps -e`, as an author does while writing
    kernels: the package's own build goes through pip's build isolation (setuptools from the
    index, about 15 s), since this setuptools needs `wheel` for --no-build-isolation; glow and
    the rest come from the test environment under the venv (plugin_env.py), not reinstalled."""
    work = tmp_path_factory.mktemp("author")
    return PluginEnv(work / "venv"), work


def scaffold(env, work, name) -> str:
    r = env.python_m("glow.cli", "new-backend", name, "--dir", str(work), cwd=work)
    assert r.returncode == 0, r.stderr
    return os.path.join(work, f"glow-backend-{name}")


@pytest.mark.slow
def test_new_backend_demo_installs_and_its_tests_run(author):
    env, work = author
    pkg = scaffold(env, work, "demo")
    env.pip("install", "--no-deps", "-q", "-e", pkg, cwd=work)
    assert backends_json(env, work)["demo"]["available"]
    # Its tests, as generated (the op records section keeps this quick): every floor kernel but
    # Identity is a stub, so those checks fail, each naming the kernel to write; the summary
    # groups them by kernel, in the order that passes the most checks soonest.
    r = env.python_m("pytest", "-q", "-p", "no:cacheprovider", "--glow-sections", "records", cwd=pkg)
    out = r.stdout
    assert r.returncode == 1, out[-3000:] + r.stderr[-2000:]
    summary = out.strip().splitlines()[-1]
    assert " failed" in summary and " passed" in summary and "error" not in summary, summary
    assert ("glow-backend-demo: the kernel for 'MatMul' is not written yet "
            "(write it in glow_backend_demo/kernels.py)") in out
    assert "glow bug" not in out and "InternalError" not in out
    assert "kernel(s) not written yet" in out and "Write them in this order" in out
    assert "glow conformance: demo" in out and "conformance of 'demo': FAIL" in out
    assert "ok   Identity" in out  # the one kernel written for you passes


#: What an author who wrote every kernel correctly has: glow's own references, appended to the
#: scaffold's kernels.py (the stubs stay, unused).
REFERENCE_KERNELS = """

from glow.ops import get_op  # noqa: E402

KERNELS = {name: get_op(name).reference for name in KERNELS}
"""


@pytest.mark.slow
def test_a_correct_scaffolded_backend_passes_the_whole_conformance_kit(author):
    """The issue-45 target: scaffold, write every kernel (correctly), pip install, `glow
    conformance --backend NAME` (records, node cases, light models) exits 0."""
    env, work = author
    pkg = scaffold(env, work, "refdemo")
    with open(os.path.join(pkg, "glow_backend_refdemo", "kernels.py"), "a") as f:
        f.write(REFERENCE_KERNELS)
    env.pip("install", "--no-deps", "-q", "-e", pkg, cwd=work)
    r = env.python_m("glow.cli", "conformance", "--backend", "refdemo", "--json", cwd=work)
    report = json.loads(r.stdout)
    fails = [f"{x['section']}/{x['id']}: {x['detail']}" for x in report["results"] if x["status"] == "fail"]
    assert r.returncode == 0 and report["ok"] and not fails, "\n".join(fails[:20]) + r.stderr[-2000:]
    table = report["table"]
    assert table["records"]["pass"] >= 400 and table["nodes"]["pass"] >= 1700 and table["models"]["pass"] == 9
    assert all(t["known"] == 0 for t in table.values())  # nothing excused: its known_failures.txt is empty
    assert set(table["nodes"]["skipped"]) <= {"needs another device", "the reference fails it too"}
