"""Profile-guided int8 quantization of float models, as Glow does it (`glow quantize`,
`glow.quantize`): run the model on calibration inputs and record every float tensor's range and
histogram (the profile), choose each tensor's scale and zero point from it, and write a standard
QDQ ONNX model that onnxruntime and glow both run.

    profile = profile_model(model, calibration)      # per tensor: min, max, histogram
    profile.save(path)                               # QuantizationProfile.load(path, model) checks
                                                     # the model's graph hash
    qmodel = quantize_model(model, profile, schema="asymmetric", calibrate="minmax", per_channel=True,
                            keep=("Softmax", "head/MatMul"))

What is written is what `onnxruntime.quantization.quantize_static(quant_format=QDQ)` writes:
* every float activation that a quantized op reads gets one QuantizeLinear/DequantizeLinear pair
  (shared by its readers); so do the graph outputs that quantized ops produce;
* Conv, ConvTranspose, Gemm and MatMul weights (constant float inputs) become int8, symmetric,
  per output channel with `per_channel` (Conv axis 0, ConvTranspose axis 1, Gemm axis 0 with
  transB else 1, MatMul axis 1), behind a DequantizeLinear; their constant biases int32 at scale
  input scale x weight scale, zero point 0;
* ops named in `keep` (node names or op types) stay float, and read the float tensors.

`reduce_range` keeps weight codes in [-64, 64] (7 bits), as onnxruntime's option of that name:
onnxruntime's uint8 x int8 kernels on an AVX2 host without VNNI sum products in pairs in int16
(vpmaddubsw), which saturates on full-range weights, so such a model computes other values
there; with 7 bits it computes the exact products everywhere (a little less weight resolution).

Schemas (activations; weights are always symmetric int8): `asymmetric` uint8 with a zero point,
the range widened to hold 0 (exact zero); `symmetric` int8, zero point 0; `symmetric-unsigned`
uint8 with zero point 0 for a tensor that is never negative (after a Relu, a Sigmoid), else int8
symmetric (Glow's SymmetricWithUnsigned). Calibrations: `minmax` (the observed range) or
`percentile` (the range that holds `percentile` % of the observed values, from the histogram:
clipping rare outliers buys resolution for the rest).
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

from .errors import InputError

SCHEMAS = ("asymmetric", "symmetric", "symmetric-unsigned")
CALIBRATIONS = ("minmax", "percentile")
BINS = 2048
#: Ops whose float activations are quantized (Q/DQ on their inputs); the rest stay float.
QUANTIZED_OPS = frozenset({
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul", "Sub", "Concat", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Softmax",
    "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Resize", "Split", "Slice", "Pad",
})
#: Ops whose input 1, when a float constant, is a weight (int8 per output channel: this axis; Gemm's
#: and MatMul's depend on transB and rank, `_weight_axis`), and input 2 a bias.
WEIGHTED = {"Conv": 0, "ConvTranspose": 1, "Gemm": None, "MatMul": None}


# -- the profile -------------------------------------------------------------------------------------

def graph_hash(model) -> str:
    """sha256 of the model's graph (nodes, attributes, weights): a profile is valid only for it."""
    return hashlib.sha256(model.graph.SerializeToString(deterministic=True)).hexdigest()


class QuantizationProfile:
    """Per float tensor (by ONNX name): min, max over every calibration run, and a histogram of
    its values over [min, max] (BINS bins)."""

    def __init__(self, model_hash: str, runs: int, tensors: dict):
        self.model_hash, self.runs, self.tensors = model_hash, runs, tensors

    def save(self, path: str) -> None:
        from .fileio import write_atomic

        data = {"format": "glow-quantization-profile", "version": 1, "graph_sha256": self.model_hash,
                "runs": self.runs, "tensors": self.tensors}
        write_atomic(path, lambda f: f.write(json.dumps(data).encode()), what="profile")

    @classmethod
    def load(cls, path: str, model) -> QuantizationProfile:
        """Read a saved profile; an InputError if it is not one, or was made for another graph."""
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read())
        except OSError as e:
            raise InputError(f"{path}: cannot read the profile: {e.strerror}") from None
        except ValueError:
            raise InputError(f"{path}: not a glow quantization profile (not JSON)") from None
        if not isinstance(data, dict) or data.get("format") != "glow-quantization-profile":
            raise InputError(f"{path}: not a glow quantization profile")
        if data.get("graph_sha256") != graph_hash(model):
            raise InputError(f"{path}: the profile was made for another graph (its hash differs); "
                             "profile this model again")
        return cls(data["graph_sha256"], int(data["runs"]), data["tensors"])


