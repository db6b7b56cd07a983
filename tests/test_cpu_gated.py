"""The cpu backend's GatedMatMul (backends/cpu/gated.py): a LLaMA-style MLP's silu(x @ Wg) * (x @ Wu)
as one GEMM. Formed only where it computes exactly what the five nodes did (its result is
checked bit for bit against the same graph compiled without the rewrite), and left alone where
an intermediate value has another reader or a weight is not a constant."""

import glow
import glow.backends.cpu.gated as gated
import numpy as np
import pytest
from glow.backends.cpu import jit
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

LEVELS = [lv for lv in jit.ISAS if jit.ISAS.index(lv) >= jit.ISAS.index(jit.host_isa())]


def mlp(rows, k, n, *, swapped=False, seed=0, gate_out=False, runtime_up=False, other_x=False, down=True):
    """x [1, rows, k] -> MatMul(x, Wg), MatMul(x, Wu), Sigmoid, Mul, Mul (-> MatMul(., Wd))."""
    rng = np.random.default_rng(seed)
    w = {name: (rng.standard_normal(shape) * 0.1).astype(np.float32)
         for name, shape in (("wg", (k, n)), ("wu", (k, n)), ("wd", (n, k)))}
    if runtime_up:
        del w["wu"]
    nodes = [h.make_node("MatMul", ["x", "wg"], ["g"]), h.make_node("MatMul", ["x2" if other_x else "x", "wu"], ["u"]),
             h.make_node("Sigmoid", ["g"], ["s"]), h.make_node("Mul", ["s", "g"] if swapped else ["g", "s"], ["a"]),
             h.make_node("Mul", ["u", "a"] if swapped else ["a", "u"], ["m"])]
    if down:
        nodes.append(h.make_node("MatMul", ["m", "wd"], ["y"]))
    else:
        del w["wd"]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [1, rows, k])]
    if other_x:
        ins.append(h.make_tensor_value_info("x2", T.FLOAT, [1, rows, k]))
    if runtime_up:
        ins.append(h.make_tensor_value_info("wu", T.FLOAT, [k, n]))
    outs = [h.make_tensor_value_info("y" if down else "m", T.FLOAT, None)]
    if gate_out:
        outs.append(h.make_tensor_value_info("g", T.FLOAT, None))
    g = h.make_graph(nodes, "mlp", ins, outs, [nh.from_array(v, name) for name, v in w.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def feeds_for(model, seed=1):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def ops_run(exe, feeds) -> set:
    return {r.op for r in exe.profile(feeds).records}


def unfused(monkeypatch, model, **kw):
    with monkeypatch.context() as m:
        m.setattr(gated, "transform_graph", lambda graph: graph)
        return glow.compile(model, "cpu", **kw)


@pytest.mark.parametrize("rows,k,n", [(1, 64, 100), (7, 96, 200), (64, 160, 96), (13, 32, 16), (5, 48, 33)])
@pytest.mark.parametrize("swapped", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_gated_mlp_runs_as_one_product_with_the_same_bits(monkeypatch, rows, k, n, swapped, threads):
    model = mlp(rows, k, n, swapped=swapped)
    feeds = feeds_for(model)
    exe = glow.compile(model, "cpu", threads=threads)
    assert "GatedMatMul" in ops_run(exe, feeds) and "Sigmoid" not in ops_run(exe, feeds)
    got = exe.run(feeds)["y"]
    np.testing.assert_array_equal(got, unfused(monkeypatch, model, threads=threads).run(feeds)["y"])
    want = glow.compile(model, "reference").run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("level", LEVELS)
def test_every_instruction_set_level_and_bf16(monkeypatch, level):
    model = mlp(9, 40, 70, down=False)
    feeds = feeds_for(model)
    for precision in ("fp32", "bf16"):
        opts = {"isa": level}
        exe = glow.compile(model, "cpu", options=opts, precision=precision)
        assert "GatedMatMul" in ops_run(exe, feeds)
        got = exe.run(feeds)["m"]
        same = unfused(monkeypatch, model, options=opts, precision=precision).run(feeds)["m"]
        np.testing.assert_array_equal(got, same)
        want = glow.compile(model, "reference").run(feeds)["m"]
        tol = dict(rtol=0.05, atol=1e-2) if precision == "bf16" else dict(rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("case", ["gate_out", "runtime_up", "other_x"])
def test_left_alone_where_the_fusion_would_change_what_is_computed(case):
    """The gate read elsewhere (a graph output), a weight given at run time, the two products over
    different rows: the five nodes run as they are."""
    model = mlp(4, 32, 48, **{case: True})
    feeds = feeds_for(model)
    exe = glow.compile(model, "cpu")
    assert "GatedMatMul" not in ops_run(exe, feeds)
    want = glow.compile(model, "reference").run(feeds)
    for name, v in exe.run(feeds).items():
        np.testing.assert_allclose(v, want[name], rtol=1e-5, atol=1e-6)


def test_the_op_reference_and_lowering_agree_with_numpy():
    from glow.graph import GraphBuilder
    from glow.lowering.registry import rule_for

    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    wg, wu = (rng.standard_normal((8, 5)).astype(np.float32) for _ in range(2))
    g = a @ wg
    want = (g * (1 / (1 + np.exp(-g)))) * (a @ wu)
    np.testing.assert_allclose(gated.GATED_MATMUL.reference(a, wg, wu), want, rtol=1e-5, atol=1e-6)
    gb = GraphBuilder("g")
    x = gb.input("a", glow.dtypes.TensorType((2, 3, 8), glow.dtypes.float32))
    y = gb.add1(gated.GATED_MATMUL, [x, gb.constant(wg), gb.constant(wu)])
    assert y.type.shape == (2, 3, 5)
    graph = gb.build([y])
    assert rule_for(gated.NAME, gated.DOMAIN) is not None
    ran = glow.compile(graph, "reference").run({"a": a})
    np.testing.assert_allclose(next(iter(ran.values())), want, rtol=1e-5, atol=1e-6)
    # weights given at run time: no kernel on cpu, so the lowering's five nodes run there
    gb = GraphBuilder("g")
    ins = [gb.input(n, glow.dtypes.TensorType(v.shape, glow.dtypes.float32)) for n, v in
           (("a", a), ("wg", wg), ("wu", wu))]
    graph = gb.build([gb.add1(gated.GATED_MATMUL, ins)])
    exe = glow.compile(graph, "cpu")
    feeds = {"a": a, "wg": wg, "wu": wu}
    assert "GatedMatMul" not in ops_run(exe, feeds)
    np.testing.assert_allclose(next(iter(exe.run(feeds).values())), want, rtol=1e-5, atol=1e-6)


def test_shapes_that_do_not_fit_are_an_error_naming_the_op():
    from glow.errors import GlowError
    from glow.graph import GraphBuilder

    gb = GraphBuilder("g")
    x = gb.input("a", glow.dtypes.TensorType((3, 8), glow.dtypes.float32))
    with pytest.raises(GlowError, match="GatedMatMul.*two \\[K, N\\] weights of one shape"):
        gb.add1(gated.GATED_MATMUL, [x, gb.constant(np.zeros((8, 5), np.float32)),
                                     gb.constant(np.zeros((8, 4), np.float32))])
