"""Small PyTorch models for the torch frontend's tests and benchmarks/torch_backends.py: transformers
architectures built from configs (random weights, no downloads) and CNNs written here (PyPI's
torchvision does not import beside the CPU torch build these machines use).

`MODELS[name]()` -> (model in eval mode, example args tuple). Sizes are tiny (hidden 32-64, two
layers) so that every model compiles in seconds on a 2-core machine.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 128


def _ids(batch=2, seq=8, vocab=VOCAB):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, (batch, seq), generator=g)


def _hf(config_cls_name: str, model_cls_name: str = "AutoModel", **kw):
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls_name)(**kw)
    cls = getattr(transformers, model_cls_name)
    model = cls.from_config(cfg) if model_cls_name.startswith("Auto") else cls(cfg)
    return model.eval()


class HFOut(nn.Module):
    """A transformers model called with keyword inputs, returning its first output tensor
    (`last_hidden_state` or `logits`) so that every backend compares one tensor."""

    def __init__(self, model, key: str = "input_ids"):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        out = self.model(**{self.key: x})
        return out[0]


_TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64)


def bert():
    return HFOut(_hf("BertConfig", **_TEXT)), (_ids(),)


def roberta():
    return HFOut(_hf("RobertaConfig", **{**_TEXT, "max_position_embeddings": 72})), (_ids(),)


def distilbert():
    m = _hf("DistilBertConfig", vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=64)
    return HFOut(m), (_ids(),)


def albert():
    return HFOut(_hf("AlbertConfig", embedding_size=16, **_TEXT)), (_ids(),)


def electra():
    return HFOut(_hf("ElectraConfig", embedding_size=16, **_TEXT)), (_ids(),)


def gpt2():
    m = _hf("GPT2Config", "AutoModelForCausalLM", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2,
            n_positions=64)
    return HFOut(m), (_ids(),)


def _decoder(config: str, **extra):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    kw.update(extra)
    return HFOut(_hf(config, "AutoModelForCausalLM", **kw)), (_ids(),)


def llama():
    return _decoder("LlamaConfig")


def qwen2():
    return _decoder("Qwen2Config")


def mistral():
    return _decoder("MistralConfig", sliding_window=None)


def t5_encoder():
    m = _hf("T5Config", "T5EncoderModel", vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
            num_heads=4)
    return HFOut(m), (_ids(),)


def vit():
    m = _hf("ViTConfig", hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            image_size=32, patch_size=8, num_channels=3)
    torch.manual_seed(2)
    return HFOut(m, "pixel_values"), (torch.randn(2, 3, 32, 32),)


def whisper_encoder():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2, decoder_layers=1,
                                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                     num_mel_bins=16, max_source_positions=16, vocab_size=VOCAB,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    m = transformers.WhisperModel(cfg).get_encoder().eval()
    torch.manual_seed(2)
    return HFOut(m, "input_features"), (torch.randn(2, 16, 32),)


# -- hand-written CNNs ---------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNetish(nn.Module):
    """ResNet-18's shape at a fraction of the width: stem, max pool, residual stages, head."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stages = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.Hardswish(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetish(nn.Module):
    """MobileNetV2/V3's shape: depthwise separable inverted residuals, ReLU6 and hardswish."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.blocks = nn.Sequential(InvertedResidual(16, 16, 1, 2), InvertedResidual(16, 24, 2, 4),
                                    InvertedResidual(24, 24, 1, 4), InvertedResidual(24, 32, 2, 4))
        self.head = nn.Sequential(nn.Linear(32, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean((2, 3)))


class Conv1dNet(nn.Module):
    """A 1-D convolutional audio/keyword-spotting shape: conv1d, GELU, avg pool, group norm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(8, 16, 5, padding=2)
        self.gn = nn.GroupNorm(4, 16)
        self.c2 = nn.Conv1d(16, 16, 3, stride=2, padding=1, groups=4)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = nn.functional.gelu(self.gn(self.c1(x)))
        x = nn.functional.avg_pool1d(self.c2(x), 2)
        return torch.log_softmax(self.fc(x.amax(-1)), -1)


def _seeded(cls, *shape):
    def make():
        torch.manual_seed(0)
        m = cls().eval()
        with torch.no_grad():  # non-trivial running statistics, so batch norm is really tested
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.uniform_(-0.5, 0.5)
                    mod.running_var.uniform_(0.5, 1.5)
        torch.manual_seed(2)
        return m, (torch.randn(*shape),)

    return make


resnet = _seeded(ResNetish, 2, 3, 32, 32)
mobilenet = _seeded(MobileNetish, 2, 3, 32, 32)
conv1d = _seeded(Conv1dNet, 2, 8, 32)

MODELS = {f.__name__: f for f in (bert, roberta, distilbert, albert, electra, gpt2, llama, qwen2, mistral,
                                  t5_encoder, vit, whisper_encoder)}
MODELS.update(resnet=resnet, mobilenet=mobilenet, conv1d=conv1d)