def calibration_feeds(graph, calibration) -> list[dict]:
    """The runs: a list of feed dicts, or a dict / npz mapping of input name -> array whose first
    axis indexes the runs (arr[i] is run i's input)."""
    names = [v.name for v in graph.inputs]
    if isinstance(calibration, (list, tuple)):
        runs = [dict(r) for r in calibration]
    else:
        missing = [n for n in names if n not in calibration]
        if missing:
            raise InputError(f"calibration data has no array for input(s) {', '.join(missing)} "
                             f"(it has {', '.join(sorted(calibration)) or 'none'})")
        arrays = {n: np.asarray(calibration[n]) for n in names}
        counts = {n: (a.shape[0] if a.ndim else 0) for n, a in arrays.items()}
        if len(set(counts.values())) != 1 or 0 in counts.values():
            raise InputError(f"calibration arrays must share a first axis (the runs): {counts}")
        runs = [{n: a[i] for n, a in arrays.items()} for i in range(next(iter(counts.values())))]
    if not runs:
        raise InputError("calibration data holds no run")
    return runs


def profile_model(model, calibration) -> QuantizationProfile:
    """Run `model` (a ModelProto) on the reference interpreter for every calibration run and
    record each float32 tensor's range, then its histogram over that range (a second pass)."""
    from .interpreter import run_graph
    from .onnx_import import load_onnx

    graph = load_onnx(model)
    runs = calibration_feeds(graph, calibration)
    onnx_names = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    ranges: dict[str, list[float]] = {}

    def observe_range(v, a):
        if v.name in onnx_names and isinstance(a, np.ndarray) and a.dtype == np.float32 and a.size:
            finite = a[np.isfinite(a)]
            if finite.size:
                lo, hi = float(finite.min()), float(finite.max())
                r = ranges.setdefault(v.name, [lo, hi])
                r[0], r[1] = min(r[0], lo), max(r[1], hi)

    for feeds in runs:
        run_graph(graph, feeds, observe=observe_range)
    hists = {name: np.zeros(BINS, np.int64) for name in ranges}

    def observe_hist(v, a):
        if v.name in hists:
            lo, hi = ranges[v.name]
            finite = a[np.isfinite(a)]
            hists[v.name] += np.histogram(finite, BINS, (lo, hi if hi > lo else lo + 1))[0]

    for feeds in runs:
        run_graph(graph, feeds, observe=observe_hist)
    tensors = {n: {"min": r[0], "max": r[1], "hist": hists[n].tolist()} for n, r in ranges.items()}
    return QuantizationProfile(graph_hash(model), len(runs), tensors)


# -- ranges and parameters ------------------------------------------------------------------------------

def tensor_range(stats: dict, calibrate: str, percentile: float) -> tuple[float, float]:
    """The range to quantize a tensor over: its observed one, or the central `percentile` % of its
    histogram (the tails cut equally)."""
    lo, hi = float(stats["min"]), float(stats["max"])
    if calibrate == "percentile" and hi > lo:
        h = np.asarray(stats["hist"], np.float64)
        cdf = np.cumsum(h) / h.sum()
        tail = (100.0 - percentile) / 200.0
        edges = np.linspace(lo, hi, len(h) + 1)
        lo = float(edges[np.searchsorted(cdf, tail, side="right")])
        hi = float(edges[min(np.searchsorted(cdf, 1.0 - tail, side="left") + 1, len(h))])
    return lo, hi


