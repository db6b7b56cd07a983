"""The OpenCL backend on whatever OpenCL platform is installed (PoCL's CPU device in CI).

Marked `opencl`; skipped with the reason when no platform or device exists. CI runs a fixed,
deterministic subset of the ONNX node suite here (every STRIDE-th case by name, plus every
`--native floor` case of a second subset); the whole suite is one command away:

    python -m pytest tests/test_node_suite.py --glow-backend opencl [--glow-native floor]
    python -m glow.testing.node_suite --backend opencl [--native floor] --show-failures

Also here: all nine light models, the pytorch suites, the GPU-shaped kernels (the ones CUDA
runs) executed on this device, the runtime (weights uploaded once, build cache, dynamic shapes,
transfers) and the unavailable-backend path.
"""

from __future__ import annotations

import glow
import numpy as np
import onnx
import pytest
from glow.testing.models import folder_cases, light_models, run_model_case
from glow.testing.node_suite import check_known, collect_cases, load_known_failures, run_case
from helpers import opencl_unavailable_reason
from onnx import TensorProto as T
from onnx import helper as h

REASON = opencl_unavailable_reason()
pytestmark = [pytest.mark.opencl,
              pytest.mark.skipif(REASON is not None, reason=f"no OpenCL platform: {REASON}")]

#: CI subset: every STRIDE-th node case in name order (deterministic, spread over all ops).
STRIDE = 8
CASES = collect_cases()
SUBSET = CASES[::STRIDE]
FLOOR_SUBSET = CASES[3::4 * STRIDE]
LIGHT = light_models()
FOLDERS = folder_cases("pytorch-converted") + folder_cases("pytorch-operator")


def _check(err, known, name):
    check_known(err, known.get(name))


@pytest.mark.parametrize("case", SUBSET, ids=[c.name for c in SUBSET])
def test_node_case_subset(case):
    _check(run_case(case, "opencl"), load_known_failures("opencl"), case.name)


@pytest.mark.parametrize("case", FLOOR_SUBSET, ids=[c.name for c in FLOOR_SUBSET])
def test_node_case_subset_floor(case):
    _check(run_case(case, "opencl", "floor"), load_known_failures("opencl-floor"), case.name)


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model(case):
    assert run_model_case(case, "opencl") is None


GPU_LIGHT = [c for c in LIGHT if c.name in ("light_squeezenet", "light_resnet50")]


@pytest.mark.parametrize("case", GPU_LIGHT, ids=[c.name for c in GPU_LIGHT])
def test_light_model_gpu_shaped(case, gpu_shaped):
    """Whole models through the GPU-shaped kernels CUDA runs (tiled conv and MatMul, flat
    elementwise), executed on PoCL."""
    from glow.testing.compare import mismatch

    exe = glow.compile(case.model_path, backend="opencl")
    assert "Bs[e / 64][e % 64] = ok ?" in exe.compiled.program.source  # the tiled GPU conv
    feeds, expected = case.data_sets[0]
    got = exe.run(feeds)
    assert mismatch(expected[0], got[exe.output_names[0]], case.rtol, case.atol) is None


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT[-2:], ids=[c.name for c in LIGHT[-2:]])
def test_light_model_floor(case):
    assert run_model_case(case, "opencl", "floor") is None


@pytest.mark.parametrize("case", FOLDERS, ids=[c.name for c in FOLDERS])
def test_pytorch_suites(case):
    _check(run_model_case(case, "opencl"), load_known_failures("opencl-models"), case.name)


