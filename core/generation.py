"""Text generation with a decoder model: a prompt's prefill, then one step per new token, sampling
on the host.

    gen = glow.Generator("qwen-genai/", backend="cpu", threads=2)   # imported and compiled once
    tokens = gen.generate([[1, 2, 3]], max_new_tokens=64)          # np.ndarray [batch, new tokens]
    glow.generate("qwen-genai/", [[1, 2, 3]], 64)                   # the same in one call

A model is an onnxruntime-genai folder (genai_config.json and the decoder it names), a Hugging
Face / optimum folder (config.json and model.onnx or decoder_model_merged.onnx), or a decoder
.onnx file. Its interface: input_ids, attention_mask, optionally position_ids, and per layer
past_key_values.N.key/value in, logits and present.N.key/value out.

The KV cache. When every past input feeds a GroupQueryAttention (onnxruntime-genai's builder), one
buffer per layer and per key/value, (batch, kv_heads, max_length, head_size), is allocated once and
passed as both past and present: each step writes its own rows into it in place
(`Executable.run(..., into=)`; onnxruntime-genai's `past_present_share_buffer`), and the step's
shapes do not change from one token to the next (the attention mask is max_length wide, zeros past
each row's length), so one compiled program serves every decoding step and one serves each prompt
length bucket (prompts are right-padded to a multiple of PROMPT_BUCKET).

Otherwise (a model of plain ops whose present is Concat(past, new), as optimum exports them) the
model itself copies the past into its present each step. Where it takes position_ids, the past is
still fed at one width for the whole generation: a buffer of CACHE_BUCKET-rounded capacity whose
unused slots the attention mask zeroes, each step's new row copied from the present into the next
slot, so the decoding step's shapes do not change either (one compile, not one per token). A model
without position_ids (its positions would follow the cache's width) or with a sliding window (its
window would count unused slots) is fed the exact cache, which grows by one row a step.

Logits: only each row's last position is needed, so where the logits come from one MatMul over the
final hidden states, the hidden states are narrowed to that position first (a graph input,
`glow_last_position`): a prefill of 512 tokens then multiplies one row by the LM head, not 512.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as dt
from .errors import InputError, ModelLoadError
from .graph import Graph

#: Prompts are right-padded to a multiple of this many tokens: one compiled prefill per bucket.
PROMPT_BUCKET = 32
#: A cache that grows by Concat is fed at a capacity rounded up to a multiple of this many rows.
CACHE_BUCKET = 64
LAST = "glow_last_position"
_PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
_PRESENT = re.compile(r"^present\.(\d+)\.(key|value)$")
_OPTIMUM_FILES = ("model.onnx", "decoder_model_merged.onnx", "decoder_with_past_model.onnx", "decoder_model.onnx")


@dataclass
class DecoderInfo:
    """What the loop needs to know of a decoder, from its graph and its configuration files."""

    path: str
    past: list = field(default_factory=list)  # [(key input, value input)] per layer
    present: list = field(default_factory=list)  # [(key output, value output)] per layer
    kv_heads: int = 0
    head_size: int = 0
    vocab: int | None = None
    max_length: int | None = None
    eos: tuple = ()
    pad: int = 0
    shared: bool = False  # the cache is one buffer per layer, written in place
    position_ids: bool = False
    cache_branch: str | None = None  # optimum's merged decoder: the use_cache_branch input
    window: int | None = None  # a sliding attention window (Hugging Face config), if any
    kv_dtype: object = np.float32


# -- finding the model and its configuration -------------------------------------------------------

def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{path}: cannot read it as JSON ({e})") from None


def locate(model) -> tuple[str, dict]:
    """(decoder .onnx path, settings from the folder's configuration files)."""
    if not isinstance(model, (str, os.PathLike)):
        raise InputError(f"a decoder model is a folder or an .onnx path, got {type(model).__name__}")
    model = os.fspath(model)
    if os.path.isfile(model):
        return model, {}
    if not os.path.isdir(model):
        raise ModelLoadError(f"{model}: no such file or folder")
    genai = os.path.join(model, "genai_config.json")
    if os.path.isfile(genai):
        return _from_genai(model, _read_json(genai))
    hf = os.path.join(model, "config.json")
    if os.path.isfile(hf):
        return _from_optimum(model, _read_json(hf))
    raise ModelLoadError(f"{model}: a decoder folder needs genai_config.json (onnxruntime-genai) or config.json "
                         "(Hugging Face / optimum)")


def _from_genai(folder: str, cfg: dict) -> tuple[str, dict]:
    m = cfg.get("model") or {}
    dec = m.get("decoder") or {}
    name = dec.get("filename", "model.onnx")
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise ModelLoadError(f"{folder}: genai_config.json names the decoder '{name}', which is not there")
    search = cfg.get("search") or {}
    settings = {"max_length": search.get("max_length") or m.get("context_length"),
                "eos": m.get("eos_token_id"), "pad": m.get("pad_token_id"), "vocab": m.get("vocab_size"),
                "kv_heads": dec.get("num_key_value_heads"), "head_size": dec.get("head_size")}
    names = dec.get("inputs") or {}
    outs = dec.get("outputs") or {}
    settings["names"] = {"past_key": names.get("past_key_names"), "past_value": names.get("past_value_names"),
                         "present_key": outs.get("present_key_names"), "present_value": outs.get("present_value_names")}
    return path, settings


def _from_optimum(folder: str, cfg: dict) -> tuple[str, dict]:
    for name in _OPTIMUM_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            break
    else:
        raise ModelLoadError(f"{folder}: config.json but no decoder ({', '.join(_OPTIMUM_FILES)})")
    gen = os.path.join(folder, "generation_config.json")
    extra = _read_json(gen) if os.path.isfile(gen) else {}
    heads = cfg.get("num_key_value_heads") or cfg.get("num_attention_heads")
    hidden, n_heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    head_size = cfg.get("head_dim") or (hidden // n_heads if hidden and n_heads else None)
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    return path, {"window": window, "max_length": cfg.get("max_position_embeddings"),
                  "eos": extra.get("eos_token_id", cfg.get("eos_token_id")),
                  "pad": extra.get("pad_token_id", cfg.get("pad_token_id")), "vocab": cfg.get("vocab_size"),
                  "kv_heads": heads, "head_size": head_size}


# -- the decoder's interface -------------------------------------------------------------------------

def _pairs(values, pattern, names, key_fmt, value_fmt) -> list:
    """[(key name, value name)] per layer, by the config's name formats or the usual names."""
    found: dict[int, dict] = {}
    for v in values:
        m = pattern.match(v.name)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = v.name
    if key_fmt and value_fmt and not found:
        k = 0
        while key_fmt % k in names and value_fmt % k in names:
            found[k] = {"key": key_fmt % k, "value": value_fmt % k}
            k += 1
    layers = sorted(found)
    if layers != list(range(len(layers))) or any(set(found[k]) != {"key", "value"} for k in layers):
        raise ModelLoadError(f"the decoder's KV cache names are incomplete: layers {layers}")
    return [(found[k]["key"], found[k]["value"]) for k in layers]


def inspect(graph: Graph, path: str, settings: dict) -> DecoderInfo:
    """The decoder's interface (DecoderInfo); a one-line ModelLoadError when it has none."""
    ins = {v.name: v for v in graph.inputs}
    outs = {v.name: v for v in graph.outputs}
    for need in ("input_ids",):
        if need not in ins:
            raise ModelLoadError(f"{path}: not a decoder: no '{need}' input (inputs: {sorted(ins)})")
    if "logits" not in outs:
        raise ModelLoadError(f"{path}: not a decoder: no 'logits' output (outputs: {sorted(outs)})")
    names = settings.get("names") or {}
    past = _pairs(graph.inputs, _PAST, ins, names.get("past_key"), names.get("past_value"))
    present = _pairs(graph.outputs, _PRESENT, outs, names.get("present_key"), names.get("present_value"))
    if len(past) != len(present):
        raise ModelLoadError(f"{path}: {len(past)} layers of past KV inputs but {len(present)} of present outputs")
    info = DecoderInfo(path, past, present)
    if past:
        t = ins[past[0][0]].type
        shape = t.shape or (None,) * 4
        info.kv_dtype = t.dtype.np
        info.kv_heads = shape[1] if isinstance(shape[1], int) else int(settings.get("kv_heads") or 0)
        info.head_size = shape[3] if isinstance(shape[3], int) else int(settings.get("head_size") or 0)
        if not info.kv_heads or not info.head_size:
            raise ModelLoadError(f"{path}: the KV cache's head count and size are not in the model or its config")
    logits = outs["logits"].type.shape
    info.vocab = logits[-1] if logits and isinstance(logits[-1], int) else settings.get("vocab")
    info.max_length = settings.get("max_length")
    info.window = settings.get("window") or None
    eos = settings.get("eos")
    info.eos = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))
    pad = settings.get("pad")
    info.pad = int(pad if pad is not None else (info.eos[0] if info.eos else 0))
    info.position_ids = "position_ids" in ins
    info.cache_branch = "use_cache_branch" if "use_cache_branch" in ins else None
    readers: dict[str, set] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None and v.name in ins:
                readers.setdefault(v.name, set()).add(n.op.name)
    info.shared = bool(past) and all(readers.get(name) == {"GroupQueryAttention"} for pair in past for name in pair)
    return info


