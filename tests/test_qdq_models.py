"""Statically quantized CNNs and a small ViT, in the QDQ form onnxruntime's quantization tool writes
(issue 14, finding 9: such models ran on cpu with a cosine of 0.11-0.73 to the fp32 model while
the reference reached 0.98-0.9999).

The models (glow.testing.quant_models) are built with onnx.helper and random weights, then
quantized by `to_qdq`, which emits what `onnxruntime.quantization.quantize_static(
quant_format=QDQ, activation_type=QUInt8, weight_type=QInt8)` emits: one QuantizeLinear /
DequantizeLinear pair on every float activation (uint8, min/max calibration over a few inputs,
range widened to hold 0), int8 symmetric weights (per output channel with `per_channel`: axis 0 of
a Conv or a transB Gemm weight, axis 1 of a MatMul's [K, N] weight) and int32 biases at scale
x_scale * w_scale. So the tests need no
onnxruntime; the last ones quantize with onnxruntime's own tool when it is installed.

Every backend must give the reference backend's answer: the output within one quantization step
of the reference on >= 99% of its elements (the float32 sums before a requantization may be
summed in another order, which moves a value across a rounding boundary now and then), and a
cosine to the fp32 model (computed by onnx.reference) >= 0.99, as the reference's own.
"""

from __future__ import annotations

import functools

import glow
import numpy as np
import onnx
import pytest
from glow.testing import quant_models
from glow.testing.quant_models import MODELS, conv_chain, inputs
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

# -- QDQ, as onnxruntime's quantize_static writes it -----------------------------------------------

def _uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)  # the range holds 0, so zero is exact
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    return scale, np.uint8(np.clip(np.round(-lo / scale), 0, 255))


def _int8_weight(w, axis):
    """Symmetric int8 (zero point 0); per-axis scales when axis is not None."""
    if axis is None:
        amax = np.float32(np.abs(w).max())
    else:
        amax = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(1).astype(np.float32)
    scale = (np.where(amax > 0, amax, 1) / np.float32(127.0)).astype(np.float32)
    col = scale if axis is None else scale.reshape([-1 if i == axis else 1 for i in range(w.ndim)])
    return np.clip(np.round(w / col), -127, 127).astype(np.int8), scale


