"""Token-id models written the way the PyTorch exporters write them (deterministic weights).

* encoder: a BERT-style encoder: word + position embeddings (position ids from
  Shape -> Gather -> Range), an attention mask turned into an additive bias, `layers` blocks of
  multi-head attention (head shapes built from Shape/Gather/Unsqueeze/Concat) and an Erf-Gelu FFN.
* decoder: a GPT-style decoder: the same blocks with a causal mask built from Range and
  LessOrEqual over the run-time sequence length, and a language-model head.

`dynamic=True` gives the inputs symbolic dims ("batch", "sequence"), as `dynamic_axes` does; with
`dynamic=False` they are fixed to (batch, seq). Either way the token ids are data: a compiler must
never need their values to compile the model.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from .bench_models import _model, _Weights


class _Builder:
    def __init__(self, hidden: int, heads: int, ffn: int, seed: int = 0):
        self.w = _Weights(seed)
        self.nodes: list = []
        self.hidden, self.heads, self.ffn = hidden, heads, ffn
        self._k = 0
        c = self.w.const
        self.i0, self.i1, self.i2 = (c("i0", np.array(0, np.int64)), c("i1", np.array(1, np.int64)),
                                     c("i2", np.array(2, np.int64)))
        self.ax0, self.ax1, self.ax12 = (c("ax0", np.array([0], np.int64)), c("ax1", np.array([1], np.int64)),
                                         c("ax12", np.array([1, 2], np.int64)))
        self.heads_hd = c("heads_hd", np.array([heads, hidden // heads], np.int64))
        self.hid = c("hid", np.array([hidden], np.int64))

    def n(self, op, ins, **attrs) -> str:
        self._k += 1
        out = f"{op.lower()}_{self._k}"
        self.nodes.append(helper.make_node(op, ins, [out], name=f"{op}_{self._k}", **attrs))
        return out

    def linear(self, x, a, b, name) -> str:
        return self.n("Add", [self.n("MatMul", [x, self.w(f"{name}_w", a, b)]), self.w(f"{name}_b", b, scale=0.02)])

    def layer_norm(self, x, name) -> str:
        return self.n("LayerNormalization", [x, self.w(f"{name}_g", self.hidden, scale=1.0),
                                             self.w(f"{name}_b", self.hidden, scale=0.02)], axis=-1, epsilon=1e-12)

    def dims(self, x):
        """(batch, sequence) of x as 1-element int64 tensors, the exporters' Shape/Gather/Unsqueeze."""
        shape = self.n("Shape", [x])
        b = self.n("Unsqueeze", [self.n("Gather", [shape, self.i0], axis=0), self.ax0])
        s = self.n("Unsqueeze", [self.n("Gather", [shape, self.i1], axis=0), self.ax0])
        return b, s

    def attention(self, x, bias, name) -> str:
        h, hd = self.hidden, self.hidden // self.heads
        b, s = self.dims(x)
        split = self.n("Concat", [b, s, self.heads_hd], axis=0)
        merged = self.n("Concat", [b, s, self.hid], axis=0)
        q, k, v = (self.n("Transpose", [self.n("Reshape", [self.linear(x, h, h, f"{name}_{p}"), split])],
                          perm=perm) for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])))
        scale = self.w.const(f"{name}_scale", np.array(1.0 / np.sqrt(hd), np.float32))
        scores = self.n("Add", [self.n("Div", [self.n("MatMul", [q, k]), self.n("Reciprocal", [scale])]), bias])
        ctx = self.n("MatMul", [self.n("Softmax", [scores], axis=-1), v])
        ctx = self.n("Reshape", [self.n("Transpose", [ctx], perm=[0, 2, 1, 3]), merged])
        return self.layer_norm(self.n("Add", [x, self.linear(ctx, h, h, f"{name}_o")]), f"{name}_ln1")

    def ffn_block(self, x, name) -> str:
        f = self.linear(x, self.hidden, self.ffn, f"{name}_f1")
        c = self.w.const
        g = self.n("Mul", [self.n("Mul", [f, self.n("Add", [self.n("Erf", [self.n("Div", [f, c(f"{name}_r2", np.array(
            np.sqrt(2.0), np.float32))])]), c(f"{name}_one", np.array(1.0, np.float32))])]),
            c(f"{name}_half", np.array(0.5, np.float32))])
        return self.layer_norm(self.n("Add", [x, self.linear(g, self.ffn, self.hidden, f"{name}_f2")]), f"{name}_ln2")

    def embed(self, ids, vocab, max_pos) -> tuple[str, str]:
        """Word + position embeddings of ids; also returns the sequence length as a scalar."""
        shape = self.n("Shape", [ids])
        seq = self.n("Gather", [shape, self.i1], axis=0)
        pos = self.n("Unsqueeze", [self.n("Range", [self.i0, seq, self.i1]), self.ax0])
        x = self.n("Add", [self.n("Gather", [self.w("word_emb", vocab, self.hidden, scale=0.5), ids], axis=0),
                           self.n("Gather", [self.w("pos_emb", max_pos, self.hidden, scale=0.1), pos], axis=0)])
        return self.layer_norm(x, "emb_ln"), seq


