"""Out-of-range data indices are an error on every backend (ONNX's rule), never a clamp, a wrap
to 32 bits or a read of another row (issue 14, finding 4).

Each indexing op runs on the reference, reference-ir (the instruction IR interpreted), cpu, cpu
with only the floor (`native="floor"`: the ops lower to floor Gathers) and opencl (skipped
without a platform). A bad index must raise an
InputError naming the node, the index and the bound after the run; valid negative indices must
still give onnx.reference's answer; the executable must work again on the next good run; a
constant bad index is a GraphError when the model is loaded.
"""

from __future__ import annotations

import shutil
import subprocess

import glow
import numpy as np
import onnx
import pytest
from helpers import opencl_unavailable_reason
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

OPENCL = opencl_unavailable_reason()
BACKENDS = [
    pytest.param(("reference", None), id="reference"),
    pytest.param(("reference-ir", None), id="reference-ir"),
    pytest.param(("cpu", None), id="cpu"),
    pytest.param(("cpu", "floor"), id="cpu-floor"),
    pytest.param(("opencl", None), id="opencl", marks=[
        pytest.mark.opencl, pytest.mark.skipif(OPENCL is not None, reason=f"no OpenCL: {OPENCL}")]),
]
NODE = "picker"
F32 = np.float32


def _model(op, inputs, attrs=None, opset=18, consts=()):
    """One `op` node named NODE; inputs: [(name, TensorProto type, shape)]; consts: initializers."""
    names = [n for n, _, _ in inputs] + [c.name for c in consts]
    node = h.make_node(op, names, ["y"], name=NODE, **(attrs or {}))
    graph = h.make_graph([node], "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=list(consts))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _data(*shape):
    return np.arange(np.prod(shape), dtype=F32).reshape(shape) + 1


#: op, attrs, input specs, data feeds, the index input's name, good indices (negatives included),
#: bad indices and the bound named in the error.
CASES = {
    "Gather": ("Gather", {"axis": 1}, [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2])],
               {"x": _data(3, 4)}, "i", [-1, -4], [[0, 4], [-5, 1]], 4),
    "Gather-int32": ("Gather", {"axis": 0}, [("x", T.FLOAT, [3, 4]), ("i", T.INT32, [2])],
                     {"x": _data(3, 4)}, "i", np.array([-3, 2], np.int32),
                     [np.array([3, 0], np.int32), np.array([0, -4], np.int32)], 3),
    # a bad row index on axis 0 would read another row's element in a flattened gather
    "GatherElements": ("GatherElements", {"axis": 0}, [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2, 4])],
                       {"x": _data(3, 4)}, "i", [[0, -1, 2, -3], [1, 1, -2, 0]],
                       [[[0, 1, 2, 3], [3, 0, 0, 0]], [[0, 0, -4, 0], [0, 0, 0, 0]]], 3),
    "GatherND": ("GatherND", {}, [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2, 2])],
                 {"x": _data(3, 4)}, "i", [[-1, -4], [2, 3]], [[[0, 4], [1, 1]], [[1, 1], [-4, 0]]],
                 None),  # the bound depends on the column: checked per case below
    "GatherND-batch": ("GatherND", {"batch_dims": 1}, [("x", T.FLOAT, [2, 3, 4]), ("i", T.INT64, [2, 1])],
                       {"x": _data(2, 3, 4)}, "i", [[-1], [2]], [[[3], [0]], [[0], [-4]]], 3),
    "ScatterElements": ("ScatterElements", {"axis": 1},
                        [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [3, 1]), ("u", T.FLOAT, [3, 1])],
                        {"x": _data(3, 4), "u": -_data(3, 1)}, "i", [[-1], [0], [-4]],
                        [[[4], [0], [0]], [[0], [-5], [0]]], 4),
    "ScatterElements-add": ("ScatterElements", {"axis": 0, "reduction": "add"},
                            [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [1, 4]), ("u", T.FLOAT, [1, 4])],
                            {"x": _data(3, 4), "u": _data(1, 4)}, "i", [[-1, 0, -3, 2]],
                            [[[0, 3, 0, 0]]], 3),
    "Scatter": ("Scatter", {"axis": 0}, [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [1, 4]),
                                         ("u", T.FLOAT, [1, 4])],
                {"x": _data(3, 4), "u": _data(1, 4)}, "i", [[-1, 0, 2, -2]], [[[0, 0, 0, 3]]], 3),
    "ScatterND": ("ScatterND", {}, [("x", T.FLOAT, [4, 3]), ("i", T.INT64, [2, 1]),
                                    ("u", T.FLOAT, [2, 3])],
                  {"x": _data(4, 3), "u": -_data(2, 3)}, "i", [[-1], [1]], [[[4], [0]], [[0], [-5]]], 4),
}
OPSET = {"Scatter": 10}


