"""Types, the graph builder's checks, the verifier, the printer and DOT export."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder, Node, topological_order
from glow.printer import format_graph, to_dot
from glow.verify import verify_graph


def f32(*shape):
    return dt.tensor(shape, "float32")


def test_tensor_types():
    t = f32(2, 3)
    assert t.is_static and t.numel == 6 and t.nbytes == 24 and str(t) == "float32[2x3]"
    assert not dt.TensorType((None, "N"), dt.int64).is_static
    with pytest.raises(glow.GraphError, match="negative dimension"):
        dt.TensorType((2, -1), dt.float32)
    assert dt.from_numpy(np.dtype("int64")) is dt.int64
    assert dt.from_onnx(16) is dt.bfloat16


def test_quantized_type_round_trip():
    q = dt.QuantizedDType(dt.int8, 0.5, 3)
    x = np.array([-1.0, 0.0, 10.0, 1000.0], np.float32)
    qs = q.quantize(x)
    assert qs.dtype == np.int8 and qs.tolist() == [1, 3, 23, 127]
    np.testing.assert_allclose(q.dequantize(qs), [-1.0, 0.0, 10.0, 62.0])
    with pytest.raises(glow.GraphError, match="scale must be positive"):
        dt.QuantizedDType(dt.int8, 0.0, 0)
    with pytest.raises(glow.GraphError, match="offset 300 out of range"):
        dt.QuantizedDType(dt.int8, 1.0, 300)


def test_builder_checks_types_at_construction():
    b = GraphBuilder()
    x = b.input("x", f32(2, 3))
    i = b.input("i", dt.tensor((2, 3), "int64"))
    with pytest.raises(glow.GraphError, match=r"node 'bad' \(Add\).*element type int64.*float32"):
        b.add("Add", [x, i], name="bad")
    with pytest.raises(glow.GraphError, match=r"node 'bad2' \(Add\).*do not broadcast"):
        b.add("Add", [x, b.input("z", f32(4))], name="bad2")
    with pytest.raises(glow.GraphError, match="unknown attribute 'alpha'"):
        b.add("Add", [x, x], {"alpha": 1.0})
    with pytest.raises(glow.GraphError, match="required input 'B' is missing"):
        b.add("Add", [x])
    with pytest.raises(glow.UnsupportedOpError, match="unknown op 'NoSuchOp'"):
        b.add("NoSuchOp", [x])


def test_known_values_flow_through_shape_computations():
    b = GraphBuilder()
    x = b.input("x", f32(2, 3, 4))
    shape = b.add1("Shape", [x])
    y = b.add1("Reshape", [x, b.constant(np.array([0, -1], np.int64))])
    z = b.add1("Reshape", [y, shape])
    assert shape.known.tolist() == [2, 3, 4]
    assert y.type.shape == (2, 12) and z.type.shape == (2, 3, 4)
    g = b.build([z])
    verify_graph(g)
    out = glow.run_graph(g, {"x": np.ones((2, 3, 4), np.float32)})
    assert out[z.name].shape == (2, 3, 4)


def _small_graph():
    b = GraphBuilder("small")
    x = b.input("x", f32(2, 3))
    w = b.constant(np.ones((2, 3), np.float32), name="w")
    a = b.add1("Add", [x, w], name="add")
    y = b.add1("Relu", [a], name="relu", output_names=["y"])
    return b.build([y])


def test_printer_is_stable_golden_text():
    assert format_graph(_small_graph()) == (
        "graph small(%x: float32[2x3]) -> (%y) {\n"
        "  %w = constant float32[2x3]\n"
        "  %add: float32[2x3] = Add(%x, %w)  # add\n"
        "  %y: float32[2x3] = Relu(%add)  # relu\n"
        "}")


def test_dot_export():
    dot = to_dot(_small_graph())
    assert dot.startswith('digraph "small"') and '"in:x" -> "n0"' in dot and '"n1" -> "out:y"' in dot


def test_verifier_catches_use_before_definition():
    g = _small_graph()
    bad = glow.Graph(g.name, g.inputs, tuple(reversed(g.nodes)), g.outputs)
    with pytest.raises(glow.GraphError, match="reads 'add' before it is defined"):
        verify_graph(bad)


def test_verifier_catches_wrong_output_type():
    g = _small_graph()
    relu = g.nodes[1]
    wrong = glow.Value("y", f32(3, 2), None, 0)
    node = Node(relu.op, relu.name, relu.inputs, relu.attrs, (wrong,))
    wrong.node = node
    bad = glow.Graph(g.name, g.inputs, (g.nodes[0], node), (wrong,))
    with pytest.raises(glow.GraphError, match="has type float32\\[3x2\\] but the op's rule gives"):
        verify_graph(bad)


def test_topological_order_sorts_and_detects_cycles():
    g = _small_graph()
    assert topological_order(reversed(g.nodes)) == list(g.nodes)


def test_interpreter_checks_inputs():
    g = _small_graph()
    with pytest.raises(glow.InputError, match="missing input"):
        glow.run_graph(g, {})
    with pytest.raises(glow.InputError, match="unknown input name"):
        glow.run_graph(g, {"x": np.zeros((2, 3), np.float32), "q": 1})
    with pytest.raises(glow.InputError, match="expected shape"):
        glow.run_graph(g, {"x": np.zeros((3, 3), np.float32)})


def test_element_type_codes_are_onnx_s():
    """glow.dtypes spells ONNX's element-type codes itself (so `import glow` needs no onnx)."""
    from glow import dtypes as dt
    from onnx import TensorProto

    for d in dt.ALL:
        name = {"float32": "FLOAT", "float64": "DOUBLE"}.get(d.name, d.name.upper())
        assert d.onnx == getattr(TensorProto, name), d
        assert dt.from_numpy(d.np) is d or d == dt.string
        assert dt.from_onnx(d.onnx) is d


