"""The CPU backend: native code through LLVM agrees with the reference interpreter.

Op-by-op checks over element types, random graphs (hypothesis) of elementwise, reduction, matmul
and conv ops, run-time input checks, threads, the compile cache, shape specialisation, and what
the backend must refuse. The node suite and the models run on it through
`pytest tests/test_node_suite.py tests/test_models.py --glow-backend cpu [--glow-native floor]`.
"""

import subprocess
import sys

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.errors import InputError, LoweringError
from glow.graph import GraphBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("llvmlite")

from glow.backends.cpu import codegen  # noqa: E402
from glow.lowering import floor_ops  # noqa: E402

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(fn, *inputs):
    """A graph from fn(builder, *input values); inputs: (name, shape, dtype) triples."""
    b = GraphBuilder("t")
    vals = [b.input(n, dt.tensor(s, d)) for n, s, d in inputs]
    outs = fn(b, *vals)
    return b.build(outs if isinstance(outs, (list, tuple)) else [outs])


def agree(graph, feeds, native=None, threads=None, rtol=1e-5, atol=1e-6):
    got = glow.compile(graph, "cpu", native=native, threads=threads).run(feeds)
    want = glow.compile(graph, "reference").run(feeds)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def rand(shape, dtype, rng=None):
    rng = rng or np.random.default_rng(0)
    d = np.dtype(dtype)
    if d == np.bool_:
        return rng.random(shape) > 0.5
    if d.kind in "iu":
        return rng.integers(-50 if d.kind == "i" else 0, 50, shape).astype(d)
    return rng.standard_normal(shape).astype(d)


# -- the backend and its kernel table -------------------------------------------------------------

def test_cpu_is_available_and_the_default():
    assert "cpu" in glow.available_backends()
    from glow.plugins import registry

    assert registry().default().name == "cpu"


def test_every_floor_primitive_has_a_kernel():
    table = codegen.load_kernels()
    missing = [op for op in floor_ops() if ("", op) not in table and op != "Constant"]
    assert not missing


def test_device_reports_measured_figures():
    from glow.plugins import registry

    be = registry().get("cpu")
    (dev,) = be.devices()
    assert dev.id == "cpu:0" and dev.peak_gflops > 1 and dev.mem_bandwidth_gbs > 0.1
    assert dev.extra["threads"] >= 1 and dev.extra["cpu"]
    assert len(be.native_ops()) >= 40  # asked of the backend: listing devices imports no kernel


def test_registering_a_kernel_for_an_unknown_op_raises():
    with pytest.raises(Exception, match="unknown op"):
        codegen.cpu_kernel("NoSuchOp")(lambda cg, instr: None)


def test_one_module_with_one_entry():
    g = build(lambda b, x: b.add1("Exp", [b.add1("Add", [x, x])]), ("x", (4, 5), "float32"))
    exe = glow.compile(g, "cpu")
    text = exe.program.module_text
    assert 'define void @"glow_run"(ptr' in text or "define void @glow_run(ptr" in text
    public = [ln for ln in text.splitlines() if ln.startswith("define") and "internal" not in ln]
    assert len(public) == 1


# -- elementwise ----------------------------------------------------------------------------------

FLOAT_UNARY = ["Exp", "Log", "Sqrt", "Sin", "Erf", "Floor", "Atan", "Tanh", "Sigmoid", "Neg", "Abs",
               "Ceil", "Reciprocal", "Cos", "Relu"]


