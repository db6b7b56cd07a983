"""The real-architecture models and model test folders shipped inside the onnx wheel.

* light models: nine CNNs (`light_*.onnx` + `light_*_output_0.pb`), fed as onnx's runner feeds them:
  only the non-initializer input, `np.arange(n).reshape(shape) / n` as float32;
* model folders (`pytorch-converted`, `pytorch-operator`, `simple`): `model.onnx` plus
  `test_data_set_*/input_*.pb` and `output_*.pb`.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT_RTOL = {"light_densenet121": 2e-3}


@dataclass
class ModelCase:
    name: str
    model_path: str
    data_sets: list  # [(feeds: dict, expected: list[ndarray])]
    rtol: float = 1e-3
    atol: float = 1e-7

    def load(self) -> onnx.ModelProto:
        return onnx.load(self.model_path)


def with_random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of `model` with seeded random weights: Conv, ConvTranspose, Gemm and MatMul weights
    and biases scaled by fan-in, BatchNormalization's scale and variance in [0.5, 1.5] and its
    bias and mean small. The light models ship with every weight 0.02 (most made at run time by
    ConstantOfShape), which hides wrong numbers behind equal ones: a ConstantOfShape of a
    constant shape becomes an initializer first, so its weights are randomised too."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g, rng = m.graph, np.random.default_rng(seed)
    inits = {t.name: t for t in g.initializer}
    for node in list(g.node):
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64)
            fill = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"),
                        np.zeros(1, np.float32))
            g.initializer.append(numpy_helper.from_array(np.full(tuple(shape), fill.reshape(-1)[0], fill.dtype),
                                                         node.output[0]))
            g.node.remove(node)
    inits = {t.name: t for t in g.initializer}

    def redo(name, make):
        if name in inits:
            w = numpy_helper.to_array(inits[name])
            if w.dtype.kind == "f":
                inits[name].CopyFrom(numpy_helper.from_array(make(w).astype(w.dtype), name))

    for node in g.node:
        if node.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            for name in node.input[1:3]:
                redo(name, lambda w: rng.standard_normal(w.shape) * (
                    1 / np.sqrt(max(w[0].size, 1)) if w.ndim > 1 else 0.1))
        elif node.op_type == "BatchNormalization":
            for k, name in enumerate(node.input[1:5], start=1):
                redo(name, lambda w, k=k: rng.uniform(0.5, 1.5, w.shape) if k in (1, 4)
                     else rng.standard_normal(w.shape) * 0.1)
    return m


def light_models() -> list[ModelCase]:
    out = []
    for path in sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx"))):
        name = os.path.basename(path)[:-5]
        model = onnx.load(path)
        init = {t.name for t in model.graph.initializer}
        feeds = {}
        for vi in model.graph.input:
            if vi.name in init:
                continue
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            n = int(np.prod(shape))
            feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
        expected = [_read_tensor(path[:-5] + "_output_0.pb")]
        out.append(ModelCase(name, path, [(feeds, expected)], rtol=LIGHT_RTOL.get(name, 1e-3)))
    return out


def _read_tensor(path: str):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def folder_cases(suite: str) -> list[ModelCase]:
    """Cases of one folder suite: 'pytorch-converted', 'pytorch-operator' or 'simple'."""
    out = []
    for d in sorted(glob.glob(os.path.join(DATA, suite, "test_*"))):
        model_path = os.path.join(d, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path)
        init = {t.name for t in model.graph.initializer}
        in_names = [i.name for i in model.graph.input if i.name not in init]
        sets = []
        for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
            ins = [_read_any(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=_idx)]
            outs = [_read_any(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=_idx)]
            sets.append((dict(zip(in_names, ins)), outs))
        out.append(ModelCase(f"{suite}/{os.path.basename(d)}", model_path, sets))
    return out


def _idx(path: str) -> int:
    return int(os.path.basename(path).split("_")[1].split(".")[0])


def _read_any(path: str):
    """A .pb that may hold a tensor, a sequence or an optional (the `simple` suite has all three)."""
    with open(path, "rb") as f:
        data = f.read()
    t = onnx.TensorProto()
    try:
        t.ParseFromString(data)
        if t.dims or t.raw_data or t.float_data or t.int64_data or t.int32_data or t.data_type:
            arr = numpy_helper.to_array(t)
            return arr.astype(object) if arr.dtype.kind in "US" else arr
    except Exception:  # noqa: BLE001 - not a tensor: try the container types
        pass
    s = onnx.SequenceProto()
    try:
        s.ParseFromString(data)
        return [numpy_helper.to_array(x) for x in s.tensor_values]
    except Exception:  # noqa: BLE001
        pass
    o = onnx.OptionalProto()
    o.ParseFromString(data)
    return numpy_helper.to_array(o.tensor_value) if o.HasField("tensor_value") else None


def run_model_case(case: ModelCase, backend: str = "reference", native: str | None = None) -> str | None:
    """None on success, else a one-line description of the first mismatch or error."""
    import glow

    from .compare import mismatch

    try:
        exe = glow.compile(case.model_path, backend=backend, native=native, strict=True)  # the backend alone
    except Exception as e:  # noqa: BLE001
        return f"compile: {type(e).__name__}: {e}"
    model = case.load()
    out_names = [o.name for o in model.graph.output]
    for feeds, expected in case.data_sets:
        try:
            with np.errstate(all="ignore"):
                got = exe.run(feeds)
        except Exception as e:  # noqa: BLE001
            return f"run: {type(e).__name__}: {e}"
        for name, exp in zip(out_names, expected):
            m = mismatch(exp, got.get(name), case.rtol, case.atol, name)
            if m:
                return m
    return None
