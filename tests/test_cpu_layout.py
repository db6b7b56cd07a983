"""The CPU backend's NHWC layout transform (backends/cpu/layout.py): results equal the graph's,
a CNN keeps its data NHWC between layers (transposes only at the edges and where the data really
moves), and the backend-private NHWC ops are understood by the reference and lower back to ONNX."""

import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.passes import cleanup_graph
from glow.verify import verify_graph

pytest.importorskip("llvmlite")

from glow.backends.cpu import layout  # noqa: E402

RNG = np.random.default_rng(0)


def w(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) or 1)).astype(np.float32)


def i64(*v):
    return np.asarray(v, np.int64)


def conv(b, x, cout, k=3, pads=1, **attrs):
    cin = x.type.shape[1] // attrs.get("group", 1)
    return b.add1("Conv", [x, b.constant(w(cout, cin, k, k)), b.constant(w(cout))],
                  {"kernel_shape": (k, k), "pads": (pads,) * 4, **attrs})


def check(graph, max_transposes=None):
    new = cleanup_graph(layout.to_nhwc(graph))
    verify_graph(new)
    feeds = {v.name: RNG.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs}
    want, got = run_graph(graph, feeds), run_graph(new, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    counts = new.op_counts()
    if max_transposes is not None:
        assert counts.get("Transpose", 0) <= max_transposes, counts
    return new, counts


def test_residual_cnn_stays_nhwc():
    b = GraphBuilder("res")
    x = b.input("x", dt.tensor((1, 8, 12, 12), "float32"))
    a = b.add1("Relu", [conv(b, x, 16)])
    s = b.add1("Add", [conv(b, a, 16), conv(b, x, 16, k=1, pads=0)])
    s = b.add1("Relu", [s])
    m = b.add1("MaxPool", [s], {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)})
    p = b.add1("AveragePool", [m], {"kernel_shape": (2, 2), "count_include_pad": 1, "pads": (0, 0, 1, 1)})
    y = b.add1("GlobalAveragePool", [p])
    y = b.add1("Reshape", [y, b.constant(i64(1, 16))])
    _, counts = check(b.build([y]), max_transposes=1)  # the input's only: GAP's result reshapes
    assert counts["ConvNHWC"] == 3 and counts["MaxPoolNHWC"] == 1 and counts["AveragePoolNHWC"] == 1


def test_concat_batchnorm_like_constants_and_channel_pads():
    b = GraphBuilder("cat")
    x = b.input("x", dt.tensor((2, 4, 9, 9), "float32"))
    c = b.add1("Concat", [conv(b, x, 6), conv(b, x, 10, k=1, pads=0)], {"axis": 1})
    c = b.add1("Add", [b.add1("Mul", [c, b.constant(w(16, 1, 1))]), b.constant(w(1, 16, 1, 1))])
    sq = b.add1("Pad", [c, b.constant(i64(0, 1, 0, 0, 0, 2, 0, 0))], {"mode": "constant"})  # LRN-style
    s = b.add1("Add", [b.add1("Slice", [sq, b.constant(i64(0)), b.constant(i64(16)), b.constant(i64(1))]),
                       b.add1("Slice", [sq, b.constant(i64(2)), b.constant(i64(18)), b.constant(i64(1))])])
    y = conv(b, s, 5, strides=(2, 2))
    check(b.build([y, c]), max_transposes=3)  # input, and each output back to NCHW


def test_channel_shuffle_costs_one_transpose():
    b = GraphBuilder("shuffle")
    x = b.input("x", dt.tensor((1, 12, 6, 6), "float32"))
    c = conv(b, x, 12, group=3)
    r = b.add1("Reshape", [c, b.constant(i64(1, 3, 4, 6, 6))])
    t = b.add1("Transpose", [r], {"perm": (0, 2, 1, 3, 4)})
    s = b.add1("Reshape", [t, b.constant(i64(1, 12, 6, 6))])
    y = conv(b, s, 12, group=12)  # depthwise
    _, counts = check(b.build([y]))
    assert counts.get("Transpose", 0) == 3  # input, the shuffle itself, output


def test_graph_without_convolutions_is_untouched():
    b = GraphBuilder("mlp")
    x = b.input("x", dt.tensor((4, 8), "float32"))
    g = b.build([b.add1("Relu", [x])])
    assert layout.to_nhwc(g) is g


@pytest.mark.parametrize("name,attrs", [
    ("ConvNHWC", {"kernel_shape": (3, 3), "strides": (2, 1), "dilations": (1, 2), "group": 2}),
    ("MaxPoolNHWC", {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 0, 1, 1), "ceil_mode": 1}),
    ("AveragePoolNHWC", {"kernel_shape": (2, 3), "pads": (1, 1, 0, 1), "count_include_pad": 1}),
    ("GlobalAveragePoolNHWC", {}),
])
def test_nhwc_ops_match_their_onnx_op_and_lower_to_it(name, attrs):
    import glow

    b = GraphBuilder(name)
    x = b.input("x", dt.tensor((2, 9, 10, 4), "float32"))
    ins = [x, b.constant(w(6, 2, 3, 3)), b.constant(w(6))] if name == "ConvNHWC" else [x]
    y = b.add1(b_op(name), ins, attrs)
    g = b.build([y])
    feeds = {"x": RNG.standard_normal((2, 9, 10, 4)).astype(np.float32)}
    got = run_graph(g, feeds)[y.name]
    base = name[:-4]
    nb = GraphBuilder("nchw")
    xn = nb.input("x", dt.tensor((2, 4, 9, 10), "float32"))
    yn = nb.add1(base, [xn, *ins[1:]], attrs)
    want = run_graph(nb.build([yn]), {"x": feeds["x"].transpose(0, 3, 1, 2)})[yn.name]
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-7)
    # another backend (reference, native set = the floor) lowers the op back to ONNX ops
    out = glow.compile(g, "reference", native="floor").run(feeds)
    np.testing.assert_allclose(out[y.name], got, rtol=1e-4, atol=1e-5)