def activation_params(lo: float, hi: float, schema: str) -> tuple[np.ndarray, np.ndarray]:
    """(scale float32, zero point uint8 or int8) of an activation over [lo, hi]."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)  # the range holds 0, so zero is exact
    if schema == "asymmetric" or (schema == "symmetric-unsigned" and lo >= 0.0):
        scale = (hi - lo) / 255.0 if hi > lo else 1.0
        zp = 0 if lo >= 0.0 else int(np.clip(round(-lo / scale), 0, 255))
        return np.float32(scale), np.uint8(zp)
    amax = max(-lo, hi)
    return np.float32(amax / 127.0 if amax > 0 else 1.0), np.int8(0)


#: The largest weight code: 127, or 64 with reduce_range (7 bits, as onnxruntime's reduce_range):
#: a uint8 activation times such a weight, summed in pairs, fits the int16 of AVX2's vpmaddubsw,
#: which onnxruntime's u8s8 kernels use on hosts without VNNI and which saturates on full-range
#: weights (so onnxruntime computes other values there); glow's AVX2 int8 kernels take it too.
WEIGHT_QMAX = {False: 127, True: 64}


def weight_params(w: np.ndarray, axis: int | None, reduce_range: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 of a float weight: (quantized, scale), per `axis` (None: per tensor); codes in
    [-64, 64] with `reduce_range`."""
    qmax = WEIGHT_QMAX[bool(reduce_range)]
    if axis is None:
        amax = np.float32(np.abs(w).max()) if w.size else np.float32(0)
    else:
        amax = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(1).astype(np.float32)
    scale = (np.where(amax > 0, amax, 1) / np.float32(qmax)).astype(np.float32)
    col = scale if axis is None else scale.reshape([-1 if i == axis else 1 for i in range(w.ndim)])
    return np.clip(np.rint(w / col), -qmax, qmax).astype(np.int8), scale


def _weight_axis(node, attrs, rank: int) -> int | None:
    """The output-channel axis of a weight of `rank` dims (None: per tensor only)."""
    if node.op_type == "Gemm":  # B is [K, N], or [N, K] with transB
        return 0 if attrs.get("transB", 0) else 1
    if node.op_type == "MatMul":  # B is [..., K, N]
        return rank - 1 if rank >= 2 else None
    return WEIGHTED[node.op_type]


# -- writing the QDQ model ---------------------------------------------------------------------------

