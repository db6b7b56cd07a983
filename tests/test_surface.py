"""The user-facing surface (issue 18): `glow --version`, `glow run`'s report, --shape, --repeat,
--threads, and the Python API every executable shares: inputs/outputs, run(outputs=), profile,
submit."""

import dataclasses
import os
import subprocess
import sys
from concurrent.futures import Future

import glow
import numpy as np
import onnx
import pytest
from helpers import backend_unavailable
from onnx import TensorProto, helper


def glow_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def two_output_model():
    """y = relu(x) + x and z = -x, x of shape (N, 48): one symbolic dim."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "x"], ["y"], name="add"),
             helper.make_node("Neg", ["x"], ["z"], name="neg")]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 48])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 48]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 48])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "two.onnx"
    onnx.save(two_output_model(), path)
    return str(path)


def expected(x):
    return {"y": np.maximum(x, 0) + x, "z": -x}


X = np.random.default_rng(1).standard_normal((3, 48)).astype(np.float32)


# -- CLI -----------------------------------------------------------------------------------------
def test_version_prints_the_package_version():
    r = glow_cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"glow {glow.__version__}"


def test_run_with_shape_repeat_threads_reports_backend_and_timings(model_path, tmp_path):
    out = tmp_path / "out.npz"
    r = glow_cli("run", model_path, "-b", "reference", "--shape", "x=2x48", "--repeat", "3",
                 "--threads", "1", "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    assert "y: shape=[2, 48] dtype=float32" in r.stdout
    assert "z: shape=[2, 48] dtype=float32" in r.stdout
    lines = r.stderr.strip().splitlines()
    assert any(ln.startswith("glow: backend reference; compiled in ") for ln in lines), r.stderr
    assert any(ln.startswith("glow: 3 runs: median ") and " min " in ln for ln in lines), r.stderr
    assert "warning" not in r.stderr  # --shape settled the symbolic dim
    with np.load(out) as z:
        assert z["y"].shape == (2, 48) and z["z"].shape == (2, 48)
        np.testing.assert_array_equal(z["y"], np.maximum(-z["z"], 0) - z["z"])  # same x behind both


def test_run_without_shape_warns_once_naming_the_input(model_path):
    r = glow_cli("run", model_path, "-b", "reference")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, r.stderr
    assert "'x'" in warnings[0] and "N" in warnings[0] and "used 1" in warnings[0] and "--shape" in warnings[0]
    assert "y: shape=[1, 48]" in r.stdout
    assert any(ln.startswith("glow: ran in ") for ln in r.stderr.splitlines()), r.stderr


def test_repeat_draws_fresh_inputs_each_time(model_path, monkeypatch, capsys):
    from glow import cli

    seen = []
    real_run = glow.Executable.run

    def spy(self, feeds, outputs=None):
        seen.append(feeds["x"].copy())
        return real_run(self, feeds, outputs)
    monkeypatch.setattr(glow.Executable, "run", spy)
    assert cli.main(["run", model_path, "-b", "reference", "--shape", "x=2x48", "--repeat", "3"]) == 0
    assert len(seen) == 3
    assert not np.array_equal(seen[0], seen[1]) and not np.array_equal(seen[1], seen[2])
    # the summary is of the first run (the inputs of --seed), whatever the later, timed runs drew
    once = capsys.readouterr().out
    assert cli.main(["run", model_path, "-b", "reference", "--shape", "x=2x48"]) == 0
    assert capsys.readouterr().out == once


@pytest.mark.parametrize("spec, needle", [
    ("x=2y48", "expected NAME=DxDx"),
    ("x", "expected NAME=DxDx"),
    ("x=2x", "expected NAME=DxDx"),
    ("x=2x47", "has shape Nx48"),
    ("x=2", "has shape Nx48"),
    ("q=2x48", "unknown input(s) ['q']"),
])
def test_bad_shape_is_exit_2_one_line(model_path, spec, needle):
    r = glow_cli("run", model_path, "-b", "reference", "--shape", spec)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args", [["--threads", "0"], ["--repeat", "0"]])
def test_bad_counts_are_exit_2(model_path, args):
    r = glow_cli("run", model_path, "-b", "reference", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_progress_is_silent_when_stderr_is_not_a_tty(model_path):
    r = glow_cli("run", model_path, "-b", "reference", "--shape", "x=1x48")
    assert "\r" not in r.stderr and "phase" not in r.stderr and "it/s" not in r.stderr, r.stderr


def test_progress_draws_phases_on_a_tty(monkeypatch):
    import io

    from glow import progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.delenv("GLOW_NO_PROGRESS", raising=False)
    seen = []
    with progress.Phases(["import", "optimise", "lower", "compile"], desc="glow run") as ph:
        glow.compile(two_output_model(), backend="reference", progress=lambda p: (seen.append(p), ph.start(p)))
    assert seen == ["optimise", "lower", "compile"]
    assert "glow run: compile" in err.getvalue()
    assert set(ph.seconds) == {"optimise", "lower", "compile"}


@pytest.mark.skipif(backend_unavailable("opencl") is not None, reason="no OpenCL")
@pytest.mark.parametrize("verbose", [False, True])
def test_opencl_compiler_warnings_only_when_verbose(verbose, model_path):
    code = ("import sys, warnings, pyopencl as cl, glow, numpy as np\n"
            "glow.compile(sys.argv[1], backend='opencl').run({'x': np.ones((2, 48), np.float32)})\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.warn('Non-empty compiler output', cl.CompilerWarning)\n"
            "print('shown' if w else 'hidden')\n")
    env = {**os.environ, "GLOW_VERBOSE": "1" if verbose else "0"}
    r = subprocess.run([sys.executable, "-c", code, model_path], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("shown" if verbose else "hidden")


# -- Python API ----------------------------------------------------------------------------------
def compile_on(target):
    if target == "partitioned":
        if backend_unavailable("cpu"):
            pytest.skip("no cpu backend")
        return glow.compile(two_output_model(), devices=["cpu", "reference"], pins={"Neg": "reference"})
    reason = backend_unavailable(target)
    if reason:
        pytest.skip(reason)
    return glow.compile(two_output_model(), backend=target)


TARGETS = ["reference", "cpu", "opencl", "cuda", "partitioned"]  # each skipped where unavailable


@pytest.mark.parametrize("target", TARGETS)
def test_inputs_and_outputs_metadata(target):
    exe = compile_on(target)
    assert [(i.name, i.shape, i.dtype, i.np_dtype) for i in exe.inputs] == [("x", ("N", 48), "float32", np.float32)]
    assert [(o.name, o.shape, o.dtype) for o in exe.outputs] == [("y", ("N", 48), "float32"),
                                                              ("z", ("N", 48), "float32")]
    assert not exe.inputs[0].is_static
    with pytest.raises(dataclasses.FrozenInstanceError):
        exe.inputs[0].name = "other"


@pytest.mark.parametrize("target", TARGETS)
def test_run_returns_only_the_outputs_asked_for(target):
    exe = compile_on(target)
    out = exe.run({"x": X}, outputs=["z"])
    assert list(out) == ["z"]
    np.testing.assert_allclose(out["z"], expected(X)["z"])
    both = exe.run({"x": X}, outputs=["z", "y"])
    assert list(both) == ["z", "y"]
    np.testing.assert_allclose(both["y"], expected(X)["y"], rtol=1e-6)
    with pytest.raises(glow.InputError, match=r"unknown output name\(s\) \['w'\]"):
        exe.run({"x": X}, outputs=["w"])


@pytest.mark.parametrize("target, granularity", [("reference", "node"), ("cpu", "kernel"), ("opencl", "kernel"),
                                                 ("cuda", "kernel"), ("partitioned", "partition")])
def test_profile_sorted_slowest_first(target, granularity):
    exe = compile_on(target)
    p = exe.profile({"x": X})
    assert p.granularity == granularity
    secs = [r.seconds for r in p.records]
    assert secs == sorted(secs, reverse=True) and all(s >= 0 for s in secs)
    # partitions on different devices may run at once (their times can add up past the total)
    assert (max(secs) if granularity == "partition" else sum(secs)) <= p.total_seconds + 1e-6
    if granularity == "node":
        assert sorted(r.name for r in p.records) == sorted(n.name for n in exe.graph.nodes)
        assert {r.op for r in p.records} == {n.op.name for n in exe.graph.nodes}
    if granularity == "partition":
        assert len(p.records) == len(exe.placement.partitions)
    np.testing.assert_allclose(p.outputs["y"], expected(X)["y"], rtol=1e-6)
    text = p.table()
    assert f"profile by {granularity}" in text and p.records[0].name in text
    if granularity != "partition":  # the time no record covers is shown: the shares add up to the run
        assert p.untracked_seconds == pytest.approx(p.total_seconds - sum(secs), abs=1e-9)
        rest = [ln for ln in p.table(limit=None).splitlines() if "(untracked)" in ln]
        assert len(rest) == (p.untracked_seconds > 0)
        rows = [ln.split() for ln in p.table(limit=None).splitlines()]
        shares = [float(r[1]) for r in rows if len(r) > 2 and r[0].replace(".", "").isdigit()]
        assert sum(shares) == pytest.approx(100.0, abs=0.1 * len(shares))


@pytest.mark.parametrize("target", TARGETS)
def test_submit_returns_a_future(target):
    exe = compile_on(target)
    futs = [exe.submit({"x": X * k}) for k in (1, 2, 3)]
    assert all(isinstance(f, Future) for f in futs)
    for k, f in zip((1, 2, 3), futs):
        np.testing.assert_allclose(f.result(timeout=60)["y"], expected(X * k)["y"], rtol=1e-6)
    only = exe.submit({"x": X}, outputs=["z"]).result(timeout=60)
    assert list(only) == ["z"]


def test_single_device_submit_reports_errors_through_the_future():
    exe = glow.compile(two_output_model(), backend="reference")
    fut = exe.submit({"x": np.ones((2, 47), np.float32)})
    assert isinstance(fut.exception(timeout=60), glow.InputError)


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason="no cpu backend")
def test_run_says_whether_the_object_cache_made_the_compile(tmp_path):
    path = tmp_path / "static.onnx"
    m = two_output_model()
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_value = 2  # static: the cpu backend compiles at once
    onnx.save(m, path)
    env = {"GLOW_CACHE_DIR": str(tmp_path / "cache")}
    first = glow_cli("run", str(path), "-b", "cpu", env=env)
    second = glow_cli("run", str(path), "-b", "cpu", env=env)
    other = glow_cli("run", str(path), "-b", "cpu", "--threads", "1", env=env)  # another setting, same code
    off = glow_cli("run", str(path), "-b", "cpu", env={"GLOW_CACHE_DIR": "off"})
    assert first.returncode == second.returncode == other.returncode == off.returncode == 0, first.stderr
    assert "glow: backend cpu; compiled in " in first.stderr
    assert "(fresh: not in the object cache)" in first.stderr, first.stderr
    assert "(from the executable cache)" in second.stderr, second.stderr  # the same compile: not run again
    assert "(from the object cache)" in other.stderr, other.stderr
    assert "(fresh: not in the object cache)" in off.stderr, off.stderr  # no cache: always compiled


def run_on_a_pty(argv, timeout=240):
    """Run argv with stderr on a fresh pseudo-terminal (size unset, as `script` makes one) and
    return what it drew there."""
    import pty
    import select

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "GLOW_NO_PROGRESS"}
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        rc = p.wait(timeout=timeout)
    return rc, out.decode("utf-8", "replace")


@pytest.mark.parametrize("argv, drawn", [
    (["-m", "glow.cli", "run", "{model}", "-b", "reference", "--shape", "x=2x48"], "glow run: compile"),
    (["-m", "glow.cli", "bench", "mlp", "-b", "reference", "--rounds", "2", "--vs", "none"], "bench mlp"),
    (["-m", "glow.cli", "conformance", "-b", "reference", "--sections", "records", "--filter", "^Relu-"],
     "conformance reference"),
    (["-m", "glow.testing.fuzz", "--backend", "reference", "--count", "2", "--no-ort", "--no-shrink",
      "--out", ""], "fuzz reference"),
])
def test_progress_is_drawn_on_a_terminal(model_path, argv, drawn):
    rc, out = run_on_a_pty([sys.executable] + [a.replace("{model}", model_path) for a in argv])
    assert rc == 0, out
    assert drawn in out and "%|" in out, out