@pytest.mark.parametrize("op", FLOAT_UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_unary(op, dtype):
    x = rand((3, 37), dtype)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + np.asarray(0.1, dtype)
    g = build(lambda b, v: b.add1(op, [v]), ("x", x.shape, dtype))
    agree(g, {"x": x}, rtol=2e-3 if dtype == "float16" else 2e-6, atol=1e-6)


BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
NUMERIC = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64", "uint64"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_broadcasting(op, dtype):
    a, b_ = rand((2, 3, 17), dtype), rand((3, 1), dtype, np.random.default_rng(1))
    g = build(lambda b, x, y: b.add1(op, [x, y]), ("a", a.shape, dtype), ("b", b_.shape, dtype))
    agree(g, {"a": a, "b": b_}, rtol=2e-3 if dtype == "float16" else 1e-6)


def test_integer_division_by_zero_and_overflow_do_not_trap():
    a = np.array([7, -7, -128, 5, 0], np.int8)
    b_ = np.array([2, 2, -1, 0, 0], np.int8)
    g = build(lambda b, x, y: b.add1("Div", [x, y]), ("a", (5,), "int8"), ("b", (5,), "int8"))
    out = glow.compile(g, "cpu").run({"a": a, "b": b_})
    assert list(out[g.output_names[0]]) == [3, -3, -128, 0, 0]


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_compare(op, dtype):
    a, b_ = rand((4, 20), dtype), rand((4, 20), dtype, np.random.default_rng(3))
    b_[:, :5] = a[:, :5]
    g = build(lambda b, x, y: b.add1(op, [x, y]), ("a", a.shape, dtype), ("b", b_.shape, dtype))
    agree(g, {"a": a, "b": b_})


def test_logic_where_and_bitwise():
    c, d = rand((5, 18), "bool"), rand((5, 18), "bool", np.random.default_rng(2))
    g = build(lambda b, x, y: [b.add1("And", [x, y]), b.add1("Not", [x]),
                               b.add1("Where", [x, b.add1("Cast", [y], {"to": dt.float32}),
                                                b.constant(np.float32(-1))])],
              ("c", c.shape, "bool"), ("d", d.shape, "bool"))
    agree(g, {"c": c, "d": d})
    u, v = rand((40,), "uint32"), (rand((40,), "uint32") % 40).astype(np.uint32)
    g = build(lambda b, x, y: [b.add1(op, [x, y]) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")]
              + [b.add1("BitwiseNot", [x]), b.add1("BitShift", [x, y], {"direction": "LEFT"}),
                 b.add1("BitShift", [x, y], {"direction": "RIGHT"})],
              ("u", (40,), "uint32"), ("v", (40,), "uint32"))
    agree(g, {"u": u, "v": v})


CAST_TYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool"]


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_cast(src, dst):
    x = (rand((3, 21), src) * (3 if src != "bool" else 1)).astype(src)
    g = build(lambda b, v: b.add1("Cast", [v], {"to": dt.from_name(dst)}), ("x", x.shape, src))
    agree(g, {"x": x}, rtol=1e-3)


NARROW = ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "int4", "uint4",
          "int2", "uint2"]


@pytest.mark.parametrize("fmt", NARROW)
@pytest.mark.parametrize("saturate", [0, 1])
def test_narrow_formats_round_trip_like_the_reference(fmt, saturate):
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 448, 460, 464, 57344, 61440, 6, 7, 1e6, 0.75, 2.5, -3.5,
               2**-9, 3 * 2**-10, 1e-9, 17.5]
    x = np.concatenate([np.array(special, np.float32), rand((300,), "float32") * 40]).astype(np.float32)
    to = dt.from_name(fmt)
    g = build(lambda b, v: b.add1("Cast", [b.add1("Cast", [v], {"to": to, "saturate": saturate})],
                                  {"to": dt.float32}), ("x", x.shape, "float32"))
    got = glow.compile(g, "cpu").run({"x": x})[g.output_names[0]]
    want = glow.compile(g, "reference").run({"x": x})[g.output_names[0]]
    np.testing.assert_array_equal(got, want)


def test_bfloat16_rounds_every_op_like_ml_dtypes():
    import ml_dtypes

    x = rand((4, 33), "float32").astype(ml_dtypes.bfloat16)
    g = build(lambda b, v: b.add1("Mul", [b.add1("Add", [v, v]), v]), ("x", x.shape, "bfloat16"))
    agree(g, {"x": x}, rtol=0, atol=0)


def test_pow_integer_and_float():
    x, y = np.array([2, -3, 5, 7], np.int64), np.array([3, 2, 0, -1], np.int64)
    g = build(lambda b, a, c: b.add1("Pow", [a, c]), ("x", (4,), "int64"), ("y", (4,), "int64"))
    agree(g, {"x": x, "y": y})
    f = np.abs(rand((30,), "float32")) + 0.5
    g = build(lambda b, a: b.add1("Pow", [a, b.constant(np.float32(1.7))]), ("x", (30,), "float32"))
    agree(g, {"x": f})


