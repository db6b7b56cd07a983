"""The CPU backend against onnxruntime and OpenVINO on models from PyTorch's ONNX exporter, at 1 and
2 threads.

    python benchmarks/exporters.py                          # build what is missing, measure, write
    python benchmarks/exporters.py --models vit_small efficientnet_b0 --threads 2 --no-write

The models are the shapes users export at their usual small sizes, with random weights (seeded),
batch 1: transformers architectures built from configs (BERT-tiny and -small, DistilBERT, ViT-small,
a Whisper-tiny encoder on 30 s of audio, a T5-small encoder, GPT-2 small: 128 tokens) and CNNs
written here in the shapes of ResNet-18, MobileNetV2, MobileNetV3-small and EfficientNet-B0 at
224 x 224 (PyPI's torchvision does not import beside the CPU torch build these machines use).
`torch.onnx.export`'s TorchScript exporter writes them (opset 17) into --dir once; building needs
torch and transformers, measuring only glow, onnxruntime and OpenVINO. Each model and thread count
is one `glow.bench.bench` (interleaved, fresh inputs, medians; busy threads per runtime). Results go
to benchmarks/results-exporters.json; docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model  # noqa: E402 (benchmarks/host.py, next to this script)

DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "glow-bench", "exporters")
SEQ = 128


# -- the models (torch is imported only to build them) ---------------------------------------------

def _hf(config: str, model: str, key: str, example, mask: bool = False, **kw):
    """A transformers model from its config; `mask`: called with an all-ones attention mask, made in
    the graph (GPT-2's mask code uses torch.diff without one, which the exporter cannot write)."""
    import torch
    import transformers

    torch.manual_seed(0)
    m = getattr(transformers, model)(getattr(transformers, config)(**kw)).eval()

    class First(torch.nn.Module):  # keyword input in, the first output tensor out
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(**{key: x}, **({"attention_mask": torch.ones_like(x)} if mask else {}))[0]

    return First(), example


def _ids():
    import torch

    return torch.randint(0, 1000, (1, SEQ), generator=torch.Generator().manual_seed(1))


def _image():
    import torch

    return torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))


def bert_tiny():
    return _hf("BertConfig", "BertModel", "input_ids", _ids(), hidden_size=128, num_hidden_layers=2,
               num_attention_heads=2, intermediate_size=512)


def bert_small():
    return _hf("BertConfig", "BertModel", "input_ids", _ids(), hidden_size=512, num_hidden_layers=4,
               num_attention_heads=8, intermediate_size=2048)


def distilbert():
    return _hf("DistilBertConfig", "DistilBertModel", "input_ids", _ids())


def vit_small():
    return _hf("ViTConfig", "ViTModel", "pixel_values", _image(), hidden_size=384, num_hidden_layers=12,
               num_attention_heads=6, intermediate_size=1536)


def whisper_tiny_encoder():
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                                     decoder_layers=1, decoder_attention_heads=6, num_mel_bins=80)
    enc = transformers.WhisperModel(cfg).get_encoder().eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = enc

        def forward(self, x):
            return self.m(input_features=x)[0]

    return Encoder(), torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(1))


def t5_small_encoder():
    return _hf("T5Config", "T5EncoderModel", "input_ids", _ids(), d_model=512, d_ff=2048, num_layers=6,
               num_heads=8, d_kv=64)


def gpt2_small():
    return _hf("GPT2Config", "GPT2Model", "input_ids", _ids(), mask=True, use_cache=False)


def _cnn(build):
    """A CNN made by `build(nn)`, with batch norms whose running statistics are not the identity."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    m = build(nn).eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
    return m, _image()


def _conv_bn(nn, cin, cout, k=1, stride=1, groups=1, act=None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act else []))


def _block(nn, cin, cout, k, stride, mid, se, act, se_act, gate):
    """An inverted residual (MobileNetV2/V3, EfficientNet's MBConv): expand 1x1, depthwise k x k,
    squeeze-excite (`se` channels, or none), project 1x1; the input added back where shapes allow."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = _conv_bn(nn, cin, mid, act=act) if mid != cin else nn.Identity()
            self.dw = _conv_bn(nn, mid, mid, k, stride, groups=mid, act=act)
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, se, 1), se_act(), nn.Conv2d(se, mid, 1),
                                    gate()) if se else None
            self.project = _conv_bn(nn, mid, cout)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.dw(self.expand(x))
            if self.se is not None:
                y = y * self.se(y)
            y = self.project(y)
            return x + y if self.residual else y

    return Block()


def _head(nn, cin, features, classes, act):
    hidden = [nn.Linear(cin, features), act()] if features else []
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), *hidden, nn.Linear(features or cin, classes))


