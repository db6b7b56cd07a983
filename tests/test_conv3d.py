"""3-D convolutions lowered as one 2-D Conv over depth-stacked taps (core/lowering/rules_conv.py,
`_volume_as_planes`): every backend equals the reference (the oracle, which runs the 3-D Conv as
it is) over groups, strides, dilations, asymmetric and automatic padding, bias, weights that are
inputs, a batch, and float16; on cpu the 2-D Conv runs on the NHWC kernels (no MatMul left)."""

import glow
import numpy as np
import pytest
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

#: (x shape, weight shape, attributes)
CASES = {
    "3x3x3-pad1": ((1, 4, 6, 7, 8), (5, 4, 3, 3, 3), dict(pads=[1] * 6)),
    "stride-dilation": ((2, 3, 9, 8, 7), (4, 3, 3, 2, 3), dict(strides=[2, 1, 2], dilations=[2, 1, 1],
                                                              pads=[1, 0, 2, 0, 1, 1])),
    "groups": ((1, 6, 5, 6, 6), (4, 3, 2, 3, 3), dict(group=2, pads=[0, 1, 1, 1, 1, 1])),
    "depthwise": ((1, 4, 5, 5, 5), (4, 1, 3, 3, 3), dict(group=4, pads=[1] * 6)),
    "same-upper": ((1, 3, 5, 6, 7), (2, 3, 2, 3, 4), dict(auto_pad="SAME_UPPER", strides=[2, 2, 1])),
    "valid-kd1": ((1, 3, 4, 6, 6), (5, 3, 1, 3, 3), dict(auto_pad="VALID")),
    "kernel-deeper-than-stride": ((1, 2, 7, 4, 4), (3, 2, 5, 1, 1), dict(strides=[3, 1, 1], pads=[2, 0, 0, 1, 0, 0])),
}


def conv3d_model(case, *, bias=True, weights_input=False, dtype=T.FLOAT):
    xs, ws, attrs = CASES[case]
    rng = np.random.default_rng(0)
    npt = np.float16 if dtype == T.FLOAT16 else np.float32
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(npt)
    b = rng.standard_normal(ws[0]).astype(npt)
    inits = [] if weights_input else [nh.from_array(w, "w")]
    ins = [h.make_tensor_value_info("x", dtype, xs)]
    ins += [h.make_tensor_value_info("w", dtype, ws)] if weights_input else []
    if bias:
        inits.append(nh.from_array(b, "b"))
    node = h.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], **attrs)
    graph = h.make_graph([node, h.make_node("Relu", ["c"], ["y"])], "conv3d", ins,
                         [h.make_tensor_value_info("y", dtype, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal(xs).astype(npt)}
    if weights_input:
        feeds["w"] = w
    return model, feeds


BACKENDS = [("cpu", None), ("cpu", "floor"), ("opencl", None)]


def check_backend(model, feeds, backend, native, rtol, atol):
    """The backend's output equals the reference's (skipped where the backend is unavailable)."""
    if backend_unavailable(backend):
        pytest.skip(f"{backend} unavailable")
    want = glow.compile(model, backend="reference").run(feeds)["y"]
    got = glow.compile(model, backend=backend, native=native, strict=True).run(feeds)["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend,native", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv3d_equals_the_reference(case, backend, native):
    check_backend(*conv3d_model(case), backend, native, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["no-bias", "weights-input", "float16"])
def test_conv3d_variants_on_cpu(variant):
    kw = {"no-bias": dict(bias=False), "weights-input": dict(weights_input=True),
          "float16": dict(dtype=T.FLOAT16)}[variant]
    model, feeds = conv3d_model("stride-dilation", **kw)
    want = glow.compile(model, backend="reference").run(feeds)["y"]
    got = glow.compile(model, backend="cpu", strict=True).run(feeds)["y"]
    assert got.dtype == want.dtype
    tol = 2e-3 if variant == "float16" else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)


def test_cpu_runs_a_3d_convolution_on_its_convolution_kernel():
    """Not the im2col MatMul (165 times onnxruntime's time on a 3 x 3 x 3 layer): one NHWC Conv."""
    model, feeds = conv3d_model("3x3x3-pad1")
    exe = glow.compile(model, backend="cpu", strict=True)
    ops = {r.op for r in exe.profile(feeds).records}
    assert "ConvNHWC" in ops and "MatMul" not in ops, ops


#: (op, x shape, attributes): 3-D pools, lowered as 2-D pools of the depth planes and a depth window
POOLS = {
    "max-3x3x3-s2-pad": ("MaxPool", (1, 3, 7, 9, 8), dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1] * 6)),
    "max-ceil-dilated": ("MaxPool", (2, 2, 8, 7, 7), dict(kernel_shape=[2, 3, 2], strides=[3, 2, 2],
                                                          dilations=[2, 1, 1], ceil_mode=1)),
    "max-1x2x2": ("MaxPool", (1, 4, 5, 8, 8), dict(kernel_shape=[1, 2, 2], strides=[1, 2, 2])),
    "avg-exclude-pad": ("AveragePool", (1, 3, 6, 7, 7), dict(kernel_shape=[3, 3, 3], strides=[2, 1, 2],
                                                              pads=[1, 1, 0, 2, 1, 1])),
    "avg-include-pad-ceil": ("AveragePool", (1, 2, 7, 6, 9), dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2],
                                                                   pads=[1, 0, 1, 0, 1, 0], count_include_pad=1,
                                                                   ceil_mode=1)),
    "avg-same-lower": ("AveragePool", (1, 2, 5, 6, 6), dict(kernel_shape=[2, 3, 3], auto_pad="SAME_LOWER")),
}