def to_qdq(model, calibration, per_channel=True):
    """The fp32 model with QDQ nodes: a uint8 Q/DQ pair on every float activation (the graph
    input, every node output read by another node, and the graph output), int8 weights and int32
    biases of Conv/Gemm/MatMul behind DequantizeLinear. Ranges come from running the model with
    onnx.reference on `calibration` inputs."""
    g = model.graph
    inits = {i.name: nh.to_array(i) for i in g.initializer}
    acts = ["x"] + [o for n in g.node for o in n.output]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(h.make_empty_tensor_value_info(a) for a in acts)
    ev = ReferenceEvaluator(probe)
    runs = [dict(zip(acts, ev.run(None, {"x": x}))) for x in calibration]
    out_name = g.output[0].name
    new_inits, nodes, qdq = [], [], {}

    def init(a, name):
        new_inits.append(nh.from_array(np.asarray(a), name))
        return name

    def activation(t):  # one shared Q/DQ pair per tensor
        if t not in qdq:
            vals = [r[t] for r in runs]
            if vals[0].dtype != np.float32:
                qdq[t] = t
                return t
            s, z = _uint8_params(float(min(v.min() for v in vals)), float(max(v.max() for v in vals)))
            sn, zn = init(s, f"{t}_scale"), init(z, f"{t}_zero_point")
            src = f"{t}_f32" if t == out_name else t
            nodes.append(h.make_node("QuantizeLinear", [src, sn, zn], [f"{t}_q"]))
            dq = t if t == out_name else f"{t}_dq"
            nodes.append(h.make_node("DequantizeLinear", [f"{t}_q", sn, zn], [dq]))
            qdq[t] = dq
        return qdq[t]

    def weight(name, axis):
        q, s = _int8_weight(inits[name], axis if per_channel else None)
        attrs = {"axis": axis} if per_channel else {}
        nodes.append(h.make_node("DequantizeLinear", [init(q, f"{name}_q"), init(s, f"{name}_scale"),
                                                      init(np.zeros_like(s, np.int8), f"{name}_zp")],
                                 [f"{name}_dq"], **attrs))
        return f"{name}_dq", s

    def bias(name, x_scale, w_scale):
        s = (np.float32(x_scale) * w_scale).astype(np.float32)
        q = np.round(inits[name] / s).astype(np.int32)
        attrs = {"axis": 0} if s.ndim else {}
        nodes.append(h.make_node("DequantizeLinear", [init(q, f"{name}_q"), init(s, f"{name}_scale"),
                                                      init(np.zeros_like(s, np.int32), f"{name}_zp")],
                                 [f"{name}_dq"], **attrs))
        return f"{name}_dq"

    activation("x")
    for n in g.node:
        ins = list(n.input)
        weighted = {"Conv": 0, "Gemm": 0, "MatMul": 1}.get(n.op_type)
        for i, t in enumerate(ins):
            if t in inits:
                if weighted is not None and i == 1:
                    ins[1], w_scale = weight(t, weighted)
                elif weighted is not None and i == 2 and n.op_type != "MatMul":
                    x_scale = nh.to_array(next(i for i in new_inits if i.name == f"{n.input[0]}_scale"))
                    ins[2] = bias(t, x_scale, w_scale)
            elif t:
                ins[i] = activation(t)
        outs = [f"{o}_f32" if o == out_name else o for o in n.output]
        nodes.append(h.make_node(n.op_type, ins, outs, name=n.name, **{a.name: h.get_attribute_value(a)
                                                                        for a in n.attribute}))
        for o in n.output:
            activation(o)
    kept = [i for i in g.initializer if not any(n.op_type in ("Conv", "Gemm", "MatMul") and
                                                i.name in n.input[1:] for n in g.node)]
    gq = h.make_graph(nodes, g.name + "_qdq", list(g.input), list(g.output), kept + new_inits)
    m = h.make_model(gq, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    onnx.checker.check_model(m)
    return m, float(nh.to_array(next(i for i in new_inits if i.name == f"{out_name}_scale")))


# -- checks ----------------------------------------------------------------------------------------

def cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _opencl_reason():
    if "opencl" in glow.available_backends():
        return None
    return "no OpenCL platform"


BACKENDS = [pytest.param(("cpu", None), id="cpu"), pytest.param(("cpu", "floor"), id="cpu-floor"),
            pytest.param(("opencl", None), id="opencl", marks=[
                pytest.mark.opencl, pytest.mark.skipif(_opencl_reason() is not None, reason="no OpenCL")])]


def run(model, backend, native, x):
    (y,) = glow.compile(model, backend, native=native).run({"x": x}).values()
    return y


def check_like_reference(qmodel, step, fp32, ref, backend, native, x):
    """The backend's output within one quantization step of the reference's output `ref` on
    >= 99% of the elements, and as close to the fp32 model's as the reference's (cosine >= 0.99)."""
    got = run(qmodel, backend, native, x)
    steps = np.abs(got.astype(np.float64) - ref) / step
    within = float(np.mean(steps <= 1 + 1e-3))
    c_ref, c_got = cosine(ref, fp32), cosine(got, fp32)
    assert c_ref >= 0.99, f"the test's quantization itself is too coarse: cosine {c_ref:.4f}"
    assert within >= 0.99 and c_got >= 0.99, (
        f"{backend}{'/' + native if native else ''}: {within:.2%} of the outputs within one step of "
        f"the reference (worst {steps.max():.1f} steps); cosine to fp32 {c_got:.4f} "
        f"(reference {c_ref:.4f})")


@functools.cache
def quantized(name, per_channel=True, batch=1):
    """(QDQ model, its output's quantization step, the input, the fp32 model's output, the
    reference backend's output)."""
    fp32 = MODELS[name](batch)
    qmodel, step = to_qdq(fp32, inputs(4, seed=7, batch=2 if batch == "N" else batch), per_channel)
    (x,) = inputs(1, seed=11, batch=2 if batch == "N" else batch)
    (want,) = ReferenceEvaluator(fp32).run(None, {"x": x})
    return qmodel, step, x, want, run(qmodel, "reference", None, x)


@pytest.mark.parametrize("backend_native", BACKENDS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_qdq_per_channel_gives_the_reference_results(name, backend_native):
    qmodel, step, x, want, ref = quantized(name)
    check_like_reference(qmodel, step, want, ref, *backend_native, x)


@pytest.mark.parametrize("backend_native", [BACKENDS[0], BACKENDS[2]])
@pytest.mark.parametrize("name", ["efficientnet", "squeezenet"])
def test_qdq_per_tensor_gives_the_reference_results(name, backend_native):
    qmodel, step, x, want, ref = quantized(name, per_channel=False)
    check_like_reference(qmodel, step, want, ref, *backend_native, x)


def test_qdq_symbolic_batch_gives_the_reference_results():
    # A symbolic batch dim: the cpu backend specialises (re-runs its pipeline) at the first run.
    qmodel, step, x, want, ref = quantized("efficientnet", batch="N")
    check_like_reference(qmodel, step, want, ref, "cpu", None, x)


# -- models quantized by onnxruntime's own tool ----------------------------------------------------

def ort_quantize(fp32, tmp_path, per_channel=True, qdq=True, reduce_range=False):
    pytest.importorskip("onnxruntime")
    return quant_models.ort_quantize(fp32, tmp_path, per_channel, qdq, reduce_range)


ORT_CASES = [pytest.param("resnet", True, True, id="resnet-qdq-per-channel"),
             pytest.param("vit", True, True, id="vit-qdq-per-channel"),
             pytest.param("squeezenet", False, True, id="squeezenet-qdq-per-tensor"),
             pytest.param("conv_chain", True, False, id="conv-chain-qoperator-per-channel")]


@pytest.mark.parametrize("backend_native", [BACKENDS[0], BACKENDS[2]])
@pytest.mark.parametrize("name,per_channel,qdq", ORT_CASES)
def test_onnxruntime_quantize_static(name, per_channel, qdq, backend_native, tmp_path):
    fp32 = conv_chain() if name == "conv_chain" else MODELS[name]()
    qmodel, step = ort_quantize(fp32, tmp_path, per_channel, qdq)
    assert not qdq or any(n.op_type == "QuantizeLinear" for n in qmodel.graph.node)
    assert qdq or any(n.op_type == "QLinearConv" for n in qmodel.graph.node)
    (x,) = inputs(1, seed=11)
    (want,) = ReferenceEvaluator(fp32).run(None, {"x": x})
    ref = run(qmodel, "reference", None, x)
    if step is None:  # the output of a final Gemm/MatMul stays float: 1/255 of its range
        step = float(np.ptp(ref)) / 255
    check_like_reference(qmodel, step, want, ref, *backend_native, x)
