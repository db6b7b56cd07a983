"""Make small ONNX models with the real PyTorch exporters, for glow's tests.

This script does NOT run in glow's own environment: it needs torch,
transformers, onnx, onnxscript (for the dynamo exporter) and onnxruntime,
which glow does not depend on.  Run it in a side virtual environment, e.g.::

    python3 -m venv /work/sidevenv
    . /work/sidevenv/bin/activate
    # CPU-only torch, without the multi-GB nvidia-* wheels:
    pip install --no-deps torch   # or a local torch-*+cpu wheel
    pip install filelock fsspec jinja2 networkx "setuptools>=77" sympy \
        typing-extensions mpmath markupsafe numpy
    pip install transformers onnx onnxscript onnxruntime
    python scripts/make_exporter_models.py          # from the repo root

It writes into tests/data/exporters/:

* bert_dynamic.onnx      transformers.BertModel, TorchScript exporter
                         (dynamo=False), opset 17, dynamic batch/sequence
* llama_dynamo.onnx      transformers.LlamaForCausalLM (use_cache=False),
                         dynamo exporter, dynamic batch/sequence, one file
* gpt2_dynamic.onnx      transformers.GPT2Model, TorchScript exporter,
                         dynamic batch/sequence
* cnn_dynamic_batch.onnx a small Conv/BN/ReLU/MaxPool/AdaptiveAvgPool/
                         Flatten/Linear CNN, TorchScript exporter, dynamic batch
* ssdlite_small.onnx     torchvision's SSDlite320 (MobileNetV3, width 0.25, 5
                         classes), TorchScript exporter, opset 17: NonZero per
                         class, TopK whose k comes from data, If, NonMaxSuppression
                         (needs torchvision; where its C++ ops do not load beside a
                         CPU torch, its two NMS ops are defined in Python here)

and, for each, <name>.npz with two input sets and the onnxruntime outputs
for them: keys ``input:<name>`` / ``output:<name>`` (batch 2, sequence 16
for the text models) and ``input2:<name>`` / ``output2:<name>`` (batch 3,
sequence 24).  Expected outputs come from onnxruntime (checked against
torch's own outputs to 1e-4), never from glow.  Weights are random with a
fixed seed; every model is in eval mode.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(HERE), "tests", "data", "exporters")
VOCAB = 1000
SEED = 0


def _text_inputs(rng, batch, seq, names):
    """Token ids < VOCAB; attention_mask with zeros at the end of row 1."""
    feeds = {}
    if "input_ids" in names:
        feeds["input_ids"] = rng.integers(0, VOCAB, size=(batch, seq), dtype=np.int64)
    if "attention_mask" in names:
        mask = np.ones((batch, seq), dtype=np.int64)
        mask[1, seq - seq // 4:] = 0
        feeds["attention_mask"] = mask
    if "token_type_ids" in names:
        tt = np.zeros((batch, seq), dtype=np.int64)
        tt[:, seq // 2:] = 1
        feeds["token_type_ids"] = tt
    return feeds


def _single_file(path):
    """Re-save a model so that all its weights live inside the one file."""
    m = onnx.load(path, load_external_data=True)
    for f in os.listdir(os.path.dirname(path)):
        full = os.path.join(os.path.dirname(path), f)
        if f.startswith(os.path.basename(path)) and full != path:
            os.remove(full)  # e.g. model.onnx.data
    onnx.save(m, path, save_as_external_data=False)


class _Wrap(torch.nn.Module):
    """Call a HF model with keyword inputs and return a tuple of tensors."""

    def __init__(self, model, in_names, out_names):
        super().__init__()
        self.model = model
        self.in_names = list(in_names)
        self.out_names = list(out_names)

    def forward(self, *args):
        out = self.model(**dict(zip(self.in_names, args)), return_dict=True)
        return tuple(out[n] for n in self.out_names)


def make_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=128)
    model = BertModel(cfg).eval()
    ins = ["input_ids", "attention_mask", "token_type_ids"]
    outs = ["last_hidden_state", "pooler_output"]
    wrap = _Wrap(model, ins, outs).eval()
    return dict(name="bert_dynamic", module=wrap, in_names=ins, out_names=outs,
                dynamo=False, text=True,
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ins}
                | {"last_hidden_state": {0: "batch", 1: "sequence"},
                   "pooler_output": {0: "batch"}})


def make_gpt2():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(SEED)
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                     n_positions=128, use_cache=False,
                     bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    model = GPT2Model(cfg).eval()
    ins = ["input_ids", "attention_mask"]
    outs = ["last_hidden_state"]
    wrap = _Wrap(model, ins, outs).eval()
    return dict(name="gpt2_dynamic", module=wrap, in_names=ins, out_names=outs,
                dynamo=False, text=True,
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ins + outs})


def make_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=128, max_position_embeddings=128,
                      use_cache=False)
    model = LlamaForCausalLM(cfg).eval()
    ins = ["input_ids", "attention_mask"]
    outs = ["logits"]
    wrap = _Wrap(model, ins, outs).eval()
    return dict(name="llama_dynamo", module=wrap, in_names=ins, out_names=outs,
                dynamo=True, text=True)


class SmallCNN(torch.nn.Module):
    """~57k parameters.  The TorchScript exporter folds the eval-mode
    BatchNorms into the Convs, so the ONNX graph has no BatchNormalization."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.features(x)


