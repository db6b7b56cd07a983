"""Generation (glow.generation): decoders from onnxruntime-genai's builder and from optimum, built
with onnx.helper (glow.testing.decoders), driven token by token with the KV cache in place.

The oracle is the whole sequence recomputed at every step, with no cache at all, on glow's
reference backend: the tokens must be the same and every step's logits agree."""

import os
import subprocess
import sys
import tracemalloc

import glow
import numpy as np
import pytest
from glow.testing.decoders import genai_decoder, plain_decoder, write_genai_folder, write_optimum_folder
from helpers import backend_unavailable

PROMPTS = [[3, 5, 7, 11, 13], [2, 4, 8]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    genai = write_genai_folder(str(root / "genai"), genai_decoder(), max_length=64)
    plain = write_optimum_folder(str(root / "plain"), plain_decoder())
    # a sliding window: the cache is fed at its exact length, grown by the model one row a step
    exact = write_optimum_folder(str(root / "exact"), plain_decoder(), config={"sliding_window": 4096})
    return {"genai": genai, "plain": plain, "plain-exact": exact}


def recompute(path, prompt, n):
    """Greedy tokens and each step's logits from the whole sequence, no cache (reference backend)."""
    exe = glow.compile(os.path.join(path, "model.onnx"), backend="reference")
    names = [v.name for v in exe.inputs]
    past = [v for v in exe.inputs if v.name.startswith("past_key_values")]
    seq, tokens, logits = list(prompt), [], []
    for _ in range(n):
        ids = np.array([seq], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "position_ids" in names:
            feeds["position_ids"] = np.arange(ids.shape[1])[None]
        for v in past:
            feeds[v.name] = np.zeros((1, v.shape[1], 0, v.shape[3]), np.float32)
        row = exe.run(feeds)["logits"][0, -1]
        logits.append(row)
        seq.append(int(np.argmax(row)))
        tokens.append(seq[-1])
    return tokens, logits


@pytest.mark.parametrize("kind", ["genai", "plain", "plain-exact"])
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_greedy_tokens_and_logits_equal_a_full_recompute(folders, kind, backend):
    if backend_unavailable(backend):
        pytest.skip(f"{backend} unavailable")
    gen = glow.Generator(folders[kind], backend=backend, threads=2)
    assert gen.info.shared == (kind == "genai")
    assert gen._fixed_width() == (kind == "plain")  # a Concat-grown cache fed at one width
    seen = []
    tokens = gen.generate(PROMPTS, 10, on_token=seen.append)  # a batch of two prompts of other lengths
    assert tokens.shape == (2, 10) and len(seen) == 10
    for r, prompt in enumerate(PROMPTS):
        want, logits = recompute(folders[kind], prompt, 10)
        assert tokens[r].tolist() == want
    # every step's logits (the generator's own, caught on their way to the sampler)
    want, logits = recompute(folders[kind], PROMPTS[0], 6)
    got = []
    assert gen.generate([PROMPTS[0]], 6, on_logits=lambda x: got.append(x[0]))[0].tolist() == want
    assert len(got) == 6
    for a, e in zip(got, logits):
        assert np.max(np.abs(a - e)) <= 1e-4 * float(np.max(np.abs(e)))


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason="cpu unavailable")
def test_bf16_decoding_stays_near_fp32(folders):
    """precision="bf16": the step's matrix products on bfloat16 weights, float32 sums; each step's
    logits near fp32's (fed the same tokens: fp32's greedy ones)."""
    want, logits = recompute(folders["genai"], PROMPTS[0], 6)
    got = []
    glow.generate(folders["genai"], [PROMPTS[0]], 6, backend="cpu", threads=1, precision="bf16",
                  on_logits=lambda x: got.append(x[0]))
    a, e = got[0], logits[0]  # the first step: the same prompt, so the same inputs
    cos = float(a @ e / np.linalg.norm(a) / np.linalg.norm(e))
    assert 0.999 < cos and not np.array_equal(a, e) and np.max(np.abs(a - e)) <= 0.05 * np.max(np.abs(e))
    assert "--precision" in _glow("generate", "--help").stdout


def test_no_compile_and_no_allocation_after_the_first_decoding_step(folders):
    gen = glow.Generator(folders["genai"], backend="cpu", threads=1, max_length=4096)  # a cache of 512 KiB a layer
    gen.prepare(1, 5)
    compiles = gen.exe.stats["compiles"]
    assert compiles == 2  # the prompt bucket's prefill and the decoding step
    cache = gen._kv(1)
    layer_bytes = cache[0][0].nbytes
    sizes = []
    tracemalloc.start()

    def step(_):
        sizes.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.reset_peak()
    gen.generate([PROMPTS[0]], 20, on_token=step)
    tracemalloc.stop()
    assert gen.exe.stats["compiles"] == compiles
    assert gen._kv(1) is cache and all(a is b for pair in zip(gen._kv(1), cache) for a, b in zip(*pair))
    # peak traced memory per step: logits and feeds, never a copy of one layer's cache
    assert max(sizes[1:]) < layer_bytes // 8, (sizes, layer_bytes)


def test_a_concat_grown_cache_compiles_once_for_every_step(folders, tmp_path):
    """An optimum-style decoder (present = Concat(past, new)): the past is fed at one capacity
    with unused slots masked, so one compiled step serves the whole generation, and the step
    writes the model's present into buffers held across steps (no cache-sized allocation)."""
    folder = write_optimum_folder(str(tmp_path / "wide"), plain_decoder(hidden=128, heads=4, kv_heads=4))
    gen = glow.Generator(folder, backend="cpu", threads=1)
    gen.prepare(1, 5, max_new_tokens=200)
    compiles = gen.exe.stats["compiles"]
    assert compiles == 2  # the prompt bucket's prefill and the decoding step at capacity 256
    extra, held = [], [0]
    tracemalloc.start()

    def step(_):  # the most a step allocated beyond what was held before it
        now, peak = tracemalloc.get_traced_memory()
        extra.append(peak - held[0])
        held[0] = now
        tracemalloc.reset_peak()
    tokens = gen.generate([PROMPTS[0]], 200, eos_token_id=-1, on_token=step)
    tracemalloc.stop()
    assert tokens.shape == (1, 200) and gen.exe.stats["compiles"] == compiles
    layer_bytes = gen._grown[0][0].nbytes  # 4 heads x 256 slots x 32 x 4 bytes
    assert gen._grown[0][0].shape[2] == 256
    assert max(extra[1:]) < layer_bytes // 8, (extra, layer_bytes)
    want, _ = recompute(folder, PROMPTS[0], 30)  # and the tokens of no cache at all
    assert tokens[0, :30].tolist() == want


def test_sampling_is_seeded_and_bounded(folders):
    gen = glow.Generator(folders["genai"], backend="cpu")
    a = gen.generate([PROMPTS[0]], 8, do_sample=True, temperature=0.8, top_k=5, top_p=0.9, seed=7)
    b = gen.generate([PROMPTS[0]], 8, do_sample=True, temperature=0.8, top_k=5, top_p=0.9, seed=7)
    np.testing.assert_array_equal(a, b)
    greedy = gen.generate([PROMPTS[0]], 8)
    one = gen.generate([PROMPTS[0]], 8, do_sample=True, top_k=1, seed=3)  # top-1 sampling is greedy
    np.testing.assert_array_equal(one, greedy)


def test_eos_ends_rows_and_pads_them(folders):
    gen = glow.Generator(folders["genai"], backend="cpu")
    free = gen.generate(PROMPTS, 6)
    eos = int(free[0, 2])
    out = gen.generate(PROMPTS, 6, eos_token_id=eos)
    assert out[0, 2] == eos and (out[0, 3:] == gen.info.pad).all()


def test_bad_input_is_one_line(folders, tmp_path):
    with pytest.raises(glow.ModelLoadError, match="needs genai_config.json"):
        glow.Generator(str(tmp_path))
    (tmp_path / "genai_config.json").write_text('{"model": {"decoder": {"filename": "model.onnx"}}}')
    with pytest.raises(glow.ModelLoadError, match="names the decoder 'model.onnx', which is not there"):
        glow.Generator(str(tmp_path))
    gen = glow.Generator(folders["genai"], backend="cpu")
    with pytest.raises(glow.InputError, match="exceed the model's max_length 64"):
        gen.generate([list(range(1, 60))], 10)
    with pytest.raises(glow.InputError, match="token id 97 is outside the vocabulary"):
        gen.generate([[1, 97]], 2)
    with pytest.raises(glow.InputError, match="max_new_tokens"):
        gen.generate([[1, 2]], 0)
    with pytest.raises(glow.InputError, match="temperature"):
        gen.generate([[1, 2]], 2, do_sample=True, temperature=0)
    model = genai_decoder()
    next(n for n in model.graph.node if n.op_type == "SkipSimplifiedLayerNormalization").op_type = "SkipFancyNorm"
    unknown = write_genai_folder(str(tmp_path / "unknown"), model, max_length=64)
    with pytest.raises(glow.UnsupportedOpError, match=r"com.microsoft.SkipFancyNorm \(x1\)"):
        glow.Generator(unknown)


def _glow(*args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, timeout=600)


def test_glow_generate_cli(folders, tmp_path):
    import json

    r = _glow("generate", folders["genai"], "--prompt-ids", "3,5,7,11,13", "--max-new-tokens", "6", "--json",
              "--threads", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["tokens"] == [recompute(folders["genai"], PROMPTS[0], 6)[0]] and out["threads"] == 1
    assert out["ttft_ms"] > 0 and out["decode_tokens_per_s"] > 0
    r = _glow("generate", folders["genai"], "--prompt-ids", "1,2", "--max-new-tokens", "3")
    assert r.returncode == 0 and "tokens: " in r.stdout and "decode_tokens_per_s:" in r.stdout
    for args, why in ((["--prompt-ids", "1,x"], "expected integers"), (["--prompt-ids", "1,200"], "vocabulary"),
                      (["--prompt-ids", "1", "--max-new-tokens", "90"], "max_length")):
        r = _glow("generate", folders["genai"], *args)
        assert r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = _glow("generate", str(tmp_path), "--prompt-ids", "1")
    assert r.returncode == 2 and "genai_config.json" in r.stderr
    model = genai_decoder()
    next(n for n in model.graph.node if n.op_type == "SkipSimplifiedLayerNormalization").op_type = "SkipFancyNorm"
    r = _glow("generate", write_genai_folder(str(tmp_path / "unknown"), model, max_length=64), "--prompt-ids", "1")
    assert r.returncode == 2 and "unsupported op type(s): com.microsoft.SkipFancyNorm" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