def _feeds(case, idx):
    _, _, inputs, data, name, *_ = case
    itype = dict((n, t) for n, t, _ in inputs)[name]
    return {**data, name: np.asarray(idx, np.int32 if itype == T.INT32 else np.int64)}


def _compile(model, backend):
    be, native = backend
    return glow.compile(model, backend=be, native=native)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", sorted(CASES))
def test_bad_index_is_an_input_error(key, backend):
    case = CASES[key]
    op, attrs, inputs, _, _, good, bads, bound = case
    model = _model(op, inputs, attrs, OPSET.get(key, 18))
    exe = _compile(model, backend)
    # onnx.reference has no Scatter: its successor ScatterElements means the same
    oracle = model if op != "Scatter" else _model("ScatterElements", inputs, attrs)
    want = ReferenceEvaluator(oracle).run(None, _feeds(case, good))[0]
    np.testing.assert_array_equal(exe.run(_feeds(case, good))["y"], want)  # negatives wrap
    for bad in bads:
        arr = np.asarray(bad, np.int64)
        ok = _in_range(key, arr)
        worst = int(arr.reshape(-1)[~ok.reshape(-1)][0])
        b = bound if bound is not None else (3 if worst in (-4, 3) else 4)  # GatherND: per column
        with pytest.raises(glow.InputError) as e:
            exe.run(_feeds(case, bad))
        msg = str(e.value)
        assert f"'{NODE}" in msg and f"index {worst} " in msg and f"dim of {b} " in msg, msg
        # the record is cleared: the same executable answers the next good run
        np.testing.assert_array_equal(exe.run(_feeds(case, good))["y"], want)


def _in_range(key, arr):
    _, attrs, inputs, data, name, *_ = CASES[key]
    shape = next(s for n, _, s in inputs if n == "x")
    if key.startswith("GatherND"):
        b = attrs.get("batch_dims", 0)
        dims = np.asarray(shape[b:b + arr.shape[-1]])
        return (arr >= -dims) & (arr < dims)
    if key == "ScatterND":
        dims = np.asarray(shape[:arr.shape[-1]])
        return (arr >= -dims) & (arr < dims)
    d = shape[attrs.get("axis", 0)]
    return (arr >= -d) & (arr < d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_index_is_not_truncated(backend):
    """2**32 + 1 is out of range, not element 1 (an int64 index cast to 32-bit int is)."""
    model = _model("Gather", [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [1])], {"axis": 0})
    exe = _compile(model, backend)
    for bad in (2**32 + 1, -(2**32) + 1, 2**62):
        with pytest.raises(glow.InputError, match=f"'{NODE}.*index {bad} .*dim of 3 "):
            exe.run({"x": _data(3, 4), "i": np.array([bad], np.int64)})


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.id != "cpu-floor"])  # no lowering
def test_max_unpool_bad_index(backend):
    model = _model("MaxUnpool", [("x", T.FLOAT, [1, 1, 2, 2]), ("i", T.INT64, [1, 1, 2, 2])],
                   {"kernel_shape": [2, 2], "strides": [2, 2]})
    exe = _compile(model, backend)
    x = _data(1, 1, 2, 2)
    good = np.array([0, 3, 9, 15], np.int64).reshape(1, 1, 2, 2)
    want = ReferenceEvaluator(model).run(None, {"x": x, "i": good})[0]
    np.testing.assert_array_equal(exe.run({"x": x, "i": good})["y"], want)
    for bad in (16, -1, 2**32 + 3):
        idx = good.copy()
        idx.reshape(-1)[2] = bad
        with pytest.raises(glow.InputError, match=f"'{NODE}'.*index {bad} .*dim of 16 "):
            exe.run({"x": x, "i": idx})
    np.testing.assert_array_equal(exe.run({"x": x, "i": good})["y"], want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_hot_out_of_range_is_all_off(backend):
    """OneHot is the exception: ONNX defines an index outside [-depth, depth - 1] as all off."""
    depth = onnx.numpy_helper.from_array(np.array(4, np.int64), "depth")
    values = onnx.numpy_helper.from_array(np.array([0, 1], F32), "values")
    model = _model("OneHot", [("i", T.INT64, [5])], consts=(depth, values))
    idx = np.array([1, -1, 4, -5, 2**32 + 1], np.int64)
    want = ReferenceEvaluator(model).run(None, {"i": idx})[0]
    np.testing.assert_array_equal(_compile(model, backend).run({"i": idx})["y"], want)
    assert not want[2:].any()


@pytest.mark.parametrize("op,attrs,shape,idx", [
    ("Gather", {"axis": 1}, [3, 4], [0, 4]),
    ("GatherElements", {"axis": 0}, [3, 4], [[0, 3, 0, 0]]),
    ("GatherND", {}, [3, 4], [[1, -5]]),
    ("ScatterElements", {"axis": 0}, [3, 4], [[0, 3, 0, 0]]),
    ("ScatterND", {}, [3, 4], [[3]]),
])
def test_constant_bad_index_is_a_compile_error(op, attrs, shape, idx):
    const = onnx.numpy_helper.from_array(np.array(idx, np.int64), "i")
    inputs = [("x", T.FLOAT, shape)]
    if op.startswith("Scatter"):
        n = np.array(idx).shape[:-1] + tuple(shape[1:]) if op == "ScatterND" else np.array(idx).shape
        inputs.append(("u", T.FLOAT, list(n)))
        node = h.make_node(op, ["x", "i", "u"], ["y"], name=NODE, **attrs)
    else:
        node = h.make_node(op, ["x", "i"], ["y"], name=NODE, **attrs)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=[const])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    with pytest.raises(glow.GraphError, match=f"node '{NODE}'.*index -?[0-9]+ is out of range"):
        glow.load_onnx(model)


