"""Regenerate core/data/tiny_cnn.onnx, the README's example model (deterministic: seed 0).

A small image classifier on 1x1x28x28: Conv-Relu-MaxPool, Conv-BatchNorm-Relu, GlobalAveragePool,
Flatten, Gemm, Softmax. Random weights; it classifies nothing, but exercises a real CNN pipeline.
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "core", "data", "tiny_cnn.onnx")


def main():
    rng = np.random.default_rng(0)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [w("conv1_w", 8, 1, 3, 3), w("conv1_b", 8), w("conv2_w", 16, 8, 3, 3, scale=0.1),
             w("bn_scale", 16), w("bn_bias", 16), w("bn_mean", 16, scale=0.1),
             numpy_helper.from_array(np.abs(rng.standard_normal(16)).astype(np.float32) + 0.5, "bn_var"),
             w("fc_w", 10, 16), w("fc_b", 10)]
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "conv2_w"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("BatchNormalization", ["c2", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["b2"],
                         name="bn2"),
        helper.make_node("Relu", ["b2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(nodes, "tiny_cnn",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="glow scripts/make_example_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, OUT)
    print(f"wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