def quantize_model(model, profile: QuantizationProfile, *, schema: str = "asymmetric",
                   calibrate: str = "minmax", percentile: float = 99.999, per_channel: bool = True, keep=(),
                   reduce_range: bool = False):
    """The QDQ ModelProto of float `model` under `profile` (see the module's docstring)."""
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh

    if schema not in SCHEMAS:
        raise InputError(f"unknown quantization schema '{schema}' (choose from {', '.join(SCHEMAS)})")
    if calibrate not in CALIBRATIONS:
        raise InputError(f"unknown calibration '{calibrate}' (choose from {', '.join(CALIBRATIONS)})")
    if not (0.0 < percentile <= 100.0) or math.isnan(percentile):
        raise InputError(f"percentile must be in (0, 100], got {percentile}")
    need = 13 if per_channel else 10  # per-axis QuantizeLinear / QuantizeLinear itself
    if not any(o.domain in ("", "ai.onnx") and o.version >= need for o in model.opset_import):
        raise InputError(f"the model's ONNX opset is below {need}, which QDQ{' per channel' if per_channel else ''} "
                         "needs: convert it first (onnx.version_converter)")
    if profile.model_hash != graph_hash(model):
        raise InputError("the profile was made for another graph (its hash differs); profile this model again")
    g = model.graph
    keep = set(keep)
    inits = {i.name: i for i in g.initializer}
    graph_outputs = {o.name for o in g.output}
    new_inits, nodes, pairs, used_weights = [], [], {}, set()
    params: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def init(a, name):
        new_inits.append(nh.from_array(np.asarray(a), name))
        return name

    def quantizable(n) -> bool:
        return n.domain in ("", "ai.onnx") and n.op_type in QUANTIZED_OPS and n.name not in keep \
            and n.op_type not in keep

    def qdq(t: str, rename_source: bool = False) -> str | None:
        """The dequantized name of activation t (one Q/DQ pair per tensor), or None if t has no
        profile (not float32, or never computed)."""
        if t in pairs:
            return pairs[t]
        stats = profile.tensors.get(t)
        if stats is None:
            return None
        s, z = activation_params(*tensor_range(stats, calibrate, percentile), schema)
        params[t] = (s, z)
        sn, zn = init(s, f"{t}_scale"), init(z, f"{t}_zero_point")
        src = f"{t}_float" if rename_source else t
        nodes.append(h.make_node("QuantizeLinear", [src, sn, zn], [f"{t}_quantized"], name=f"{t}_QuantizeLinear"))
        dq = t if rename_source else f"{t}_dequantized"
        nodes.append(h.make_node("DequantizeLinear", [f"{t}_quantized", sn, zn], [dq], name=f"{t}_DequantizeLinear"))
        pairs[t] = dq
        return dq

    weights: dict[tuple, tuple[str, np.ndarray]] = {}

    def weight(name, axis):
        if (name, axis) in weights:  # one weight read by several nodes: quantized once
            return weights[(name, axis)]
        w = nh.to_array(inits[name]).astype(np.float32)
        if axis is not None and (w.ndim <= axis or not per_channel):
            axis = None
        q, s = weight_params(w, axis, reduce_range)
        tag = f"{name}_axis{axis}" if any(k[0] == name for k in weights) else name  # another axis before
        out = f"{tag}_dequantized"
        nodes.append(h.make_node("DequantizeLinear", [init(q, f"{tag}_quantized"), init(s, f"{tag}_scale"),
                                                      init(np.zeros_like(s, np.int8), f"{tag}_zero_point")],
                                 [out], name=f"{tag}_DequantizeLinear", **({"axis": axis} if s.ndim else {})))
        used_weights.add(name)
        weights[(name, axis)] = out, s
        return out, s

    def bias(name, x_scale, w_scale):
        """An int32 bias at scale x_scale * w_scale, or None (left float) unless it is one value per
        output channel (or the weight's scale is one value)."""
        b = nh.to_array(inits[name]).astype(np.float64)
        if b.ndim != 1 or (w_scale.ndim and w_scale.size != b.size):
            return None
        s = (np.float32(x_scale) * w_scale).astype(np.float32)
        q = np.clip(np.rint(b / s), -(2 ** 31), 2 ** 31 - 1).astype(np.int32)
        attrs = {"axis": 0} if s.ndim else {}
        out = f"{name}_dequantized"
        nodes.append(h.make_node("DequantizeLinear", [init(q, f"{name}_quantized"), init(s, f"{name}_scale"),
                                                      init(np.zeros_like(s, np.int32), f"{name}_zero_point")],
                                 [out], name=f"{name}_DequantizeLinear", **attrs))
        used_weights.add(name)
        return out

    for n in g.node:
        ins = list(n.input)
        attrs = {a.name: h.get_attribute_value(a) for a in n.attribute}
        if quantizable(n):
            w_scale = None
            for i, t in enumerate(ins):
                if not t:
                    continue
                if t in inits:
                    arr = inits[t]
                    if n.op_type in WEIGHTED and i == 1 and arr.data_type == onnx.TensorProto.FLOAT:
                        ins[1], w_scale = weight(t, _weight_axis(n, attrs, len(arr.dims)))
                    elif n.op_type in WEIGHTED and i == 2 and w_scale is not None and n.input[0] in params \
                            and arr.data_type == onnx.TensorProto.FLOAT:
                        ins[2] = bias(t, params[n.input[0]][0], w_scale) or t
                else:
                    dq = qdq(t)
                    if dq is not None:
                        ins[i] = dq
        outs = [f"{o}_float" if o in graph_outputs and quantizable(n) and o in profile.tensors else o
                for o in n.output]
        nodes.append(h.make_node(n.op_type, ins, outs, name=n.name, domain=n.domain or None, **attrs))
        for o, new in zip(n.output, outs):
            if new != o:
                qdq(o, rename_source=True)
    kept = [i for i in g.initializer if i.name not in used_weights or any(
        i.name in n.input for n in nodes if not n.op_type.endswith("QuantizeLinear"))]
    gq = h.make_graph(nodes, g.name, list(g.input), list(g.output), kept + new_inits,
                      value_info=list(g.value_info))
    m = h.make_model(gq, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                     producer_name="glow quantize")
    onnx.checker.check_model(m)
    return m


def quantize(model, calibration=None, *, profile: QuantizationProfile | str | None = None,
             schema: str = "asymmetric", calibrate: str = "minmax", percentile: float = 99.999,
             per_channel: bool = True, keep=(), save_profile: str | None = None, reduce_range: bool = False):
    """Quantize float `model` (a path or ModelProto) to a QDQ ModelProto. `calibration`: a list of
    feed dicts, or input name -> array with the runs on the first axis (an .npz's contents).
    `profile`: a QuantizationProfile or a saved profile's path to reuse instead of profiling (its
    graph hash must match); `save_profile`: where to write the profile."""
    from .onnx_import import load_model_proto

    proto, _ = load_model_proto(model)
    if isinstance(profile, (str, os.PathLike)):
        profile = QuantizationProfile.load(os.fspath(profile), proto)
    if profile is None:
        if calibration is None:
            raise InputError("quantize needs calibration data or a saved profile")
        profile = profile_model(proto, calibration)
    if save_profile:
        profile.save(save_profile)
    return quantize_model(proto, profile, schema=schema, calibrate=calibrate, percentile=percentile,
                          per_channel=per_channel, keep=keep, reduce_range=reduce_range)