def resnet18():
    def build(nn):
        class Basic(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.body = nn.Sequential(_conv_bn(nn, cin, cout, 3, stride, act=nn.ReLU), _conv_bn(nn, cout, cout, 3))
                self.down = _conv_bn(nn, cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

            def forward(self, x):
                return (self.body(x) + self.down(x)).relu()

        stages = [Basic(c_in, c, s) for c_in, c, s in ((64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1),
                                                       (128, 256, 2), (256, 256, 1), (256, 512, 2), (512, 512, 1))]
        return nn.Sequential(_conv_bn(nn, 3, 64, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1), *stages,
                             _head(nn, 512, 0, 1000, None))

    return _cnn(build)


def mobilenet_v2():
    def build(nn):
        blocks, cin = [], 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                           (6, 320, 1, 1)):
            for i in range(n):
                blocks.append(_block(nn, cin, c, 3, s if i == 0 else 1, cin * t, 0, nn.ReLU6, None, None))
                cin = c
        return nn.Sequential(_conv_bn(nn, 3, 32, 3, 2, act=nn.ReLU6), *blocks, _conv_bn(nn, 320, 1280, act=nn.ReLU6),
                             _head(nn, 1280, 0, 1000, None))

    return _cnn(build)


def mobilenet_v3_small():
    def build(nn):
        blocks, cin = [], 16
        for k, mid, c, se, hs, s in ((3, 16, 16, 1, 0, 2), (3, 72, 24, 0, 0, 2), (3, 88, 24, 0, 0, 1),
                                     (5, 96, 40, 1, 1, 2), (5, 240, 40, 1, 1, 1), (5, 240, 40, 1, 1, 1),
                                     (5, 120, 48, 1, 1, 1), (5, 144, 48, 1, 1, 1), (5, 288, 96, 1, 1, 2),
                                     (5, 576, 96, 1, 1, 1), (5, 576, 96, 1, 1, 1)):
            squeeze = max(8, (mid // 4 + 4) // 8 * 8) if se else 0
            blocks.append(_block(nn, cin, c, k, s, mid, squeeze, nn.Hardswish if hs else nn.ReLU, nn.ReLU,
                                 nn.Hardsigmoid))
            cin = c
        return nn.Sequential(_conv_bn(nn, 3, 16, 3, 2, act=nn.Hardswish), *blocks,
                             _conv_bn(nn, 96, 576, act=nn.Hardswish), _head(nn, 576, 1024, 1000, nn.Hardswish))

    return _cnn(build)


def efficientnet_b0():
    def build(nn):
        blocks, cin = [], 32
        for t, k, s, c, n in ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                              (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)):
            for i in range(n):
                blocks.append(_block(nn, cin, c, k, s if i == 0 else 1, cin * t, max(1, cin // 4), nn.SiLU, nn.SiLU,
                                     nn.Sigmoid))
                cin = c
        return nn.Sequential(_conv_bn(nn, 3, 32, 3, 2, act=nn.SiLU), *blocks, _conv_bn(nn, 320, 1280, act=nn.SiLU),
                             _head(nn, 1280, 0, 1000, None))

    return _cnn(build)


MODELS = {f.__name__: f for f in (bert_tiny, bert_small, distilbert, vit_small, whisper_tiny_encoder, t5_small_encoder,
                                  gpt2_small, resnet18, mobilenet_v2, mobilenet_v3_small, efficientnet_b0)}


def build(name: str, folder: str) -> str:
    """The model's .onnx in `folder`, exported now if it is not there (written whole, then renamed)."""
    path = os.path.join(folder, f"{name}.onnx")
    if os.path.exists(path):
        return path
    import torch

    os.makedirs(folder, exist_ok=True)
    model, example = MODELS[name]()
    tmp = path + ".part"
    with torch.no_grad():
        torch.onnx.export(model, (example,), tmp, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["y"])
    os.replace(tmp, path)
    return path


# -- measuring --------------------------------------------------------------------------------------

def measure(path: str, threads: int, rounds: int) -> dict:
    from glow.bench import bench

    r = bench(path, backend="cpu", threads=threads, rounds=rounds, vs="onnxruntime,openvino")
    peers = {n: t.median_ms for n, t in r.peers.items()}
    return {"threads": threads, "glow_ms": r.glow.median_ms, "glow_busy": r.glow.busy_threads, "peers_ms": peers,
            "peers_busy": {n: t.busy_threads for n, t in r.peers.items()}, "compile_s": r.compile_s,
            "max_abs_diff": r.max_abs_diff, "fastest_ratio": r.glow.median_ms / min(peers.values())}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def table(rows: list[dict]) -> list[str]:
    """Markdown rows: model, threads, glow / onnxruntime / OpenVINO ms, glow / fastest peer, busy threads."""
    out = ["| model | threads | glow ms | onnxruntime ms | OpenVINO ms | glow / fastest peer | busy threads (glow) |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["peers_ms"]
        out.append(f"| {r['model']} | {r['threads']} | {r['glow_ms']:.3f} | {p.get('onnxruntime', float('nan')):.3f} | "
                   f"{p.get('openvino', float('nan')):.3f} | {r['fastest_ratio']:.2f} | {r['glow_busy']:.1f} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--dir", default=DEFAULT_DIR, help="where the exported models are kept")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from glow.backends.cpu import jit

    rows = []
    for name in args.models:
        path = build(name, args.dir)
        for t in args.threads:
            r = {"model": name, **measure(path, t, args.rounds)}
            rows.append(r)
            print(table([r])[-1], flush=True)
    for t in args.threads:
        ratios = [r["fastest_ratio"] for r in rows if r["threads"] == t]
        print(f"{t} thread(s): geomean glow / fastest peer {geomean(ratios):.3f} over {len(ratios)} models, "
              f"worst {max(ratios):.2f}")
    if not args.no_write:  # rows of models and thread counts not measured now are kept
        path = os.path.join(HERE, "results-exporters.json")
        host = {"cpu_model": cpu_model(), "cpu": jit.cpu_name(), "isa": jit.isa(), "cores": os.cpu_count()}
        old = json.load(open(path)) if os.path.exists(path) else {}
        new = {(r["model"], r["threads"]) for r in rows}
        kept = [r for r in old.get("rows", []) if (r["model"], r["threads"]) not in new and old.get("host") == host]
        order = list(MODELS)
        rows = sorted(kept + rows, key=lambda r: (order.index(r["model"]) if r["model"] in order else 99, r["threads"]))
        with open(path, "w") as f:
            json.dump({"host": host, "rounds": args.rounds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
