"""Small model builders shared by the tests."""

import numpy as np
import onnx
from onnx import TensorProto, helper

EXAMPLE_MODEL = __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "core", "data",
                                           "tiny_cnn.onnx")


def make_model(nodes, inputs, outputs, initializers=(), opset=17, name="g"):
    """inputs/outputs: [(name, elem_type, shape)]."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def relu_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2, 3])],
                      [("y", TensorProto.FLOAT, [2, 3])])


def add_const_model():
    w = onnx.numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    return make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, [2, 3])],
                      [("y", TensorProto.FLOAT, [2, 3])], [w])


def backend_unavailable(name: str) -> str | None:
    """None when backend `name` can run here, else the reason it cannot (for skip markers)."""
    import glow
    from glow.plugins import registry

    try:
        registry().get(name).check_available()
    except glow.GlowError as e:
        return str(e)
    return None


def opencl_unavailable_reason() -> str | None:
    """Why the opencl backend cannot run here (no platform, no pyopencl), or None when it can."""
    import glow
    from glow.backends.opencl.backend import OpenCLBackend

    try:
        OpenCLBackend().check_available()
    except glow.BackendError as e:
        return str(e)
    return None
