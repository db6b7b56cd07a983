"""Small fp32 CNNs and a ViT built with onnx.helper (random He-scaled weights), and their
quantization by onnxruntime's own tool: the models of the quantization tests
(tests/test_qdq_models.py, tests/test_qoperator.py) and benchmark (benchmarks/quantized.py).

    MODELS[name](batch) -> onnx.ModelProto   resnet, squeezenet, efficientnet, vit: [N, 3, 32, 32] -> [N, 10]
    inputs(n, seed, batch)                   n random inputs
    ort_quantize(fp32, folder, per_channel, qdq, reduce_range)
                                             quantize_static's model (QDQ or QOperator), and its output step
    onnxruntime_saturates_u8s8()             whether this host's onnxruntime sums uint8 x int8 products in
                                             int16 pairs (AVX2 without VNNI): then a model that it must
                                             compute exactly needs 7-bit weights (reduce_range)
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

SHAPE = (1, 3, 32, 32)


# -- fp32 models -----------------------------------------------------------------------------------

class _Net:
    """A tiny graph builder: random weights (He-scaled), one op per call."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def _name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def weight(self, shape, std=None):
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        a = self.rng.standard_normal(shape) * (std if std is not None else np.sqrt(2.0 / fan))
        return self.const(a.astype(np.float32), "w")

    def const(self, a, p="c"):
        name = self._name(p)
        self.inits.append(nh.from_array(np.asarray(a), name))
        return name

    def op(self, op_type, ins, **attrs):
        out = self._name(op_type.lower())
        self.nodes.append(h.make_node(op_type, ins, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, group=1, relu=True, pad=None):
        # A Conv with its BatchNormalization folded in: weights and a bias.
        p = k // 2 if pad is None else pad
        y = self.op("Conv", [x, self.weight([cout, cin // group, k, k]), self.weight([cout], 0.1)],
                    kernel_shape=[k, k], pads=[p] * 4, strides=[stride] * 2, group=group)
        return self.op("Relu", [y]) if relu else y

    def gemm(self, x, k, n):
        return self.op("Gemm", [x, self.weight([n, k]), self.weight([n], 0.1)], transB=1)

    def model(self, out, batch=1):
        g = h.make_graph(self.nodes, "net", [h.make_tensor_value_info("x", T.FLOAT, [batch, *SHAPE[1:]])],
                         [h.make_tensor_value_info(out, T.FLOAT, [batch, 10])], self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
        onnx.checker.check_model(m)
        return m


def resnet_like(batch=1):
    """ResNet: Conv (BN folded), Relu, MaxPool, residual Adds with a strided 1x1 shortcut,
    GlobalAveragePool, Flatten, Gemm."""
    b = _Net(1)
    x = b.conv("x", 3, 16, 3, 2)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    y = b.conv(b.conv(x, 16, 16, 3), 16, 16, 3, relu=False)
    x = b.op("Relu", [b.op("Add", [x, y])])
    y = b.conv(b.conv(x, 16, 32, 3, 2), 32, 32, 3, relu=False)
    x = b.op("Relu", [b.op("Add", [b.conv(x, 16, 32, 1, 2, relu=False), y])])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.model(b.gemm(x, 32, 10), batch)


def squeezenet_like(batch=1):
    """SqueezeNet: fire modules (1x1 squeeze, 1x1 and 3x3 expands joined by Concat)."""
    b = _Net(2)
    x = b.op("MaxPool", [b.conv("x", 3, 16, 3, 2)], kernel_shape=[3, 3], strides=[2, 2])
    for cin in (16, 32):
        s = b.conv(x, cin, 8, 1)
        x = b.op("Concat", [b.conv(s, 8, 16, 1), b.conv(s, 8, 16, 3)], axis=1)
    x = b.op("GlobalAveragePool", [b.conv(x, 32, 10, 1)])
    return b.model(b.op("Flatten", [x], axis=1), batch)


def efficientnet_like(batch=1):
    """EfficientNet: HardSwish, depthwise Conv, SiLU (Sigmoid-Mul), squeeze-excite."""
    b = _Net(3)
    x = b.op("HardSwish", [b.conv("x", 3, 16, 3, 2, relu=False)])
    for _ in range(2):
        y = b.conv(x, 16, 16, 3, group=16, relu=False)
        y = b.op("Mul", [y, b.op("Sigmoid", [y])])
        se = b.conv(b.conv(b.op("GlobalAveragePool", [y]), 16, 4, 1), 4, 16, 1, relu=False)
        y = b.conv(b.op("Mul", [y, b.op("Sigmoid", [se])]), 16, 16, 1, relu=False)
        x = b.op("Add", [x, y])
    x = b.op("HardSwish", [b.conv(x, 16, 32, 1, relu=False)])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.model(b.gemm(x, 32, 10), batch)


def vit_like(batch=1):
    """ViT: patch Conv, LayerNormalization, single-head attention (MatMul, Softmax), Gelu MLP
    (Erf), residual Adds."""
    b, d = _Net(4), 32
    x = b.conv("x", 3, d, 4, 4, relu=False, pad=0)
    x = b.op("Transpose", [b.op("Reshape", [x, b.const(np.array([batch, d, 64], np.int64))])],
             perm=[0, 2, 1])
    ones, zeros = b.const(np.ones(d, np.float32)), b.const(np.zeros(d, np.float32))

    def scalar(v):
        return b.const(np.array(v, np.float32))

    for _ in range(2):
        ln = b.op("LayerNormalization", [x, ones, zeros], axis=-1)
        q, k, v = (b.op("MatMul", [ln, b.weight([d, d], 0.2)]) for _ in range(3))
        s = b.op("Mul", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 2, 1])]), scalar(d ** -0.5)])
        a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
        x = b.op("Add", [x, b.op("MatMul", [a, b.weight([d, d], 0.2)])])
        ln = b.op("LayerNormalization", [x, ones, zeros], axis=-1)
        m = b.op("Add", [b.op("MatMul", [ln, b.weight([d, 2 * d], 0.2)]), b.weight([2 * d], 0.1)])
        erf = b.op("Erf", [b.op("Div", [m, scalar(np.sqrt(2.0))])])
        m = b.op("Mul", [b.op("Mul", [m, scalar(0.5)]), b.op("Add", [erf, scalar(1.0)])])
        x = b.op("Add", [x, b.op("MatMul", [m, b.weight([2 * d, d], 0.2)])])
    return b.model(b.gemm(b.op("ReduceMean", [x], axes=[1], keepdims=0), d, 10), batch)