@pytest.mark.parametrize("backend,native", BACKENDS)
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool3d_equals_the_reference(case, backend, native):
    op, xs, attrs = POOLS[case]
    graph = h.make_graph([h.make_node(op, ["x"], ["y"], **attrs)], "pool3d",
                         [h.make_tensor_value_info("x", T.FLOAT, xs)], [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 19)])
    feeds = {"x": np.random.default_rng(1).standard_normal(xs).astype(np.float32)}
    check_backend(model, feeds, backend, native, rtol=1e-5, atol=1e-6)


#: (x shape, weight shape [C, M/group, k...], attributes): transposed convolutions, lowered as one
#: Conv whose output channels are the stride's phases (core/lowering/rules_conv.py `_phases_as_conv`)
TRANSPOSED = {
    "k2-s2-unet": ((1, 8, 6, 7), (8, 4, 2, 2), dict(strides=[2, 2])),
    "k4-s2-p1-dcgan": ((2, 6, 5, 5), (6, 3, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "k3-s2-outpad": ((1, 4, 5, 6), (4, 5, 3, 3), dict(strides=[2, 2], pads=[1, 0, 1, 2], output_padding=[1, 1])),
    "k3-s1": ((1, 5, 8, 8), (5, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    "k1-s3": ((1, 3, 4, 4), (3, 2, 1, 1), dict(strides=[3, 3])),
    "groups": ((1, 6, 5, 5), (6, 2, 3, 3), dict(group=3, strides=[2, 1], pads=[0, 1, 1, 0])),
    "output-shape": ((1, 3, 4, 5), (3, 2, 3, 3), dict(strides=[2, 2], output_shape=[9, 12])),
    "same-upper": ((1, 3, 5, 4), (3, 2, 4, 3), dict(strides=[2, 3], auto_pad="SAME_UPPER")),
    "1d": ((2, 4, 9), (4, 3, 5), dict(strides=[3], pads=[2, 1])),
    "3d": ((1, 3, 3, 4, 4), (3, 2, 2, 3, 3), dict(strides=[2, 2, 1], pads=[0, 1, 1, 0, 1, 1])),
    "dilated": ((1, 3, 5, 5), (3, 2, 3, 3), dict(strides=[2, 2], dilations=[2, 1])),
}


@pytest.mark.parametrize("backend,native", BACKENDS)
@pytest.mark.parametrize("case", sorted(TRANSPOSED))
def test_conv_transpose_equals_the_reference(case, backend, native):
    xs, ws, attrs = TRANSPOSED[case]
    rng = np.random.default_rng(2)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    bias = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
    node = h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = h.make_graph([node], "convT", [h.make_tensor_value_info("x", T.FLOAT, xs)],
                         [h.make_tensor_value_info("y", T.FLOAT, None)],
                         [nh.from_array(w, "w"), nh.from_array(bias, "b")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    check_backend(model, {"x": rng.standard_normal(xs).astype(np.float32)}, backend, native, rtol=1e-4, atol=1e-5)
