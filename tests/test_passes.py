"""Graph passes: each pass checked on the graph it leaves behind, and against the interpreter."""

import glow
import numpy as np
import pytest
from glow import GraphError
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.passes import FixedPoint, Pass, PassLog, get_pass, optimize_graph, pass_names, run_passes
from glow.passes.batchnorm import fold_batchnorm_pass
from glow.passes.cse import eliminate_common_subexpressions as cse
from glow.passes.dce import eliminate_dead_code as dce
from glow.passes.fold import fold_constants
from glow.passes.fusion import FuseActivation, FuseElementwise, fuse
from glow.passes.simplify import exact_cast, simplify
from glow.passes.sinking import sink_transposes

F32 = "float32"
RNG = np.random.default_rng(0)


def ops(g):
    return [n.op.name for n in g.nodes]


def same_outputs(before, after, feeds, rtol=1e-6, atol=1e-6):
    a, b = run_graph(before, feeds), run_graph(after, feeds)
    assert list(a) == list(b), "the graph's interface changed"
    for k in a:
        np.testing.assert_allclose(np.asarray(b[k], np.float64), np.asarray(a[k], np.float64),
                                   rtol=rtol, atol=atol)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- infrastructure --------------------------------------------------------------------------------
def test_pass_registry_names_the_default_passes():
    assert {"dce", "cse", "constant-fold", "simplify", "fold-batchnorm",
            "sink-transpose-reshape"} <= set(pass_names())
    p = get_pass("dce")
    assert p.name == "dce" and callable(p.apply)
    with pytest.raises(KeyError, match="unknown pass"):
        get_pass("no-such-pass")


def test_verifier_runs_after_every_pass_and_names_the_pass():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2,), F32))
    g = b.build([b.add1("Relu", [x])])

    def break_it(graph):  # a pass that reorders nodes so a value is read before it is defined
        b2 = GraphBuilder()
        x2 = b2.input("x", dt.tensor((2,), F32))
        r = b2.add1("Relu", [x2])
        s = b2.add1("Neg", [r])
        bad = b2.build([s])
        return bad.__class__(bad.name, bad.inputs, tuple(reversed(bad.nodes)), bad.outputs)

    with pytest.raises(GraphError, match="after pass 'breaker'"):
        run_passes(g, [Pass("breaker", break_it)])


def test_fixed_point_stops_when_nothing_changes_and_log_records_changes():
    calls = []

    def count(g):
        calls.append(1)
        return g

    g = GraphBuilder().build([])
    FixedPoint("fp", (Pass("count", count),)).apply(g)
    assert len(calls) == 1
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2,), F32))
    b.add1("Relu", [x])
    log = PassLog()
    out = run_passes(b.build([x]), [get_pass("dce")], log)
    assert out.nodes == () and log.rows == [("dce", 1, 0)]


# -- DCE and CSE -----------------------------------------------------------------------------------
def test_dce_drops_unused_nodes_but_keeps_impure_ones():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    b.add1("Exp", [x])  # unused, pure
    b.add1("RandomNormal", [], {"shape": (2,), "dtype": dt.float32})  # unused, impure
    y = b.add1("Relu", [x])
    g = dce(b.build([y]))
    assert ops(g) == ["RandomNormal", "Relu"]
    assert dce(g) is g  # nothing more to do: the same object


def test_cse_merges_duplicate_subgraphs_and_equal_small_constants():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    one_a = b.constant(np.float32(1.0))
    one_b = b.constant(np.float32(1.0))
    ya = b.add1("Relu", [b.add1("Add", [x, one_a])])
    yb = b.add1("Relu", [b.add1("Add", [one_b, x])])  # commuted, with its own constant
    z = b.add1("Mul", [ya, yb])
    g = b.build([z])
    out = cse(g)
    assert ops(out) == ["Add", "Relu", "Mul"]
    mul = out.nodes[-1]
    assert mul.inputs[0] is mul.inputs[1]
    same_outputs(g, out, {"x": rand(2, 3)})


def test_cse_never_merges_impure_nodes():
    b = GraphBuilder()
    r1 = b.add1("RandomNormal", [], {"shape": (2,), "dtype": dt.float32, "seed": 1.0})
    r2 = b.add1("RandomNormal", [], {"shape": (2,), "dtype": dt.float32, "seed": 1.0})
    g = b.build([b.add1("Add", [r1, r2])])
    assert ops(cse(g)) == ["RandomNormal", "RandomNormal", "Add"]


