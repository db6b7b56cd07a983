"""ONNX import: constants vs placeholders, names, errors, external data, functions, sub-graphs."""

import glow
import numpy as np
import onnx
import pytest
from helpers import add_const_model, make_model
from onnx import TensorProto, helper


def test_initializers_become_constants():
    g = glow.load_onnx(add_const_model())
    assert [v.name for v in g.inputs] == ["x"]
    (w,) = g.constants
    assert w.name == "w" and w.kind == "constant" and w.data.tolist() == [0, 1, 2]


def test_ir3_initializers_listed_as_inputs_are_not_feeds():
    m = add_const_model()
    m.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]))
    m.ir_version = 3
    g = glow.load_onnx(m)
    assert g.input_names == ["x"]
    out = glow.compile(g, backend="reference").run({"x": np.zeros((2, 3), np.float32)})
    assert out["y"].tolist() == [[0, 1, 2]] * 2


def test_symbolic_dims_are_kept():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, ["N", 3])],
                   [("y", TensorProto.FLOAT, ["N", 3])])
    g = glow.load_onnx(m)
    assert g.inputs[0].type.shape == ("N", 3)
    out = glow.compile(g, backend="reference").run({"x": -np.ones((5, 3), np.float32)})
    assert out["y"].shape == (5, 3)


def test_unsupported_ops_are_all_named_with_counts():
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Frobnicate", ["b"], ["c"]), helper.make_node("Wibble", ["c"], ["y"])]
    m = make_model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])])
    with pytest.raises(glow.UnsupportedOpError) as e:
        glow.load_onnx(m)
    assert e.value.ops == {"Frobnicate": 2, "Wibble": 1}
    assert "Frobnicate (x2), Wibble (x1)" in str(e.value)


def test_ill_typed_node_names_node_and_op():
    nodes = [helper.make_node("Add", ["x", "i"], ["y"], name="my_add")]
    m = make_model(nodes, [("x", TensorProto.FLOAT, [2]), ("i", TensorProto.INT64, [2])],
                   [("y", TensorProto.FLOAT, [2])])
    with pytest.raises(glow.GraphError, match=r"node 'my_add' \(Add\)"):
        glow.load_onnx(m)


def test_undefined_input_is_named():
    m = make_model([helper.make_node("Relu", ["nothere"], ["y"], name="r")], [("x", TensorProto.FLOAT, [2])],
                   [("y", TensorProto.FLOAT, [2])])
    with pytest.raises(glow.GraphError, match="input 'nothere' is not defined"):
        glow.load_onnx(m)


def test_old_opset_forms_are_rewritten():
    # Opset 6: explicit broadcast with axis aligns B at axis 1 (NumPy would align it at the end).
    nodes = [helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)]
    m = make_model(nodes, [("x", TensorProto.FLOAT, [2, 3, 4]), ("b", TensorProto.FLOAT, [3])],
                   [("y", TensorProto.FLOAT, [2, 3, 4])], opset=6)
    x, b = np.zeros((2, 3, 4), np.float32), np.array([1, 2, 3], np.float32)
    out = glow.compile(m, backend="reference").run({"x": x, "b": b})
    np.testing.assert_array_equal(out["y"], x + b[:, None])


def test_bytes_and_garbage():
    data = add_const_model().SerializeToString()
    assert glow.load_onnx(data).input_names == ["x"]
    with pytest.raises(glow.ModelLoadError, match="not a valid ONNX model"):
        glow.load_onnx(b"\x08\x07garbage\xff\xff\xff")
    with pytest.raises(glow.ModelLoadError, match="empty file"):
        glow.load_onnx(b"")