def make_cnn():
    torch.manual_seed(SEED)
    model = SmallCNN()
    # Non-trivial BatchNorm statistics, so the folded BN is not the identity.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.eval()
    return dict(name="cnn_dynamic_batch", module=model, in_names=["input"],
                out_names=["logits"], dynamo=False, text=False,
                dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def _torchvision():
    """torchvision, importable beside a CPU torch build whose C++ ops it cannot load (PyPI's wheel
    is built against CUDA torch): its two NMS ops are defined in Python first. Exporters only need
    their schema (torchvision maps them to ONNX's NonMaxSuppression) and a CPU value for the check."""
    import glob
    import importlib.util

    where = os.path.dirname(importlib.util.find_spec("torchvision").origin)
    try:
        torch.ops.load_library(glob.glob(os.path.join(where, "_C*.so"))[0])
        import torchvision

        return torchvision
    except OSError:  # built against another torch: define the ops before torchvision is imported
        pass
    lib = torch.library.Library("torchvision", "DEF")
    _KEEP.append(lib)  # a Library's ops go when it is collected
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

    def nms(dets, scores, iou):
        order = torch.argsort(scores, descending=True, stable=True)
        x1, y1, x2, y2 = dets[order].unbind(1)
        area = (x2 - x1) * (y2 - y1)
        gone = torch.zeros(len(order), dtype=torch.bool)
        keep = []
        for i in range(len(order)):
            if gone[i]:
                continue
            keep.append(int(order[i]))
            w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
            h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
            gone |= w * h / (area[i] + area - w * h) > iou
        return torch.tensor(keep, dtype=torch.int64)

    lib.impl("nms", nms, "CPU")
    lib.impl("qnms", nms, "CPU")
    import torchvision.extension as ext

    ext._has_ops = _true  # a plain function: TorchScript compiles the callers that ask
    import torchvision

    return torchvision


_KEEP: list = []


def _true():
    return True


def make_ssdlite():
    tv = _torchvision()
    torch.manual_seed(SEED)
    model = tv.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=5, width_mult=0.25).eval()
    # torchvision's detection init (normal, std 0.03) lets activations die out in the backbone:
    # every class score is then 1/5 exactly, and the boxes TopK and NMS keep depend on how each
    # engine breaks ties. He-initialised convolutions keep the activations, so scores differ.
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
    return dict(name="ssdlite_small", module=_Detections(model).eval(), in_names=["images"],
                out_names=["boxes", "scores", "labels"], dynamo=False, text=False, image=(1, 160),
                dynamic_axes={})