def _io(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, list(dims))


def encoder(layers: int = 2, hidden: int = 128, heads: int = 2, ffn: int = 512, vocab: int = 1000,
            batch: int = 2, seq: int = 32, dynamic: bool = True) -> onnx.ModelProto:
    """BERT-style: (input_ids, attention_mask) -> last_hidden_state [batch, seq, hidden]."""
    nb = _Builder(hidden, heads, ffn)
    dims = ("batch", "sequence") if dynamic else (batch, seq)
    x, _ = nb.embed("input_ids", vocab, 512)
    m = nb.n("Cast", [nb.n("Unsqueeze", ["attention_mask", nb.ax12])], to=TensorProto.FLOAT)
    one = nb.w.const("one", np.array(1.0, np.float32))
    bias = nb.n("Mul", [nb.n("Sub", [one, m]), nb.w.const("neg", np.array(-10000.0, np.float32))])
    for i in range(layers):
        x = nb.ffn_block(nb.attention(x, bias, f"l{i}"), f"l{i}")
    nb.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    return _model("bert_encoder", nb.nodes, [_io("input_ids", TensorProto.INT64, dims),
                                             _io("attention_mask", TensorProto.INT64, dims)],
                  [_io("last_hidden_state", TensorProto.FLOAT, (*dims, hidden))], nb.w.inits)


def decoder(layers: int = 2, hidden: int = 128, heads: int = 2, ffn: int = 512, vocab: int = 1000,
            batch: int = 2, seq: int = 32, dynamic: bool = True) -> onnx.ModelProto:
    """GPT-style: input_ids -> logits [batch, seq, vocab], causal attention."""
    nb = _Builder(hidden, heads, ffn, seed=1)
    dims = ("batch", "sequence") if dynamic else (batch, seq)
    x, s = nb.embed("input_ids", vocab, 512)
    r = nb.n("Range", [nb.i0, s, nb.i1])
    future = nb.n("Greater", [nb.n("Unsqueeze", [r, nb.ax0]), nb.n("Unsqueeze", [r, nb.ax1])])  # key > query
    bias = nb.n("Where", [future, nb.w.const("ninf", np.array(-1e9, np.float32)),
                          nb.w.const("zero", np.array(0.0, np.float32))])
    for i in range(layers):
        x = nb.ffn_block(nb.attention(x, bias, f"l{i}"), f"l{i}")
    nb.nodes.append(helper.make_node("MatMul", [x, nb.w("lm_head", hidden, vocab)], ["logits"]))
    return _model("gpt_decoder", nb.nodes, [_io("input_ids", TensorProto.INT64, dims)],
                  [_io("logits", TensorProto.FLOAT, (*dims, vocab))], nb.w.inits)


def token_feeds(model: onnx.ModelProto, batch: int, seq: int, rng: np.random.Generator, vocab: int = 1000) -> dict:
    """Fresh random token ids (and an attention mask with padding at the end of the last row)."""
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64)}
    if any(i.name == "attention_mask" for i in model.graph.input):
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq - seq // 4:] = 0
        feeds["attention_mask"] = mask
    return feeds