def test_model_local_functions_are_inlined():
    fn = helper.make_function("local", "AddRelu", ["a", "b"], ["c"],
                              [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["c"])],
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("AddRelu", ["x", "x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=[fn])
    graph = glow.load_onnx(m)
    assert [n.op.name for n in graph.nodes] == ["Add", "Relu"]
    out = glow.compile(graph, backend="reference").run({"x": np.array([-1, 0, 2], np.float32)})
    assert out["y"].tolist() == [0, 0, 4]


def test_output_that_is_an_input_gets_its_name():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                   [("y", TensorProto.FLOAT, [2]), ("x", TensorProto.FLOAT, [2])])
    out = glow.compile(m, backend="reference").run({"x": np.array([-1, 1], np.float32)})
    assert out["x"].tolist() == [-1, 1] and out["y"].tolist() == [0, 1]


def test_onnx_backend_interface():
    import glow.onnx_backend as gb

    rep = gb.prepare(add_const_model())
    (y,) = rep.run([np.ones((2, 3), np.float32)])
    assert y.tolist() == [[1, 2, 3]] * 2
    (y,) = gb.run_node(helper.make_node("Relu", ["a"], ["b"]), [np.array([-2.0, 3.0], np.float32)])
    assert y.tolist() == [0, 3]
    assert gb.supports_device("CPU")


def test_save_load_roundtrip_from_file(tmp_path):
    onnx.save(add_const_model(), tmp_path / "m.onnx")
    assert glow.load_onnx(str(tmp_path / "m.onnx")).output_names == ["y"]


# -- declared shapes never refuse a model (issue 40, item 6) ----------------------------------------
# A graph output or value_info whose shape contradicts glow's inference is one GlowWarning naming
# the node and the value; the computed shape (the ONNX spec's) is used. onnxruntime disagrees with
# the spec in both models below: it keeps one row of a backward Slice whose end is INT_MAX (the
# spec clamps ends to [-1, dim-1] for negative steps: nothing is left), and it gives MaxPool with
# SAME_LOWER and dilations 2 outputs of 6 rows (the spec: ceil(6 / 2) = 3, with one row of padding
# in front). onnx's own shape inference agrees with glow on both.

INT_MAX = 2**31 - 1


def _slice_model(declared):
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in
             (("starts", [1, -2**31]), ("ends", [INT_MAX, INT_MAX]), ("axes", [0, 1]), ("steps", [-1, 2]))]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"], name="sl")
    return make_model([node], [("x", TensorProto.FLOAT, [1, 7, 1, 11])], [("y", TensorProto.FLOAT, declared)],
                      inits, opset=13)


def _maxpool_model(declared):
    node = helper.make_node("MaxPool", ["x"], ["y"], name="mp", auto_pad="SAME_LOWER", dilations=[2, 1],
                            kernel_shape=[2, 1], strides=[2, 2])
    return make_model([node], [("x", TensorProto.FLOAT, [1, 1, 6, 5])], [("y", TensorProto.FLOAT, declared)],
                      opset=12)


def _maxpool_expected(x):
    # SAME_LOWER: (3 - 1) * 2 + (2 - 1) * 2 + 1 - 6 = 1 row of padding, in front; windows read rows
    # (2i - 1, 2i + 1) and columns 0, 2, 4.
    xp = np.concatenate([np.full((1, 1, 1, 5), -np.inf, np.float32), x], axis=2)
    return np.maximum(xp[:, :, 0:6:2], xp[:, :, 2:7:2])[:, :, :, ::2]


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("case", ["slice", "maxpool"])
def test_a_contradicting_declared_shape_is_one_warning(case, backend):
    import warnings

    from helpers import backend_unavailable

    if backend_unavailable(backend):
        pytest.skip(backend_unavailable(backend))
    x = np.random.default_rng(0).standard_normal((1, 7, 1, 11) if case == "slice" else (1, 1, 6, 5)).astype(np.float32)
    if case == "slice":
        model, declared, node = _slice_model([1, 4, 1, 11]), "float32[1x4x1x11]", "node 'sl' (Slice)"
        expected = x[1:INT_MAX:-1, 0:INT_MAX:2]  # NumPy's clamping is the spec's: (0, 4, 1, 11)
        computed = "float32[0x4x1x11]"
    else:
        model, declared, node = _maxpool_model([1, 1, 2, 3]), "float32[1x1x2x3]", "node 'mp' (MaxPool)"
        expected, computed = _maxpool_expected(x), "float32[1x1x3x3]"
    inferred = onnx.shape_inference.infer_shapes(_slice_model(None) if case == "slice" else _maxpool_model(None))
    dims = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    assert tuple(dims) == expected.shape  # onnx's shape inference says what glow says
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = glow.compile(model, backend=backend, strict=True).run({"x": x})["y"]
    ours = [w for w in caught if issubclass(w.category, glow.GlowWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    msg = str(ours[0].message)
    assert "\n" not in msg and node in msg and "output 'y'" in msg and declared in msg and computed in msg
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_a_declared_rank_that_contradicts_is_a_warning_and_a_wrong_element_type_an_error():
    import warnings

    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", TensorProto.FLOAT, [2, 3])],
                   [("y", TensorProto.FLOAT, [6])])
    with pytest.warns(glow.GlowWarning, match=r"node 'r' \(Relu\): output 'y' is declared float32\[6\]"):
        g = glow.load_onnx(m)
    assert g.outputs[0].type.shape == (2, 3)
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", TensorProto.FLOAT, [2, 3])],
                   [("y", TensorProto.INT64, [2, 3])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(glow.GraphError, match=r"node 'r' \(Relu\): output 'y' is declared int64"):
            glow.load_onnx(m)


# -- attributes of the wrong type (issue 40, item 7) ------------------------------------------------
# Every attribute must have the type ONNX gives it (the op's schema at the model's opset; for
# contrib ops without one, the kind glow's op table declares), or the model is refused with one
# GraphError line naming the node, the attribute, the type expected and the type found, as
# onnx.checker and onnxruntime refuse it: no silent coercion of "1" to 1 or of 1.0 to 1.

def _one_node(node, inputs, opset=17, domains=()):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]
                             + [helper.make_opsetid(d, 1) for d in domains])