class _Detections(torch.nn.Module):
    """The detector on a batch tensor, returning (boxes, scores, labels) of the first image."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images):
        d = self.model(images)[0]
        return d["boxes"], d["scores"], d["labels"]


def _feeds(spec, rng, second):
    if spec.get("image"):
        batch, hw = spec["image"]
        return {"images": rng.random((batch, 3, hw, hw), dtype=np.float32)}
    if spec["text"]:
        batch, seq = (3, 24) if second else (2, 16)
        return _text_inputs(rng, batch, seq, spec["in_names"])
    batch, hw = (3, 32) if second else (2, 32)
    return {"input": rng.standard_normal((batch, 3, hw, hw)).astype(np.float32)}


def export(spec, path):
    module = spec["module"]
    rng = np.random.default_rng(SEED)
    example = _feeds(spec, rng, second=False)
    args = tuple(torch.from_numpy(example[n]) for n in spec["in_names"])
    if spec["dynamo"]:
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("sequence", min=2, max=128)
        # _Wrap.forward takes *args: one entry holding a spec per input.
        dyn = (tuple({0: batch, 1: seq} for _ in spec["in_names"]),)
        prog = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=dyn,
                                 input_names=spec["in_names"],
                                 output_names=spec["out_names"],
                                 external_data=False)
        prog.save(path, external_data=False)
        _single_file(path)
    else:
        torch.onnx.export(module, args, path, dynamo=False, opset_version=17,
                          input_names=spec["in_names"],
                          output_names=spec["out_names"],
                          dynamic_axes=spec["dynamic_axes"],
                          do_constant_folding=True)
        # The TorchScript exporter keeps weights inline for small models;
        # make sure anyway.
        _single_file(path)


def check(spec, path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(SEED + 1)
    data = {}
    diffs = []
    for tag, second in (("", False), ("2", True)):
        feeds = _feeds(spec, rng, second)
        got = sess.run(spec["out_names"], feeds)
        with torch.no_grad():
            ref = spec["module"](*(torch.from_numpy(feeds[n]) for n in spec["in_names"]))
        if isinstance(ref, torch.Tensor):
            ref = (ref,)
        for n, g, r in zip(spec["out_names"], got, ref):
            r = r.numpy()  # relative to the output's scale (a detector's boxes are in pixels)
            d = float(np.max(np.abs(g - r), initial=0.0)) / max(1.0, float(np.max(np.abs(r), initial=0.0)))
            diffs.append(d)
            assert g.shape == tuple(r.shape), (n, g.shape, r.shape)
            assert d < 1e-4, f"{spec['name']}:{n}: onnxruntime vs torch max diff {d} (of the output's scale)"
            data[f"output{tag}:{n}"] = g
        for n, v in feeds.items():
            data[f"input{tag}:{n}"] = v
    np.savez(os.path.join(OUT_DIR, spec["name"] + ".npz"), **data)
    hist = {}
    for node in model.graph.node:
        hist[node.op_type] = hist.get(node.op_type, 0) + 1
    opset = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    return dict(size=os.path.getsize(path), maxdiff=max(diffs), hist=hist,
                nodes=len(model.graph.node), functions=len(model.functions),
                opset=opset,
                inputs=[(i.name, [d.dim_param or d.dim_value
                                  for d in i.type.tensor_type.shape.dim])
                        for i in model.graph.input],
                outputs=[(o.name, [d.dim_param or d.dim_value
                                   for d in o.type.tensor_type.shape.dim])
                         for o in model.graph.output])


def main(argv):
    os.makedirs(OUT_DIR, exist_ok=True)
    warnings.filterwarnings("ignore")
    makers = {"bert_dynamic": make_bert, "llama_dynamo": make_llama,
              "gpt2_dynamic": make_gpt2, "cnn_dynamic_batch": make_cnn, "ssdlite_small": make_ssdlite}
    wanted = argv or list(makers)
    rows = []
    for key in wanted:
        spec = makers[key]()
        path = os.path.join(OUT_DIR, spec["name"] + ".onnx")
        with torch.no_grad():
            export(spec, path)
        info = check(spec, path)
        assert info["size"] < 3 * 1024 * 1024, (path, info["size"])
        rows.append((spec["name"], info))
    print(f"{'model':22} {'bytes':>9} {'nodes':>6} {'max|ort-torch|':>15}  opset")
    for name, info in rows:
        print(f"{name:22} {info['size']:>9} {info['nodes']:>6} "
              f"{info['maxdiff']:>15.3g}  {info['opset']}")
    for name, info in rows:
        print(f"\n{name}: inputs {info['inputs']} outputs {info['outputs']} "
              f"functions {info['functions']}")
        print("  " + ", ".join(f"{k} {v}" for k, v in
                               sorted(info["hist"].items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