# -- kernels the CUDA backend runs, executed here ---------------------------------------------------
def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "t", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outputs],
                     [onnx.numpy_helper.from_array(a, n) for n, a in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def gpu_shaped(monkeypatch):
    """Make the OpenCL device render GPU-shaped kernels (local-memory tiles, barriers)."""
    from glow.backends.opencl.runtime import ClDevice
    from glow.render import DeviceParams

    monkeypatch.setattr(ClDevice, "params", lambda self: DeviceParams(kind="gpu", max_local=256,
                                                                      flat_local=64))


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (100, 37, 129), (1, 300, 70)])
@pytest.mark.parametrize("shape", ["gpu", "cpu"])
def test_matmul_shapes(m, k, n, shape, request):
    if shape == "gpu":
        request.getfixturevalue("gpu_shaped")
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    mdl = _model([h.make_node("MatMul", ["a", "b"], ["mm"]), h.make_node("Add", ["mm", "bias"], ["s"]),
                  h.make_node("Relu", ["s"], ["y"])], [("a", [m, k])], ["y"], [("b", b), ("bias", bias)])
    exe = glow.compile(mdl, backend="opencl")
    got = exe.run({"a": a})["y"]
    np.testing.assert_allclose(got, np.maximum(a.astype(np.float64) @ b + bias, 0), rtol=1e-4, atol=1e-4)
    names = [k.name for k in exe.compiled.program.launches]
    assert len(names) == 1 and names[0].startswith("matmul_ep")  # bias and relu fused in


@pytest.mark.parametrize("shape", ["gpu", "cpu"])
@pytest.mark.parametrize("geom", [dict(k=3, s=1, p=1, g=1), dict(k=1, s=1, p=0, g=1), dict(k=3, s=2, p=1, g=1),
                                  dict(k=5, s=3, p=2, g=1), dict(k=3, s=1, p=1, g=4), dict(k=3, s=1, p=1, g=1, hw=45),
                                  dict(k=3, s=2, p=1, g=1, hw=77), dict(k=7, s=4, p=3, g=1, hw=70)])