MODELS = {"resnet": resnet_like, "squeezenet": squeezenet_like, "efficientnet": efficientnet_like,
          "vit": vit_like}


def inputs(n, seed, batch=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, *SHAPE[1:])).astype(np.float32) for _ in range(n)]


@functools.cache
def onnxruntime_saturates_u8s8() -> bool:
    """Whether onnxruntime's uint8 x int8 products saturate here: its MLAS kernels on x86 hosts
    without VNNI add the two products of a pair in int16 (vpmaddubsw), so 255 * 127 * 2 clips to
    32767 (onnxruntime documents it and offers reduce_range). Asked of onnxruntime itself, with a
    MatMulInteger whose pairs are all 255 * 127 * 2; it needs onnxruntime."""
    import onnxruntime as ort

    k = 64
    g = h.make_graph([h.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                     [h.make_tensor_value_info("a", T.UINT8, [1, k])], [h.make_tensor_value_info("y", T.INT32, None)],
                     [nh.from_array(np.full((k, 16), 127, np.int8), "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"a": np.full((1, k), 255, np.uint8)})[0]
    return bool(np.any(y != 255 * 127 * k))


def ort_quantize(fp32, folder, per_channel=True, qdq=True, reduce_range=False):
    """fp32 quantized by onnxruntime.quantization.quantize_static (uint8 activations, int8
    weights, 7-bit ones with `reduce_range`, min-max calibration on 4 inputs), written in
    `folder`; also the step of its output when a DequantizeLinear makes it, else None. Needs
    onnxruntime."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"x": x} for x in inputs(4, seed=7))

        def get_next(self):
            return next(self.it, None)

    src, dst = Path(folder) / "fp32.onnx", Path(folder) / "int8.onnx"
    onnx.save(fp32, src)
    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" advice
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                    per_channel=per_channel, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    reduce_range=reduce_range)
    m = onnx.load(dst)
    last = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name]
    scales = {i.name: nh.to_array(i) for i in m.graph.initializer}
    step = float(scales[last[0].input[1]]) if last and last[0].op_type == "DequantizeLinear" else None
    return m, step


def conv_chain():
    """Convolutions (one grouped) and a MatMul only: quantize_static's QOperator format writes
    these as the standard QLinearConv / QLinearMatMul only (no com.microsoft contrib op)."""
    b = _Net(6)
    x = b.conv(b.conv(b.conv("x", 3, 16, 3, 2), 16, 16, 3, group=4), 16, 8, 1, relu=False)
    x = b.op("Reshape", [x, b.const(np.array([1, 8 * 16 * 16], np.int64))])
    return b.model(b.op("MatMul", [x, b.weight([8 * 16 * 16, 10], 0.02)]))
