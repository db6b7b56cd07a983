"""Executable.bind_io: a run of the same arrays, checked once, that reads their values at each call
(a decoding step). The arrays are held by the binding (the cpu program keeps only their
addresses otherwise), outputs written into an input follow the same in-place-or-copy rule as
run(into=), an input whose values choose the signature is looked up per call, and an array the
binding had to copy (not contiguous) is read again at each call."""

import gc

import glow
import numpy as np
import pytest
from glow.errors import InputError
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

W = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)


def _model(rows="n"):
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"]), h.make_node("Relu", ["x2"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [rows, 8]),
                                  h.make_tensor_value_info("x2", T.FLOAT, [rows, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [rows, 8]),
                      h.make_tensor_value_info("z", T.FLOAT, [rows, 8])], [nh.from_array(W, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("rows", ["n", 4])  # a specialising executable, and a static one
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_bound_run_reads_the_values_its_arrays_hold_at_each_call(backend, rows):
    if backend_unavailable(backend):
        pytest.skip(f"{backend} unavailable")
    exe = glow.compile(_model(rows), backend, threads=2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    x2 = rng.standard_normal((4, 8)).astype(np.float32)
    run = exe.bind_io({"x": x, "x2": x2.copy()})  # x2's array: only the binding holds it
    gc.collect()
    junk = [np.full((4, 8), 7.0, np.float32) for _ in range(50)]  # memory a freed x2 would lend  # noqa: F841
    for _ in range(3):
        x[:] = rng.standard_normal((4, 8))
        got = run()
        assert list(got) == ["y", "z"]
        np.testing.assert_allclose(got["y"], x @ W, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got["z"], np.maximum(x2, 0))


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_bound_run_writes_into_its_inputs_as_run_into_does(backend):
    if backend_unavailable(backend):
        pytest.skip(f"{backend} unavailable")
    exe = glow.compile(_model(), backend, threads=2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    x2 = rng.standard_normal((4, 8)).astype(np.float32)
    # y over x (a MatMul reads all of x before it may write: copied after the run), z over x2 (in place)
    run = exe.bind_io({"x": x, "x2": x2}, into={"y": x, "z": x2})
    for _ in range(3):
        want_y, want_z = x @ W, np.maximum(x2, 0)
        got = run()
        assert got["y"] is x and got["z"] is x2
        np.testing.assert_allclose(x, want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x2, want_z)
        x2 -= 0.5  # new values, some negative again


def test_an_array_the_binding_copies_is_read_again_at_each_call():
    exe = glow.compile(_model(), "cpu", threads=1)
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((4, 16)).astype(np.float32)
    x = wide[:, ::2]  # not contiguous: the program reads a contiguous copy, made at each call
    x2 = np.zeros((4, 8), np.float32)
    run = exe.bind_io({"x": x, "x2": x2})
    for _ in range(2):
        wide[:] = rng.standard_normal((4, 16))
        np.testing.assert_allclose(run()["y"], np.ascontiguousarray(x) @ W, rtol=1e-5, atol=1e-5)


def test_an_input_whose_values_choose_the_shapes_is_looked_up_at_each_call():
    g = h.make_graph([h.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [32]), h.make_tensor_value_info("shape", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    exe = glow.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]), "cpu", threads=1)
    x, shape = np.arange(32, dtype=np.float32), np.array([2, 16], np.int64)
    run = exe.bind_io({"x": x, "shape": shape})
    assert run()["y"].shape == (2, 16)
    shape[:] = [4, 8]
    np.testing.assert_array_equal(run()["y"], x.reshape(4, 8))


def test_binding_checks_its_arrays_once_as_run_does():
    exe = glow.compile(_model(4), "cpu", threads=1)
    with pytest.raises(InputError, match="input 'x'"):
        exe.bind_io({"x": np.zeros((5, 8), np.float32), "x2": np.zeros((4, 8), np.float32)})
    with pytest.raises(InputError, match="into=: output 'y'"):
        exe.bind_io({"x": np.zeros((4, 8), np.float32), "x2": np.zeros((4, 8), np.float32)},
                 into={"y": np.zeros((4, 8), np.float64)})