# -- reductions, movement, gather, matmul ---------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("axes", [[0], [1], [2], [0, 2], [1, 2], [0, 1, 2], []])
@pytest.mark.parametrize("keep", [0, 1])
def test_reductions(op, axes, keep):
    x = (rand((3, 5, 19), "float32") * 0.5).astype(np.float32)
    g = build(lambda b, v: b.add1(op, [v, b.constant(np.array(axes, np.int64))] if axes else [v],
                                  {"keepdims": keep}), ("x", x.shape, "float32"))
    agree(g, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float16", "float64"])
def test_reductions_other_types(dtype):
    x = rand((4, 6, 40), dtype)
    for axes in ([1], [2], [0, 2]):
        g = build(lambda b, v, axes=axes: [b.add1(op, [v, b.constant(np.array(axes, np.int64))])
                                           for op in ("ReduceSum", "ReduceMax", "ReduceMin")],
                  ("x", x.shape, dtype))
        agree(g, {"x": x}, rtol=2e-3 if dtype == "float16" else 1e-6, atol=1e-2 if dtype == "float16" else 0)


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 1], [2, 1, 0]])
def test_transpose(perm):
    x = rand((3, 4, 18), "float32")
    g = build(lambda b, v: b.add1("Transpose", [v], {"perm": perm}), ("x", x.shape, "float32"))
    agree(g, {"x": x})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [0], [1]), ([-1], [-100], [1], [-2]), ([0, 2], [9, 17], [1, 2], [3, 5]),
    ([5], [1000], [2], [1]), ([2, 0], [0, 4], [0, 1], [-1, 2])])
def test_slice(starts, ends, axes, steps):
    x = rand((4, 9, 20), "int64")
    c = [np.array(v, np.int64) for v in (starts, ends, axes, steps)]
    g = build(lambda b, v: b.add1("Slice", [v] + [b.constant(a) for a in c]), ("x", x.shape, "int64"))
    agree(g, {"x": x})


def test_pad_concat_expand_gather():
    x = rand((2, 3, 5), "float32")
    idx = np.array([[0, -1], [2, 1]], np.int64)

    def fn(b, v, i):
        pad = b.add1("Pad", [v, b.constant(np.array([0, 1, 2, 1, -1, 0], np.int64)),
                             b.constant(np.float32(7.5))])
        cat = b.add1("Concat", [v, v, v], {"axis": 1})
        exp = b.add1("Expand", [b.add1("Slice", [v] + [b.constant(np.array(a, np.int64)) for a in
                                                        ([0], [1], [2])]),
                                b.constant(np.array([4, 2, 3, 5], np.int64))])
        return [pad, cat, exp, b.add1("Gather", [v, i], {"axis": 1}), b.add1("Gather", [v, i], {"axis": 2})]

    agree(build(fn, ("x", x.shape, "float32"), ("i", idx.shape, "int64")), {"x": x, "i": idx})


def test_a_constant_node_left_in_the_graph_is_copied_out():
    g = build(lambda b, v: [b.add1("Constant", [], {"value": np.arange(6, dtype=np.int32).reshape(2, 3)}),
                            b.add1("Neg", [v])], ("x", (2,), "float32"))
    agree(g, {"x": np.ones(2, np.float32)})


def test_gather_out_of_range_index_is_an_error_not_a_clamp():
    # ONNX makes it an error; more cases on every backend in test_index_checks.py
    g = build(lambda b, v, i: b.add1("Gather", [v, i]), ("x", (4, 3), "float32"), ("i", (3,), "int64"))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.raises(glow.InputError, match=r"index 1000000000000 is out of range for a dim of 4"):
        glow.compile(g, "cpu").run({"x": x, "i": np.array([10**12, -10**12, 3], np.int64)})


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("shapes", [((5, 7), (7, 19)), ((2, 1, 3, 4), (3, 4, 6)), ((7,), (7, 3)),
                                    ((2, 4, 5), (5,))])