# -- constant folding ------------------------------------------------------------------------------
def test_constant_subgraph_becomes_one_constant():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    w = b.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    wt = b.add1("Transpose", [w], {"perm": (1, 0)})
    w2 = b.add1("Mul", [b.add1("Exp", [wt]), b.constant(np.float32(0.5))])
    shape = b.add1("Shape", [x])  # static shape: known at compile time
    y = b.add1("Add", [x, w2])
    y = b.add1("Reshape", [y, shape])
    g = b.build([y])
    out = fold_constants(g)
    assert ops(out) == ["Add", "Reshape"]
    (c,) = [v for v in out.nodes[0].inputs if v.is_constant]
    np.testing.assert_array_equal(c.data, (np.exp(w.data.T) * np.float32(0.5)).astype(np.float32))
    same_outputs(g, out, {"x": rand(2, 3)}, rtol=0, atol=0)


def test_folding_skips_impure_ops_and_keeps_output_names():
    b = GraphBuilder()
    r = b.add1("RandomUniform", [], {"shape": (3,), "dtype": dt.float32})
    c = b.add1("Exp", [b.constant(np.zeros(3, np.float32))], output_names=["out"])
    g = b.build([b.add1("Add", [r, r]), c])
    out = fold_constants(g)
    assert "RandomUniform" in ops(out) and "Exp" not in ops(out)
    assert out.output_names == g.output_names


# -- algebraic simplification ----------------------------------------------------------------------
def test_arithmetic_identities_and_double_negation():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    y = b.add1("Mul", [x, b.constant(np.ones((3,), np.float32))])
    y = b.add1("Add", [b.constant(np.float32(0)), y])
    y = b.add1("Div", [y, b.constant(np.float32(1))])
    y = b.add1("Neg", [b.add1("Neg", [y])])
    y = b.add1("Relu", [y])
    g = b.build([y])
    out = simplify(g)
    assert ops(out) == ["Relu"] and out.nodes[0].inputs[0] is out.inputs[0]


def test_broadcasting_identity_is_not_removed():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((3,), F32))
    y = b.add1("Add", [x, b.constant(np.zeros((2, 3), np.float32))])  # result is 2x3, not x
    g = b.build([b.add1("Relu", [y])])
    assert ops(simplify(g)) == ["Add", "Relu"]


def test_cast_chains():
    assert exact_cast(dt.float16, dt.float32) and exact_cast(dt.int8, dt.int32)
    assert exact_cast(dt.int16, dt.float32) and not exact_cast(dt.int32, dt.float32)
    assert not exact_cast(dt.float32, dt.float16) and not exact_cast(dt.float16, dt.bfloat16)
    b = GraphBuilder()
    x = b.input("x", dt.tensor((4,), "float16"))
    up = b.add1("Cast", [x], {"to": dt.float32})
    back = b.add1("Cast", [up], {"to": dt.float16})  # exact round trip: x itself
    y = b.add1("Cast", [b.add1("Cast", [back], {"to": dt.float64})], {"to": dt.int32})  # one Cast
    z = b.add1("Cast", [b.add1("Cast", [b.add1("Relu", [x])], {"to": dt.int8})], {"to": dt.float16})
    g = b.build([y, z])
    out = simplify(g)
    assert ops(out) == ["Cast", "Relu", "Cast", "Cast"]  # f16->i8->f16 is lossy: kept
    assert out.nodes[0].inputs[0] is out.inputs[0] and out.nodes[0].attrs["to"] == dt.int32
    same_outputs(g, out, {"x": (rand(4) * 50).astype(np.float16)}, rtol=0, atol=0)


def test_transpose_pairs_cancel_and_merge():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3, 4), F32))
    t1 = b.add1("Transpose", [x], {"perm": (1, 2, 0)})
    t2 = b.add1("Transpose", [t1], {"perm": (2, 0, 1)})  # inverse: cancels
    y = b.add1("Relu", [t2])
    u = b.add1("Transpose", [b.add1("Transpose", [y], {"perm": (1, 0, 2)})], {"perm": (0, 2, 1)})
    g = b.build([u])
    out = simplify(g)
    assert ops(out) == ["Relu", "Transpose"]
    assert out.nodes[1].attrs["perm"] == (1, 2, 0)
    same_outputs(g, out, {"x": rand(2, 3, 4)}, rtol=0, atol=0)


