"""Issue 14, findings 5 and 6, on every backend (reference, cpu, cpu --native floor, opencl).

5. Reduce* with noop_with_empty_axes=1 and no axes (attribute absent, axes input absent, empty, or
   empty at run time) reduce over the empty set of axes: the op's elementwise part still applies
   (ReduceL1 -> |x|, ReduceL2 -> sqrt(x*x), ReduceSumSquare -> x*x, ReduceLogSum -> log x,
   ReduceLogSumExp -> x; Sum/Mean/Max/Min/Prod -> x), as the ONNX function bodies, onnxruntime and
   onnx.reference say. Expected values come from NumPy, cross-checked with onnx.reference.
6. Slice / Pad / Gather / CumSum with int32 index inputs after a layout-changing op (MaxPool, Conv:
   the cpu backend runs them NHWC and rewrites the Slice's axes) compile and give NumPy's answer.
"""

import glow
import numpy as np
import pytest
from helpers import opencl_unavailable_reason
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPENCL_REASON = opencl_unavailable_reason()
BACKENDS = [
    pytest.param(("reference", None), id="reference"),
    pytest.param(("cpu", None), id="cpu"),
    pytest.param(("cpu", "floor"), id="cpu-floor"),
    pytest.param(("opencl", None), id="opencl", marks=[
        pytest.mark.opencl,
        pytest.mark.skipif(OPENCL_REASON is not None, reason=f"no OpenCL platform: {OPENCL_REASON}")]),
]


def _run(model, feeds, backend):
    name, native = backend
    return glow.compile(model, backend=name, native=native).run(feeds)


def _onnx_reference(model, feeds):
    from onnx.reference import ReferenceEvaluator

    return dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, feeds)))


# -- finding 5: noop_with_empty_axes with no axes ----------------------------------------------------
def _f32(fn):
    """fn computed as the reference computes 16-bit floats (in float32), cast back."""
    return lambda x: fn(x.astype(np.float32) if x.dtype == np.float16 else x).astype(x.dtype)


#: op -> the elementwise result of reducing each element alone (what ONNX's function bodies give).
ELEMENTWISE = {
    "ReduceL1": _f32(np.abs),
    "ReduceL2": lambda x: np.trunc(np.sqrt(x.astype(np.float64) ** 2)).astype(x.dtype)
    if x.dtype.kind in "iu" else _f32(lambda w: np.sqrt(w * w))(x),
    "ReduceSumSquare": _f32(lambda w: w * w),
    "ReduceLogSum": _f32(np.log),
    "ReduceLogSumExp": lambda x: x,
    "ReduceSum": lambda x: x, "ReduceMean": lambda x: x, "ReduceMax": lambda x: x,
    "ReduceMin": lambda x: x, "ReduceProd": lambda x: x,
}
FLOAT_ONLY = {"ReduceLogSum", "ReduceLogSumExp"}
DTYPES = {"float32": T.FLOAT, "float16": T.FLOAT16, "int32": T.INT32, "int64": T.INT64}
#: absent: no axes input; empty: an empty constant; runtime: an empty graph input at run time;
#: opset13: ReduceSum at opset 13 (the only one that had noop_with_empty_axes and an axes input).
FORMS = ["absent", "empty", "runtime", "opset13"]


def _noop_model(dtype: str, form: str):
    ops = ["ReduceSum"] if form == "opset13" else [
        op for op in ELEMENTWISE if dtype.startswith("float") or op not in FLOAT_ONLY]
    axes = {"absent": [], "empty": ["axes"], "runtime": ["axes"], "opset13": ["axes"]}[form]
    nodes = [h.make_node(op, ["x", *axes], [op], keepdims=1, noop_with_empty_axes=1) for op in ops]
    inputs = [h.make_tensor_value_info("x", DTYPES[dtype], [2, 3])]
    inits = []
    if form == "runtime":
        inputs.append(h.make_tensor_value_info("axes", T.INT64, [None]))
    elif axes:
        inits.append(nh.from_array(np.zeros(0, np.int64), "axes"))
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info(op, DTYPES[dtype], None) for op in ops],
                     initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13 if form == "opset13" else 18)]), ops