def test_cpu_cached_program_still_checks(tmp_path, monkeypatch):
    """The second compile of a model loads the object from the disk cache: the record is found
    by its symbol there too."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    model = _model("Gather", [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2])], {"axis": 0})
    for _ in range(2):
        exe = glow.compile(model, backend="cpu")
        with pytest.raises(glow.InputError, match="index 7 "):
            exe.run({"x": _data(3, 4), "i": np.array([0, 7], np.int64)})
    assert any(tmp_path.rglob("*")), "nothing was cached: the cached path went untested"


def test_cpu_threads_record_one_bad_index():
    """Many threads meeting bad indices at once: one error, naming one of them, never a crash."""
    model = _model("Gather", [("x", T.FLOAT, [64, 1024]), ("i", T.INT64, [4096])], {"axis": 0})
    exe = glow.compile(model, backend="cpu")
    idx = np.full(4096, 64, np.int64)
    idx[::2] = 1
    with pytest.raises(glow.InputError, match=r"index 64 .*dim of 64 "):
        exe.run({"x": np.ones((64, 1024), F32), "i": idx})
    good = np.arange(4096, dtype=np.int64) % 64
    np.testing.assert_array_equal(exe.run({"x": _data(64, 1024), "i": good})["y"], _data(64, 1024)[good])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("op,inputs,attrs", [
    ("Gather", [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2])], {"axis": 1}),
    ("MaxUnpool", [("x", T.FLOAT, [1, 1, 2, 2]), ("i", T.INT64, [1, 1, 2, 2])],
     {"kernel_shape": [2, 2], "strides": [2, 2]}),
])
def test_cuda_index_checks_compile(op, inputs, attrs, tmp_path):
    """CUDA's spelling of the record (atomicCAS, long long indices) compiles (no GPU needed)."""
    from glow.backends.cuda.backend import render_cuda_program

    src = render_cuda_program(glow.load_onnx(_model(op, inputs, attrs))).source
    assert "atomicCAS(" in src and ("long long k = " in src or "long long f = " in src)
    (tmp_path / "k.cu").write_text(src)
    res = subprocess.run(["nvcc", "--ptx", "-arch=sm_80", "-o", str(tmp_path / "k.ptx"),
                          str(tmp_path / "k.cu")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,inputs,attrs,data,name,good,bads,opset", [
    # a length past the time axis would read the next batch entry's steps
    ("ReverseSequence", [("x", T.FLOAT, [4, 2]), ("n", T.INT64, [2])], {"batch_axis": 1, "time_axis": 0},
     {"x": _data(4, 2)}, "n", [4, 0], [[5, 1], [1, -1]], 18),
    # linear mode: a window running past the cache's end (or a negative start) is an error
    ("TensorScatter", [("x", T.FLOAT, [2, 5, 3]), ("u", T.FLOAT, [2, 2, 3]), ("w", T.INT64, [2])],
     {"mode": "linear", "axis": 1}, {"x": _data(2, 5, 3), "u": -_data(2, 2, 3)}, "w", [3, 0],
     [[4, 0], [0, -1]], 24),
])
def test_lengths_and_window_starts_are_checked(op, inputs, attrs, data, name, good, bads, opset, backend):
    model = _model(op, inputs, attrs, opset)
    exe = _compile(model, backend)
    feeds = {**data, name: np.array(good, np.int64)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_array_equal(exe.run(feeds)["y"], want)
    for bad in bads:
        with pytest.raises(glow.InputError, match=f"'{NODE}"):
            exe.run({**data, name: np.array(bad, np.int64)})
    np.testing.assert_array_equal(exe.run(feeds)["y"], want)


def test_cpu_programs_keep_their_own_records():
    """Each program's record is its own module's symbol, not one process-wide global."""
    exes = {n: glow.compile(_model("Gather", [("x", T.FLOAT, [n, 4]), ("i", T.INT64, [2])]), backend="cpu")
            for n in (3, 5)}
    for n in (5, 3):
        with pytest.raises(glow.InputError, match=f"index 9 .*dim of {n} "):
            exes[n].run({"x": _data(n, 4), "i": np.array([0, 9], np.int64)})


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.id in ("cpu", "cpu-floor")])
def test_axis_too_long_for_a_table_is_still_checked(backend):
    """Past TABLE_LIMIT the lowering poisons bad offsets instead; the final Gather rejects them
    (naming the node; the index it reports is the poisoned offset)."""
    from glow.lowering.rules_index import TABLE_LIMIT

    d = TABLE_LIMIT + 1
    model = _model("GatherElements", [("x", T.FLOAT, [2, d]), ("i", T.INT64, [2, 3])], {"axis": 1})
    exe = _compile(model, backend)
    x = np.random.default_rng(0).random((2, d), dtype=F32)
    good = np.array([[0, -1, d - 1], [5, -d, 7]], np.int64)
    np.testing.assert_array_equal(exe.run({"x": x, "i": good})["y"], np.take_along_axis(x, good % d, 1))
    for bad in (d, -d - 1):
        idx = good.copy()
        idx[0, 1] = bad  # in range of the flattened data: it would read row 1
        with pytest.raises(glow.InputError, match=f"'{NODE}"):
            exe.run({"x": x, "i": idx})