def test_conv_shapes(geom, shape, request):
    """Every conv variant (direct; CPU: 16 columns x 8 channels, 16 channels x 8 pixels)."""
    if shape == "gpu":
        request.getfixturevalue("gpu_shaped")
    rng = np.random.default_rng(1)
    cin, cout, hw = 8, 16, geom.get("hw", 19)
    x = rng.standard_normal((2, cin, hw, hw), np.float32)
    w = rng.standard_normal((cout, cin // geom["g"], geom["k"], geom["k"]), np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    node = h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[geom["p"]] * 4, strides=[geom["s"]] * 2,
                       group=geom["g"])
    mdl = _model([node, h.make_node("Relu", ["c"], ["y"])], [("x", list(x.shape))], ["y"], [("w", w), ("b", b)])
    ref = glow.compile(mdl, backend="reference").run({"x": x})["y"]
    got = glow.compile(mdl, backend="opencl").run({"x": x})["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_convolutions_of_other_sizes_share_one_kernel():
    """CPU-shaped convolutions read image and channel sizes as kernel arguments: two layers of
    one window and epilogue but other sizes launch one kernel (PoCL builds it once), and each
    computes its own geometry correctly."""
    rng = np.random.default_rng(3)
    nodes, inits, c, prev = [], [], 8, "x"
    for i, cout in enumerate((16, 32, 32, 48)):  # 80x80, 40x40 (16-column rows); 20x20, 10x10 (16 channels)
        w = rng.standard_normal((cout, c, 3, 3), np.float32) * 0.2
        b = rng.standard_normal(cout).astype(np.float32)
        inits += [(f"w{i}", w), (f"b{i}", b)]
        nodes += [h.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1] * 4),
                  h.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev, c = f"r{i}", cout
        if i < 3:
            nodes.append(h.make_node("MaxPool", [prev], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            prev = f"p{i}"
    nodes[-1].output[0] = "y"
    x = rng.standard_normal((1, 8, 80, 80), np.float32)
    mdl = _model(nodes, [("x", list(x.shape))], ["y"], inits)
    exe = glow.compile(mdl, backend="opencl")
    convs = [k.name for k in exe.compiled.program.launches if k.instr.opname == "Conv"]
    assert len(convs) == 4 and len(set(convs)) == 2, convs
    ref = glow.compile(mdl, backend="reference").run({"x": x})["y"]
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("geom", [
    dict(cin=8, cout=16, g=1, hw=(19, 19), k=(3, 3), s=(1, 1), p=(1, 1), d=(1, 1)),
    dict(cin=5, cout=70, g=1, hw=(13, 29), k=(3, 5), s=(2, 1), p=(0, 2), d=(1, 1)),
    dict(cin=8, cout=32, g=2, hw=(17, 17), k=(3, 3), s=(1, 1), p=(2, 2), d=(2, 2)),
    dict(cin=48, cout=16, g=1, hw=(9, 9), k=(1, 1), s=(1, 1), p=(0, 0), d=(1, 1)),
    dict(cin=3, cout=24, g=1, hw=(70, 70), k=(7, 7), s=(4, 4), p=(3, 3), d=(1, 1))])
def test_gpu_tiled_conv(geom, gpu_shaped):
    """The GPU implicit-GEMM convolution (the kernel CUDA runs) on PoCL: ragged tiles in every
    dimension, groups, dilation, padding, bias and a fused Relu."""
    rng = np.random.default_rng(geom["cout"])
    x = rng.standard_normal((2, geom["cin"], *geom["hw"]), np.float32)
    w = rng.standard_normal((geom["cout"], geom["cin"] // geom["g"], *geom["k"]), np.float32)
    b = rng.standard_normal(geom["cout"]).astype(np.float32)
    node = h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[*geom["p"], *geom["p"]], strides=list(geom["s"]),
                       dilations=list(geom["d"]), group=geom["g"])
    mdl = _model([node, h.make_node("Relu", ["c"], ["y"])], [("x", list(x.shape))], ["y"], [("w", w), ("b", b)])
    exe = glow.compile(mdl, backend="opencl")
    assert "Bs[e / 64][e % 64] = ok ?" in exe.compiled.program.source, "the tiled GPU conv was not rendered"
    ref = glow.compile(mdl, backend="reference").run({"x": x})["y"]
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-4, atol=1e-4)


# -- runtime -------------------------------------------------------------------------------------------
def _mlp():
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((32, 64), np.float32), rng.standard_normal((64, 10), np.float32)
    return _model([h.make_node("MatMul", ["x", "w1"], ["h"]), h.make_node("Relu", ["h"], ["r"]),
                   h.make_node("MatMul", ["r", "w2"], ["y"])], [("x", [4, 32])], ["y"], [("w1", w1), ("w2", w2)])


def test_runs_repeatably_and_builds_once():
    from glow.backends.opencl.backend import OpenCLBackend

    x = np.random.default_rng(2).standard_normal((4, 32), np.float32)
    exe = glow.compile(_mlp(), backend="opencl")
    ref = glow.compile(_mlp(), backend="reference").run({"x": x})["y"]
    for _ in range(3):  # weights stay on the device; inputs are rewritten each run
        np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(exe.run({"x": 2 * x})["y"],
                               glow.compile(_mlp(), backend="reference").run({"x": 2 * x})["y"], rtol=1e-4, atol=1e-4)
    again = glow.compile(_mlp(), backend="opencl")  # same program text: the build cache answers
    assert again.build_seconds < 0.05
    dev = OpenCLBackend()._cl_devices()[0]
    assert len(dev.programs) >= 1


def test_dynamic_shapes_specialise_per_signature():
    g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("ReduceSum", ["r"], ["y"], keepdims=0)], "dyn",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n", 3])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    exe = glow.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), backend="opencl")
    for n in (2, 5, 2):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3) - 4
        np.testing.assert_allclose(exe.run({"x": x})["y"], np.maximum(x, 0).sum(), rtol=1e-6)
    assert exe.stats["compiles"] == 2 and exe.stats["specializations"] == 2


def test_devices_and_transfers():
    from glow.backends.opencl.backend import OpenCLBackend

    be = OpenCLBackend()
    devs = be.devices()
    assert devs and all(d.backend == "opencl" and d.memory_bytes > 0 for d in devs)
    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(be.to_host(be.to_device(a, devs[0]), devs[0]), a)
    assert "opencl" in glow.available_backends()


def test_unavailable_without_platform(monkeypatch):
    import sys

    from glow.backends.opencl import backend as mod

    mod._discover.cache_clear()
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # import pyopencl now fails
    try:
        with pytest.raises(glow.BackendError, match="pyopencl is not installed"):
            mod.OpenCLBackend().check_available()
    finally:
        mod._discover.cache_clear()


def test_constant_power_helpers_match_numpy():
    """x ** 0.75 (LRN) renders with the vectorisable glow_powf helper: within a few ulp of NumPy,
    special values included."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(0, 10, 5000), np.exp(rng.uniform(-100, 80, 5000)),
                        [0, -1, np.inf, np.nan, 1e-40, 1e-45, 1, 16, 3e38]]).astype(np.float32)
    g = h.make_graph([h.make_node("Pow", ["x", "e"], ["y"])], "p", [h.make_tensor_value_info("x", T.FLOAT, [x.size])],
                     [h.make_tensor_value_info("y", T.FLOAT, [x.size])],
                     [onnx.numpy_helper.from_array(np.array(0.75, np.float32), "e")])
    exe = glow.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), backend="opencl")
    assert "glow_powf" in exe.compiled.program.source
    got = exe.run({"x": x})["y"]
    np.testing.assert_allclose(got, np.power(x.astype(np.float64), 0.75).astype(np.float32), rtol=3.6e-7)


# -- the narrow formats (float8, float4, int4, int2): Cast both ways, bit for bit --------------------
NARROW = {"float8e4m3fn": T.FLOAT8E4M3FN, "float8e4m3fnuz": T.FLOAT8E4M3FNUZ, "float8e5m2": T.FLOAT8E5M2,
          "float8e5m2fnuz": T.FLOAT8E5M2FNUZ, "float8e8m0": T.FLOAT8E8M0, "float4e2m1": T.FLOAT4E2M1,
          "int4": T.INT4, "uint4": T.UINT4, "int2": T.INT2, "uint2": T.UINT2}


def _narrow_probe() -> np.ndarray:
    """Every finite value of every narrow format, the halfway points between neighbours (and the
    floats just either side of them), the ends of the ranges, signed zeros, NaNs, infinities,
    float32 subnormals and values far out of range."""
    import ml_dtypes

    grid = [np.arange(256, dtype=np.uint8).view(glow.dtypes.from_name(n).np).astype(np.float32)
            for n in NARROW]
    v = np.unique(np.concatenate(grid + [np.float32([2.0 ** k for k in range(-140, 128)])]))
    v = v[np.isfinite(v)]
    v = np.concatenate([v, -v])
    v = np.unique(np.concatenate([v, ((v[1:].astype(np.float64) + v[:-1]) / 2).astype(np.float32)]))
    v = np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))])
    specials = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1e-40, -3e-39, 3.4028235e38,
                -3.4028235e38, 1e10, -1e10, 2.0 ** 31, -2.0 ** 31, 3e9, 7.5, -8.5, 8.5, 15.5, 16.5,
                float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max) + 16]
    return np.concatenate([v, np.float32(specials)]).astype(np.float32)


def _narrow_reference(x, fmt, saturate, round_mode):
    """The reference's conversion (glow.narrow's rule, which tests/test_narrow.py checks against
    a grid oracle), never the installed ml_dtypes' own (0.5 and 0.7 differ)."""
    from glow.ops.cast import cast_array

    with np.errstate(invalid="ignore"):
        return cast_array(x, glow.dtypes.from_name(fmt), bool(saturate), round_mode)


