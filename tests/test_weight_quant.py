"""Weight-only block quantization (glow.weight_quant, `glow quantize --weights`): the codes it writes
dequantize to within half a step of the weights, the MatMulNBits model runs on glow and onnxruntime
alike, a decoder folder quantizes whole (configs along) and generates, bad input is one line."""

import json
import os
import subprocess
import sys

import glow
import numpy as np
import onnx
import pytest
from glow.ops.nbits import dequantize_nbits
from glow.testing.decoders import genai_decoder, plain_decoder, write_genai_folder, write_optimum_folder
from glow.weight_quant import block_quantize, pack_bits, quantize_weights
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


@pytest.mark.parametrize("bits,symmetric", [(4, False), (4, True), (8, False), (8, True)])
@pytest.mark.parametrize("k,block", [(64, 32), (70, 32), (128, 128), (40, 16)])
def test_codes_dequantize_to_within_half_a_step(bits, symmetric, k, block):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, 24)).astype(np.float32)
    w[:, 3] = 0.0  # a column of zeros: scale 1, codes exactly 0
    w[:, 5] = np.abs(w[:, 5])  # all positive: the range widened to hold 0
    codes, scales, zp = block_quantize(w, bits, block, symmetric)
    assert (zp is None) == symmetric
    b = pack_bits(codes, bits)
    z = None if zp is None else pack_bits(zp, bits).reshape(-1)
    back = dequantize_nbits(b, scales, z, K=k, N=24, bits=bits, block_size=block)
    step = np.repeat(scales, block, axis=1)[:, :k].T  # [K, N]
    assert np.all(np.abs(back - w) <= 0.5 * step * (1 + 1e-5))
    assert np.all(back[:, 3] == 0.0)
    assert np.abs(back - w).max() > 0  # it did quantize


