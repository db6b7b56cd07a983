"""`exe.profile(feeds)` on the code-generating backends: one record per instruction of the
compiled program (granularity "kernel"), slowest first, adding up to about the run.

cpu times an instrumented twin of the program (backends/cpu/profiling.py), compiled on the first
profile and kept; the program `run` calls stays uninstrumented. opencl sums the event times of
each launch on a profiling queue, and adds one record per copy to and from the device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import glow
import numpy as np
import pytest
from helpers import backend_unavailable, make_model, opencl_unavailable_reason
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CPU = pytest.param("cpu", marks=pytest.mark.skipif(backend_unavailable("cpu") is not None,
                                                   reason=str(backend_unavailable("cpu"))))
OPENCL = pytest.param("opencl", marks=[pytest.mark.opencl, pytest.mark.skipif(
    opencl_unavailable_reason() is not None, reason=str(opencl_unavailable_reason()))])
COPY_OPS = ("(to device)", "(to host)")


def conv_model(batch=1):
    """Conv -> Relu -> Reshape -> MatMul -> Softmax, big enough that kernels dominate a run."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1, "W"),
             numpy_helper.from_array(rng.standard_normal((32 * 30 * 30, 10)).astype(np.float32) * 0.01, "M"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "M"], ["m"], name="matmul"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [batch, 16, 32, 32])], [("y", TensorProto.FLOAT, [batch, 10])],
                      inits, name="convnet")


def dynamic_model():
    """MatMul -> Relu -> Softmax over a batch of unknown size N."""
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"])]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 64])], [("y", TensorProto.FLOAT, ["N", 32])], [w])


def feeds(batch=1, seed=2):
    return {"x": np.random.default_rng(seed).standard_normal((batch, 16, 32, 32)).astype(np.float32)}


def instructions(exe):
    """The instructions of an executable's compiled program that the entry runs, in order."""
    fn = exe.program.fn if hasattr(exe, "program") else exe.compiled.ir.fn
    return [i for i in fn.instrs if i.kind not in ("alloc", "dealloc")]


def check_records(p, instrs=None):
    assert p.granularity == "kernel"
    secs = [r.seconds for r in p.records]
    assert all(s >= 0 for s in secs) and secs == sorted(secs, reverse=True)
    total = sum(secs)
    assert 0 < total <= p.total_seconds + 1e-6, (total, p.total_seconds)
    kernels = [r for r in p.records if r.op not in COPY_OPS]
    if instrs is not None:
        assert sorted((r.name, r.op) for r in kernels) == sorted((i.name, i.opname) for i in instrs)
    text = p.table()
    assert "profile by kernel: " in text and "one record per instruction" in text and p.records[0].name in text
    return kernels


@pytest.mark.parametrize("target", [CPU, OPENCL])
def test_one_record_per_instruction_slowest_first(target):
    exe = glow.compile(conv_model(), backend=target)
    want = exe.run(feeds())
    p = exe.profile(feeds())
    kernels = check_records(p, instructions(exe))
    assert "MatMul" in {r.op for r in kernels}
    assert any(r.op.startswith("Conv") for r in kernels)
    # the kernels are most of this run: the rest is the call and the checks around it
    assert sum(r.seconds for r in p.records) >= p.total_seconds / 20
    np.testing.assert_allclose(p.outputs["y"], want["y"], rtol=1e-5, atol=1e-7)
    if target == "opencl":  # the copies in and out are records of their own
        assert sorted((r.op, r.name) for r in p.records if r.op in COPY_OPS) == [("(to device)", "x"),
                                                                                 ("(to host)", "y")]


@pytest.mark.parametrize("target", [CPU, OPENCL])
def test_runs_after_a_profile_are_the_same_as_before(target):
    exe = glow.compile(conv_model(batch=2), backend=target)
    before = exe.run(feeds(2))
    program = getattr(exe, "program", None)
    state = None if program is None else (program.module, program.entry, program.module_text)
    for seed in (2, 3):
        p = exe.profile(feeds(2, seed))
        np.testing.assert_allclose(p.outputs["y"], exe.run(feeds(2, seed))["y"], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(exe.run(feeds(2))["y"], before["y"])
    if program is not None:  # cpu: the program run calls is the one compiled at first, untimed
        from glow.backends.cpu.profiling import profiled

        assert exe.program is program and (program.module, program.entry, program.module_text) == state
        assert "readcyclecounter" not in program.module_text
        twin = profiled(program)
        assert profiled(program) is twin and "llvm.readcyclecounter" in twin.module_text  # compiled once
        assert len(twin.counters) == len(instructions(exe))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
def test_cpu_profile_with_any_thread_count(threads):
    """The twin runs on the caller alone, whatever the pool; normal runs still use the pool."""
    exe = glow.compile(conv_model(), backend="cpu", threads=threads)
    p = exe.profile(feeds())
    check_records(p, instructions(exe))
    np.testing.assert_allclose(exe.run(feeds())["y"], p.outputs["y"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("target", [CPU, OPENCL])
def test_dynamic_shapes_profile_the_specialised_program(target):
    exe = glow.compile(dynamic_model(), backend=target)
    for n in (3, 5, 3):
        x = np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32)
        p = exe.profile({"x": x})
        kernels = check_records(p)
        assert "MatMul" in {r.op for r in kernels}
        assert p.outputs["y"].shape == (n, 32)
        np.testing.assert_allclose(p.outputs["y"], exe.run({"x": x})["y"], rtol=1e-5, atol=1e-7)


FRESH = """
    import json, sys
    import numpy as np
    sys.path.insert(0, {here!r})
    import glow
    from test_profile_kernels import conv_model, feeds
    exe = glow.compile(conv_model(), backend="cpu")
    p = exe.profile(feeds())
    assert "onnxruntime" not in sys.modules
    ok = bool(np.allclose(p.outputs["y"], exe.run(feeds())["y"], rtol=1e-5, atol=1e-7))
    print("RESULT", json.dumps([p.granularity, len(p.records), ok]))
"""


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
def test_cpu_profile_in_a_process_that_imports_only_glow(tmp_path):
    """The twin is compiled fresh (empty cache) and checked like any object: it calls nothing
    outside itself (linking.py)."""
    env = {**os.environ, "GLOW_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(FRESH.format(here=HERE))], capture_output=True,
                       text=True, env=env, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    granularity, n, ok = json.loads(r.stdout.split("RESULT", 1)[1])
    assert granularity == "kernel" and n >= 4 and ok