def b_op(name):
    from glow.ops import get_op

    return get_op(name, layout.DOMAIN)


def test_an_empty_slice_after_conv_keeps_its_empty_dim():
    """The NHWC result goes back to NCHW through a Reshape (only size-1 axes move): its literal 0
    dim needs allowzero, or ONNX reads it as "keep the input's dim" (found by the fuzzer)."""
    import glow
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as oh

    rng = np.random.default_rng(0)
    w = oh.make_tensor("w", T.FLOAT, [1, 3, 2, 1], rng.standard_normal(6).astype(np.float32))
    ints = [oh.make_tensor(n, T.INT64, [4], v) for n, v in
            [("s", [0, 1, 0, 0]), ("e", [1, 1, 1, 1]), ("a", [0, 1, 2, 3]), ("st", [1, 1, 1, 1])]]
    g = oh.make_graph([oh.make_node("Conv", ["x", "w"], ["c"], dilations=[2, 2], strides=[2, 2], kernel_shape=[2, 1]),
                       oh.make_node("Slice", ["c", "s", "e", "a", "st"], ["y"])], "g",
                      [oh.make_tensor_value_info("x", T.FLOAT, [1, 3, 3, 1])],
                      [oh.make_tensor_value_info("y", T.FLOAT, [1, 0, 1, 1])], initializer=[w, *ints])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)])
    onnx.checker.check_model(m)
    x = rng.standard_normal((1, 3, 3, 1)).astype(np.float32)
    assert glow.compile(m, "cpu").run({"x": x})["y"].shape == (1, 0, 1, 1)


# -- 1-D windows (Whisper's and wav2vec's stems, temporal CNNs) run as 2-D ones over [1, L] ----------

def _stem_1d(conv_attrs, pool=None, cin=6, cout=8, length=23):
    """Conv1d -> Relu -> (pool) -> Conv1d(k=1) -> Transpose to [N, L, C] (Whisper's order), plus
    an output of a node without inputs (a Constant: the rewrite once read every node's input 0)."""
    b = GraphBuilder("stem1d")
    x = b.input("x", dt.tensor((2, cin, length), "float32"))
    const = b.add1("Constant", [], {"value": np.arange(3, dtype=np.float32)})
    g = conv_attrs.get("group", 1)
    k = conv_attrs.get("kernel_shape", (3,))[0]
    y = b.add1("Conv", [x, b.constant(w(cout, cin // g, k)), b.constant(w(cout))], conv_attrs)
    y = b.add1("Relu", [y])
    if pool is not None:
        y = b.add1(pool[0], [y], pool[1])
    y = b.add1("Conv", [y, b.constant(w(cout, cout, 1))], {"kernel_shape": (1,)})
    return b.build([b.add1("Transpose", [y], {"perm": (0, 2, 1)}), const])


CASES_1D = [
    ({"kernel_shape": (3,), "pads": (1, 1)}, None),
    ({"kernel_shape": (3,), "pads": (1, 1), "strides": (2,)}, None),  # Whisper's second conv
    ({"kernel_shape": (5,), "pads": (2, 1), "dilations": (2,), "group": 2}, None),
    ({"kernel_shape": (3,), "group": 6}, None),  # depthwise (cout 6 below)
    ({"kernel_shape": (4,), "auto_pad": "SAME_UPPER", "strides": (2,)}, None),
    ({"kernel_shape": (3,)}, ("MaxPool", {"kernel_shape": (3,), "strides": (2,), "pads": (1, 1), "ceil_mode": 1})),
    ({"kernel_shape": (3,)}, ("AveragePool", {"kernel_shape": (2,), "pads": (0, 1), "count_include_pad": 1})),
]


@pytest.mark.parametrize("conv_attrs,pool", CASES_1D)
def test_1d_windows_run_nhwc_as_2d_ones(conv_attrs, pool):
    """transform_graph makes every 1-D Conv and pool the 2-D window over [1, L], which runs NHWC
    (no im2col: no Concat of taps), the activation fused next to it; the results are the graph's,
    compiled (with and without the optimiser: unoptimised, the NCHW kernels take rank 3) and not."""
    import glow

    cout = 6 if conv_attrs.get("group") == 6 else 8
    g = _stem_1d(conv_attrs, pool, cout=cout)
    new = cleanup_graph(layout.transform_graph(g))
    verify_graph(new)
    counts = new.op_counts()
    assert counts.get("ConvNHWC") == 2 and "Conv" not in counts, counts
    assert counts.get(f"{pool[0]}NHWC" if pool else "MaxPoolNHWC", 0) == (1 if pool else 0), counts
    assert counts.get("Transpose", 0) <= 1, counts  # the input's; the output's Transpose is free
    feeds = {"x": RNG.standard_normal((2, 6, 23)).astype(np.float32)}
    want = run_graph(g, feeds)
    name = g.outputs[0].name
    np.testing.assert_allclose(run_graph(new, feeds)[name], want[name], rtol=1e-5, atol=1e-6)
    for optimize in (True, False):
        got = glow.compile(g, "cpu", optimize=optimize).run(feeds)[name]
        np.testing.assert_allclose(got, want[name], rtol=1e-4, atol=1e-5)