def _mlp():
    rng = np.random.default_rng(1)
    x = h.make_tensor_value_info("x", T.FLOAT, ["n", 48])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"), h.make_node("Relu", ["h"], ["r"]),
             h.make_node("MatMul", ["r", "w2"], ["y"], name="lm_head")]
    inits = [nh.from_array(rng.standard_normal((48, 70)).astype(np.float32), "w1"),
             nh.from_array(rng.standard_normal((70, 33)).astype(np.float32), "w2")]
    return h.make_model(h.make_graph(nodes, "mlp", [x], [y], inits), opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_quantized_model_runs_alike_on_glow_and_onnxruntime(symmetric):
    model, n = quantize_weights(_mlp(), bits=4, block_size=32, symmetric=symmetric, accuracy_level=0)
    assert n == 2 and [nd.op_type for nd in model.graph.node] == ["MatMulNBits", "Relu", "MatMulNBits"]
    assert {t.name for t in model.graph.initializer}.isdisjoint({"w1", "w2"})  # the float weights are gone
    x = np.random.default_rng(2).standard_normal((5, 48)).astype(np.float32)
    ref = glow.compile(model, backend="reference").run({"x": x})["y"]
    cpu = glow.compile(model, backend="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    exact = glow.compile(_mlp(), backend="reference").run({"x": x})["y"]
    assert np.abs(ref - exact).max() < 0.25 * np.abs(exact).max()  # int4: close, not equal
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_skip_keeps_the_lm_head_in_float():
    model, n = quantize_weights(_mlp(), skip=["lm_head"])
    assert n == 1 and [nd.op_type for nd in model.graph.node] == ["MatMulNBits", "Relu", "MatMul"]
    model, n = quantize_weights(_mlp(), skip=["w*"])
    assert n == 0


def _tied():
    """ids -> embedding rows of Transpose(W) -> MatMul(W): an embedding tied to the LM head, as the
    builder exports Qwen's; plus an untied table, gathered too."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]), h.make_node("Gather", ["Wt", "ids"], ["e"]),
             h.make_node("Gather", ["P", "pos"], ["p"]), h.make_node("Add", ["e", "p"], ["x"]),
             h.make_node("MatMul", ["x", "W"], ["logits"], name="lm_head")]
    g = h.make_graph(nodes, "tied", [h.make_tensor_value_info("ids", T.INT64, [2, 3]),
                                     h.make_tensor_value_info("pos", T.INT64, [2, 3])],
                     [h.make_tensor_value_info("logits", T.FLOAT, None)],
                     [nh.from_array(rng.standard_normal((64, 50)).astype(np.float32), "W"),
                      nh.from_array(rng.standard_normal((10, 64)).astype(np.float32), "P")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


@pytest.mark.parametrize("symmetric", [False, True])
def test_embeddings_become_gather_block_quantized_and_a_tied_one_reads_the_heads_codes(symmetric):
    model, n = quantize_weights(_tied(), block_size=32, symmetric=symmetric, accuracy_level=0)
    ops = [nd.op_type for nd in model.graph.node]
    assert n == 1 and ops.count("GatherBlockQuantized") == 2 and "Transpose" not in ops and "Gather" not in ops
    names = {t.name for t in model.graph.initializer}
    assert "W" not in names and "P" not in names  # no float copy of either table is left
    feeds = {"ids": np.array([[0, 49, 7], [3, 3, 1]]), "pos": np.array([[0, 1, 2], [9, 8, 7]])}
    ref = glow.compile(model, backend="reference").run(feeds)["logits"]
    cpu = glow.compile(model, backend="cpu").run(feeds)["logits"]
    np.testing.assert_allclose(cpu, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    exact = glow.compile(_tied(), backend="reference").run(feeds)["logits"]
    assert np.abs(ref - exact).max() < 0.25 * np.abs(exact).max()
    kept, _ = quantize_weights(_tied(), skip=["embeddings"])
    assert [nd.op_type for nd in kept.graph.node].count("Gather") == 2
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, timeout=600)


def _recompute(path, prompt, n):
    exe = glow.compile(os.path.join(path, "model.onnx"), backend="reference")
    past = [v for v in exe.inputs if v.name.startswith("past_key_values")]
    seq = list(prompt)
    for _ in range(n):
        ids = np.array([seq], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        for v in past:
            feeds[v.name] = np.zeros((1, v.shape[1], 0, v.shape[3]), np.float32)
        seq.append(int(np.argmax(exe.run(feeds)["logits"][0, -1])))
    return seq[len(prompt):]


def test_a_genai_folder_quantizes_whole_and_generates(tmp_path):
    src = write_genai_folder(str(tmp_path / "fp32"), genai_decoder(), max_length=64)
    out = str(tmp_path / "int4")
    r = _cli("quantize", src, "--weights", "int4", "--accuracy-level", "0", "-o", out)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["genai_config.json", "model.onnx"]
    m = onnx.load(os.path.join(out, "model.onnx"))
    assert sum(nd.op_type == "MatMulNBits" for nd in m.graph.node) == sum(
        nd.op_type == "MatMul" for nd in onnx.load(os.path.join(src, "model.onnx")).graph.node)
    assert any(nd.op_type == "GatherBlockQuantized" for nd in m.graph.node)  # the embedding too
    gen = glow.Generator(out, backend="cpu", threads=2)
    assert gen.narrowed  # the int4 LM head is applied to the last position only
    tokens = gen.generate([[3, 5, 7, 11, 13]], 8)
    assert tokens[0].tolist() == _recompute(out, [3, 5, 7, 11, 13], 8)
    # at accuracy_level 4 (int8 activations) it generates too
    out4 = str(tmp_path / "int4-acc4")
    assert _cli("quantize", src, "--weights", "int4", "--sym", "-o", out4).returncode == 0
    assert glow.Generator(out4, backend="cpu").generate([[3, 5, 7]], 4).shape == (1, 4)


def test_an_optimum_folder_quantizes_to_int8(tmp_path):
    src = write_optimum_folder(str(tmp_path / "plain"), plain_decoder())
    out = str(tmp_path / "int8")
    r = _cli("quantize", src, "--weights", "int8", "--block", "16", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "int8 in blocks of 16" in r.stdout
    assert json.load(open(os.path.join(out, "config.json")))["model_type"] == "llama"
    assert glow.Generator(out, backend="cpu").generate([[2, 4, 8]], 4).shape == (1, 4)


def test_bad_input_is_one_line_and_leaves_nothing(tmp_path):
    src = str(tmp_path / "m.onnx")
    onnx.save(_mlp(), src)
    cases = [(["--weights", "int4", "--block", "24"], "block size 24 must be a power of 2"),
             (["--weights", "int4", "--calibration", "x.npz"], "--calibration, --profile and --reduce-range do not apply"),
             (["--weights", "int4", "--reduce-range"], "--reduce-range do not apply"),
             (["--weights", "int4", "--skip", "fc1,lm_head"], "no MatMul with a constant 2-D float weight")]
    for args, why in cases:
        out = str(tmp_path / "out.onnx")
        r = _cli("quantize", src, *args, "-o", out)
        assert r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not os.path.exists(out)
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    folder = write_genai_folder(str(tmp_path / "g"), genai_decoder(), max_length=64)
    r = _cli("quantize", folder, "--weights", "int4", "-o", str(full))
    assert r.returncode == 2 and "exists and is not empty" in r.stderr
    r = _cli("quantize", str(tmp_path / "missing.onnx"), "--weights", "int4", "-o", str(tmp_path / "o.onnx"))
    assert r.returncode == 2 and "no such model file" in r.stderr
    (tmp_path / "g" / "junk.onnx").write_bytes(b"not a model")  # a folder with a damaged .onnx
    r = _cli("quantize", folder, "--weights", "int4", "-o", str(tmp_path / "gq"))
    assert r.returncode == 2 and "junk.onnx: not a readable ONNX model" in r.stderr and r.stderr.count("\n") == 1
    (tmp_path / "g" / "junk.onnx").unlink()
    assert sorted(os.listdir(tmp_path)) == ["full", "g", "m.onnx"]  # no temporary left behind


def test_two_gathers_of_one_tied_table_share_one_reshape():
    """A second Gather of the same tied table added a second Reshape with the same output name and
    a second shape initializer of the same name: an invalid model."""
    model = _tied()
    model.graph.node.insert(2, h.make_node("Gather", ["Wt", "pos"], ["e2"]))
    model.graph.node[4].input[1] = "e2"  # logits from e + e2
    q, _ = quantize_weights(model, accuracy_level=0)
    outs = [o for nd in q.graph.node for o in nd.output]
    inits = [t.name for t in q.graph.initializer]
    assert len(outs) == len(set(outs)) and len(inits) == len(set(inits))
    assert [nd.op_type for nd in q.graph.node].count("Reshape") == 2  # one per table, not per Gather
    feeds = {"ids": np.array([[0, 49, 7], [3, 3, 1]]), "pos": np.array([[0, 1, 2], [9, 8, 7]])}
    ref = glow.compile(q, backend="reference").run(feeds)["logits"]
    np.testing.assert_allclose(glow.compile(q, backend="cpu").run(feeds)["logits"], ref, rtol=1e-5,
                               atol=1e-5 * np.abs(ref).max())
