"""Integer convolution on the cpu backend (backends/cpu/kernels/int8_conv.py) and the QDQ island
rules that lead to it (glow.passes.qdq): ConvInteger equals the reference's int32 exactly at every
instruction-set level this host runs, optimised (NHWC) and not (NCHW through scratch); a
DQ -> Conv -> Q island becomes QLinearConv (DQ -> MatMul -> Q with constant weights QLinearMatMul);
Q(Relu) becomes a Max with the zero point."""

from __future__ import annotations

from collections import Counter

import glow
import numpy as np
import pytest
from glow.passes import optimize_graph
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _levels():
    from glow.backends.cpu import jit

    return list(jit.ISAS[jit.ISAS.index(jit.host_isa()):])


def _conv_integer(rng, shape, m, k, stride, pads, xdt, wdt, xzp, wzp, dilation=1, wmax=None):
    n, c, hh, ww = shape
    if wmax is None:
        lo, hi = (0, 256) if wdt == np.uint8 else (-128, 128)
    else:  # 7-bit weights around the zero point: AVX2's vpmaddubsw takes them (|B'| <= 64)
        lo, hi = (128 - wmax, 128 + wmax + 1) if wdt == np.uint8 else (-wmax, wmax + 1)
    w = rng.integers(lo, hi, (m, c, k, k)).astype(wdt)
    inits = [nh.from_array(w, "w"), nh.from_array(np.asarray(xzp, xdt), "xzp"),
             nh.from_array(np.asarray(wzp, wdt), "wzp")]
    node = h.make_node("ConvInteger", ["x", "w", "xzp", "wzp"], ["y"], pads=pads, strides=[stride, stride],
                       dilations=[dilation, dilation])
    x = h.make_tensor_value_info("x", T.UINT8 if xdt == np.uint8 else T.INT8, list(shape))
    g = h.make_graph([node], "g", [x], [h.make_tensor_value_info("y", T.INT32, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


#: (input NCHW, output channels, kernel, stride, pads, dilation): pointwise; padded 3x3 on a batch;
#: a strided 7x7 stem over 3 channels (taps not whole groups of 4); uneven pads; dilation; 17
#: output channels (a partial panel).
GEOMETRIES = [((1, 16, 8, 8), 32, 1, 1, [0, 0, 0, 0], 1), ((2, 8, 9, 7), 20, 3, 1, [1, 1, 1, 1], 1),
              ((1, 3, 17, 17), 24, 7, 2, [3, 3, 3, 3], 1), ((1, 12, 10, 10), 40, 3, 2, [1, 0, 1, 2], 1),
              ((1, 8, 11, 11), 16, 3, 1, [2, 2, 2, 2], 2), ((1, 5, 6, 6), 17, 3, 1, [0, 0, 0, 0], 1)]


def _cases():
    for xdt, xzp in ((np.uint8, 7), (np.int8, -3)):
        for wdt, wzp in ((np.int8, 0), (np.uint8, 128), (np.int8, [i % 5 for i in range(20)])):
            for shape, m, k, s, pads, d in GEOMETRIES:
                if isinstance(wzp, list) and m != 20:
                    continue  # the per-channel zero point is made for 20 channels
                yield shape, m, k, s, pads, xdt, wdt, xzp, wzp, d


@pytest.mark.parametrize("level", ["avx512", "avx2", "generic"])
def test_conv_integer_equals_the_reference_exactly(level):
    if level not in _levels():
        pytest.skip(f"this CPU does not execute {level}")
    rng = np.random.default_rng(5)
    for shape, m, k, s, pads, xdt, wdt, xzp, wzp, d in _cases():
        model = _conv_integer(rng, shape, m, k, s, pads, xdt, wdt, xzp, wzp, d, wmax=64)
        lo, hi = (0, 256) if xdt == np.uint8 else (-128, 128)
        x = rng.integers(lo, hi, shape).astype(xdt)
        want = glow.compile(model, "reference").run({"x": x})["y"]
        for optimize in (True, False):
            exe = glow.compile(model, "cpu", optimize=optimize, options={"isa": level})
            ops = Counter(n.op.name for n in exe.graph.nodes)
            if level != "generic":  # 7-bit weights: vpdpbusd or vpmaddubsw, faster than float32
                assert ops["ConvIntegerNHWC" if optimize else "ConvInteger"] == 1, ops
            got = exe.run({"x": x})["y"]
            assert got.dtype == np.int32 and np.array_equal(got, want), (shape, k, s, pads, xdt, wdt, optimize)


def test_full_range_weights_take_the_integer_kernel_only_where_it_is_faster(monkeypatch):
    # AVX2's exact int16 pairs are slower than the float32 convolution: full 8-bit weights
    # convolve in float32 there (exact, rules_quant.f32_slices), and on the integer kernel with VNNI.
    # $GLOW_CPU_ISA is what a host of that level sees when the graph is lowered.
    from glow.backends.cpu import jit
    from glow.backends.cpu.kernels.int8_gemm import vnni

    rng = np.random.default_rng(1)
    model = _conv_integer(rng, (1, 16, 8, 8), 32, 3, 1, [1, 1, 1, 1], np.uint8, np.int8, 9, 0)
    x = rng.integers(0, 256, (1, 16, 8, 8)).astype(np.uint8)
    want = glow.compile(model, "reference").run({"x": x})["y"]
    for level in _levels():
        monkeypatch.setenv("GLOW_CPU_ISA", level)
        exe = glow.compile(model, "cpu")
        with jit.level(level):
            integer = vnni()
        assert ("ConvIntegerNHWC" in {n.op.name for n in exe.graph.nodes}) == integer, level
        assert np.array_equal(exe.run({"x": x})["y"], want), level


# -- the QDQ island rules ------------------------------------------------------------------------

def _qdq_conv(relu=False, bias_scale=None, per_channel=True):
    rng = np.random.default_rng(2)
    m, c = 8, 4
    ws = (rng.uniform(0.01, 0.02, m) if per_channel else np.asarray(0.015)).astype(np.float32)
    xs, ys = np.float32(0.05), np.float32(0.1)
    bs = (xs * ws) if bias_scale is None else np.broadcast_to(np.float32(bias_scale), (m,))
    inits = [nh.from_array(rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8), "wq"),
             nh.from_array(ws, "ws"), nh.from_array(np.zeros(ws.shape, np.int8), "wz"),
             nh.from_array(rng.integers(-500, 500, m).astype(np.int32), "bq"),
             nh.from_array(np.asarray(bs, np.float32), "bs"), nh.from_array(np.zeros(m, np.int32), "bz"),
             nh.from_array(np.asarray(xs), "xs"), nh.from_array(np.asarray(3, np.uint8), "xz"),
             nh.from_array(np.asarray(ys), "ys"), nh.from_array(np.asarray(128, np.uint8), "yz")]
    nodes = [h.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], axis=0),
             h.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bf"], axis=0),
             h.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=[1, 1, 1, 1])]
    if relu:
        nodes.append(h.make_node("Relu", ["yf"], ["rf"]))
    nodes.append(h.make_node("QuantizeLinear", ["rf" if relu else "yf", "ys", "yz"], ["y"]))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.UINT8, [1, c, 6, 6])],
                     [h.make_tensor_value_info("y", T.UINT8, [1, m, 6, 6])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def _ops(model):
    from glow.onnx_import import load_onnx

    return Counter(n.op.name for n in optimize_graph(load_onnx(model), supports=lambda node: True).nodes)


@pytest.mark.parametrize("relu", [False, True])
def test_a_dq_conv_q_island_becomes_qlinear_conv(relu):
    model = _qdq_conv(relu)
    ops = _ops(model)
    assert ops["QLinearConv"] == 1 and ops["Conv"] == 0 and ops["Max"] == int(relu), ops
    x = np.random.default_rng(4).integers(0, 256, (1, 4, 6, 6)).astype(np.uint8)
    # the float graph as written (the reference interpreter, unoptimised): equal but for values
    # on a half step, which the exact integer accumulation may round the other way
    want = glow.compile(model, "reference", optimize=False).run({"x": x})["y"]
    for backend in ("reference", "cpu"):
        got = glow.compile(model, backend).run({"x": x})["y"]
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert diff.max() <= 1 and (diff == 0).mean() >= 0.99, (backend, diff.max(), (diff == 0).mean())


def test_an_island_whose_bias_is_not_at_the_accumulator_scale_stays_float():
    ops = _ops(_qdq_conv(bias_scale=0.3))
    assert ops["QLinearConv"] == 0 and ops["Conv"] == 1, ops


def _qdq_matmul():
    rng = np.random.default_rng(6)
    k, n = 48, 24
    inits = [nh.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "bq"),
             nh.from_array(rng.uniform(0.01, 0.02, n).astype(np.float32), "bs"),
             nh.from_array(np.zeros(n, np.int8), "bz"),
             nh.from_array(np.asarray(0.05, np.float32), "as"), nh.from_array(np.asarray(10, np.uint8), "az"),
             nh.from_array(np.asarray(0.2, np.float32), "ys"), nh.from_array(np.asarray(120, np.uint8), "yz")]
    nodes = [h.make_node("DequantizeLinear", ["a", "as", "az"], ["af"]),
             h.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bf"], axis=1),
             h.make_node("MatMul", ["af", "bf"], ["yf"]),
             h.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.UINT8, [2, 5, k])],
                     [h.make_tensor_value_info("y", T.UINT8, [2, 5, n])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def test_a_dq_matmul_q_island_with_constant_weights_becomes_qlinear_matmul():
    model = _qdq_matmul()
    ops = _ops(model)
    assert ops["QLinearMatMul"] == 1 and ops["MatMul"] == 0, ops
    a = np.random.default_rng(7).integers(0, 256, (2, 5, 48)).astype(np.uint8)
    want = glow.compile(model, "reference", optimize=False).run({"a": a})["y"]
    exe = glow.compile(model, "cpu")
    assert "MatMulInteger" in {n.op.name for n in exe.graph.nodes}
    diff = np.abs(exe.run({"a": a})["y"].astype(np.int16) - want.astype(np.int16))
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.99, (diff.max(), (diff == 0).mean())


def _residual_block(rng, xdt, per_pixel: bool):
    """Two QLinearConvs (3x3 padded, 20 channels: a partial panel; and 1x1) whose outputs a float
    chain adds, with a residual input of the output's shape, then Relu and QuantizeLinear: a
    ResNet block as onnxruntime's QOperator format writes it. `per_pixel` multiplies in a
    [1, 1, 9, 7] constant, which no epilogue can index by row or column."""
    c, m = 8, 20
    xz = np.asarray(7 if xdt == np.uint8 else -3, xdt)
    f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
    inits = [nh.from_array(xz, "xz"), nh.from_array(f32(0.04), "xs"),
             nh.from_array(rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8), "wa"),
             nh.from_array(rng.integers(-127, 128, (m, c, 1, 1)).astype(np.int8), "wb"),
             nh.from_array(f32(rng.uniform(0.002, 0.01, m)), "wsa"), nh.from_array(f32(0.006), "wsb"),
             nh.from_array(np.zeros(m, np.int8), "wza"), nh.from_array(np.asarray(0, np.int8), "wzb"),
             nh.from_array(rng.integers(-3000, 3000, m).astype(np.int32), "ba"),
             nh.from_array(f32(0.09), "ysa"), nh.from_array(np.asarray(131, np.uint8), "yza"),
             nh.from_array(f32(0.07), "ysb"), nh.from_array(np.asarray(120, np.uint8), "yzb"),
             nh.from_array(f32(0.05), "rs"), nh.from_array(np.asarray(128, np.uint8), "rz"),
             nh.from_array(f32(0.11), "ys"), nh.from_array(np.asarray(0, np.uint8), "yz"),
             nh.from_array(f32(rng.uniform(0.5, 1.5, (1, 1, 9, 7))), "pp")]
    nodes = [h.make_node("QLinearConv", ["x", "xs", "xz", "wa", "wsa", "wza", "ysa", "yza", "ba"], ["qa"],
                         pads=[1, 1, 1, 1]),
             h.make_node("QLinearConv", ["x", "xs", "xz", "wb", "wsb", "wzb", "ysb", "yzb"], ["qb"]),
             h.make_node("DequantizeLinear", ["qa", "ysa", "yza"], ["fa"]),
             h.make_node("DequantizeLinear", ["qb", "ysb", "yzb"], ["fb"]),
             h.make_node("DequantizeLinear", ["r", "rs", "rz"], ["fr"]),
             h.make_node("Add", ["fa", "fb"], ["s1"]), h.make_node("Add", ["s1", "fr"], ["s2"])]
    if per_pixel:
        nodes.append(h.make_node("Mul", ["s2", "pp"], ["s3"]))
    nodes += [h.make_node("Relu", ["s3" if per_pixel else "s2"], ["s4"]),
              h.make_node("QuantizeLinear", ["s4", "ys", "yz"], ["y"])]
    t = T.UINT8 if xdt == np.uint8 else T.INT8
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", t, [2, c, 9, 7]),
                                  h.make_tensor_value_info("r", T.UINT8, [2, m, 9, 7])],
                     [h.make_tensor_value_info("y", T.UINT8, [2, m, 9, 7])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


@pytest.mark.parametrize("per_pixel", [False, True], ids=["epilogue", "no-epilogue"])
@pytest.mark.parametrize("xdt", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("level", ["avx512", "avx2"])
def test_requantisation_and_residual_add_run_in_the_integer_convolutions_epilogue(level, xdt, per_pixel):
    """What follows an integer convolution (its requantisation, the dequantized residual adds,
    Relu, the next QuantizeLinear) runs in the kernel's epilogue, on each panel of int32 sums
    before the store: the other convolution's int32 sums and the residual read at the same element,
    per-channel scales by column, a partial panel masked, on 1 and 2 threads; bit for bit the
    reference's. A chain reading a tensor the epilogue cannot index stays a separate kernel. The
    graph is fused for the host (with VNNI only, int8_conv.epilogue_fits); `isa` then makes the
    code for a lower level, so the avx2 kernels' epilogue is checked on a VNNI host too."""
    from glow.backends.cpu.kernels.int8_gemm import vnni

    if level not in _levels():
        pytest.skip(f"this CPU does not execute {level}")
    rng = np.random.default_rng(11)
    model = _residual_block(rng, xdt, per_pixel)
    lo, hi = (0, 256) if xdt == np.uint8 else (-128, 128)
    feeds = {"x": rng.integers(lo, hi, (2, 8, 9, 7)).astype(xdt),
             "r": rng.integers(0, 256, (2, 20, 9, 7)).astype(np.uint8)}
    want = glow.compile(model, "reference").run(feeds)["y"]
    for threads in (1, 2):
        exe = glow.compile(model, "cpu", threads=threads, options={"isa": level})
        heads = [n.attrs["body"].nodes[0].op.name for n in exe.graph.nodes if n.op.name == "FusedKernel"]
        fused = vnni() and not per_pixel
        ops = Counter(n.op.name for n in exe.graph.nodes)
        assert heads.count("ConvIntegerNHWC") == int(fused), (heads, ops)
        assert not vnni() or ops["ConvIntegerNHWC"] == (1 if fused else 2), (heads, ops)
        got = exe.run(feeds)["y"]
        assert got.dtype == np.uint8 and np.array_equal(got, want), (threads, np.abs(got.astype(int) - want).max())


def _rescale_model(mover):
    inits = [nh.from_array(np.asarray(0.037, np.float32), "s1"), nh.from_array(np.asarray(100, np.uint8), "z1"),
             nh.from_array(np.asarray(0.05, np.float32), "s2"), nh.from_array(np.asarray(-3, np.int8), "z2"),
             nh.from_array(np.asarray([2, 6, 5, 2], np.int64), "shape")]
    nodes = [h.make_node("DequantizeLinear", ["x", "s1", "z1"], ["f"])]
    if mover == "Reshape":
        nodes.append(h.make_node("Reshape", ["f", "shape"], ["g"]))
    elif mover == "MaxPool":
        nodes.append(h.make_node("MaxPool", ["f"], ["g"], kernel_shape=[2, 2]))
    nodes.append(h.make_node("QuantizeLinear", ["g" if mover else "f", "s2", "z2"], ["y"]))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.UINT8, [2, 3, 4, 5])],
                     [h.make_tensor_value_info("y", T.INT8, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


@pytest.mark.parametrize("mover", [None, "Reshape", "MaxPool"], ids=["alone", "Reshape", "MaxPool"])
def test_q_of_dq_with_other_parameters_becomes_a_rescale(mover):
    """Q(DQ(q, s1, z1), s2, z2), and across a mover, is Glow's Rescale: Requantize of q - z1 (as
    integers, the mover on the bytes), for a backend that runs Requantize; equal to the float
    pair bit for bit (DQ's float32 product is the exact product rounded once, as Requantize's)."""
    model = _rescale_model(mover)
    ops = _ops(model)
    assert ops["Requantize"] == 1 and ops["DequantizeLinear"] == 0 and ops["QuantizeLinear"] == 0, ops
    every = np.resize(np.random.default_rng(8).permutation(256), 360).astype(np.uint8)  # each byte
    exes = [(b, nat, glow.compile(model, b, native=nat)) for b, nat in (("reference", None), ("cpu", None),
                                                                       ("cpu", "floor"))]
    ref = glow.compile(model, "reference", optimize=False)
    for x in every.reshape(3, 2, 3, 4, 5):
        want = ref.run({"x": x})["y"]
        for backend, native, exe in exes:
            got = exe.run({"x": x})["y"]
            assert got.dtype == np.int8 and np.array_equal(got, want), (backend, native)
