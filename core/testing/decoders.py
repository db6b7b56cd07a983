"""Small decoders with random weights, built with onnx.helper, for tests and examples:

* `genai_decoder`: onnxruntime-genai's builder's op set (Gather embeddings, SimplifiedLayerNormalization,
  packed-QKV GroupQueryAttention with rotary fused in, SkipSimplifiedLayerNormalization, a SiLU MLP,
  an LM head), its input/output names and its seqlens_k / total_sequence_length sub-graph;
* `plain_decoder`: the same network in standard ops with a KV cache that grows by Concat, as an
  optimum export writes it (attention as MatMul / Softmax with a causal mask from Trilu);
* `write_genai_folder` / `write_optimum_folder`: a model folder as those tools write it.

Weights are drawn with std 0.05 (with std 0.02, greedy output of a random decoder repeats one token).
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

MS = "com.microsoft"


class _Net:
    def __init__(self, seed, layers, hidden, heads, kv_heads, vocab, inter, max_pos):
        self.rng = np.random.default_rng(seed)
        self.layers, self.hidden, self.heads, self.kv_heads = layers, hidden, heads, kv_heads
        self.vocab, self.inter, self.max_pos = vocab, inter, max_pos
        self.head = hidden // heads
        self.nodes, self.inits = [], []

    def w(self, name, *shape, std=0.05):
        self.inits.append(nh.from_array((self.rng.standard_normal(shape) * std).astype(np.float32), name))
        return name

    def const(self, name, value, dtype=np.int64):
        self.inits.append(nh.from_array(np.asarray(value, dtype), name))
        return name

    def add(self, op, ins, outs, domain="", **attrs):
        self.nodes.append(h.make_node(op, ins, outs, name=f"n{len(self.nodes)}_{op}", domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def rotary(self):
        inv = 1.0 / (10000 ** (np.arange(0, self.head, 2) / self.head))
        ang = np.outer(np.arange(self.max_pos), inv)
        self.inits.append(nh.from_array(np.cos(ang).astype(np.float32), "cos_cache"))
        self.inits.append(nh.from_array(np.sin(ang).astype(np.float32), "sin_cache"))

    def mlp(self, i, x):
        gate = self.add("MatMul", [x, self.w(f"l{i}.gate", self.hidden, self.inter)], [f"l{i}.g"])
        up = self.add("MatMul", [x, self.w(f"l{i}.up", self.hidden, self.inter)], [f"l{i}.u"])
        act = self.add("Mul", [gate, self.add("Sigmoid", [gate], [f"l{i}.sg"])], [f"l{i}.silu"])
        return self.add("MatMul", [self.add("Mul", [act, up], [f"l{i}.gu"]),
                                   self.w(f"l{i}.down", self.inter, self.hidden)], [f"l{i}.d"])

    def norm_weight(self, name):
        self.inits.append(nh.from_array((1 + 0.1 * self.rng.standard_normal(self.hidden)).astype(np.float32), name))
        return name


def _io(net, past_names=True):
    kv = [net.kv_heads, "past_sequence_length", net.head]
    ins = [h.make_tensor_value_info("input_ids", T.INT64, ["batch_size", "sequence_length"]),
           h.make_tensor_value_info("attention_mask", T.INT64, ["batch_size", "total_sequence_length"])]
    outs = [h.make_tensor_value_info("logits", T.FLOAT, ["batch_size", "sequence_length", net.vocab])]
    for i in range(net.layers):
        for kind in ("key", "value"):
            ins.append(h.make_tensor_value_info(f"past_key_values.{i}.{kind}", T.FLOAT, ["batch_size", *kv]))
            outs.append(h.make_tensor_value_info(f"present.{i}.{kind}", T.FLOAT,
                                                 ["batch_size", net.kv_heads, "total_sequence_length", net.head]))
    return ins, outs


def genai_decoder(*, layers=2, hidden=64, heads=4, kv_heads=2, vocab=97, inter=96, max_pos=128,
                  seed=0) -> onnx.ModelProto:
    net = _Net(seed, layers, hidden, heads, kv_heads, vocab, inter, max_pos)
    net.rotary()
    x = net.add("Gather", [net.w("embed", vocab, hidden, std=1.0), "input_ids"], ["embeds"])
    total = net.add("ReduceSum", ["attention_mask", net.const("axis1", [1])], ["mask_sum"], keepdims=0)
    seqlens = net.add("Cast", [net.add("Sub", [total, net.const("one", 1)], ["seqlens64"])], ["seqlens_k"],
                      to=T.INT32)
    width = net.add("Gather", [net.add("Shape", ["attention_mask"], ["mask_shape"]), net.const("dim1", 1)],
                    ["total64"], axis=0)
    total_len = net.add("Cast", [width], ["total_sequence_length"], to=T.INT32)
    normed = net.add("SimplifiedLayerNormalization", [x, net.norm_weight("ln.0")], ["normed.0"], epsilon=1e-6)
    resid = x
    qkv_width = (heads + 2 * kv_heads) * net.head
    for i in range(layers):
        qkv = net.add("MatMul", [normed, net.w(f"l{i}.qkv", hidden, qkv_width)], [f"l{i}.qkv_out"])
        attn = net.add("GroupQueryAttention", [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value",
                                               seqlens, total_len, "cos_cache", "sin_cache"],
                       [f"l{i}.attn", f"present.{i}.key", f"present.{i}.value"], domain=MS, num_heads=heads,
                       kv_num_heads=kv_heads, do_rotary=1)[0]
        o = net.add("MatMul", [attn, net.w(f"l{i}.o", heads * net.head, hidden)], [f"l{i}.o_out"])
        normed, _, _, resid = net.add("SkipSimplifiedLayerNormalization", [o, resid, net.norm_weight(f"l{i}.ln2")],
                                      [f"l{i}.n2", "", "", f"l{i}.r2"], domain=MS, epsilon=1e-6)
        down = net.mlp(i, normed)
        last = i == layers - 1
        normed, _, _, resid = net.add("SkipSimplifiedLayerNormalization",
                                      [down, resid, net.norm_weight("final" if last else f"ln.{i + 1}")],
                                      [f"l{i}.n3", "", "", f"l{i}.r3"], domain=MS, epsilon=1e-6)
    net.add("MatMul", [normed, net.w("lm_head", hidden, vocab)], ["logits"])
    ins, outs = _io(net)
    g = h.make_graph(net.nodes, "decoder", ins, outs, net.inits)
    # (onnx.checker refuses SimplifiedLayerNormalization, an onnxruntime op in the default domain, as it
    # refuses the builder's own models)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)])


def plain_decoder(*, layers=2, hidden=64, heads=4, kv_heads=2, vocab=97, inter=96, seed=0) -> onnx.ModelProto:
    """Standard ops; present = Concat(past, new); learned absolute positions from position_ids."""
    net = _Net(seed, layers, hidden, heads, kv_heads, vocab, inter, 256)
    d, g = net.head, heads // kv_heads
    x = net.add("Add", [net.add("Gather", [net.w("embed", vocab, hidden, std=1.0), "input_ids"], ["tok"]),
                        net.add("Gather", [net.w("pos_embed", 256, hidden, std=0.5), "position_ids"], ["pos"])],
                ["embeds"])
    # padding: -1e9 where the mask is 0, over the keys (B, 1, 1, total)
    pad = net.add("Mul", [net.add("Sub", [net.const("onef", 1.0, np.float32),
                                          net.add("Cast", ["attention_mask"], ["maskf"], to=T.FLOAT)], ["inv"]),
                          net.const("neg", -1e9, np.float32)], ["pad"])
    pad = net.add("Unsqueeze", [pad, net.const("ax12", [1, 2])], ["pad4"])
    resid = x
    for i in range(layers):
        normed = net.add("RMSNormalization", [resid, net.norm_weight(f"l{i}.ln1")], [f"l{i}.n1"], epsilon=1e-6)

        def heads_first(v, n, name, i=i):
            r = net.add("Reshape", [v, net.const(f"l{i}.{name}.shape", [0, 0, n, d])], [f"l{i}.{name}.r"])
            return net.add("Transpose", [r], [f"l{i}.{name}.t"], perm=[0, 2, 1, 3])

        q = heads_first(net.add("MatMul", [normed, net.w(f"l{i}.wq", hidden, heads * d)], [f"l{i}.q"]), heads, "q")
        k = heads_first(net.add("MatMul", [normed, net.w(f"l{i}.wk", hidden, kv_heads * d)], [f"l{i}.k"]), kv_heads,
                        "k")
        v = heads_first(net.add("MatMul", [normed, net.w(f"l{i}.wv", hidden, kv_heads * d)], [f"l{i}.v"]), kv_heads,
                        "v")
        k = net.add("Concat", [f"past_key_values.{i}.key", k], [f"present.{i}.key"], axis=2)
        v = net.add("Concat", [f"past_key_values.{i}.value", v], [f"present.{i}.value"], axis=2)
        if g > 1:  # repeat kv heads for their query groups
            k = net.add("Reshape", [net.add("Expand", [net.add("Unsqueeze", [k, net.const(f"l{i}.ax2", [2])],
                                                                [f"l{i}.ku"]),
                                                        net.const(f"l{i}.kx", [1, 1, g, 1, 1])], [f"l{i}.ke"]),
                                    net.const(f"l{i}.ks", [0, heads, -1, d])], [f"l{i}.krep"])
            v = net.add("Reshape", [net.add("Expand", [net.add("Unsqueeze", [v, f"l{i}.ax2"], [f"l{i}.vu"]),
                                                        f"l{i}.kx"], [f"l{i}.ve"]), f"l{i}.ks"], [f"l{i}.vrep"])
        scores = net.add("Div", [net.add("MatMul", [q, net.add("Transpose", [k], [f"l{i}.kt"], perm=[0, 1, 3, 2])],
                                         [f"l{i}.qk"]), net.const(f"l{i}.sqrt", np.sqrt(d), np.float32)],
                         [f"l{i}.scores"])
        # causal: query s (at position past + s) sees keys up to past + s
        qs = net.add("Shape", [q], [f"l{i}.qshape"], start=2, end=3)
        ks = net.add("Shape", [k], [f"l{i}.kshape"], start=2, end=3)
        past = net.add("Sub", [ks, qs], [f"l{i}.past"])
        ones = net.add("ConstantOfShape", [net.add("Concat", [qs, ks], [f"l{i}.qk_shape"], axis=0)], [f"l{i}.ones"],
                       value=h.make_tensor("one", T.BOOL, [1], [True]))
        causal = net.add("Trilu", [ones, net.add("Squeeze", [past], [f"l{i}.past0"])], [f"l{i}.causal"], upper=0)
        scores = net.add("Where", [causal, net.add("Add", [scores, pad], [f"l{i}.padded"]),
                                   net.const(f"l{i}.ninf", -np.inf, np.float32)], [f"l{i}.masked"])
        probs = net.add("Softmax", [scores], [f"l{i}.p"], axis=-1)
        ctx = net.add("Transpose", [net.add("MatMul", [probs, v], [f"l{i}.ctx"])], [f"l{i}.ctxt"], perm=[0, 2, 1, 3])
        ctx = net.add("Reshape", [ctx, net.const(f"l{i}.flat", [0, 0, heads * d])], [f"l{i}.ctxf"])
        resid = net.add("Add", [resid, net.add("MatMul", [ctx, net.w(f"l{i}.wo", heads * d, hidden)], [f"l{i}.o"])],
                        [f"l{i}.r1"])
        normed = net.add("RMSNormalization", [resid, net.norm_weight(f"l{i}.ln2")], [f"l{i}.n2"], epsilon=1e-6)
        resid = net.add("Add", [resid, net.mlp(i, normed)], [f"l{i}.r2"])
    normed = net.add("RMSNormalization", [resid, net.norm_weight("final")], ["final_norm"], epsilon=1e-6)
    net.add("MatMul", [normed, net.w("lm_head", hidden, vocab)], ["logits"])
    ins, outs = _io(net)
    ins.append(h.make_tensor_value_info("position_ids", T.INT64, ["batch_size", "sequence_length"]))
    graph = h.make_graph(net.nodes, "plain_decoder", ins, outs, net.inits)
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    onnx.checker.check_model(m)
    return m


def write_genai_folder(path: str, model: onnx.ModelProto, *, max_length: int = 128, eos: int = 1) -> str:
    """model.onnx and a genai_config.json as onnxruntime-genai's builder writes them."""
    os.makedirs(path, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    past = next(i for i in model.graph.input if i.name == "past_key_values.0.key").type.tensor_type.shape.dim
    layers = sum(1 for i in model.graph.input if i.name.endswith(".key"))
    cfg = {"model": {"bos_token_id": 0, "eos_token_id": eos, "pad_token_id": eos, "context_length": max_length,
                     "type": "llama", "vocab_size": model.graph.output[0].type.tensor_type.shape.dim[2].dim_value,
                     "decoder": {"filename": "model.onnx", "head_size": past[3].dim_value,
                                 "num_key_value_heads": past[1].dim_value, "num_hidden_layers": layers,
                                 "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                                            "past_key_names": "past_key_values.%d.key",
                                            "past_value_names": "past_key_values.%d.value"},
                                 "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                                             "present_value_names": "present.%d.value"}}},
           "search": {"max_length": max_length, "past_present_share_buffer": True, "do_sample": False}}
    with open(os.path.join(path, "genai_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def write_optimum_folder(path: str, model: onnx.ModelProto, *, max_positions: int = 256, eos: int = 1,
                         config: dict | None = None) -> str:
    """model.onnx and the config.json a Hugging Face export carries (`config`: more of its keys)."""
    os.makedirs(path, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    past = next(i for i in model.graph.input if i.name == "past_key_values.0.key").type.tensor_type.shape.dim
    cfg = {"model_type": "llama", "max_position_embeddings": max_positions, "eos_token_id": eos,
           "num_key_value_heads": past[1].dim_value, "head_dim": past[3].dim_value, **(config or {})}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    return path
