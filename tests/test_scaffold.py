"""`glow new-backend NAME`: the package it writes (installing it and running its tests is in
tests/test_example_backend.py)."""

import ast
import os
import subprocess
import sys

import glow
import numpy as np
import pytest
from glow import plugins
from glow.lowering import FLOOR
from glow.scaffold import floor_kernel_stubs, new_backend
from glow.testing.conformance import run_conformance

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture
def demo(tmp_path, monkeypatch):
    written = new_backend("my-npu", str(tmp_path))
    root = tmp_path / "glow-backend-my-npu"
    monkeypatch.syspath_prepend(str(root))
    yield root, written
    for mod in [m for m in sys.modules if m.startswith("glow_backend_my_npu")]:
        del sys.modules[mod]
    plugins.reload()


def test_it_writes_an_installable_package(demo):
    root, written = demo
    rel = sorted(os.path.relpath(p, root) for p in written)
    assert rel == ["README.md", "glow_backend_my_npu/__init__.py", "glow_backend_my_npu/backend.py",
                   "glow_backend_my_npu/kernels.py", "glow_backend_my_npu/known_failures.txt",
                   "glow_backend_my_npu/plugin.py", "pyproject.toml", "tests/test_conformance.py"]
    with open(root / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["name"] == "glow-backend-my-npu"
    assert project["entry-points"] == {"glow.backends": {"my-npu": "glow_backend_my_npu.plugin"}}
    for path in written:
        if path.endswith(".py"):
            with open(path) as f:
                ast.parse(f.read(), path)
    backend = (root / "glow_backend_my_npu" / "backend.py").read_text()
    assert "class MyNpuBackend(glow.Backend):" in backend and f"api_version = {glow.BACKEND_API}\n" in backend
    assert project["dependencies"][0] == f"glow-compiler>={glow.__version__}"


def test_its_known_failures_file_is_read_by_the_kit(demo):
    """The package ships its own list (declared by Backend.known_failures): a listed check is a
    known failure, with the reason from the file."""
    root, _ = demo
    from glow_backend_my_npu import MyNpuBackend

    path = root / "glow_backend_my_npu" / "known_failures.txt"
    assert MyNpuBackend.known_failures == str(path)
    assert all(line.startswith("#") or not line.strip() for line in path.read_text().splitlines())
    path.write_text(path.read_text() + "Add-2x3-2x3  # not written yet, on purpose\n")
    plugins.reload({"plugins": {"modules": ["glow_backend_my_npu.plugin"]}})
    (r,) = run_conformance("my-npu", sections=["records"], pattern=r"^Add-2x3-2x3$").results
    assert r.status == "known" and r.detail.startswith("not written yet, on purpose (")


def test_kernels_are_the_floor_stubbed_with_clear_errors(demo):
    from glow_backend_my_npu.kernels import KERNELS

    assert set(KERNELS) == FLOOR
    with pytest.raises(glow.KernelNotWrittenError, match=r"glow-backend-my-npu: the kernel for 'Exp' is not "
                       r"written yet \(write it in glow_backend_my_npu/kernels.py\)") as e:
        KERNELS["Exp"](np.zeros(3, np.float32))
    assert e.value.op == "Exp" and isinstance(e.value, NotImplementedError)
    x = np.arange(3.0)
    assert KERNELS["Identity"](x) is x
    _, table, count = floor_kernel_stubs()
    assert count == len(FLOOR) == table.count("\n") + 1


def test_the_generated_backend_runs_what_it_has_and_names_what_it_lacks(demo):
    plugins.reload({"plugins": {"modules": ["glow_backend_my_npu.plugin"]}})
    assert "my-npu" in glow.available_backends()
    report = run_conformance("my-npu", sections=["records"], pattern=r"^(Identity|Add|Max)-")
    status = {r.check.id: r for r in report.results}
    assert status["Identity-2d"].status == "pass"
    assert status["Add-2x3-2x3"].status == "fail" and status["Add-2x3-2x3"].missing == "Add"
    assert status["Add-2x3-2x3"].detail.startswith("glow-backend-my-npu: the kernel for 'Add' is not written yet")
    # The predicate claims the floor's forms only: binary Max, not the n-ary form (which lowers to it).
    assert status["Max-2x3-2x3"].status == "fail" and "'Max'" in status["Max-2x3-2x3"].detail
    assert "Max-variadic-3" not in status
    # A stub is the author's work in progress: grouped by kernel, never called a glow bug.
    text = report.to_text()
    assert "glow bug" not in text and "InternalError" not in text and "Most common failures" not in text
    assert "2 kernel(s) not written yet" in text and "Write them in this order" in text
    order = [k["op"] for k in report.not_written()]
    assert sorted(order) == ["Add", "Max"]


def test_bad_names_and_existing_folders_are_refused(tmp_path):
    with pytest.raises(glow.GlowError, match="lower-case letters"):
        new_backend("My Device", str(tmp_path))
    with pytest.raises(glow.GlowError, match="no such folder"):
        new_backend("dev", str(tmp_path / "missing"))
    new_backend("dev", str(tmp_path))
    with pytest.raises(glow.GlowError, match="already exists"):
        new_backend("dev", str(tmp_path))


def test_cli(tmp_path):
    r = subprocess.run([sys.executable, "-m", "glow.cli", "new-backend", "cli-dev", "--dir", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "glow-backend-cli-dev" in r.stdout and "glow_backend_cli_dev/kernels.py" in r.stdout
    r = subprocess.run([sys.executable, "-m", "glow.cli", "new-backend", "cli-dev", "--dir", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "already exists" in r.stderr


def test_sequences_and_optionals_are_not_claimed_and_pass_through_unchanged(demo):
    """The scaffold's kernels take and return arrays: it must not claim Identity on a sequence or
    an optional (ONNX's test_identity_sequence / test_identity_opt then failed with "expected a
    sequence, got ndarray"), and a kernel's non-tensor result must not be squashed by np.asarray."""
    plugins.reload({"plugins": {"modules": ["glow_backend_my_npu.plugin"]}})
    report = run_conformance("my-npu", sections=["nodes"], pattern=r"^test_identity")
    status = {r.check.id: r for r in report.results}
    assert status["test_identity"].status == "pass"
    for case in ("test_identity_sequence", "test_identity_opt"):
        assert status[case].status == "skip" and "needs another device" in status[case].detail, status[case]

    from glow.backend import CompileOptions
    from glow.testing.node_suite import case_by_name
    from glow_backend_my_npu import MyNpuBackend
    case = case_by_name()["test_identity_sequence"]
    graph = glow.load_onnx(case.model)
    be = MyNpuBackend()
    assert not be.supports(graph.nodes[0])
    exe = be.compile(graph, CompileOptions())  # as an author who adds sequence kernels would
    (inputs,), (expected,) = case.data_sets[0]
    seq = [np.asarray(a) for a in inputs]
    (out,) = exe.run({graph.input_names[0]: seq}).values()
    assert isinstance(out, list) and len(out) == len(seq)
    for got, want in zip(out, expected):
        np.testing.assert_array_equal(got, want)