# -- loss targets ----------------------------------------------------------------------------------
# NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss read input[n, target, d...]: the lowering
# computes a flat offset, so a target outside [0, C) read another row's entry (issue 14, finding 4).
# A target equal to ignore_index is never read, so it may be anything, in range or not.

LOSS_C = 3


def _loss_model(op, reduction, weighted, ignore_index, tind=T.INT64):
    inputs = [("x", T.FLOAT, [2, LOSS_C, 2]), ("t", tind, [2, 2])] + ([("w", T.FLOAT, [LOSS_C])] if weighted else [])
    attrs = {"reduction": reduction} | ({} if ignore_index is None else {"ignore_index": ignore_index})
    node = h.make_node(op, [n for n, _, _ in inputs], ["y"], name=NODE, **attrs)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,reduction,weighted,ignore_index,tind", [
    ("NegativeLogLikelihoodLoss", "mean", False, None, T.INT64),
    ("NegativeLogLikelihoodLoss", "sum", True, 5, T.INT64),  # an ignored target past C
    ("NegativeLogLikelihoodLoss", "none", True, -1, T.INT32),  # an ignored negative target
    ("NegativeLogLikelihoodLoss", "mean", True, 1, T.INT64),  # an ignored target in range
    ("SoftmaxCrossEntropyLoss", "mean", True, -7, T.INT64),
    ("SoftmaxCrossEntropyLoss", "none", False, None, T.INT32),
    ("SoftmaxCrossEntropyLoss", "sum", False, 1, T.INT64),
])
def test_loss_target_out_of_range(op, reduction, weighted, ignore_index, tind, backend):
    model = _loss_model(op, reduction, weighted, ignore_index, tind)
    exe = _compile(model, backend)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((2, LOSS_C, 2)).astype(F32)}
    if weighted:
        feeds["w"] = np.array([0.5, 2.0, 1.25], F32)
    itype = np.int32 if tind == T.INT32 else np.int64

    def run(targets):
        return exe.run({**feeds, "t": np.array(targets, itype)})["y"]

    ig = ignore_index
    good = [[0, 2], [1, 2] if ig is None else [ig, 2]]
    want = ReferenceEvaluator(model).run(None, {**feeds, "t": np.array(good, itype)})[0]
    np.testing.assert_allclose(run(good), want, rtol=1e-5, atol=1e-6)
    for bad in (LOSS_C, 7, 2**32 + 1, -1, -LOSS_C - 1):
        if bad == ig or (itype is np.int32 and bad > 2**31):
            continue
        targets = [[0, bad], [1, 2] if ig is None else [ig, 2]]
        with pytest.raises(glow.InputError) as e:
            run(targets)
        msg = str(e.value)
        assert f"'{NODE}" in msg and f"dim of {LOSS_C} " in msg, msg
        if bad >= 0:  # a negative target is reported as moved below -C by the native backends
            assert f"index {bad} " in msg, msg
        np.testing.assert_allclose(run(good), want, rtol=1e-5, atol=1e-6)  # the record was cleared