# -- narrowing the logits to each row's last position ---------------------------------------------

def last_position_logits(graph: Graph) -> Graph | None:
    """The graph with its LM head applied to one position per row (input LAST, int64 [batch]):
    where `logits` is MatMul(hidden (B, S, H), W) or MatMulNBits (+ a bias), hidden is gathered at LAST first. None
    when the logits come otherwise."""
    from .rewrite import rebuild

    out = next(v for v in graph.outputs if v.name == "logits")
    node = out.node
    if node is not None and node.op.name == "Add" and node.inputs[1] is not None and node.inputs[1].is_constant:
        node = node.inputs[0].node
    if node is None or node.op.name not in ("MatMul", "MatMulNBits") or not node.inputs[1].is_constant:
        return None
    hidden = node.inputs[0].type
    if not (isinstance(hidden, dt.TensorType) and hidden.rank == 3 and isinstance(hidden.shape[2], int)):
        return None
    batch = hidden.shape[0]
    last = {}

    def visit(rb, n, inputs):
        if n is not node:
            return None
        where = rb.input(LAST, dt.TensorType((batch,), dt.int64))
        last["input"] = where
        idx = rb.emit1("Reshape", [where, rb.constant(np.array([-1, 1, 1], np.int64), name="shape")])
        idx = rb.emit1("Expand", [idx, rb.constant(np.array([1, 1, hidden.shape[2]], np.int64), name="width")])
        row = rb.emit1("GatherElements", [inputs[0], idx], {"axis": 1})
        return [rb.emit1(node.op, [row, *inputs[1:]], node.attrs)]  # MatMul, or MatMulNBits (int4)

    new, changed = rebuild(graph, visit)
    return new if changed and "input" in last else None