def _untyped_axis_concat():
    node = helper.make_node("Concat", ["a", "b"], ["y"], name="c")
    a = node.attribute.add()  # a value with no type: nothing to read it as
    a.name, a.i = "axis", 1
    return node


WRONG_ATTRIBUTES = {
    "string-for-int": (helper.make_node("Concat", ["a", "b"], ["y"], name="c", axis="1"), 17,
                       "node 'c' (Concat): attribute 'axis' must be an int, got a string"),
    "floats-for-ints": (helper.make_node("Transpose", ["a"], ["y"], name="t", perm=[1.0, 0.0]), 17,
                        "node 't' (Transpose): attribute 'perm' must be a list of ints, got a list of floats"),
    "int-for-float": (helper.make_node("LeakyRelu", ["a"], ["y"], name="l", alpha=1), 17,
                      "node 'l' (LeakyRelu): attribute 'alpha' must be a float, got an int"),
    "int-for-ints-at-opset-11": (helper.make_node("Squeeze", ["a"], ["y"], name="s", axes=0), 11,
                                 "node 's' (Squeeze): attribute 'axes' must be a list of ints, got an int"),
    "no-type": (_untyped_axis_concat(), 17, "node 'c' (Concat): attribute 'axis' must be an int, got no type"),
}


@pytest.mark.parametrize("case", sorted(WRONG_ATTRIBUTES))
def test_an_attribute_of_the_wrong_type_is_refused(case):
    node, opset, message = WRONG_ATTRIBUTES[case]
    m = _one_node(node, [(n, [1, 2]) for n in node.input], opset)
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version, ctx.opset_imports = onnx.IR_VERSION, {"": opset}
    with pytest.raises(onnx.checker.ValidationError, match="attr"):  # onnx refuses it too
        onnx.checker.check_node(node, ctx)
    with pytest.raises(glow.GraphError) as e:
        glow.load_onnx(m)
    assert str(e.value) == f"model: {message}"


def test_a_contrib_op_without_an_onnx_schema_is_checked_against_the_op_table():
    inputs = ["x", "xs", "xz", "ys", "yz"]
    node = helper.make_node("QLinearLeakyRelu", inputs, ["y"], name="q", domain="com.microsoft", alpha="0.1")
    m = _one_node(node, [(n, [2]) for n in inputs], domains=["com.microsoft"])
    with pytest.raises(glow.GraphError, match=r"^model: node 'q' \(QLinearLeakyRelu\): attribute 'alpha' "
                                              r"must be a float, got a string$"):
        glow.load_onnx(m)


def test_a_function_passes_its_callers_attribute_type_through():
    body = helper.make_node("Concat", ["a", "b"], ["c"], name="cat")
    ref = body.attribute.add()
    ref.name, ref.ref_attr_name, ref.type = "axis", "ax", onnx.AttributeProto.INT
    fn = helper.make_function("local", "Cat", ["a", "b"], ["c"], [body], [helper.make_opsetid("", 17)],
                              attributes=["ax"])

    def model(ax):
        g = helper.make_graph([helper.make_node("Cat", ["x", "x"], ["y"], name="f", domain="local", ax=ax)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                                 functions=[fn])

    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    assert glow.compile(model(1), backend="reference").run({"x": x})["y"].shape == (2, 4)
    with pytest.raises(glow.GraphError, match=r"node 'f/cat' \(Concat\): attribute 'axis' must be an int, got a str"):
        glow.load_onnx(model("1"))


def test_attributes_of_older_opsets_keep_their_types():
    # Upsample-7's scales is FLOATS (an input from opset 9); BatchNormalization-7's spatial is an
    # INT that later opsets dropped; Dropout-7's ratio a FLOAT: each is read as its opset says.
    up = _one_node(helper.make_node("Upsample", ["a"], ["y"], scales=[1.0, 2.0], mode="nearest"), [("a", [1, 2])], 7)
    assert glow.compile(up, backend="reference").run({"a": np.ones((1, 2), np.float32)})["y"].shape == (1, 4)
    drop = _one_node(helper.make_node("Dropout", ["a"], ["y"], ratio=0.5), [("a", [1, 2])], 7)
    glow.load_onnx(drop)
    bn = helper.make_node("BatchNormalization", ["a", "s", "b", "m", "v"], ["y"], spatial=1, epsilon=1e-5)
    glow.load_onnx(_one_node(bn, [("a", [1, 2, 2]), *((n, [2]) for n in "sbmv")], 7))
