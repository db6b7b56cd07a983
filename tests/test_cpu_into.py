"""run(..., into=): outputs written into the caller's arrays, also where an array is an input's (or
overlaps one): in place only where the program allows it and the memory is the input's exactly,
else copied after the run (a partial overlap written in place was read after it was written)."""

import glow
import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _model():
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"]), h.make_node("Relu", ["x2"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 8]),
                                  h.make_tensor_value_info("x2", T.FLOAT, [4, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4, 8]), h.make_tensor_value_info("z", T.FLOAT, [4, 8])],
                     [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)]), w


def test_into_an_input_array_and_into_an_overlapping_view():
    model, w = _model()
    exe = glow.compile(model, "cpu", threads=2)
    rng = np.random.default_rng(1)
    for _ in range(2):  # twice: nothing about the arrays is remembered between runs
        big = rng.standard_normal((12, 8)).astype(np.float32)
        x, x2 = big[0:4], big[4:8]
        want_y, want_z = x @ w, np.maximum(x2, 0)
        # y into x's own memory (a MatMul reads all of x before it may write: copied after),
        # z into a view that straddles x2 and the rows after it
        y_into, z_into = big[0:4], big[6:10]
        got = exe.run({"x": x, "x2": x2.copy()}, into={"y": y_into})
        np.testing.assert_allclose(got["y"], want_y, rtol=1e-5, atol=1e-5)
        assert got["y"] is y_into
        np.testing.assert_allclose(big[0:4], want_y, rtol=1e-5, atol=1e-5)
        x2c = big[4:8].copy()
        got = exe.run({"x": big[8:12].copy(), "x2": big[4:8]}, into={"z": z_into})
        np.testing.assert_array_equal(got["z"], np.maximum(x2c, 0))
        np.testing.assert_array_equal(big[6:10], np.maximum(x2c, 0))
        # the same memory as the input, for an op that may write over it: in place
        x2 = big[4:8]
        want_z = np.maximum(x2, 0)
        got = exe.run({"x": big[8:12].copy(), "x2": x2}, into={"z": x2})
        assert got["z"] is x2
        np.testing.assert_array_equal(big[4:8], want_z)