# -- the generator ----------------------------------------------------------------------------------

class Generator:
    """A decoder imported and compiled once; `generate` runs prompts through it token by token."""

    def __init__(self, model, *, backend: str | None = None, threads: int | None = None,
                 max_length: int | None = None, strict: bool = False, options: dict | None = None,
                 precision: str | None = None):
        from .api import compile as compile_model
        from .onnx_import import load_onnx

        path, settings = locate(model)
        graph = load_onnx(path)
        self.info = info = inspect(graph, path, settings)
        if max_length is not None:
            if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2:
                raise InputError(f"max_length must be a whole number of at least 2, got {max_length!r}")
            info.max_length = max_length
        if info.shared and not info.max_length:
            raise InputError(f"{path}: the model's KV cache is a max_length buffer, and no max_length is configured: "
                             "pass max_length=")
        narrowed = last_position_logits(graph)
        self.narrowed = narrowed is not None
        self.graph = narrowed or graph
        from .plugins import registry

        self.backend = registry().get(backend).name if backend else registry().default().name
        self.exe = compile_model(self.graph, backend=self.backend, threads=threads, strict=strict, options=options,
                                 precision=precision)
        self._cache: list | None = None  # the shared KV buffers, per layer (key, value)
        self._grown: list | None = None  # a Concat-grown cache's fixed-width buffers (_grow_buffers)
        self.stats: dict = {}
        self.compile_s = 0.0  # spent compiling for new signatures in `prepare`

    def prepare(self, batch: int = 1, prompt_length: int = 1, max_new_tokens: int = 32) -> None:
        """Compile now what a generation of `batch` prompts of up to `prompt_length` tokens and
        `max_new_tokens` new ones runs (the prompt bucket's prefill and the decoding step), so
        that neither the time to the first token nor the decoding rate includes a compile.
        Generating compiles them anyway."""
        from .flow import SpecializingExecutable

        if not isinstance(self.exe, SpecializingExecutable) or not (self.info.shared or self._fixed_width()):
            return
        t0 = time.perf_counter()
        prompts = [np.zeros(prompt_length, np.int64)] * batch
        lens = np.full(batch, prompt_length, np.int64)
        nxt = np.zeros(batch, np.int64)
        if self.info.shared:
            kv = self._kv(batch)
            steps = [(self._prefill_feeds(prompts, lens), kv), (self._decode_feeds(nxt, lens, 0), kv)]
        else:
            feeds, mask, positions, kv = self._grow_prefill_feeds(prompts, lens)
            state = _Grown(mask, positions[:, -1].copy(), mask.shape[1])
            buffers = self._grow_buffers(batch, self._capacity(state.filled, max_new_tokens))
            state.widen(buffers, [(a[:, :, :0], b[:, :, :0]) for a, b in kv], copy=False)
            steps = [(feeds, kv), (self._grow_decode_feeds(nxt, state), state.cache)]
        for feeds, cache in steps:
            self.exe.specialized(self._with_cache(feeds, cache))
        self.compile_s += time.perf_counter() - t0

    # -- inputs ----------------------------------------------------------------------------------
    def _prompts(self, prompt_ids) -> list[np.ndarray]:
        if isinstance(prompt_ids, np.ndarray) and prompt_ids.ndim in (1, 2):
            rows = [prompt_ids] if prompt_ids.ndim == 1 else list(prompt_ids)
        elif isinstance(prompt_ids, (list, tuple)) and prompt_ids and all(isinstance(x, (int, np.integer))
                                                                         for x in prompt_ids):
            rows = [prompt_ids]
        elif isinstance(prompt_ids, (list, tuple)) and prompt_ids:
            rows = list(prompt_ids)
        else:
            raise InputError("prompt_ids must be token ids: a list of ints, a list of such lists, or a 1-D/2-D "
                             "integer array")
        out = []
        for r in rows:
            a = np.asarray(r)
            if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
                raise InputError("every prompt must be a non-empty 1-D list of integer token ids")
            a = a.astype(np.int64)
            vocab = self.info.vocab
            bad = a[(a < 0) | (a >= vocab)] if vocab else a[a < 0]
            if bad.size:
                raise InputError(f"token id {int(bad[0])} is outside the vocabulary [0, {vocab})")
            out.append(a)
        return out

    def _kv(self, batch: int) -> list:
        """The shared cache for `batch` rows: allocated once, reused while the batch size stays."""
        info = self.info
        shape = (batch, info.kv_heads, info.max_length, info.head_size)
        if self._cache is None or self._cache[0][0].shape != shape:
            self._cache = [(np.zeros(shape, info.kv_dtype), np.zeros(shape, info.kv_dtype)) for _ in info.past]
        return self._cache

    # -- one forward pass -------------------------------------------------------------------------------
    def _feeds(self, ids, mask, positions, last) -> dict:
        info = self.info
        feeds = {"input_ids": ids, "attention_mask": mask}
        if info.position_ids:
            feeds["position_ids"] = positions
        if info.cache_branch:
            feeds[info.cache_branch] = np.array([True])
        if self.narrowed:
            feeds[LAST] = last
        return feeds

    def _with_cache(self, feeds, kv) -> dict:
        for (pk, pv), (k, v) in zip(self.info.past, kv):
            feeds[pk], feeds[pv] = k, v
        return feeds

    def _step(self, feeds, last, kv, into: dict):
        """Logits (B, V) at each row's last position `last`, and the run's outputs; the present
        outputs named in `into` are written into those arrays (the shared cache: in place)."""
        outs = self.exe.run(self._with_cache(feeds, kv), into=into)
        logits = outs["logits"]
        return (logits[:, 0] if self.narrowed else logits[np.arange(logits.shape[0]), last]), outs

    # -- the loop -----------------------------------------------------------------------------------------
    def generate(self, prompt_ids, max_new_tokens: int = 32, *, do_sample: bool = False, temperature: float = 1.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int | None = None, eos_token_id=None,
                 on_token=None, on_logits=None) -> np.ndarray:
        """New tokens for each prompt, [batch, n] (n <= max_new_tokens: fewer when every row
        ended with an end-of-sequence token; a row that ended earlier is filled with the pad id).
        `on_token(tokens)` is called with each step's [batch] tokens as they come, `on_logits(logits)`
        with the [batch, vocab] logits they were chosen from."""
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a whole number of at least 1, got {max_new_tokens!r}")
        sampler = Sampler(do_sample, temperature, top_k, top_p, seed)
        info = self.info
        prompts = self._prompts(prompt_ids)
        lens = np.array([p.size for p in prompts], np.int64)
        batch = len(prompts)
        longest = int(lens.max())
        if info.max_length and longest + max_new_tokens > info.max_length:
            raise InputError(f"a prompt of {longest} tokens and {max_new_tokens} new ones exceed the model's "
                             f"max_length {info.max_length}")
        eos = set(info.eos if eos_token_id is None else np.atleast_1d(eos_token_id).tolist())
        t0 = time.perf_counter()
        if info.shared:
            logits, kv, state = self._prefill_shared(prompts, lens)
        else:
            logits, kv, state = self._prefill_grow(prompts, lens, max_new_tokens)
        tokens, done = [], np.zeros(batch, bool)
        first = decode = None
        for step in range(max_new_tokens):
            if on_logits is not None:
                on_logits(logits.copy())  # a decoding step writes over its logits: the caller's own
            nxt = sampler(logits)
            nxt = np.where(done, info.pad, nxt).astype(np.int64)
            tokens.append(nxt)
            if first is None:
                first = time.perf_counter()
            if on_token is not None:
                on_token(nxt.copy())
            done |= np.isin(nxt, list(eos)) if eos else False
            if done.all() or step == max_new_tokens - 1:
                break
            if info.shared:
                decode = decode or self._decode_shared(lens, kv)
                logits = decode(nxt, lens + step)
            else:
                logits, kv, state = self._decode_grow(nxt, kv, state)
        end = time.perf_counter()
        n = len(tokens)
        self.stats = {"ttft_ms": (first - t0) * 1e3, "new_tokens": n, "prompt_tokens": int(lens.sum()),
                      "decode_tokens_per_s": (n - 1) / (end - first) if n > 1 and end > first else None,
                      "batch": batch}
        return np.stack(tokens, axis=1)

    def _prefill_feeds(self, prompts, lens) -> dict:
        """Prompts right-padded to the bucket; the mask says which tokens are real."""
        info = self.info
        batch = len(prompts)
        length = min(-(-int(lens.max()) // PROMPT_BUCKET) * PROMPT_BUCKET, info.max_length)
        ids = np.full((batch, length), info.pad, np.int64)
        mask = np.zeros((batch, length), np.int64)
        for r, p in enumerate(prompts):
            ids[r, :p.size], mask[r, :p.size] = p, 1
        positions = np.broadcast_to(np.arange(length, dtype=np.int64), (batch, length)).copy()
        return self._feeds(ids, mask, positions, lens - 1)

    def _decode_feeds(self, nxt, lens, step) -> dict:
        """One new token per row, at position lens + step; the mask max_length wide."""
        batch = nxt.size
        now = lens + step
        mask = (np.arange(self.info.max_length)[None, :] <= now[:, None]).astype(np.int64)
        return self._feeds(nxt.reshape(batch, 1), mask, now.reshape(batch, 1), np.zeros(batch, np.int64))

    def _prefill_shared(self, prompts, lens):
        kv = self._kv(len(prompts))
        logits, _ = self._step(self._prefill_feeds(prompts, lens), lens - 1, kv, self._into(kv))
        return logits, kv, None

    def _decode_shared(self, lens, kv):
        """The decoding step, bound once per generation (Executable.bind_io): each token only writes
        its values into the step's input arrays (the token, its position, one more mask column)
        and runs; the cache is written in place. Returns `decode(nxt, now) -> logits (B, V)`,
        valid until the next call."""
        feeds = self._decode_feeds(np.zeros(lens.size, np.int64), lens, 0)
        ids, mask, positions = feeds["input_ids"], feeds["attention_mask"], feeds.get("position_ids")
        run = self.exe.bind_io(self._with_cache(feeds, kv), into=self._into(kv))
        rows = np.arange(lens.size)

        def decode(nxt, now):
            ids[:, 0] = nxt
            if positions is not None:
                positions[:, 0] = now
            mask[rows, now] = 1
            return run()["logits"][:, 0]
        return decode

    def _into(self, kv) -> dict:
        return {name: arr for pair, arrs in zip(self.info.present, kv) for name, arr in zip(pair, arrs)}

    # -- a cache that grows by Concat ------------------------------------------------------------------
    def _fixed_width(self) -> bool:
        """Whether a Concat-grown cache can be fed at one width with unused slots masked out: the
        model takes position_ids (positions never follow the cache's width) and attends without a
        sliding window (which would count the unused slots)."""
        return self.info.position_ids and not self.info.window

    def _grow_prefill_feeds(self, prompts, lens):
        """Prompts left-padded (positions count real tokens only), to a PROMPT_BUCKET multiple
        where the cache is fed at a fixed width; an empty past."""
        info = self.info
        batch, length = len(prompts), int(lens.max())
        if self._fixed_width():
            length = -(-length // PROMPT_BUCKET) * PROMPT_BUCKET
        ids = np.full((batch, length), info.pad, np.int64)
        mask = np.zeros((batch, length), np.int64)
        for r, p in enumerate(prompts):
            ids[r, length - p.size:], mask[r, length - p.size:] = p, 1
        positions = np.maximum(np.cumsum(mask, 1) - 1, 0)
        empty = (batch, info.kv_heads, 0, info.head_size)
        kv = [(np.zeros(empty, info.kv_dtype), np.zeros(empty, info.kv_dtype)) for _ in info.past]
        return self._feeds(ids, mask, positions, np.full(batch, length - 1)), mask, positions, kv

    @staticmethod
    def _capacity(prompt_width: int, max_new_tokens: int) -> int:
        return -(-(prompt_width + max_new_tokens - 1) // CACHE_BUCKET) * CACHE_BUCKET

    def _prefill_grow(self, prompts, lens, max_new_tokens):
        """The prompts' pass; at a fixed width, then the cache's buffers with the prompt's rows
        in them, the pads' rows zeroed (a pad's key or value is never read, but must be finite)."""
        feeds, mask, positions, kv = self._grow_prefill_feeds(prompts, lens)
        last = np.full(len(prompts), mask.shape[1] - 1)
        logits, outs = self._step(feeds, last, kv, {})
        kv = [(outs[k], outs[v]) for k, v in self.info.present]
        state = _Grown(mask, positions[:, -1].copy(), mask.shape[1])
        if self._fixed_width():
            state.widen(self._grow_buffers(len(prompts), self._capacity(state.filled, max_new_tokens)), kv)
            kv = state.cache
        return logits, kv, state

    def _grow_buffers(self, batch, capacity) -> list:
        """[(cache, present)] per layer and key/value: the cache `capacity` rows wide, the present
        one row wider; allocated once per batch size and capacity, reused by the next generation."""
        info = self.info
        shape = (batch, info.kv_heads, capacity, info.head_size)
        held = self._grown
        if held is None or held[0][0].shape != shape:
            wide = shape[:2] + (capacity + 1,) + shape[3:]
            self._grown = held = [(np.zeros(shape, info.kv_dtype), np.zeros(wide, info.kv_dtype))
                                  for _ in range(2 * len(info.past))]
        return held

    def _grow_decode_feeds(self, nxt, state) -> dict:
        batch = nxt.size
        pos = (state.last_pos + 1).reshape(batch, 1)
        return self._feeds(nxt.reshape(batch, 1), state.mask, pos, np.zeros(batch, np.int64))

    def _decode_grow(self, nxt, kv, state):
        info = self.info
        last = 0
        if state.buffers is None:  # the exact cache: grown by the model's Concat, one row a step
            state.mask = np.concatenate([state.mask, np.ones((nxt.size, 1), np.int64)], axis=1)
            feeds = self._grow_decode_feeds(nxt, state)
            logits, outs = self._step(feeds, last, kv, {})
            kv = [(outs[k], outs[v]) for k, v in info.present]
        else:  # a fixed width: the new row (the present's last) goes to the next free slot
            feeds = self._grow_decode_feeds(nxt, state)
            logits, _ = self._step(feeds, last, kv, state.into(info.present))
            for cache, present in state.buffers:
                cache[:, :, state.filled] = present[:, :, -1]
            state.mask[:, state.filled] = 1
            state.filled += 1
        state.last_pos = feeds["position_ids"][:, 0] if "position_ids" in feeds else state.last_pos + 1
        return logits, kv, state


@dataclass
class _Grown:
    """Where a Concat-grown cache stands between steps. At a fixed width: `buffers` [(cache,
    present)] per layer and key/value, `filled` slots used, `mask` the step's attention mask
    (the used slots, zeros, and the new token's 1 at the end)."""

    mask: np.ndarray
    last_pos: np.ndarray
    filled: int
    buffers: list | None = None
    cache: list | None = None

    def widen(self, buffers, kv, copy: bool = True) -> None:
        """Move to the fixed-width `buffers`, the prompt's cache `kv` copied in (unless not `copy`)."""
        rows = self.mask[:, None, :, None] > 0
        for (cache, _), arr in zip(buffers, (a for pair in kv for a in pair)):
            if copy:
                np.copyto(cache[:, :, :self.filled], np.where(rows, arr, 0))
                cache[:, :, self.filled:] = 0
        width = buffers[0][0].shape[2]
        mask = np.zeros((self.mask.shape[0], width + 1), np.int64)
        mask[:, :self.filled], mask[:, -1] = self.mask, 1
        self.mask, self.buffers = mask, buffers
        self.cache = [(buffers[2 * i][0], buffers[2 * i + 1][0]) for i in range(len(buffers) // 2)]

    def into(self, present_names) -> dict:
        """The present outputs' arrays: each step's run writes the grown cache there."""
        wide = [p for _, p in self.buffers]
        return {name: arr for pair, arrs in zip(present_names, zip(wide[::2], wide[1::2]))
                for name, arr in zip(pair, arrs)}


class Sampler:
    """Greedy (argmax, the lowest id on ties), or sampling with temperature, top-k and top-p."""

    def __init__(self, do_sample, temperature, top_k, top_p, seed):
        if not (isinstance(temperature, (int, float)) and temperature > 0):
            raise InputError(f"temperature must be positive, got {temperature!r}")
        if not (isinstance(top_k, int) and top_k >= 0):
            raise InputError(f"top_k must be a whole number >= 0 (0: off), got {top_k!r}")
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise InputError(f"top_p must be in (0, 1], got {top_p!r}")
        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, float(temperature), top_k, float(top_p)
        self.rng = np.random.default_rng(seed)

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        if not self.do_sample:
            return np.argmax(logits, axis=-1)
        out = np.empty(logits.shape[0], np.int64)
        for r, row in enumerate(logits.astype(np.float64) / self.temperature):
            order = np.argsort(-row, kind="stable")
            if self.top_k:
                order = order[:self.top_k]
            p = np.exp(row[order] - row[order[0]])
            p /= p.sum()
            if self.top_p < 1:
                keep = int(np.searchsorted(np.cumsum(p), self.top_p) + 1)
                order, p = order[:keep], p[:keep] / p[:keep].sum()
            out[r] = order[self.rng.choice(len(order), p=p)]
        return out


def generate(model, prompt_ids, max_new_tokens: int = 32, *, backend: str | None = None, threads: int | None = None,
             max_length: int | None = None, precision: str | None = None, **kw) -> np.ndarray:
    """`Generator(model, ...).generate(prompt_ids, max_new_tokens, ...)` in one call."""
    return Generator(model, backend=backend, threads=threads, max_length=max_length, precision=precision).generate(
        prompt_ids, max_new_tokens, **kw)


__all__ = ["DecoderInfo", "Generator", "PROMPT_BUCKET", "Sampler", "generate", "inspect", "last_position_logits",
           "locate"]