def test_movement_chains_become_one_reshape():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((1, 8, 1, 1), F32))
    y = b.add1("Flatten", [x])  # 1x8
    y = b.add1("Unsqueeze", [y, b.constant(np.array([0], np.int64))])  # 1x1x8
    y = b.add1("Transpose", [y], {"perm": (1, 0, 2)})  # moves only size-1 dims: a reshape
    y = b.add1("Reshape", [y, b.constant(np.array([2, 4], np.int64))])
    g = b.build([b.add1("Relu", [y])])
    out = simplify(g)
    assert ops(out) == ["Reshape", "Relu"]
    assert out.nodes[0].inputs[0] is out.inputs[0]
    same_outputs(g, out, {"x": rand(1, 8, 1, 1)}, rtol=0, atol=0)


def test_no_op_slice_pad_and_inference_dropout_disappear():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    i64 = lambda *v: b.constant(np.array(v, np.int64))  # noqa: E731
    y = b.add1("Slice", [x, i64(0, 0), i64(2, 100)])
    y = b.add1("Pad", [y, i64(0, 0, 0, 0)])
    y = b.add1("Dropout", [y, b.constant(np.float32(0.5))])
    g = b.build([b.add1("Relu", [y])])
    assert ops(simplify(g)) == ["Relu"]


def test_output_identity_is_kept_and_simplify_terminates():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2,), F32))
    y = b.add1("Mul", [x, b.constant(np.float32(1))], output_names=["y"])
    out = simplify(b.build([y]))
    assert out.output_names == ["y"] and ops(out) == ["Identity"]
    assert simplify(out) is out


# -- BatchNorm folding -----------------------------------------------------------------------------
def _bn_params(b, c):
    return [b.constant(RNG.uniform(0.5, 1.5, c).astype(np.float32)), b.constant(rand(c)),
            b.constant(rand(c)), b.constant(RNG.uniform(0.5, 2, c).astype(np.float32))]


def test_conv_batchnorm_becomes_one_conv_with_folded_weights():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((1, 3, 8, 8), F32))
    w, bias = b.constant(rand(4, 3, 3, 3)), b.constant(rand(4))
    c = b.add1("Conv", [x, w, bias], {"pads": (1, 1, 1, 1)})
    y = b.add1("BatchNormalization", [c] + _bn_params(b, 4), {"epsilon": 1e-3})
    g = b.build([b.add1("Relu", [y])])
    out = fold_batchnorm_pass(g)
    assert ops(out) == ["Conv", "Relu"]
    conv = out.nodes[0]
    assert conv.inputs[1] is not w and conv.inputs[1].is_constant and conv.inputs[2].is_constant
    assert conv.attrs["pads"] == (1, 1, 1, 1)
    same_outputs(g, out, {"x": rand(1, 3, 8, 8)}, rtol=1e-4, atol=1e-5)


def test_conv_with_two_readers_is_not_folded():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((1, 3, 4, 4), F32))
    c = b.add1("Conv", [x, b.constant(rand(2, 3, 1, 1))])
    y = b.add1("BatchNormalization", [c] + _bn_params(b, 2))
    g = b.build([y, b.add1("Relu", [c])])
    assert "BatchNormalization" in ops(fold_batchnorm_pass(g))


def test_gemm_batchnorm_and_channel_scale_chains_fold():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 5), F32))
    gm = b.add1("Gemm", [x, b.constant(rand(6, 5)), b.constant(rand(6))], {"transB": 1, "beta": 0.5})
    y = b.add1("BatchNormalization", [gm] + _bn_params(b, 6))
    # Caffe2-style Scale after a Conv: Mul and Add by per-channel constants ...
    z = b.input("z", dt.tensor((1, 3, 4, 4), F32))
    c = b.add1("Conv", [z, b.constant(rand(2, 3, 1, 1))])
    c = b.add1("Mul", [c, b.constant(rand(2, 1, 1))])
    c = b.add1("Add", [b.constant(rand(1, 2, 1, 1)), c])
    # ... and after a BatchNormalization that follows no Conv: all one BatchNormalization.
    n = b.add1("BatchNormalization", [b.add1("Relu", [z])] + _bn_params(b, 3))
    n = b.add1("Add", [b.add1("Mul", [n, b.constant(rand(3, 1, 1))]), b.constant(rand(3, 1, 1))])
    g = b.build([y, c, n])
    out = fold_batchnorm_pass(g)
    assert sorted(ops(out)) == ["BatchNormalization", "Conv", "Gemm", "Relu"]
    same_outputs(g, out, {"x": rand(2, 5), "z": rand(1, 3, 4, 4)}, rtol=1e-4, atol=1e-5)


