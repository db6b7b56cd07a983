"""Lowering: the floor, the driver, and every rule checked against the un-lowered op."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.lowering import FLOOR, LOWERINGS, lower_to_supported, rule_for, supports_floor
from glow.ops import all_ops, get_op
from glow.testing.op_records import all_records

RECORDS = [r for r in all_records() if rule_for(r.op, r.domain) is not None]


def test_floor_is_small_closed_and_declared():
    assert 30 <= len(FLOOR) <= 40
    for name in FLOOR:
        assert get_op(name) is not None


def test_every_rule_has_a_record():
    rule_for("Relu")  # loads the rules
    covered = {(r.domain, r.op) for r in all_records()}
    # Backend-private ops (domain "glow.<backend>") are tested with their backend (tests/test_cpu_*).
    missing = sorted(k for k in set(LOWERINGS) - covered if not k[0].startswith("glow."))
    assert not missing, f"lowering rules without a test record: {missing}"


@pytest.mark.parametrize("rec", RECORDS, ids=[r.id for r in RECORDS])
def test_rule_matches_unlowered_op(rec):
    graph, feeds = rec.build()
    expected = run_graph(graph, feeds)
    lowered = lower_to_supported(graph, supports_floor, "floor", verify=True)
    assert all(supports_floor(n) for n in lowered.nodes)
    assert "node" not in {n.name for n in lowered.nodes}, "the record's node was not lowered"
    got = run_graph(lowered, feeds)
    for name, e in expected.items():
        g = got[name]
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rec.rtol, atol=rec.atol,
                                   equal_nan=True)


def test_driver_names_every_stuck_op_and_the_backend():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), "float32"))
    y = b.add1("Relu", [x])
    z = b.add1("Sqrt", [y])
    g = b.build([z])
    with pytest.raises(glow.LoweringError, match=r"backend 'toy' cannot run 1 op type\(s\).*Sqrt \(x1\)"):
        lower_to_supported(g, lambda n: n.op.name in {"Max"}, "toy")


def test_driver_reaches_fixed_point_and_keeps_interface():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), "float32"))
    y = b.add1("Tanh", [b.add1("Relu", [x])], output_names=["out"])
    g = lower_to_supported(b.build([y]), supports_floor, "floor")
    assert g.output_names == ["out"] and g.input_names == ["x"]
    assert {n.op.name for n in g.nodes} <= FLOOR


def test_rules_only_for_known_ops():
    rule_for("Relu")
    known = {(o.domain, o.name) for o in all_ops()}
    assert set(LOWERINGS) <= known


# -- empty tensors (issue 40, item 5) ---------------------------------------------------------------
# An op whose output has no elements needs no rule (the driver makes it an empty constant), and an
# op whose output is not empty but whose inputs are (a Conv with no input channels) computes what
# the reference does. Checked on every backend, against the reference and onnxruntime's shapes.

def _empty_backends():
    from helpers import backend_unavailable

    out = [pytest.param(("reference", None), id="reference")]
    for name, native in (("cpu", None), ("cpu", "floor"), ("opencl", None)):
        why = backend_unavailable(name)
        marks = [pytest.mark.skipif(why is not None, reason=f"{name} unavailable: {why}")]
        if name == "opencl":
            marks.append(pytest.mark.opencl)
        out.append(pytest.param((name, native), id=name + ("-floor" if native else ""), marks=marks))
    return out


def _one_node_model(node, inputs, inits=(), opset=19):
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _resize(x_shape, sizes, **attrs):
    from onnx import helper

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    return _one_node_model(node, [("x", x_shape)], [("sizes", np.asarray(sizes, np.int64))])


EMPTY_CASES = {
    # The user's model: sizes on an empty axis (no scale: size / 0), every mode.
    "resize-linear": (_resize([0, 5, 1], [0, 5, 3], mode="linear", coordinate_transformation_mode="asymmetric"),
                      {"y": (0, 5, 3)}),
    "resize-nearest": (_resize([0, 5, 1], [0, 5, 3], mode="nearest"), {"y": (0, 5, 3)}),
    "resize-cubic": (_resize([0, 5, 1], [0, 5, 3], mode="cubic"), {"y": (0, 5, 3)}),
    "resize-axes": (_resize([0, 5, 1], [0, 3], mode="linear", axes=[0, 2]), {"y": (0, 5, 3)}),
    # keep_aspect_ratio_policy: an empty axis says nothing about the ratio (onnxruntime's shapes).
    "resize-not-larger": (_resize([0, 5, 1], [0, 10, 3], mode="linear", keep_aspect_ratio_policy="not_larger"),
                          {"y": (0, 10, 2)}),
    "resize-not-smaller": (_resize([0, 5, 1], [0, 10, 3], mode="linear", keep_aspect_ratio_policy="not_smaller"),
                           {"y": (0, 15, 3)}),
}


def _add_empty_case(name, node, inputs, inits, shapes, opset=19):
    EMPTY_CASES[name] = (_one_node_model(node, inputs, inits, opset), shapes)


def _empty_node_cases():
    from onnx import helper

    ones = np.ones
    _add_empty_case("gridsample-no-channels", helper.make_node("GridSample", ["x", "g"], ["y"]),
                    [("x", [1, 0, 3, 3]), ("g", [1, 4, 4, 2])], [], {"y": (1, 0, 4, 4)})
    _add_empty_case("lstm-no-batch", helper.make_node("LSTM", ["x", "w", "r"], ["y", "yh"], hidden_size=2),
                    [("x", [3, 0, 4])], [("w", ones((1, 8, 4), np.float32)), ("r", ones((1, 8, 2), np.float32))],
                    {"y": (3, 1, 0, 2), "yh": (1, 0, 2)})
    bias = [("b", np.arange(1, 3, dtype=np.float32))]
    _add_empty_case("conv-no-channels", helper.make_node("Conv", ["x", "w", "b"], ["y"]),
                    [("x", [1, 0, 4, 4]), ("w", [2, 0, 3, 3])], bias, {"y": (1, 2, 2, 2)})
    _add_empty_case("conv-transpose-no-channels", helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"]),
                    [("x", [1, 0, 4, 4]), ("w", [0, 2, 3, 3])], bias, {"y": (1, 2, 6, 6)})
    # a maximum over no positions is -inf (as ReduceMax's over an empty set): the reference raised
    for op in ("GlobalMaxPool", "GlobalAveragePool"):
        _add_empty_case(f"{op.lower()}-no-positions", helper.make_node(op, ["x"], ["y"]), [("x", [1, 2, 0, 3])], [],
                        {"y": (1, 2, 1, 1)})


_empty_node_cases()


@pytest.mark.parametrize("case", sorted(EMPTY_CASES))
@pytest.mark.parametrize("backend", _empty_backends())
def test_empty_tensors_flow_through(case, backend):
    name, native = backend
    model, shapes = EMPTY_CASES[case]
    feeds = {i.name: np.zeros([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
             for i in model.graph.input}
    expected = glow.compile(model, backend="reference").run(feeds)
    got = glow.compile(model, backend=name, native=native, strict=True).run(feeds)  # on `name` itself
    assert {k: v.shape for k, v in got.items()} == shapes
    for k, v in got.items():
        np.testing.assert_array_equal(v, expected[k])