NARROW_CASES = [(f, s, "up") for f in NARROW for s in (0, 1)] + \
               [("float8e8m0", s, m) for s in (0, 1) for m in ("down", "nearest")]


@pytest.mark.parametrize("fmt,saturate,round_mode", NARROW_CASES,
                         ids=[f"{f}-sat{s}-{m}" for f, s, m in NARROW_CASES])
def test_narrow_formats_cast_bit_for_bit(fmt, saturate, round_mode):
    """float32 -> narrow format -> float32 agrees bit for bit with the reference: values, halfway
    points, overflow, NaN and signed zeros, with and without saturation."""
    x = _narrow_probe()
    g = h.make_graph([h.make_node("Cast", ["x"], ["q"], to=NARROW[fmt], saturate=saturate, round_mode=round_mode),
                      h.make_node("Cast", ["q"], ["y"], to=T.FLOAT)], "narrow",
                     [h.make_tensor_value_info("x", T.FLOAT, [x.size])],
                     [h.make_tensor_value_info("q", NARROW[fmt], [x.size]),
                      h.make_tensor_value_info("y", T.FLOAT, [x.size])])
    exe = glow.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 25)]), backend="opencl")
    assert f"glow_{fmt}_enc" in exe.compiled.program.source or "int" in fmt
    out = exe.run({"x": x})
    want = _narrow_reference(x, fmt, saturate, round_mode)
    np.testing.assert_array_equal(out["q"].view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(out["y"].view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("src", ["float64", "float16", "int32", "int64", "bool"])
def test_narrow_formats_cast_from_other_sources(src):
    """Every narrow format from wider and integer sources: a float64 is rounded once (to odd in
    float32 first), float8e8m0 decides in float64 as the reference does."""
    from glow.ops.cast import cast_array

    rng = np.random.default_rng(1)
    base = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.uniform(-10, 10, 200),
                           [0, 1.5, 2 ** 24 + 1, 1.0625 + 2 ** -40, 448, 500, 2.0 ** 127 * 1.5, 2.0 ** -130, 7.5,
                            -17, 2 ** 31 + 5, 2.0 ** 53 + 1]])
    with np.errstate(all="ignore"):
        x = base > 0 if src == "bool" else base.astype(src)
    for fmt, to in NARROW.items():
        for saturate, mode in [(1, "up"), (0, "up")] + [(0, "nearest"), (1, "down")] * (fmt == "float8e8m0"):
            g = h.make_graph([h.make_node("Cast", ["x"], ["q"], to=to, saturate=saturate, round_mode=mode)], "n",
                             [h.make_tensor_value_info("x", h.np_dtype_to_tensor_dtype(x.dtype), [x.size])],
                             [h.make_tensor_value_info("q", to, [x.size])])
            exe = glow.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 25)]), backend="opencl")
            with np.errstate(all="ignore"):
                want = cast_array(x, glow.dtypes.from_name(fmt), bool(saturate), mode)
            np.testing.assert_array_equal(exe.run({"x": x})["q"].view(np.uint8), want.view(np.uint8),
                                          err_msg=f"{src} -> {fmt}, saturate={saturate}, round_mode={mode}")


def test_a_node_deferred_to_run_time_stays_out_of_fused_bodies():
    """From the fuzzer (seed 4042, graph 16): CastLike(Sub(n, n)) of an int64 scalar input n to
    float16. opencl accepts the CastLike for later (an input decides its value) though the
    renderer has no code for it, and the fusion put it in an elementwise body: "glow bug: ...
    KeyError: ('', 'CastLike')". Fused bodies take only what the renderer renders."""
    m = h.make_model(h.make_graph(
        [h.make_node("Sub", ["n", "n"], ["d"]), h.make_node("CastLike", ["d", "like"], ["y"])], "g",
        [h.make_tensor_value_info("n", T.INT64, [])], [h.make_tensor_value_info("y", T.FLOAT16, [])],
        [h.make_tensor("like", T.FLOAT16, [1], [0.0])]), opset_imports=[h.make_opsetid("", 19)])
    for n in (5, -3):
        y = glow.compile(m, backend="opencl", strict=True).run({"n": np.array(n, np.int64)})["y"]
        assert y.dtype == np.float16 and y.shape == () and y == 0