# -- sinking ---------------------------------------------------------------------------------------
def test_transposes_sink_through_elementwise_ops_and_cancel():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3, 4), F32))
    y = b.input("y", dt.tensor((2, 3, 4), F32))
    tx = b.add1("Transpose", [x], {"perm": (0, 2, 1)})
    ty = b.add1("Transpose", [y], {"perm": (0, 2, 1)})
    s = b.add1("Relu", [b.add1("Add", [tx, ty])])
    s = b.add1("Mul", [s, b.constant(rand(4, 3))])  # a constant in the transposed layout
    out_t = b.add1("Transpose", [s], {"perm": (0, 2, 1)})
    g = b.build([out_t])
    sunk = sink_transposes(g)
    assert ops(sunk)[-2:] == ["Transpose", "Transpose"]
    out = simplify(sunk)
    assert "Transpose" not in ops(out)
    same_outputs(g, out, {"x": rand(2, 3, 4), "y": rand(2, 3, 4)}, rtol=0, atol=0)


def test_reshape_sinks_and_pairs_merge():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 6), F32))
    r = b.add1("Reshape", [x, b.constant(np.array([3, 4], np.int64))])
    r = b.add1("Sigmoid", [b.add1("Relu", [r])])
    r = b.add1("Reshape", [r, b.constant(np.array([2, 6], np.int64))])
    g = b.build([r])
    out = optimize_graph(g)
    assert ops(out) == ["Relu", "Sigmoid"]
    same_outputs(g, out, {"x": rand(2, 6)}, rtol=0, atol=0)


# -- fusion ----------------------------------------------------------------------------------------
def test_elementwise_chain_becomes_one_fused_node():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), F32))
    y = b.input("y", dt.tensor((3,), F32))
    t = b.add1("Mul", [x, b.constant(np.float32(2))])
    t = b.add1("Add", [t, y])
    t = b.add1("Tanh", [b.add1("Relu", [t])])
    g = b.build([t])
    out = fuse(g, [FuseElementwise()])
    assert ops(out) == ["FusedElementwise"] and out.output_names == g.output_names
    body = out.nodes[0].attrs["body"]
    assert ops(body) == ["Mul", "Add", "Relu", "Tanh"] and len(body.inputs) == 2
    same_outputs(g, out, {"x": rand(2, 3), "y": rand(3)}, rtol=0, atol=0)


def test_shared_intermediates_are_not_fused_away():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((4,), F32))
    e = b.add1("Exp", [x])
    g = b.build([b.add1("Relu", [e]), b.add1("Neg", [e])])  # e has two readers
    assert ops(fuse(g, [FuseElementwise()])) == ["Exp", "Relu", "Neg"]


def test_activation_fuses_into_its_producer():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((1, 2, 5, 5), F32))
    c = b.add1("Conv", [x, b.constant(rand(3, 2, 3, 3)), b.constant(rand(3))])
    y = b.add1("Relu", [c])
    g = b.build([b.add1("MaxPool", [y], {"kernel_shape": (2, 2)})])
    out = fuse(g, [FuseActivation()])
    assert ops(out) == ["FusedKernel", "MaxPool"]
    assert ops(out.nodes[0].attrs["body"]) == ["Conv", "Relu"]
    same_outputs(g, out, {"x": rand(1, 2, 5, 5)}, rtol=0, atol=0)


# -- the pipeline ----------------------------------------------------------------------------------
def test_default_pipeline_on_the_example_model():
    from helpers import EXAMPLE_MODEL

    g = glow.load_onnx(EXAMPLE_MODEL)
    out = optimize_graph(g)
    assert "BatchNormalization" not in ops(out) and "Flatten" not in ops(out)
    assert len(out.nodes) < len(g.nodes)
    same_outputs(g, out, {"image": rand(1, 1, 28, 28)}, rtol=1e-4, atol=1e-6)


def test_sub_graph_captures_survive_the_pipeline():
    """Values a Loop/Scan body reads by name must keep their names (a folded one would not)."""
    from glow.testing.node_suite import case_by_name, run_case

    for name in ("test_affine_grid_2d_expanded", "test_range_float_type_positive_delta_expanded"):
        assert run_case(case_by_name()[name], "reference") is None