def test_matmul(dtype, shapes, native=None):
    a, b_ = rand(shapes[0], dtype), rand(shapes[1], dtype, np.random.default_rng(4))
    g = build(lambda b, x, y: b.add1("MatMul", [x, y]), ("a", a.shape, dtype), ("b", b_.shape, dtype))
    agree(g, {"a": a, "b": b_}, rtol=1e-4, atol=1e-4)
    agree(g, {"a": a, "b": b_}, native="floor", rtol=1e-4, atol=1e-4)


# -- random graphs, CPU vs reference ------------------------------------------------------------

UNARY_OK = ["Exp", "Sin", "Floor", "Atan", "Tanh", "Sigmoid", "Neg", "Abs", "Relu", "Erf"]
BINARY_OK = ["Add", "Sub", "Mul", "Max", "Min"]


@st.composite
def elementwise_graphs(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    n_in = draw(st.integers(1, 3))
    in_shapes = [tuple(1 if draw(st.booleans()) else d for d in shape[draw(st.integers(0, rank - 1)):])
                 for _ in range(n_in - 1)]
    steps = draw(st.lists(st.tuples(st.sampled_from(UNARY_OK + BINARY_OK), st.integers(0, 10)), min_size=1,
                          max_size=8))
    return shape, in_shapes, steps


@FAST
@given(elementwise_graphs(), st.sampled_from([None, "floor"]), st.sampled_from([1, 2]))
def test_random_elementwise_graphs(spec, native, threads):
    shape, in_shapes, steps = spec

    def fn(b, *xs):
        vals = list(xs)
        for op, k in steps:
            if op in UNARY_OK:
                vals.append(b.add1(op, [vals[k % len(vals)]]))
            else:
                vals.append(b.add1(op, [vals[-1], vals[k % len(vals)]]))
        return [vals[-1]]

    ins = [("x", shape, "float32")] + [(f"y{k}", s, "float32") for k, s in enumerate(in_shapes)]
    feeds = {n: rand(s, "float32", np.random.default_rng(k)) for k, (n, s, _) in enumerate(ins)}
    agree(build(fn, *ins), feeds, native=native, threads=threads, rtol=1e-4, atol=1e-5)


@FAST
@given(st.lists(st.integers(1, 12), min_size=1, max_size=4), st.data(),
       st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"]), st.sampled_from([0, 1]))
def test_random_reductions(shape, data, op, keep):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape),
                              max_size=len(shape)))
    x = (rand(tuple(shape), "float32") * 0.7).astype(np.float32)
    g = build(lambda b, v: b.add1(op, [v, b.constant(np.array(axes, np.int64))] if axes else [v],
                                  {"keepdims": keep}), ("x", x.shape, "float32"))
    # a sum of thousands of terms that nearly cancel is exact only to float32's rounding of the
    # terms' magnitudes (hypothesis found 6,336 summing to -0.0017: 1.1e-5 apart in summation order)
    atol = max(1e-5, 1e-6 * float(np.abs(x).sum())) if op == "ReduceSum" else 1e-5
    agree(g, {"x": x}, rtol=1e-4, atol=atol)


@FAST
@given(st.integers(1, 40), st.integers(1, 70), st.integers(1, 50), st.integers(0, 2), st.booleans(),
       st.sampled_from([None, "floor"]))
def test_random_matmul(m, k, n, batch, const_b, native):
    a = rand((batch + 1, m, k) if batch else (m, k), "float32")
    w = rand((k, n), "float32", np.random.default_rng(5))

    def fn(bld, x, *rest):
        return bld.add1("MatMul", [x, bld.constant(w) if const_b else rest[0]])

    ins = [("a", a.shape, "float32")] + ([] if const_b else [("w", w.shape, "float32")])
    feeds = {"a": a} if const_b else {"a": a, "w": w}
    agree(build(fn, *ins), feeds, native=native, rtol=1e-4, atol=1e-4)


@FAST
@given(st.integers(1, 2), st.integers(1, 9), st.integers(4, 14), st.integers(1, 12), st.integers(1, 3),
       st.integers(1, 2), st.integers(0, 2), st.integers(1, 2), st.booleans(), st.sampled_from([None, "floor"]))
