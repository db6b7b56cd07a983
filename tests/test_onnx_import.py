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