@pytest.mark.slow
def test_pipeline_reduces_every_light_model():
    from glow.testing.models import light_models

    for case in light_models():
        g = glow.load_onnx(case.model_path)
        out = optimize_graph(g)
        assert len(out.nodes) < len(g.nodes), case.name
        assert not {"BatchNormalization", "ConstantOfShape", "Dropout"} & set(ops(out)) or \
            case.name == "light_densenet121", (case.name, out.op_counts())


# -- Q/DQ ------------------------------------------------------------------------------------------

def _qdq_chain(x_type, mover=None, scale=0.05, zp=128, q_scale=None, q_zp=None, mover_attrs=None):
    """x -> DequantizeLinear -> [mover] -> QuantizeLinear -> y (parameters per tensor unless arrays)."""
    b = GraphBuilder()
    x = b.input("x", x_type)
    zdt = x_type.dtype.np
    s, z = b.constant(np.asarray(scale, np.float32)), b.constant(np.asarray(zp, zdt))
    qs = s if q_scale is None else b.constant(np.asarray(q_scale, np.float32))
    qz = z if q_zp is None else b.constant(np.asarray(q_zp, zdt))
    v = b.add1("DequantizeLinear", [x, s, z])
    if mover is not None:
        v = b.add1(mover, [v], mover_attrs or {})
    return b.build([b.add1("QuantizeLinear", [v, qs, qz], output_names=["y"])])


def _ops(g):
    return sorted(n.op.name for n in g.nodes)


def _same_results(g, feeds):
    want = run_graph(g, feeds)["y"]
    got = run_graph(optimize_graph(g), feeds)["y"]
    np.testing.assert_array_equal(got, want)


def test_qdq_round_trip_cancels():
    x = np.random.default_rng(0).integers(0, 256, (2, 3, 4)).astype(np.uint8)
    g = _qdq_chain(dt.tensor((2, 3, 4), "uint8"))
    assert "QuantizeLinear" not in _ops(optimize_graph(g)) and "DequantizeLinear" not in _ops(optimize_graph(g))
    _same_results(g, {"x": x})
    other = _qdq_chain(dt.tensor((2, 3, 4), "uint8"), q_scale=0.1)  # different parameters: a rescale
    assert "QuantizeLinear" in _ops(optimize_graph(other))
    _same_results(other, {"x": x})


@pytest.mark.parametrize("mover,attrs", [("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}),
                                         ("Transpose", {"perm": [0, 2, 3, 1]}), ("Flatten", {"axis": 1})])
@pytest.mark.parametrize("dtype,zp", [("uint8", 131), ("int8", -3)])
def test_data_ops_between_dq_and_q_run_on_the_integers(mover, attrs, dtype, zp):
    x = np.random.default_rng(1).integers(-128 if dtype == "int8" else 0, 128 if dtype == "int8" else 256,
                                          (1, 3, 5, 5)).astype(dtype)
    g = _qdq_chain(dt.tensor((1, 3, 5, 5), dtype), mover, zp=zp, mover_attrs=attrs)
    opt = optimize_graph(g)
    assert _ops(opt) == [{"Flatten": "Reshape"}.get(mover, mover)], _ops(opt)  # (simplify makes Flatten a Reshape)
    assert opt.nodes[0].inputs[0].type.dtype.name == dtype
    _same_results(g, {"x": x})
    (y,) = glow.compile(g, "cpu").run({"x": x}).values()
    np.testing.assert_array_equal(y, run_graph(g, {"x": x})["y"])


def test_qdq_moves_only_what_commutes():
    # a negative scale reverses the order (MaxPool would pick the other end): not moved
    neg = _qdq_chain(dt.tensor((1, 1, 4, 4), "uint8"), "MaxPool", scale=-0.05, mover_attrs={"kernel_shape": [2, 2]})
    assert "DequantizeLinear" in _ops(optimize_graph(neg))
    # int16 data: MaxPool takes no int16, so the chain stays
    i16 = _qdq_chain(dt.tensor((1, 1, 4, 4), "int16"), "MaxPool", zp=0, mover_attrs={"kernel_shape": [2, 2]})
    assert "DequantizeLinear" in _ops(optimize_graph(i16))
    x = np.arange(16, dtype=np.int16).reshape(1, 1, 4, 4)
    _same_results(i16, {"x": x})