def test_random_conv(n, cin, hw, cout, k, stride, pad, dil, depthwise, native):
    groups = cin if depthwise else 1
    cout = cin if depthwise else cout
    if hw + 2 * pad < dil * (k - 1) + 1:
        return
    x = rand((n, cin, hw, hw), "float32")
    w = rand((cout, cin // groups, k, k), "float32", np.random.default_rng(6))
    bias = rand((cout,), "float32", np.random.default_rng(7))
    attrs = {"strides": [stride] * 2, "pads": [pad] * 4, "dilations": [dil] * 2, "group": groups,
             "kernel_shape": [k, k]}
    g = build(lambda b, v: b.add1("Relu", [b.add1("Conv", [v, b.constant(w), b.constant(bias)], attrs)]),
              ("x", x.shape, "float32"))
    agree(g, {"x": x}, native=native, rtol=1e-4, atol=1e-4)


# -- running: input checks, threads, cache, specialisation, refusals ------------------------------

def test_wrong_inputs_are_refused_before_the_native_call():
    g = build(lambda b, v: b.add1("Exp", [v]), ("x", (2, 3), "float32"))
    exe = glow.compile(g, "cpu")
    with pytest.raises(InputError, match="element type"):
        exe.run({"x": np.zeros((2, 3), np.float64)})
    with pytest.raises(InputError, match="shape"):
        exe.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(InputError, match="shape"):
        exe.program.run({"x": np.zeros((2, 4), np.float32)})  # the program checks on its own too
    with pytest.raises(InputError, match="missing"):
        exe.run({})
    with pytest.raises(InputError, match="unknown"):
        exe.run({"x": np.zeros((2, 3), np.float32), "z": np.zeros(1)})
    strided = np.ones((2, 6), np.float32)[:, ::2]  # not contiguous: copied, not misread
    np.testing.assert_allclose(exe.run({"x": strided})[g.output_names[0]], np.e, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_agree(threads):
    x = rand((64, 1100), "float32")
    g = build(lambda b, v: [b.add1("ReduceSum", [b.add1("Exp", [v]), b.constant(np.array([1]))]),
                            b.add1("Transpose", [b.add1("Sigmoid", [v])], {"perm": [1, 0]})],
              ("x", x.shape, "float32"))
    agree(g, {"x": x}, threads=threads, rtol=1e-5, atol=1e-4)


def test_an_epilogue_pass_waits_for_every_thread_of_its_kernel():
    # float64 MatMul has no fused-epilogue kernel: the bias is a second pass, split differently
    a, w, bias = rand((96, 300), "float64"), rand((300, 160), "float64"), rand((160,), "float64")
    g = build(lambda b, x: b.add1("Add", [b.add1("MatMul", [x, b.constant(w)]), b.constant(bias)]),
              ("a", a.shape, "float64"))
    exe = glow.compile(g, "cpu", threads=2)
    for _ in range(5):
        np.testing.assert_allclose(exe.run({"a": a})[g.output_names[0]], a @ w + bias, rtol=1e-10)


def test_generic_matmuls_of_other_shapes_share_one_kernel():
    # the plain loop nest (float64, int32, float16) reads its sizes and batch strides from a
    # table: four MatMuls of four shapes build one kernel per element type and batch rank (0, 2)
    cases = [((3, 5), (5, 7)), ((2, 4, 6), (6, 3)), ((2, 1, 3, 4), (5, 4, 2)), ((9,), (9, 4))]
    for dtype in ("float64", "int32", "float16"):
        shapes = [(f"a{k}", sa, dtype) for k, (sa, _) in enumerate(cases)]
        weights = [rand(sb, dtype, np.random.default_rng(k)) for k, (_, sb) in enumerate(cases)]
        g = build(lambda b, *xs, ws=weights: [b.add1("MatMul", [x, b.constant(w)]) for x, w in zip(xs, ws)],
                  *shapes)
        feeds = {n: rand(s, d, np.random.default_rng(9 + k)) for k, (n, s, d) in enumerate(shapes)}
        exe = glow.compile(g, "cpu")
        got = exe.run(feeds)
        for (n, _, _), w, out in zip(shapes, weights, g.output_names):
            want = np.matmul(feeds[n].astype(np.float32 if dtype == "float16" else dtype), w.astype(
                np.float32 if dtype == "float16" else dtype)).astype(dtype)
            np.testing.assert_allclose(got[out], want, rtol=2e-3 if dtype == "float16" else 1e-12)
        kernels = [line for line in exe.program.module_text.splitlines()
                   if line.startswith("define") and "MatMul" in line]
        assert len(kernels) == 2, (dtype, kernels)


def test_compile_cache_cold_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    g = build(lambda b, v: b.add1("Tanh", [b.add1("Mul", [v, v])]), ("x", (7, 9), "float32"))
    first, second = glow.compile(g, "cpu"), glow.compile(g, "cpu")
    assert not first.stats["cached"] and second.stats["cached"]
    x = rand((7, 9), "float32")
    np.testing.assert_array_equal(first.run({"x": x})[g.output_names[0]], second.run({"x": x})[g.output_names[0]])


def test_dynamic_shapes_are_specialised_per_signature():
    b = GraphBuilder("dyn")
    x = b.input("x", dt.TensorType(("N", 5), dt.float32))
    g = b.build([b.add1("ReduceSum", [b.add1("Exp", [x]), b.constant(np.array([1]))])])
    exe = glow.compile(g, "cpu")
    for n in (1, 7, 1):
        v = rand((n, 5), "float32")
        np.testing.assert_allclose(exe.run({"x": v})[g.output_names[0]], np.exp(v).sum(1, keepdims=True),
                                   rtol=1e-5)
    assert exe.stats["compiles"] == 2 and exe.stats["specializations"] == 2


def test_ops_the_cpu_cannot_run_fail_a_strict_compile_with_a_lowering_error():
    g = build(lambda b, v: b.add1("NonZero", [v]), ("x", (4,), "float32"))
    with pytest.raises(LoweringError, match="NonZero"):
        glow.compile(g, "cpu", strict=True)


def test_cli_run_on_cpu(tmp_path):
    from helpers import EXAMPLE_MODEL

    x = np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32)
    np.savez(tmp_path / "in.npz", image=x)
    r = subprocess.run([sys.executable, "-m", "glow.cli", "run", EXAMPLE_MODEL, "--backend", "cpu",
                        "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = glow.compile(EXAMPLE_MODEL, "reference").run({"image": x})
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-4, atol=1e-6)


def test_cli_backends_lists_cpu_with_its_device():
    r = subprocess.run([sys.executable, "-m", "glow.cli", "backends", "--probe"], capture_output=True, text=True)
    assert r.returncode == 0 and "cpu" in r.stdout and "cpu:0" in r.stdout
    # without --probe: listed, its devices not asked for (LLVM's start-up is not paid)
    r = subprocess.run([sys.executable, "-m", "glow.cli", "backends"], capture_output=True, text=True)
    assert r.returncode == 0 and "cpu          available" in r.stdout and "cpu:0" not in r.stdout
    assert "glow backends --probe" in r.stdout


@pytest.mark.parametrize("fmt,bits,signed", [("int4", 4, True), ("uint4", 4, False), ("int2", 2, True),
                                             ("uint2", 2, False)])
def test_float_to_narrow_int_is_glows_rule_not_ml_dtypes(fmt, bits, signed):
    """Out-of-range float -> int4/int2 is undefined in ONNX; glow's rule (truncate toward zero, a
    value out of range, NaN and infinities give 0, as onnx.reference does) must not follow the
    installed ml_dtypes version (0.5 wrapped)."""
    import math

    vals = [0.0, 1.9, -1.9, 7.5, 8.0, -8.9, -9.0, 3.99, 17.5, 200.0, -200.7, 1e6, 3e9, np.nan, np.inf, -np.inf]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    def rule(v):
        return math.trunc(v) if math.isfinite(v) and lo <= math.trunc(v) <= hi else 0

    x = np.array(vals, np.float32)
    to = dt.from_name(fmt)
    g = build(lambda b, v: b.add1("Cast", [b.add1("Cast", [v], {"to": to})], {"to": dt.float32}),
              ("x", x.shape, "float32"))
    want = np.array([rule(float(v)) for v in x], np.float32)
    for backend in ("reference", "cpu"):
        got = glow.compile(g, backend).run({"x": x})[g.output_names[0]]
        np.testing.assert_array_equal(got, want, err_msg=backend)


def test_float64_to_float8_rounds_once():
    """1.0625 + 2^-40 lies just above an e4m3fn halfway point: a plain float64 -> float32 step
    would make it the tie (rounded down to even); glow rounds once, up to 1.125."""
    x = np.array([1.0625 + 2.0 ** -40, -1.0625 - 2.0 ** -40, 1.0625], np.float64)
    g = build(lambda b, v: b.add1("Cast", [b.add1("Cast", [v], {"to": dt.float8e4m3fn})], {"to": dt.float32}),
              ("x", x.shape, "float64"))
    for backend in ("reference", "cpu"):
        got = glow.compile(g, backend).run({"x": x})[g.output_names[0]]
        np.testing.assert_array_equal(got, np.float32([1.125, -1.125, 1.0]), err_msg=backend)


# -- issue 14 finding 7: fused bodies hold only what the expression emitter computes -------------

def _ids_matmul_gelu(tail: str, opset: int = 20):
    """Token ids -> Gather -> MatMul -> Add(bias) -> a Gelu (the op, its tanh form, the erf pattern
    exporters write, or Gelu -> Relu). Eight int64 ids make every value input-determined: the
    backend deferred Gelu (instead of lowering it), the fuser put it in an epilogue."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, n)
             for n, s in (("E", (50, 16)), ("W", (16, 32)), ("B", (32,)))]
    nodes = [helper.make_node("Gather", ["E", "ids"], ["x"]), helper.make_node("MatMul", ["x", "W"], ["mm"]),
             helper.make_node("Add", ["mm", "B"], ["a"])]
    if tail == "erf":
        inits += [numpy_helper.from_array(np.array(v, np.float32), n)
                  for n, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
        nodes += [helper.make_node("Div", ["a", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["a", "p"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    elif tail == "gather-gelu-relu":  # no producer: a plain fused elementwise chain
        nodes = [nodes[0], helper.make_node("Gelu", ["x"], ["g"]), helper.make_node("Relu", ["g"], ["y"])]
    else:
        nodes.append(helper.make_node("Gelu", ["a"], ["y"], approximate=tail))
    out = [1, 8, 16] if tail == "gather-gelu-relu" else [1, 8, 32]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("tail,opset", [("none", 20), ("tanh", 20), ("erf", 17), ("gather-gelu-relu", 20)])
def test_gelu_after_matmul_is_never_fused_into_code_without_an_emitter(tail, opset):
    from glow import CompileOptions
    from glow.backends.cpu.kernels.elementwise import emits
    from glow.flow import optimize_for_backend
    from glow.passes import fuse_for_backend
    from glow.passes.fusion import FUSED_OPS
    from glow.plugins import registry

    model = _ids_matmul_gelu(tail, opset)
    ids = np.random.default_rng(1).integers(0, 50, (1, 8)).astype(np.int64)
    want = glow.compile(model, "reference").run({"ids": ids})["y"]
    exe = glow.compile(model, "cpu")
    got = exe.run({"ids": ids})["y"]  # was: KeyError 'Gelu' from ewops.apply
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # Float data decided by the ids is lowered now, not folded into a program per ids value.
    assert exe.program is not None  # one static program: nothing specialised on the ids
    be = registry().get("cpu")
    g = optimize_for_backend(glow.load_onnx(model), be)
    # The fuser itself, on the imported graph (its Gelu still the op): the cpu backend's fusion
    # requests fuse only what ewops' table emits, whatever the graph holds.
    fused = fuse_for_backend(glow.load_onnx(model), be)
    for graph in (g, fused):
        for node in graph.nodes:
            if node.op in FUSED_OPS:
                body = node.attrs["body"].nodes
                members = body[1:] if node.op.name == "FusedKernel" else body
                assert all(emits(m) for m in members), [m.op.name for m in members]
    if tail in ("none", "tanh"):
        assert any(n.op.name == "Gelu" for n in fused.nodes)  # left out of every fused node
        np.testing.assert_allclose(be.compile(fused, CompileOptions()).run({"ids": ids})["y"], want,
                                   rtol=1e-5, atol=1e-6)
