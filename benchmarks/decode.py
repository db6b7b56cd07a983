"""LLM decoding on the CPU: glow against onnxruntime-genai and openvino-genai, interleaved.

    python benchmarks/decode.py --build --python /path/to/side/python     # once: the models, offline
    python benchmarks/decode.py [--configs llama,qwen] [--threads 1,2] [--prompts 64,512]

Models (`--build`, run by a Python that has torch==2.13.0, transformers, onnxruntime-genai, onnx_ir
and optimum-intel; glow's own environment needs none of them), in --models-dir (./decode-models):
  llama  LlamaConfig: hidden 512, 8 layers, 8 heads / 4 KV heads, MLP 1408, vocab 32,000 (~50M parameters)
  qwen   Qwen2.5-0.5B's shape: hidden 896, 24 layers, 14 / 2 heads, MLP 4864, vocab 151,936, tied embeddings
Random weights at std 0.05 (at transformers' 0.02 greedy output repeats one token) and a small
byte-level BPE tokenizer (the builder wants one). onnxruntime-genai's builder makes the fp32 folder
glow and onnxruntime-genai run (-p fp32 -e cpu); optimum-intel's export the fp32 OpenVINO IR.

Per config, thread count and prompt length: fresh random prompt ids every round, the same for every
engine of the round, engines in turns; greedy, exactly --new-tokens tokens. TTFT is the time to the
first new token (prefill included), the decode rate the tokens after it over their time; medians
over --rounds, after one untimed run of each engine, each run after a quarter-second pause (the
previous engine's spinning threads would otherwise slow the next one's first token). openvino-genai
runs with prefix caching off (a repeated prompt would otherwise skip its prefill), at its f32 hint
and at its default precision (bf16 on AVX512-BF16/AMX hosts), each in a worker process of its own
(its default precision has crashed with SIGFPE at one thread: such a cell is reported as crashed).
"glow bf16" (--engines) is glow at precision="bf16", beside OpenVINO's default. glow compiles its prefill
bucket and decoding step before the clock (`Generator.prepare`; onnxruntime-genai's session and
openvino-genai's pipeline are made before too). Also: the host's memory bandwidth (one core, all
cores), glow's fraction of it (bytes of weights and KV cache read per token x tokens/s), and parity
of glow with onnxruntime-genai (greedy tokens, the logits of every step while the tokens agree:
max relative error and cosine). int4 rows (--precisions) run the builder's -p int4 folder (glow and
onnxruntime-genai) and NNCF's int4 IR (openvino-genai). Results:
benchmarks/results-decode.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, write_results  # noqa: E402

QUIET_S = 0.25  # pause before each timed run

CONFIGS = {
    "llama": dict(kind="llama", hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
                  num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, tie_word_embeddings=False),
    "qwen": dict(kind="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True,
                 rope_theta=1000000.0),
}

BUILD = r'''
import json, os, subprocess, sys, torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast
name, spec, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
hf, genai, ovdir = (os.path.join(out, f"{name}-{k}") for k in ("hf", "genai-fp32", "ov-fp32"))
kind = spec.pop("kind")
torch.manual_seed(0)
cfg = AutoConfig.for_model(kind, initializer_range=0.05, bos_token_id=0, eos_token_id=1, **spec)
AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(hf, safe_serialization=True)
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20],
                        trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>"],
                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(hf)
for p in ("fp32", "int4"):  # int4: MatMulNBits, blocks of 32, accuracy_level 4 (the builder's defaults)
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf, "-o",
                    os.path.join(out, f"{name}-genai-{p}"), "-p", p, "-e", "cpu"], check=True)
subprocess.run(["optimum-cli", "export", "openvino", "--model", hf, "--task", "text-generation-with-past",
                "--weight-format", "fp32", ovdir], check=True)
# NNCF's int4 (asymmetric, groups of 32 as the builder's, every layer; embeddings and LM head int8)
subprocess.run(["optimum-cli", "export", "openvino", "--model", hf, "--task", "text-generation-with-past",
                "--weight-format", "int4", "--group-size", "32", "--ratio", "1.0",
                os.path.join(out, f"{name}-ov-int4")], check=True)
'''

OV_WORKER = r'''
import json, sys, time
import numpy as np, openvino as ov, openvino_genai as og
path, threads, hint = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sc = og.SchedulerConfig()
sc.enable_prefix_caching = False
props = {"INFERENCE_NUM_THREADS": threads, "scheduler_config": sc}
if hint != "default":
    props["INFERENCE_PRECISION_HINT"] = hint
pipe = og.LLMPipeline(path, "CPU", **props)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    ids = np.array([req["ids"]], np.int64)
    cfg = og.GenerationConfig()
    cfg.max_new_tokens = cfg.min_new_tokens = req["new"]
    cfg.do_sample = False
    r = pipe.generate(og.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids))), cfg)
    pm = r.perf_metrics
    print(json.dumps({"ttft_ms": pm.get_ttft().mean, "tpot_ms": pm.get_tpot().mean, "tokens": list(r.tokens[0])}),
          flush=True)
'''


# -- the engines -------------------------------------------------------------------------------------

class Glow:
    name = "glow"

    def __init__(self, folder, threads, prompt_lengths, new_tokens, precision=None):
        import glow

        self.gen = glow.Generator(folder, backend="cpu", threads=threads, precision=precision)
        for n in prompt_lengths:
            self.gen.prepare(1, n, new_tokens)

    def run(self, ids, new):
        tokens = self.gen.generate([ids], new, eos_token_id=[])
        s = self.gen.stats
        return {"ttft_ms": s["ttft_ms"], "tok_s": s["decode_tokens_per_s"], "tokens": tokens[0].tolist()}


class OrtGenai:
    name = "onnxruntime-genai"

    def __init__(self, folder, threads, prompt_lengths, new_tokens):
        import onnxruntime_genai as og

        self.og = og
        cfg = og.Config(folder)
        cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
        self.model = og.Model(cfg)

    def run(self, ids, new, logits=None):
        og = self.og
        params = og.GeneratorParams(self.model)
        params.set_search_options(max_length=len(ids) + new, min_length=len(ids) + new, do_sample=False)
        t0 = time.perf_counter()
        g = og.Generator(self.model, params)
        g.append_tokens([ids])
        out = []
        first = None
        while not g.is_done():
            if logits is not None:
                logits.append(np.array(g.get_logits())[0, -1].copy())
            g.generate_next_token()
            out.append(int(g.get_next_tokens()[0]))
            if first is None:
                first = time.perf_counter()
        end = time.perf_counter()
        return {"ttft_ms": (first - t0) * 1e3, "tok_s": (len(out) - 1) / (end - first), "tokens": out}


class OpenVinoGenai:
    """openvino-genai in a worker process: a crash fails its cell, not the benchmark."""

    def __init__(self, folder, threads, hint):
        self.name = f"openvino-genai {hint}"
        self.proc = subprocess.Popen([sys.executable, "-c", OV_WORKER, folder, str(threads), hint], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if self._read() is None:
            raise RuntimeError("crashed while loading")

    def _read(self):
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self, ids, new):
        self.proc.stdin.write(json.dumps({"ids": [int(x) for x in ids], "new": new}) + "\n")
        self.proc.stdin.flush()
        r = self._read()
        if r is None:
            raise RuntimeError(f"crashed (exit code {self.proc.wait()})")
        return {"ttft_ms": r["ttft_ms"], "tok_s": 1000.0 / r["tpot_ms"], "tokens": r["tokens"]}

    def close(self):
        self.proc.kill()


# -- the host's memory bandwidth ---------------------------------------------------------------------

BANDWIDTH = r'''
import sys, threading, time
import numpy as np
n = int(sys.argv[1])
parts = [np.ones(96 << 20, np.float32) for _ in range(n)]  # 384 MiB a thread: far past the caches
best = 0.0
for _ in range(5):
    go = threading.Barrier(n + 1)
    def work(a):
        go.wait()
        a.max()
    ts = [threading.Thread(target=work, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    best = max(best, sum(a.nbytes for a in parts) / (time.perf_counter() - t0))
print(best / 1e9)
'''


def bandwidth(threads: int) -> float:
    """GB/s of `threads` threads each reading a 384 MiB vector (NumPy's max: a vectorised stream that
    computes next to nothing, the GIL released), best of 5."""
    out = subprocess.run([sys.executable, "-c", BANDWIDTH, str(threads)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def bytes_per_token(folder: str, context: int) -> float:
    """Bytes a decoding step reads: every weight but the embedding rows not gathered, and the KV
    cache up to `context` tokens."""
    import onnx

    m = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    total = 0
    gathered = {n.input[0] for n in m.graph.node if n.op_type == "Gather"}
    for t in m.graph.initializer:
        n = int(np.prod(t.dims)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        total += (n // t.dims[0]) if t.name in gathered and t.dims else n
    cfg = json.load(open(os.path.join(folder, "genai_config.json")))["model"]["decoder"]
    kv = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_size"] * 4 * context
    return float(total + kv)


# -- the run -------------------------------------------------------------------------------------------

def parity(folder, new, rng, vocab):
    """glow's greedy tokens and every step's logits against onnxruntime-genai's, one prompt."""
    ids = rng.integers(2, min(vocab, 30000), 64).tolist()
    ref_logits = []
    ref = OrtGenai(folder, 1, [64], new).run(ids, new, logits=ref_logits)
    import glow

    gen = glow.Generator(folder, backend="cpu", threads=1)
    ours = []
    tokens = gen.generate([ids], new, eos_token_id=[], on_logits=lambda lg: ours.append(lg[0].copy()))
    first = next((k for k, (a, b) in enumerate(zip(tokens[0].tolist(), ref["tokens"])) if a != b), None)
    # logits compared while both engines have read the same tokens: up to the first differing one
    same = list(zip(ours, ref_logits))[:None if first is None else first + 1]
    errs = [float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) for a, b in same]
    cos = [float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-30)) for a, b in same]
    return {"tokens_equal": tokens[0].tolist() == ref["tokens"][:new], "steps": len(ours), "first_difference": first,
            "max_rel_logit_err": max(errs) if errs else None, "min_logit_cosine": min(cos) if cos else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", default="decode-models")
    ap.add_argument("--build", action="store_true", help="make the models (needs --python)")
    ap.add_argument("--python", help="a Python with torch, transformers, onnxruntime-genai, onnx_ir, optimum-intel")
    ap.add_argument("--configs", default="llama,qwen")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompts", default="64,512")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engines", default="glow,onnxruntime-genai,openvino-genai f32,openvino-genai default",
                    help="comma-separated: glow, glow bf16 (precision=\"bf16\"), onnxruntime-genai, "
                    "openvino-genai f32, openvino-genai default")
    ap.add_argument("--precisions", default="fp32,int4", help="fp32: the builder's -p fp32 folder and "
                    "OpenVINO's fp32 IR; int4: the builder's -p int4 folder and NNCF's int4 IR")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--results", default="decode", help="write benchmarks/results-NAME.json (another name keeps "
                    "one host's run beside another's)")
    a = ap.parse_args(argv)
    configs = [c.strip() for c in a.configs.split(",")]
    if a.build:
        if not a.python:
            ap.error("--build needs --python (the side environment that has torch and the builders)")
        os.makedirs(a.models_dir, exist_ok=True)
        for c in configs:
            subprocess.run([a.python, "-c", BUILD, c, json.dumps(CONFIGS[c]), a.models_dir], check=True)
        return 0
    threads = [int(t) for t in a.threads.split(",")]
    prompts = [int(p) for p in a.prompts.split(",")]
    engines = [e.strip() for e in a.engines.split(",")]
    results = {"cpu": cpu_model(), "flags": _isa(), "new_tokens": a.new_tokens, "rounds": a.rounds,
               "bandwidth_gbs": {"1 core": bandwidth(1), "all cores": bandwidth(os.cpu_count() or 1)}, "cells": []}
    print(f"# {results['cpu']} ({results['flags']}); memory bandwidth {results['bandwidth_gbs']['1 core']:.1f} GB/s "
          f"one core, {results['bandwidth_gbs']['all cores']:.1f} GB/s all cores")
    rng = np.random.default_rng(2026)
    precisions = [p.strip() for p in a.precisions.split(",")]
    for c, prec in ((c, p) for c in configs for p in precisions):
        genai = os.path.join(a.models_dir, f"{c}-genai-{prec}")
        ov = os.path.join(a.models_dir, f"{c}-ov-{prec}")
        vocab = CONFIGS[c]["vocab_size"]
        if "onnxruntime-genai" in engines:
            results.setdefault("parity", {})[f"{c} {prec}"] = parity(genai, a.new_tokens, rng, vocab)
            print(f"{c} {prec}: parity with onnxruntime-genai: {results['parity'][f'{c} {prec}']}")
        for t in threads:
            live = {}
            for e in engines:
                try:
                    if e in ("glow", "glow bf16"):  # glow bf16: precision="bf16" (bfloat16 weights)
                        live[e] = Glow(genai, t, prompts, a.new_tokens, e.split()[-1] if e != "glow" else None)
                    elif e == "onnxruntime-genai":
                        live[e] = OrtGenai(genai, t, prompts, a.new_tokens)
                    elif e.startswith("openvino-genai"):
                        live[e] = OpenVinoGenai(ov, t, e.split()[-1])
                except Exception as err:  # noqa: BLE001 - a missing engine is a row that says why
                    results["cells"].append({"config": c, "precision": prec, "threads": t, "engine": e,
                                             "error": str(err)[:200]})
            for p in prompts:
                runs = {e: [] for e in live}
                warm = rng.integers(2, min(vocab, 30000), p).tolist()
                for eng in list(live.values()):  # a first run of each, untimed (first touches, caches)
                    try:
                        eng.run(warm, a.new_tokens)
                    except Exception:  # noqa: BLE001 - said when a timed run fails the same way
                        pass
                for _ in range(a.rounds):
                    ids = rng.integers(2, min(vocab, 30000), p).tolist()
                    for e, eng in list(live.items()):
                        # the engine before may leave threads spinning for a while after its run
                        # (onnxruntime's and OpenVINO's pools do): each engine starts on a quiet CPU
                        time.sleep(QUIET_S)
                        try:
                            runs[e].append(eng.run(ids, a.new_tokens))
                        except Exception as err:  # noqa: BLE001 - a crashed engine's cell says so
                            results["cells"].append({"config": c, "precision": prec, "threads": t, "prompt": p,
                                                     "engine": e, "error": str(err)[:200]})
                            live.pop(e)
                for e, rs in runs.items():
                    if not rs:
                        continue
                    cell = {"config": c, "precision": prec, "threads": t, "prompt": p, "engine": e,
                            "ttft_ms": statistics.median(r["ttft_ms"] for r in rs),
                            "decode_tok_s": statistics.median(r["tok_s"] for r in rs)}
                    if e == "glow":
                        read = bytes_per_token(genai, p + a.new_tokens // 2)
                        key = "1 core" if t == 1 else "all cores"
                        cell["bandwidth_fraction"] = read * cell["decode_tok_s"] / (results["bandwidth_gbs"][key] * 1e9)
                    results["cells"].append(cell)
                    print(f"{c:6} {prec} {t} thr prompt {p:4}: {e:26} TTFT {cell['ttft_ms']:8.1f} ms  decode "
                          f"{cell['decode_tok_s']:7.2f} tok/s"
                          + (f"  ({100 * cell['bandwidth_fraction']:.0f}% of bandwidth)" if "bandwidth_fraction"
                             in cell else ""), flush=True)
            for eng in live.values():
                if hasattr(eng, "close"):
                    eng.close()
    if not a.no_write:
        print("wrote", write_results(a.results, results))
    return 0


def _isa() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return ", ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8") if f in flags)


if __name__ == "__main__":
    sys.exit(main())