def _noop_input(dtype: str):
    if dtype.startswith("float"):
        return np.array([[-0.5, 2.0, 3.0], [1.5, -0.25, 0.0]], dtype)
    return np.array([[1, -2, 3], [-4, 5, 0]], dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_noop_with_empty_axes_applies_the_elementwise_part(dtype, form, backend):
    model, ops = _noop_model(dtype, form)
    x = _noop_input(dtype)
    feeds = {"x": x, **({"axes": np.zeros(0, np.int64)} if form == "runtime" else {})}
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = {op: ELEMENTWISE[op](x) for op in ops}
        onnx_ref = _onnx_reference(model, feeds)
    got = _run(model, feeds, backend)
    for op in ops:
        e = expected[op]
        # The test's NumPy expectation is onnx.reference's answer (it gives int64 for an int32
        # ReduceSumSquare, so values are compared, not types).
        np.testing.assert_array_equal(onnx_ref[op].astype(np.float64), e.astype(np.float64), err_msg=op)
        g = got[op]
        assert g.dtype == e.dtype and g.shape == e.shape, (op, g.dtype, g.shape)
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=1e-6, equal_nan=True,
                                   err_msg=f"{op} {dtype} {form}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_runtime_axes_with_noop_still_reduce_when_given(backend):
    """The same run-time axes input, non-empty: an ordinary reduction over axis 1."""
    model, ops = _noop_model("float32", "runtime")
    x = np.abs(_noop_input("float32")) + 1
    got = _run(model, {"x": x, "axes": np.array([1], np.int64)}, backend)
    sums = {"ReduceL1": np.abs(x).sum(1), "ReduceL2": np.sqrt((x * x).sum(1)), "ReduceSumSquare": (x * x).sum(1),
            "ReduceLogSum": np.log(x.sum(1)), "ReduceLogSumExp": np.log(np.exp(x).sum(1)),
            "ReduceSum": x.sum(1), "ReduceMean": x.mean(1), "ReduceMax": x.max(1), "ReduceMin": x.min(1),
            "ReduceProd": x.prod(1)}
    for op in ops:
        np.testing.assert_allclose(got[op], sums[op].reshape(2, 1), rtol=1e-5, err_msg=op)


# -- finding 6: int32 index inputs after a layout-changing op ----------------------------------------
X_SHAPE = (4, 3, 6, 75)
W = np.random.default_rng(1).standard_normal((3, 3, 1, 1)).astype(np.float32)
PRE = {  # the producer of `p`, and its NumPy value
    "identity": (lambda: [h.make_node("Identity", ["x"], ["p"])], lambda x: x),
    "maxpool": (lambda: [h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 1], strides=[3, 1])],
                lambda x: np.maximum(x[:, :, [0, 3]], x[:, :, [1, 4]])),  # H 6 -> 2: rows {0,1}, {3,4}
    "conv": (lambda: [h.make_node("Conv", ["x", "w"], ["p"], kernel_shape=[1, 1])],
             lambda x: np.einsum("oc,nchw->nohw", W[:, :, 0, 0], x)),
}
I32 = np.int32
#: name -> (nodes after p, int32 initializers, run-time int32 inputs, NumPy of p and the feeds)
INDEX_CASES = {
    "slice": ([h.make_node("Slice", ["p", "s", "e", "a", "st"], ["y"])],
              {"s": I32([0, 1]), "e": I32([3, 60]), "a": I32([1, 3]), "st": I32([1, 2])}, {},
              lambda p, f: p[:, 0:3, :, 1:60:2]),
    "slice-no-axes": ([h.make_node("Slice", ["p", "s", "e"], ["y"])],
                      {"s": I32([1, 0, 0, 2]), "e": I32([3, 2, 2, 70])}, {},
                      lambda p, f: p[1:3, 0:2, 0:2, 2:70]),
    "slice-negative-step": ([h.make_node("Slice", ["p", "s", "e", "a", "st"], ["y"])],
                            {"s": I32([-1]), "e": I32([-100]), "a": I32([-1]), "st": I32([-3])}, {},
                            lambda p, f: p[..., ::-3]),
    "slice-runtime-starts": ([h.make_node("Slice", ["p", "s", "e", "a"], ["y"])],
                             {"a": I32([1, 3])}, {"s": I32([1, 5]), "e": I32([3, 50])},
                             lambda p, f: p[:, 1:3, :, 5:50]),
    "slice-runtime-no-axes": ([h.make_node("Slice", ["p", "s", "e"], ["y"])],
                              {}, {"s": I32([1, 0]), "e": I32([3, 2])}, lambda p, f: p[1:3, 0:2]),
    "pad-axes": ([h.make_node("Pad", ["p", "pads", "", "a"], ["y"])],
                 {"pads": np.int64([1, 2, 0, 3]), "a": I32([1, 3])}, {},
                 lambda p, f: np.pad(p, [(0, 0), (1, 0), (0, 0), (2, 3)])),
    "gather": ([h.make_node("Gather", ["p", "i"], ["y"], axis=3)], {"i": I32([[0, -1], [5, 2]])}, {},
               lambda p, f: p[:, :, :, [[0, 74], [5, 2]]]),
    "cumsum": ([h.make_node("CumSum", ["p", "ax"], ["y"])], {"ax": I32(2)}, {},
               lambda p, f: np.cumsum(p, axis=2, dtype=np.float32)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pre", list(PRE))
@pytest.mark.parametrize("name", list(INDEX_CASES))
def test_int32_index_inputs_after_layout_ops(name, pre, backend):
    nodes, inits, runtime, numpy_of = INDEX_CASES[name]
    make_pre, numpy_pre = PRE[pre]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, list(X_SHAPE))]
    inputs += [h.make_tensor_value_info(k, T.INT32, [len(v)]) for k, v in runtime.items()]
    tensors = [nh.from_array(v, k) for k, v in inits.items()] + ([nh.from_array(W, "w")] if pre == "conv" else [])
    g = h.make_graph(make_pre() + nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, None)],
                     initializer=tensors)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    x = np.random.default_rng(0).standard_normal(X_SHAPE).astype(np.float32)
    feeds = {"x": x, **runtime}
    expected = numpy_of(numpy_pre(x), feeds)
    y = _run(model, feeds, backend)["y"]
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