def test_import_glow_needs_neither_onnx_nor_ml_dtypes():
    """Each costs over a second to import; `import glow` (the CLI's help, `glow backends`) must not
    pay for them until a model is read or an exotic element type is used."""
    import subprocess
    import sys

    code = "import sys, glow; glow.compile; print('onnx' in sys.modules, 'ml_dtypes' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_rebuild_keeps_unchanged_nodes_and_reinfers_changed_ones(monkeypatch):
    """A graph pass copies the nodes it leaves alone without running their shape rules again
    (rewrite.copy_node -> GraphBuilder.add_unchanged); a node whose input changed type is
    inferred again, and so is everything downstream of it."""
    import glow.graph
    from glow.rewrite import rebuild

    b = GraphBuilder("g")
    x = b.input("x", dt.tensor((2, 3), "float32"))
    y = b.add1("Relu", [x])
    z = b.add1("Neg", [y])
    s = b.add1("Shape", [z])
    g = b.build([z, s])
    calls = []
    real = glow.graph.check_node_inputs  # GraphBuilder.add's first step, before the shape rule
    monkeypatch.setattr(glow.graph, "check_node_inputs", lambda op, *a: calls.append(op.name) or real(op, *a))
    g2, changed = rebuild(g)
    assert not changed and calls == []
    assert [str(v.type) for v in g2.outputs] == [str(v.type) for v in g.outputs]
    assert g2.outputs[1].known.tolist() == [2, 3] and g2.outputs[0].node is not g.outputs[0].node

    def relu_to_cast(rb, node, ins):  # Neg's and Shape's input types change; [2, 3] stays
        if node.op.name == "Relu":
            return [rb.emit1("Cast", [ins[0]], {"to": dt.float64})]
        return None

    g3, changed = rebuild(g, relu_to_cast)
    assert changed and calls == ["Cast", "Neg", "Shape"]
    assert g3.outputs[0].type.dtype == dt.float64 and g3.outputs[1].known.tolist() == [2, 3]