@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_only_ignored_targets_may_be_out_of_range(backend):
    """Every target ignored, far out of range: read by nobody, so a good run (sum 0)."""
    model = _loss_model("NegativeLogLikelihoodLoss", "sum", True, 2**40, T.INT64)
    exe = _compile(model, backend)
    feeds = {"x": np.ones((2, LOSS_C, 2), F32), "w": np.ones(LOSS_C, F32),
             "t": np.full((2, 2), 2**40, np.int64)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(exe.run(feeds)["y"], want)
    assert want == 0


@pytest.mark.parametrize("ignore_index,bad", [(None, LOSS_C), (5, -1)])
def test_loss_constant_bad_target_is_a_compile_error(ignore_index, bad):
    const = onnx.numpy_helper.from_array(np.array([[0, bad], [5, 1]], np.int64), "t")
    node = h.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name=NODE, reduction="sum",
                       **({} if ignore_index is None else {"ignore_index": ignore_index}))
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [2, LOSS_C, 2])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=[const])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    if ignore_index is None:  # 5 is out of range too: the first bad one is named
        with pytest.raises(glow.GraphError, match=f"node '{NODE}'.*index {bad} is out of range .*dim of 3 "):
            glow.load_onnx(model)
    else:
        with pytest.raises(glow.GraphError, match=f"node '{NODE}'.*index -1 is out of range .*valid: \\[0, 2\\]"):
            glow.load_onnx(model)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.id in ("cpu", "cpu-floor")])
def test_loss_classes_too_many_for_a_table_are_still_checked(backend):
    from glow.lowering.rules_index import TABLE_LIMIT

    c = TABLE_LIMIT + 1
    model = h.make_model(h.make_graph(
        [h.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name=NODE, reduction="none")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, c]), h.make_tensor_value_info("t", T.INT64, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, None)]), opset_imports=[h.make_opsetid("", 18)])
    exe = _compile(model, backend)
    x = np.random.default_rng(0).random((2, c), dtype=F32)
    good = np.array([c - 1, 3], np.int64)
    np.testing.assert_array_equal(exe.run({"x": x, "t": good})["y"], -x[[0, 1], good])
    for bad in ([c, 0], [-1, 0]):  # row 0's target c would read row 1's class 0
        with pytest.raises(glow.InputError, match=f"'{NODE}"):
            exe.run({"x": x, "t": np.array(bad, np.int64)})


@pytest.mark.parametrize("be", BACKENDS)
def test_gather_elements_indices_smaller_than_data_outside_the_axis(be):
    """out[i][j] = data[i][indices[i][j]]: outside the gathered axis the indices may be smaller
    than the data (onnxruntime takes them; onnx.reference refuses, docs/fuzzing.md). The reference
    raised (an IndexError inside NumPy) while cpu and opencl answered; every backend answers now.
    Larger indices there would read past the data: a GraphError when the model is built."""
    backend, native = be
    small = _model("GatherElements", [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [2, 2])], {"axis": 1})
    x, i = np.arange(12, dtype=F32).reshape(3, 4), np.array([[0, -1], [1, 2]])
    got = glow.compile(small, backend=backend, native=native, strict=True).run({"x": x, "i": i})["y"]
    np.testing.assert_array_equal(got, [[0, 3], [5, 6]])
    large = _model("GatherElements", [("x", T.FLOAT, [3, 4]), ("i", T.INT64, [5, 2])], {"axis": 1})
    with pytest.raises(glow.GraphError, match=r"indices shape \[5, 2\] is larger than data shape \[3, 4\] at axis 0"):
        glow.compile(large, backend=backend, native=native)
