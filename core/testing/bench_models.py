"""The three benchmark models generated with onnx.helper (deterministic weights, seed 0).

* mlp: 784-512-512-10 with ReLU, batch 64;
* small_cnn: 1x3x64x64 -> 3 conv/relu/maxpool stages -> global pool -> linear 10;
* transformer: one encoder block (sequence 128, hidden 256, 4 heads, FFN 1024), batch 1, written
  with MatMul/Softmax/LayerNormalization/Gelu-by-Erf the way exporters emit it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="glow benchmarks")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


class _Weights:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.inits = []

    def __call__(self, name, *shape, scale=None):
        fan_in = shape[-1] if len(shape) == 1 else int(np.prod(shape[1:])) if len(shape) == 4 else shape[0]
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32),
                                                  name))
        return name

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name


def mlp(batch: int = 64) -> onnx.ModelProto:
    w = _Weights()
    nodes, x = [], "x"
    dims = [784, 512, 512, 10]
    for i, (a, b) in enumerate(zip(dims, dims[1:])):
        nodes.append(helper.make_node("Gemm", [x, w(f"w{i}", a, b), w(f"b{i}", b, scale=0.1)], [f"h{i}"]))
        x = f"h{i}"
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    return _model("mlp", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 784])],
                  [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 10])], w.inits)


def small_cnn() -> onnx.ModelProto:
    w = _Weights()
    nodes, x, c = [], "x", 3
    for i, co in enumerate([32, 64, 128]):
        nodes += [helper.make_node("Conv", [x, w(f"cw{i}", co, c, 3, 3), w(f"cb{i}", co, scale=0.1)], [f"c{i}"],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
                  helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2])]
        x, c = f"p{i}", co
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("Gemm", ["f", w("fw", 10, 128), w("fb", 10, scale=0.1)], ["y"], transB=1)]
    return _model("small_cnn", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], w.inits)


def transformer(seq: int = 128, hidden: int = 256, heads: int = 4, ffn: int = 1024) -> onnx.ModelProto:
    w = _Weights()
    hd = hidden // heads
    n = helper.make_node
    shape_heads = w.const("shape_heads", np.array([1, seq, heads, hd], np.int64))
    shape_back = w.const("shape_back", np.array([1, seq, hidden], np.int64))
    scale = w.const("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    half, one, sqrt2 = (w.const("half", np.array(0.5, np.float32)), w.const("one", np.array(1.0, np.float32)),
                        w.const("sqrt2", np.array(np.sqrt(2.0), np.float32)))
    nodes = []
    for name in "qkv":
        nodes += [n("MatMul", ["x", w(f"w{name}", hidden, hidden)], [f"{name}0"]),
                  n("Add", [f"{name}0", w(f"b{name}", hidden, scale=0.02)], [f"{name}1"]),
                  n("Reshape", [f"{name}1", shape_heads], [f"{name}2"]),
                  n("Transpose", [f"{name}2"], [f"{name}3"], perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["q3", "k3"], ["s0"]), n("Mul", ["s0", scale], ["s1"]),
              n("Softmax", ["s1"], ["p"], axis=-1), n("MatMul", ["p", "v3"], ["o0"]),
              n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", shape_back], ["o2"]),
              n("MatMul", ["o2", w("wo", hidden, hidden)], ["o3"]),
              n("Add", ["o3", w("bo", hidden, scale=0.02)], ["o4"]),
              n("Add", ["x", "o4"], ["r1"]),
              n("LayerNormalization", ["r1", w("ln1_g", hidden, scale=1.0), w("be1", hidden, scale=0.02)], ["n1"],
                axis=-1, epsilon=1e-5),
              n("MatMul", ["n1", w("w1", hidden, ffn)], ["f0"]), n("Add", ["f0", w("b1", ffn, scale=0.02)], ["f1"]),
              # Gelu the way exporters write it: x * 0.5 * (1 + erf(x / sqrt(2)))
              n("Div", ["f1", sqrt2], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", one], ["g2"]),
              n("Mul", ["f1", "g2"], ["g3"]), n("Mul", ["g3", half], ["g4"]),
              n("MatMul", ["g4", w("w2", ffn, hidden)], ["f2"]), n("Add", ["f2", w("b2", hidden, scale=0.02)], ["f3"]),
              n("Add", ["n1", "f3"], ["r2"]),
              n("LayerNormalization", ["r2", w("ln2_g", hidden, scale=1.0), w("be2", hidden, scale=0.02)], ["y"],
                axis=-1, epsilon=1e-5)]
    return _model("transformer", nodes,
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], w.inits)


GENERATED = {"mlp": mlp, "small_cnn": small_cnn, "transformer": transformer}
