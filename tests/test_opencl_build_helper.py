"""The OpenCL build helper (backends/opencl/build_helper.py): a second process that builds PoCL
kernels into PoCL's disk cache while the executable builds others.

Each test runs in a fresh process that imports only glow, with empty PoCL and glow caches: the
helper is a process of its own, and what it leaves behind is on disk. Whether the helper takes
any kernel of a real compile depends on timing, so the tests drive it directly where they check
what it built, and check results (never timing) where a compile uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import opencl_unavailable_reason

REASON = opencl_unavailable_reason()
pytestmark = [pytest.mark.opencl,
              pytest.mark.skipif(REASON is not None, reason=f"no OpenCL platform: {REASON}")]

TINY_CNN = os.path.join(os.path.dirname(__file__), os.pardir, "core", "data", "tiny_cnn.onnx")


def _isolated(code: str, tmp_path, **env) -> dict:
    """Run `code` in a process importing only glow (and numpy); its last stdout line as JSON."""
    full = {**os.environ, "POCL_CACHE_DIR": str(tmp_path / "pocl"), "GLOW_CACHE_DIR": str(tmp_path / "glow"), **env}
    prelude = f"import json, os, sys\nimport numpy as np\nimport glow\nMODEL = {os.path.abspath(TINY_CNN)!r}\n"
    p = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       env=full, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "onnxruntime" not in p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


def _kernel_binaries(folder) -> set[str]:
    """The kernel binaries in a PoCL cache folder (PoCL writes one shared object per kernel and
    work-group size under the program's folder)."""
    return {os.path.relpath(os.path.join(d, f), folder)
            for d, _, fs in os.walk(folder) for f in fs if f.endswith(".so")}


def test_the_helper_builds_every_kernel_it_takes_into_pocls_cache(tmp_path):
    """Driven directly: nothing taken by the executable, so the helper builds every kernel of the
    program into its own (empty) PoCL cache; a second process with that cache then builds no
    kernel itself, and its results equal the interpreter's: the helper's binaries are the ones
    the executable would have built."""
    got = _isolated("""
        from glow.backends.opencl import build_helper
        from glow.backends.opencl.backend import OpenCLBackend
        from glow.backends.opencl.runtime import _warm_launch

        exe = glow.compile(MODEL, "opencl")  # its own kernels go to POCL_CACHE_DIR
        dev = OpenCLBackend()._cl_devices()[0]
        os.environ["POCL_CACHE_DIR"] = os.environ["HELPER_CACHE"]  # the helper's cache: empty
        helper = build_helper.BuildHelper(dev.index, dev.device.name)
        layout = exe.compiled.layout
        kernels = build_helper.job_kernels([(k, *_warm_launch(k, layout))
                                            for k in exe.compiled.program.kernels.values()])
        job = helper.submit(exe.compiled.program.source, layout.total, kernels)
        built = job.wait(0)
        helper.close()
        print(json.dumps({"kernels": len(kernels), "built": built, "names": sorted(k[0] for k in kernels)}))
    """, tmp_path, HELPER_CACHE=str(tmp_path / "helper"), GLOW_OPENCL_HELPER="0")
    assert got["kernels"] >= 4 and got["built"] == got["kernels"]
    helper_cache = tmp_path / "helper"
    before = _kernel_binaries(helper_cache)
    # (plus the one-line kernel with which the helper starts PoCL's compiler)
    assert sorted(os.path.basename(p)[:-3] for p in before) == sorted([*got["names"], "glow_warm"])

    again = _isolated("""
        exe = glow.compile(MODEL, "opencl")
        x = np.random.default_rng(1).normal(size=(1, 1, 28, 28)).astype(np.float32)
        name = exe.graph.inputs[0].name
        out = exe.run({name: x})
        ref = glow.compile(MODEL, "reference").run({name: x})
        diff = max(float(np.max(np.abs(out[k] - ref[k]))) for k in ref)
        print(json.dumps({"diff": diff}))
    """, tmp_path, POCL_CACHE_DIR=str(helper_cache), GLOW_OPENCL_HELPER="0")
    assert again["diff"] < 1e-4
    assert _kernel_binaries(helper_cache) == before  # every kernel came from the helper's builds


def test_results_with_the_helper_equal_those_without(tmp_path):
    code = """
        exe = glow.compile(MODEL, "opencl")
        x = np.random.default_rng(2).normal(size=(1, 1, 28, 28)).astype(np.float32)
        out = exe.run({exe.graph.inputs[0].name: x})
        exe.run({exe.graph.inputs[0].name: x})
        print(json.dumps({"out": {k: v.tolist() for k, v in out.items()}, "helper": exe.dev.helper is not None}))
    """
    on = _isolated(code, tmp_path / "on", GLOW_OPENCL_HELPER="1")
    off = _isolated(code, tmp_path / "off", GLOW_OPENCL_HELPER="0")
    assert on["out"] == off["out"]
    assert not off["helper"]
    assert on["helper"] == (len(os.sched_getaffinity(0)) >= 2)


def test_a_dead_helper_costs_nothing_but_time(tmp_path):
    """The helper killed before the compile hands it the program: the executable builds every
    kernel itself, gives the right answer, and nothing waits for the dead process."""
    got = _isolated("""
        from glow.backends.opencl.backend import OpenCLBackend

        be = OpenCLBackend()
        be.warm_up(None)
        dev = be._cl_devices()[0]
        if dev.helper is not None:
            dev.helper.proc.kill()
            dev.helper.proc.wait()
        exe = glow.compile(MODEL, "opencl")
        x = np.random.default_rng(3).normal(size=(1, 1, 28, 28)).astype(np.float32)
        name = exe.graph.inputs[0].name
        out = exe.run({name: x})
        ref = glow.compile(MODEL, "reference").run({name: x})
        print(json.dumps({"diff": max(float(np.max(np.abs(out[k] - ref[k]))) for k in ref),
                          "from_helper": exe.helper_kernels}))
    """, tmp_path)
    assert got["diff"] < 1e-4
    assert got["from_helper"] == 0


def test_a_bad_glow_opencl_helper_is_a_one_line_error(tmp_path):
    env = {**os.environ, "GLOW_OPENCL_HELPER": "yes", "POCL_CACHE_DIR": str(tmp_path / "pocl"),
           "GLOW_CACHE_DIR": str(tmp_path / "glow")}
    p = subprocess.run([sys.executable, "-m", "glow.cli", "run", os.path.abspath(TINY_CNN), "--backend", "opencl"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "GLOW_OPENCL_HELPER must be 0 or 1, got 'yes'" in err[0]


def test_no_helper_where_sys_executable_is_not_python(monkeypatch):
    """In an application that embeds Python, sys.executable is the application: starting it
    with `-m glow...` would start another copy of the application."""
    from glow.backends.opencl import build_helper
    from glow.backends.opencl.backend import OpenCLBackend

    dev = OpenCLBackend()._cl_devices()[0]
    monkeypatch.setattr(sys, "executable", "/opt/someapp/bin/someapp")
    assert not build_helper.worth_starting(dev)
    monkeypatch.setattr(sys, "executable", "")
    assert not build_helper.worth_starting(dev)
