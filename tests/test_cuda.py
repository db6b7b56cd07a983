"""The CUDA backend: nvcc compile checks of every generated kernel (no GPU needed), and the tests
that need a CUDA device (marked `cuda`, skipped with the reason where there is none).

Without a GPU: every CUDA kernel that the ONNX node suite and the nine light models produce is
rendered (after the same optimise-lower-fuse flow as a real compile, shapes specialised on the
cases' inputs) and compiled to PTX with `nvcc --ptx` for sm_90 and sm_80, all kernels of the
suite in one translation unit per architecture. The kernel logic is the one OpenCL runs on PoCL
(tests/test_opencl.py), so together they check CUDA's kernels without a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import warnings

import glow
import numpy as np
import pytest
from glow.backends.cuda.backend import CudaBackend
from glow.flow import optimize_for_backend
from glow.render import GPU
from glow.render.helpers import HELPERS, render_helpers
from glow.testing.compare import mismatch, to_array

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH (CUDA toolkit absent)")
ARCHS = ("sm_90", "sm_80")


def _cuda_available() -> str | None:
    """None when a CUDA device is usable, else the reason."""
    try:
        CudaBackend().check_available()
    except glow.BackendError as e:
        return str(e)
    return None


CUDA_REASON = _cuda_available()
needs_cuda = pytest.mark.skipif(CUDA_REASON is not None, reason=f"no CUDA device: {CUDA_REASON}")


# -- rendering every kernel of the suites ------------------------------------------------------------
def _kernels_of(model, feeds, be, into: dict) -> bool:
    """Add the CUDA kernels of `model`, compiled as the backend would (specialised on `feeds`
    when its shapes or index operands are only known at run time)."""
    from glow.backend import CompileOptions
    from glow.flow import SpecializingExecutable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = optimize_for_backend(glow.load_onnx(model), be)
        if not be.fully_renderable(g):
            g = SpecializingExecutable(g, be, None, CompileOptions()).specialized_graph(feeds)
        for k in be.compile_graph(g, GPU).program.launches:
            into.setdefault(k.name, k)
    return True


def collect_suite_kernels():
    """{kernel name: Kernel} over the node suite and the light models, plus counts."""
    from glow.testing.models import light_models
    from glow.testing.node_suite import collect_cases

    be, kernels, rendered, skipped = CudaBackend(), {}, 0, 0
    for case in collect_cases():
        init = {t.name for t in case.model.graph.initializer}
        names = [i.name for i in case.model.graph.input if i.name not in init]
        feeds = {n: to_array(x) for n, x in zip(names, case.data_sets[0][0])} if case.data_sets else {}
        try:
            ok = _kernels_of(case.model, feeds, be, kernels)
        except Exception:  # noqa: BLE001 - cases the backend cannot run are counted, not rendered
            ok = False
        rendered, skipped = rendered + ok, skipped + (not ok)
    for case in light_models():
        assert _kernels_of(case.model_path, case.data_sets[0][0], be, kernels), case.name
        rendered += 1
    return kernels, rendered, skipped


@pytest.fixture(scope="module")
def suite_kernels():
    t = time.perf_counter()
    kernels, rendered, skipped = collect_suite_kernels()
    print(f"\n{len(kernels)} distinct CUDA kernels from {rendered} models "
          f"({skipped} node cases not renderable) in {time.perf_counter() - t:.1f}s")
    return kernels


def _translation_unit(kernels) -> str:
    from glow.backends.cuda.dialect import CUDARenderer

    helpers = render_helpers(CUDARenderer(), set(HELPERS))
    return "\n".join(helpers + [k.source for k in kernels]) + "\n"


def _nvcc(source: str, arch: str, workdir: str) -> subprocess.CompletedProcess:
    cu, ptx = os.path.join(workdir, f"k_{arch}.cu"), os.path.join(workdir, f"k_{arch}.ptx")
    with open(cu, "w") as f:
        f.write(source)
    return subprocess.run([NVCC, "--ptx", f"-arch={arch}", "-o", ptx, cu], capture_output=True, text=True)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_every_generated_kernel_compiles_to_ptx(suite_kernels, arch, tmp_path):
    kernels = list(suite_kernels.values())
    assert len(kernels) > 500, "expected the suites to produce hundreds of distinct kernels"
    t = time.perf_counter()
    res = _nvcc(_translation_unit(kernels), arch, str(tmp_path))
    if res.returncode != 0:  # find the culprits one by one, for a readable failure
        bad = [k.name for k in kernels if _nvcc(_translation_unit([k]), arch, str(tmp_path)).returncode]
        pytest.fail(f"nvcc failed for {len(bad)} kernel(s): {bad[:10]}\n{res.stderr[-3000:]}")
    with open(tmp_path / f"k_{arch}.ptx") as f:
        ptx = f.read()
    entries = ptx.count(".entry ")
    print(f"\n{arch}: {entries} kernels compiled to PTX in {time.perf_counter() - t:.1f}s")
    assert entries == len(kernels)


@needs_nvcc
def test_small_program_compiles_for_both_archs(tmp_path):
    from glow.backends.cuda.backend import render_cuda_program
    from glow.testing.models import light_models

    case = next(c for c in light_models() if c.name == "light_squeezenet")
    prg = render_cuda_program(glow.load_onnx(case.model_path))
    for arch in ARCHS:
        res = _nvcc(prg.source, arch, str(tmp_path))
        assert res.returncode == 0, res.stderr[-2000:]


def test_unavailable_backend_says_why():
    if CUDA_REASON is None:
        pytest.skip("a CUDA device is present")
    from glow.plugins import registry

    rec = registry().records.get("cuda")
    assert rec is not None and not rec.available and rec.reason
    with pytest.raises(glow.BackendError, match="cuda"):
        glow.compile(glow.load_onnx(_tiny_model()), backend="cuda")


def _tiny_model():
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "tiny",
                     [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("y", T.FLOAT, [4])])
    return h.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])


# -- on a GPU -------------------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.cuda
def test_cuda_runs_a_small_model():
    x = np.array([-1.0, 0.5, -2.0, 3.0], np.float32)
    out = glow.compile(_tiny_model(), backend="cuda").run({"x": x})["y"]
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@needs_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("n", [64, 257, 1024])
def test_cuda_matmul_kernel_and_cublas_agree(n, monkeypatch):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                     [h.make_tensor_value_info("a", T.FLOAT, [n, n]), h.make_tensor_value_info("b", T.FLOAT, [n, n])],
                     [h.make_tensor_value_info("y", T.FLOAT, [n, n])])
    m = h.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    ref = a.astype(np.float64) @ b
    for mode in ("", "cublas"):
        monkeypatch.setenv("GLOW_CUDA_MATMUL", mode)
        got = glow.compile(m, backend="cuda").run({"a": a, "b": b})["y"]
        assert mismatch(ref.astype(np.float32), got, 1e-3, 1e-3, "y") is None, mode
