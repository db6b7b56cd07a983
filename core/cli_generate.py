"""`glow generate`: text generation with a decoder folder or file (glow.generation)."""

from __future__ import annotations

import json
import os

from .errors import InputError


def add_parser(sub) -> None:
    g = sub.add_parser("generate", help="generate tokens with a decoder (an onnxruntime-genai or optimum folder, "
                       "or an .onnx file)",
                       description="Run a decoder token by token: the prompt's prefill, then one step per new token "
                       "(KV cache updated in place), greedy unless --do-sample. Prints the new tokens, the time to the "
                       "first token and the decoding rate.")
    g.add_argument("model", help="an onnxruntime-genai folder (genai_config.json), an optimum folder (config.json) "
                   "or a decoder .onnx")
    g.add_argument("--prompt-ids", metavar="IDS", help="token ids, comma-separated; ';' between the rows of a batch "
                   "(e.g. 1,2,3;4,5)")
    g.add_argument("--prompt", metavar="TEXT", help="text, encoded with the folder's tokenizer.json (needs the "
                   "'tokenizers' package)")
    g.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="tokens to generate (default 32)")
    g.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="the KV cache's length (default: the model's configured max_length)")
    g.add_argument("--backend", "-b", default=None, help="backend name (default: best available)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="threads for the cpu backend")
    g.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                   help="cpu: bf16 weights for the float32 matrix products (half the bytes per token), float32 sums")
    g.add_argument("--do-sample", action="store_true", help="sample instead of taking the most likely token")
    g.add_argument("--temperature", type=float, default=1.0, help="with --do-sample: divides the logits "
                   "(below 1: surer, above 1: more varied; default 1.0)")
    g.add_argument("--top-k", type=int, default=0, metavar="K", help="sample among the K most likely (0: all)")
    g.add_argument("--top-p", type=float, default=1.0, metavar="P", help="nucleus sampling (1.0: off)")
    g.add_argument("--seed", type=int, default=None, help="with --do-sample: seed of the sampler (default: "
                   "a fresh one each run)")
    g.add_argument("--json", action="store_true", help="one JSON object: tokens, ttft_ms, decode_tokens_per_s, threads")
    g.set_defaults(func=cmd_generate)


def _ids(text: str) -> list[list[int]]:
    rows = []
    for row in text.split(";"):
        try:
            ids = [int(x) for x in row.replace(" ", "").split(",") if x != ""]
        except ValueError:
            raise InputError(f"--prompt-ids {text!r}: expected integers separated by ',' (rows by ';')") from None
        if not ids:
            raise InputError(f"--prompt-ids {text!r}: an empty prompt")
        rows.append(ids)
    return rows


def _tokenizer(model: str):
    path = os.path.join(model, "tokenizer.json") if os.path.isdir(model) else None
    if path is None or not os.path.isfile(path):
        raise InputError(f"--prompt needs a tokenizer.json beside the model ({model} has none): pass --prompt-ids")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InputError("--prompt needs the 'tokenizers' package (pip install tokenizers): or pass --prompt-ids") \
            from None
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # noqa: BLE001 - a broken file is the user's input
        raise InputError(f"{path}: cannot read the tokenizer ({e})") from None


def cmd_generate(args) -> int:
    from .generation import Generator

    if (args.prompt_ids is None) == (args.prompt is None):
        raise InputError("give the prompt as --prompt-ids IDS or --prompt TEXT (one of them)")
    if args.threads is not None and args.threads < 1:
        raise InputError("--threads must be at least 1")
    tok = _tokenizer(args.model) if args.prompt is not None else None
    prompts = _ids(args.prompt_ids) if tok is None else [tok.encode(args.prompt).ids]
    gen = Generator(args.model, backend=args.backend, threads=args.threads, max_length=args.max_length,
                    precision=args.precision)
    gen.prepare(len(prompts), max(len(p) for p in prompts), args.max_new_tokens)  # compiled before the clock
    tokens = gen.generate(prompts, args.max_new_tokens, do_sample=args.do_sample, temperature=args.temperature,
                          top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    s = gen.stats
    threads = args.threads
    if threads is None and gen.backend == "cpu":
        from .backends.cpu.backend import default_threads

        threads = default_threads()
    rate = s["decode_tokens_per_s"]
    if args.json:
        out = {"tokens": tokens.tolist(), "ttft_ms": round(s["ttft_ms"], 3), "compile_s": round(gen.compile_s, 3),
               "decode_tokens_per_s": None if rate is None else round(rate, 3), "threads": threads}
        if tok is not None:
            out["text"] = [tok.decode(list(r)) for r in tokens]
        print(json.dumps(out))
        return 0
    for row in tokens:
        print("tokens: " + " ".join(str(int(t)) for t in row))
        if tok is not None:
            print("text: " + tok.decode(list(row)))
    print(f"compile_s: {gen.compile_s:.3f}")
    print(f"ttft_ms: {s['ttft_ms']:.3f}")
    print(f"decode_tokens_per_s: {'-' if rate is None else f'{rate:.3f}'}")
    print(f"threads: {threads}")
    return 0
