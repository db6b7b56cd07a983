"""Fold before lower: decomposed Softmax, Gelu and LayerNormalization patterns are raised to the op
exactly when they compute the same function, and the folded graph gives the reference's results."""

import math

import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.passes.fold_patterns import FOLD_PATTERNS, fold_patterns

SHAPE = (2, 3, 5)


def _graph(build, shape=SHAPE, dtype="float32"):
    b = GraphBuilder("pattern")
    x = b.input("x", dt.tensor(shape, dtype))
    y = build(b, x)
    return b.build([b.add1("Identity", [y], output_names=["y"])])


def _c(b, v, dtype=np.float32):
    return b.constant(np.asarray(v, dtype))


def _axes(b, *axes):
    return b.constant(np.asarray(axes, np.int64))


def _check(graph, op, attrs=None, dtype=np.float32, rtol=1e-5, folds=True, atol=None):
    folded = fold_patterns(graph)
    ops = folded.op_counts()
    if not folds:
        assert op not in ops, ops
        assert folded is graph
        return folded
    assert ops.get(op) == 1, ops
    node = next(n for n in folded.nodes if n.op.name == op)
    for k, v in (attrs or {}).items():
        assert node.attrs[k] == v, (k, node.attrs[k], v)
    assert folded.output_names == graph.output_names and folded.input_names == graph.input_names
    feeds = {"x": np.random.default_rng(0).uniform(-4, 4, graph.inputs[0].type.shape).astype(dtype)}
    want, got = run_graph(graph, feeds)["y"], run_graph(folded, feeds)["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=rtol / 10 if atol is None else atol)
    return folded


# -- Softmax -------------------------------------------------------------------------------------------

def _softmax(axis, shift_axis=None, keepdims=1, sum_axes=None):
    def build(b, x):
        if shift_axis is not None:
            x = b.add1("Sub", [x, b.add1("ReduceMax", [x, _axes(b, shift_axis)], {"keepdims": 1})])
        e = b.add1("Exp", [x])
        s = b.add1("ReduceSum", [e, _axes(b, *(sum_axes or [axis]))], {"keepdims": keepdims})
        return b.add1("Div", [e, s])
    return build


@pytest.mark.parametrize("axis", [2, -1, 0, -2])
def test_softmax_folds(axis):
    folded = _check(_graph(_softmax(axis)), "Softmax", {"axis": axis % 3})
    assert "Exp" not in folded.op_counts() and "ReduceSum" not in folded.op_counts()


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_with_max_subtracted_folds_to_plain_softmax(axis):
    folded = _check(_graph(_softmax(axis, shift_axis=axis)), "Softmax", {"axis": axis % 3})
    assert set(folded.op_counts()) == {"Softmax", "Identity"}


def test_softmax_shifted_along_another_axis_keeps_the_shift():
    folded = _check(_graph(_softmax(-1, shift_axis=0)), "Softmax", {"axis": 2})
    assert "ReduceMax" in folded.op_counts()


def test_softmax_on_0d_and_1d():
    _check(_graph(_softmax(0), shape=(7,)), "Softmax", {"axis": 0})
    b = GraphBuilder()
    x = b.input("x", dt.tensor((4,), "float32"))
    e = b.add1("Exp", [x])
    s = b.add1("ReduceSum", [e], {"keepdims": 1})  # no axes: all of them, which is axis 0 here
    g = b.build([b.add1("Div", [e, s], output_names=["y"])])
    _check(g, "Softmax", {"axis": 0})


@pytest.mark.parametrize("case", ["two-axes", "keepdims0-broadcast", "other-numerator"])
def test_softmax_not_folded_when_not_equivalent(case):
    if case == "two-axes":
        g = _graph(_softmax(-1, sum_axes=[1, 2]))
    elif case == "keepdims0-broadcast":
        g = _graph(_softmax(0, keepdims=0), shape=(3, 3))  # sums broadcast along the wrong axis
    else:
        def build(b, x):
            e = b.add1("Exp", [x])
            s = b.add1("ReduceSum", [e, _axes(b, -1)], {"keepdims": 1})
            return b.add1("Div", [b.add1("Exp", [b.add1("Neg", [x])]), s])
        g = _graph(build)
    _check(g, "Softmax", folds=False)


def test_softmax_float16_and_large_inputs():
    g = _graph(_softmax(-1, shift_axis=-1), dtype="float16")
    _check(g, "Softmax", {"axis": 2}, dtype=np.float16, rtol=2e-3)


# -- Gelu ----------------------------------------------------------------------------------------------

def _phi(b, x, form):
    if form == "div":
        z = b.add1("Div", [x, _c(b, math.sqrt(2))])
    else:
        z = b.add1("Mul", [_c(b, math.sqrt(0.5)), x])
    erf = b.add1("Erf", [z])
    return b.add1("Add", [erf, _c(b, 1.0)] if form == "div" else [_c(b, [1.0]), erf])


GELU_FORMS = {
    # PyTorch's export: (x * (erf(x / 1.4142135) + 1)) * 0.5
    "torch": lambda b, x: b.add1("Mul", [b.add1("Mul", [x, _phi(b, x, "div")]), _c(b, 0.5)]),
    # 0.5 * x * (1 + erf(x * 0.70710677))
    "half-x-first": lambda b, x: b.add1("Mul", [b.add1("Mul", [_c(b, 0.5), x]), _phi(b, x, "mul")]),
    # x * (0.5 * (1 + erf(...)))
    "half-phi": lambda b, x: b.add1("Mul", [x, b.add1("Mul", [_phi(b, x, "div"), _c(b, 0.5)])]),
    # 0.5 * (x * phi)
    "half-outside": lambda b, x: b.add1("Mul", [_c(b, 0.5), b.add1("Mul", [_phi(b, x, "mul"), x])]),
}


@pytest.mark.parametrize("form", sorted(GELU_FORMS))
def test_gelu_folds(form):
    folded = _check(_graph(GELU_FORMS[form]), "Gelu", {"approximate": "none"})
    assert "Erf" not in folded.op_counts()


def test_gelu_folds_in_float16_with_rounded_constants():
    def build(b, x):
        return b.add1("Mul", [b.add1("Mul", [x, _phi16(b, x)]), _c(b, 0.5, np.float16)])

    def _phi16(b, x):
        erf = b.add1("Erf", [b.add1("Div", [x, _c(b, math.sqrt(2), np.float16)])])
        return b.add1("Add", [erf, _c(b, 1.0, np.float16)])

    # (atol: the float16 pattern itself loses 1 + erf(x) to cancellation below x = -3; Gelu does not)
    _check(_graph(build, dtype="float16"), "Gelu", dtype=np.float16, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("case", ["wrong-half", "wrong-root", "other-x", "broadcast-up"])
def test_gelu_not_folded_when_not_equivalent(case):
    def build(b, x):
        half = _c(b, 0.6 if case == "wrong-half" else 0.5)
        if case == "broadcast-up":
            half = _c(b, np.full((2, 1, 1, 1), 0.5))  # changes the output's shape
        z = b.add1("Div", [x, _c(b, 1.5 if case == "wrong-root" else math.sqrt(2))])
        phi = b.add1("Add", [b.add1("Erf", [z]), _c(b, 1.0)])
        other = b.add1("Neg", [x]) if case == "other-x" else x
        return b.add1("Mul", [b.add1("Mul", [other, phi]), half])
    _check(_graph(build), "Gelu", folds=False)


# -- LayerNormalization --------------------------------------------------------------------------------

def _layer_norm(axes=(-1,), var_axes=None, eps=1e-5, square="mul", inverse="div", scale=None, bias=None):
    def build(b, x):
        mean = b.add1("ReduceMean", [x, _axes(b, *axes)], {"keepdims": 1})
        d = b.add1("Sub", [x, mean])
        t = x.type.dtype.np
        sq = b.add1("Mul", [d, d]) if square == "mul" else b.add1("Pow", [d, _c(b, 2.0, t)])
        var = b.add1("ReduceMean", [sq, _axes(b, *(var_axes or axes))], {"keepdims": 1})
        root = b.add1("Sqrt", [b.add1("Add", [var, _c(b, eps, t)])])
        if inverse == "div":
            y = b.add1("Div", [d, root])
        else:
            y = b.add1("Mul", [b.add1("Reciprocal", [root]), d])
        if scale is not None:
            y = b.add1("Mul", [_c(b, scale), y])
        if bias is not None:
            y = b.add1("Add", [y, _c(b, bias)])
        return y
    return build


def test_layer_norm_folds():
    folded = _check(_graph(_layer_norm()), "LayerNormalization", {"axis": 2})
    assert set(folded.op_counts()) == {"LayerNormalization", "Identity"}
    ln = next(n for n in folded.nodes if n.op.name == "LayerNormalization")
    assert ln.attrs["epsilon"] == pytest.approx(1e-5, rel=1e-6)


def test_layer_norm_with_scale_and_bias_folds_into_one_op():
    rng = np.random.default_rng(1)
    scale, bias = rng.uniform(0.5, 2, 5).astype(np.float32), rng.uniform(-1, 1, 5).astype(np.float32)
    folded = _check(_graph(_layer_norm(scale=scale, bias=bias)), "LayerNormalization", {"axis": 2})
    ln = next(n for n in folded.nodes if n.op.name == "LayerNormalization")
    assert len(ln.inputs) == 3 and np.array_equal(ln.inputs[1].data, scale)
    assert np.array_equal(ln.inputs[2].data, bias)
    assert set(folded.op_counts()) == {"LayerNormalization", "Identity"}


@pytest.mark.parametrize("square,inverse", [("pow", "div"), ("mul", "reciprocal"), ("pow", "reciprocal")])
def test_layer_norm_variants_fold(square, inverse):
    _check(_graph(_layer_norm(eps=1e-3, square=square, inverse=inverse, bias=np.float32(0.5))),
           "LayerNormalization", {"axis": 2})


def test_layer_norm_over_two_trailing_axes():
    scale = np.random.default_rng(2).uniform(0.5, 2, (3, 5)).astype(np.float32)
    _check(_graph(_layer_norm(axes=(1, 2), scale=scale)), "LayerNormalization", {"axis": 1})
    _check(_graph(_layer_norm(axes=(-1, -2), var_axes=(1, 2))), "LayerNormalization", {"axis": 1})


def test_layer_norm_float64_keeps_float64_statistics():
    _check(_graph(_layer_norm(), dtype="float64"), "LayerNormalization",
           {"stash_type": dt.float64}, dtype=np.float64, rtol=1e-12)


@pytest.mark.parametrize("case", ["not-trailing", "axes-differ", "negative-eps", "scale-broadcasts-up"])
def test_layer_norm_not_folded_when_not_equivalent(case):
    kw = {"not-trailing": dict(axes=(1,)), "axes-differ": dict(axes=(2,), var_axes=(1, 2)),
          "negative-eps": dict(eps=-1e-5),
          "scale-broadcasts-up": dict(scale=np.ones((4, 1, 1, 5), np.float32))}[case]
    folded = fold_patterns(_graph(_layer_norm(**kw)))
    if case == "scale-broadcasts-up":  # the normalisation folds; the shape-changing Mul stays
        assert folded.op_counts().get("Mul") == 1
    else:
        assert "LayerNormalization" not in folded.op_counts()


def test_nested_patterns_fold_together():
    def build(b, x):
        return GELU_FORMS["torch"](b, _softmax(-1, shift_axis=-1)(b, _layer_norm()(b, x)))
    folded = _check(_graph(build), "Gelu")
    assert {"Softmax", "LayerNormalization", "Gelu"} <= set(folded.op_counts())
    assert len(folded.nodes) == 4


def test_pass_object_and_unchanged_graph_is_returned_as_is():
    g = _graph(lambda b, x: b.add1("Relu", [x]))
    assert FOLD_PATTERNS.apply(g) is g
    assert FOLD_PATTERNS.name == "fold-patterns"


# -- the forms ONNX's own function bodies use ----------------------------------------------------------

def test_gelu_in_onnx_function_form_folds():
    """Constants as CastLike(c, x), sqrt 2 as Sqrt(CastLike(2, x)), 1 + erf as a two-input Sum."""
    def build(b, x):
        def like(v):
            return b.add1("CastLike", [b.constant(np.asarray(v, np.float64)), x])
        phi = b.add1("Sum", [like(1.0), b.add1("Erf", [b.add1("Div", [x, b.add1("Sqrt", [like(2.0)])])])])
        return b.add1("Mul", [b.add1("Mul", [like(0.5), x]), phi])
    folded = _check(_graph(build), "Gelu")
    assert "CastLike" not in folded.op_counts()


def test_layer_norm_with_mean_of_squares_variance_folds():
    """var = mean(x^2) - mean(x)^2, the form of ONNX's LayerNormalization function body."""
    def build(b, x):
        mean = b.add1("ReduceMean", [x, _axes(b, -1)], {"keepdims": 1})
        sq_mean = b.add1("ReduceMean", [b.add1("Mul", [x, x]), _axes(b, -1)], {"keepdims": 1})
        var = b.add1("Sub", [sq_mean, b.add1("Mul", [mean, mean])])
        root = b.add1("Sqrt", [b.add1("Sum", [var, _c(b, 1e-5)])])
        return b.add1("Div", [b.add1("Sub", [x, mean]), root])
    _check(_graph(build), "LayerNormalization", {"axis": 2}, rtol=1e-4)


@pytest.mark.parametrize("name,op", [
    ("test_softmax_axis_0_expanded", "Softmax"), ("test_softmax_large_number_expanded_ver18", "Softmax"),
    ("test_gelu_default_2_expanded", "Gelu"),
    ("test_layer_normalization_4d_axis_negative_2_expanded", "LayerNormalization"),
    ("test_layer_normalization_default_axis_expanded_ver18", "LayerNormalization")])
def test_onnx_expanded_node_tests_fold_and_still_pass(name, op):
    import glow
    from glow.passes import optimize_graph
    from glow.testing.compare import mismatch, to_array
    from glow.testing.node_suite import case_by_name

    case = case_by_name()[name]
    folded = fold_patterns(optimize_graph(glow.load_onnx(case.model)))
    assert op in folded.op_counts(), folded.op_counts()
    init = {t.name for t in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in init]
    for inputs, expected in case.data_sets:
        got = run_graph(folded, {n: to_array(v) for n, v in zip(names, inputs)})
        for out, exp in zip(case.model.graph.output, expected):
            assert mismatch(to_array(exp), got[out.name], case.rtol, case.atol, out.name) is None


def test_layer_norm_used_twice_is_not_duplicated_by_its_scale():
    b = GraphBuilder()
    x = b.input("x", dt.tensor(SHAPE, "float32"))
    y = _layer_norm()(b, x)
    scaled = b.add1("Mul", [y, _c(b, np.full(5, 2.0))], output_names=["scaled"])
    g = b.build([b.add1("Identity", [y], output_names=["y"]), scaled])
    folded = fold_patterns(g)
    assert folded.op_counts().get("LayerNormalization") == 1 and folded.op_counts().get("Mul") == 1
    feeds = {"x": np.random.default_rng(3).normal(size=SHAPE).astype(np.float32)}
    want, got = run_graph(g, feeds), run_graph(folded, feeds)
    for k in ("y", "scaled"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
