"""onnxruntime-genai's decoder ops (glow.ops.genai): the reference against onnxruntime, and every
backend against the reference (cpu's native GroupQueryAttention kernel, the lowering on cpu floor
and opencl), the KV cache written in place when past and present are one buffer."""

import itertools

import glow
import numpy as np
import pytest
from glow.backends.cpu import jit
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h

MS = "com.microsoft"


def gqa_model(b, s, heads, kv_heads, d, past, *, packed=True, rotary=True, interleaved=False, window=-1,
              softcap=0.0, rot_rows=64):
    ins = ["query", "" if packed else "key", "" if packed else "value", "past_key" if past is not None else "",
           "past_value" if past is not None else "", "seqlens_k", "total", "cos" if rotary else "",
           "sin" if rotary else ""]
    node = h.make_node("GroupQueryAttention", ins, ["y", "present_key", "present_value"], domain=MS,
                       num_heads=heads, kv_num_heads=kv_heads, do_rotary=int(rotary),
                       rotary_interleaved=int(interleaved), local_window_size=window, softcap=float(softcap))
    qh = (heads + 2 * kv_heads) * d if packed else heads * d
    vi = [h.make_tensor_value_info("query", T.FLOAT, [b, s, qh]), h.make_tensor_value_info("seqlens_k", T.INT32, [b]),
          h.make_tensor_value_info("total", T.INT32, [])]
    if past is not None:
        vi += [h.make_tensor_value_info(n, T.FLOAT, [b, kv_heads, past, d]) for n in ("past_key", "past_value")]
    if not packed:
        vi += [h.make_tensor_value_info(n, T.FLOAT, [b, s, kv_heads * d]) for n in ("key", "value")]
    if rotary:
        vi += [h.make_tensor_value_info(n, T.FLOAT, [rot_rows, d // 2]) for n in ("cos", "sin")]
    outs = [h.make_tensor_value_info(n, T.FLOAT, None) for n in ("y", "present_key", "present_value")]
    return h.make_model(h.make_graph([node], "gqa", vi, outs),
                        opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)])


def gqa_feeds(rng, b, s, heads, kv_heads, d, past, lens, total, *, packed=True, rotary=True, rot_rows=64):
    qh = (heads + 2 * kv_heads) * d if packed else heads * d
    f = {"query": rng.standard_normal((b, s, qh)).astype(np.float32),
         "seqlens_k": np.array([n - 1 for n in lens], np.int32), "total": np.array(total, np.int32)}
    if past is not None:
        for n in ("past_key", "past_value"):
            f[n] = rng.standard_normal((b, kv_heads, past, d)).astype(np.float32)
    if not packed:
        for n in ("key", "value"):
            f[n] = rng.standard_normal((b, s, kv_heads * d)).astype(np.float32)
    if rotary:
        angle = rng.uniform(0, 6.3, (rot_rows, d // 2))
        f["cos"], f["sin"] = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    return f


#: (batch, sequence, past buffer, row lengths, total_sequence_length): a first prompt (one row
#: padded), decoding from a max_length buffer, a chunk after a past (batch 1), a growing cache
CALLS = {"first": (2, 5, 8, [5, 3], 5), "first-no-past": (1, 5, None, [5], 5), "decode": (2, 1, 8, [7, 3], 8),
         "chunk": (1, 5, 12, [9], 12), "grow": (1, 5, 4, [9], 9)}
FORMS = {"packed-rotary": dict(packed=True, rotary=True), "separate": dict(packed=False, rotary=False),
         "interleaved-window": dict(packed=True, rotary=True, interleaved=True, window=3),
         "softcap": dict(packed=False, rotary=True, softcap=2.5)}


def _case(call, form, seed=0):
    b, s, past, lens, total = CALLS[call]
    kw = FORMS[form]
    model = gqa_model(b, s, 4, 2, 16, past, **kw)
    feeds = gqa_feeds(np.random.default_rng(seed), b, s, 4, 2, 16, past, lens, total, packed=kw["packed"],
                      rotary=kw["rotary"])
    return model, feeds, lens, s == total


def _valid_rows(y, lens, first):
    """A first prompt's padded positions (past a row's length) compute nothing anyone reads."""
    return [y[r, :lens[r]] if first else y[r] for r in range(y.shape[0])]


@pytest.mark.parametrize("call,form", list(itertools.product(CALLS, FORMS)))
def test_group_query_attention_reference_equals_onnxruntime(call, form):
    ort = pytest.importorskip("onnxruntime")
    model, feeds, lens, first = _case(call, form)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = list(glow.compile(model, backend="reference").run(feeds).values())
    for a, e in zip(_valid_rows(got[0], lens, first), _valid_rows(want[0], lens, first)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
    for a, e in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


BACKENDS = [pytest.param(("cpu", None), id="cpu"), pytest.param(("cpu", "floor"), id="cpu-floor"),
            pytest.param(("opencl", None), id="opencl", marks=pytest.mark.opencl)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call,form", list(itertools.product(CALLS, FORMS)))
def test_group_query_attention_backends_equal_the_reference(call, form, backend):
    name, native = backend
    if backend_unavailable(name):
        pytest.skip(f"{name} unavailable")
    model, feeds, lens, first = _case(call, form, seed=1)
    want = list(glow.compile(model, backend="reference").run(feeds).values())
    exe = glow.compile(model, backend=name, native=native, strict=True)
    for _ in range(2):  # compiled code serves a second run alike
        got = list(exe.run(feeds).values())
        for a, e in zip(_valid_rows(got[0], lens, first), _valid_rows(want[0], lens, first)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
        for a, e in zip(got[1:], want[1:]):
            np.testing.assert_array_equal(a, e)



@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("call,form", [(c, f) for c, f in itertools.product(CALLS, FORMS) if CALLS[c][1] > 1])
def test_cpu_prompt_tiles_equal_the_reference(call, form, threads, monkeypatch):
    """Every prompt-shaped call through the cpu kernel that attends to QL queries at once (taken
    from TILE_MIN_S queries; lowered here so that 5-query prompts take it): padded rows, a chunk
    after a past, a window starting mid-tile, softcap, a partial tile."""
    from glow.backends.cpu.kernels import attention

    monkeypatch.setattr(attention, "TILE_MIN_S", 2)
    model, feeds, lens, first = _case(call, form, seed=3)
    want = list(glow.compile(model, backend="reference").run(feeds).values())
    got = list(glow.compile(model, backend="cpu", threads=threads, strict=True).run(feeds).values())
    for a, e in zip(_valid_rows(got[0], lens, first), _valid_rows(want[0], lens, first)):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
    for a, e in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(a, e)

def test_cpu_uses_its_kernel_and_writes_the_cache_in_place():
    """Decoding from a max_length buffer passed as both past and present: the new rows land in
    the caller's array, nothing else of it changes, and the output equals the reference's."""
    model, feeds, lens, _ = _case("decode", "packed-rotary", seed=2)
    exe = glow.compile(model, backend="cpu", threads=2, strict=True)
    prof = exe.profile(feeds)
    assert any(r.op == "GroupQueryAttention" for r in prof.records)  # the native kernel, not the lowering
    want = glow.compile(model, backend="reference").run(feeds)
    cache_k, cache_v = feeds["past_key"].copy(), feeds["past_value"].copy()
    before = cache_k.copy()
    got = exe.run({**feeds, "past_key": cache_k, "past_value": cache_v},
                  into={"present_key": cache_k, "present_value": cache_v})
    assert got["present_key"] is cache_k and got["present_value"] is cache_v
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)
    for r, n in enumerate(lens):  # rows [0, n) as the reference has them; the rest untouched
        np.testing.assert_array_equal(cache_k[r, :, :n], want["present_key"][r, :, :n])
        np.testing.assert_array_equal(cache_k[r, :, n:], before[r, :, n:])
    program = (exe.specialized(feeds)[0] if hasattr(exe, "specialized") else exe).program
    assert program.aliasable("past_key", "present_key")
    assert not program.aliasable("past_key", "present_value")  # a key buffer is never a value's


def test_a_row_past_the_cache_is_an_input_error_on_cpu():
    model, feeds, _, _ = _case("decode", "separate", seed=3)
    feeds["seqlens_k"] = np.array([8, 2], np.int32)  # row 0: 9 tokens in a buffer of 8
    with pytest.raises(glow.InputError, match="GroupQueryAttention"):
        glow.compile(model, backend="cpu", strict=True).run(feeds)


# -- the norms and onnxruntime's RotaryEmbedding ----------------------------------------------------

def _one(op, ins, specs, outs, domain="", **attrs):
    node = h.make_node(op, ins, outs, domain=domain, **attrs)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info(n, T.INT64 if n == "p" else T.FLOAT, s)
                                       for n, s in specs],
                         [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs if o])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)])


def _norm_cases():
    rng = np.random.default_rng(4)
    x, s = rng.standard_normal((2, 3, 16)).astype(np.float32), rng.standard_normal((2, 3, 16)).astype(np.float32)
    gamma, beta = (1 + rng.standard_normal(16) * 0.1).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    v = [("x", [2, 3, 16]), ("s", [2, 3, 16]), ("g", [16]), ("b", [16])]
    pos = np.array([[0, 1, 2], [5, 6, 7]], np.int64)
    angle = rng.uniform(0, 6.3, (16, 8))
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    return {
        "simplified": (_one("SimplifiedLayerNormalization", ["x", "g"], v[::2], ["y", "inv"], epsilon=1e-6),
                       {"x": x, "g": gamma}),
        "skip-simplified": (_one("SkipSimplifiedLayerNormalization", ["x", "s", "g", "b"], v, ["y", "", "inv", "sum"],
                                 MS, epsilon=1e-6), {"x": x, "s": s, "g": gamma, "b": beta}),
        "skip-layer": (_one("SkipLayerNormalization", ["x", "s", "g", "b"], v, ["y", "m", "inv", "sum"], MS,
                            epsilon=1e-6), {"x": x, "s": s, "g": gamma, "b": beta}),
        "rotary": (_one("RotaryEmbedding", ["x", "p", "c", "n"], [("x", [2, 3, 16]), ("p", [2, 3]), ("c", [16, 8]),
                                                                  ("n", [16, 8])], ["y"], MS, num_heads=1),
                   {"x": x, "p": pos, "c": cos, "n": sin}),
        "rotary-offset-interleaved": (_one("RotaryEmbedding", ["x", "p", "c", "n"],
                                           [("x", [2, 3, 16]), ("p", [1]), ("c", [16, 8]), ("n", [16, 8])], ["y"],
                                           MS, num_heads=1, interleaved=1),
                                      {"x": x, "p": np.array([4], np.int64), "c": cos, "n": sin}),
    }


NORMS = _norm_cases()


@pytest.mark.parametrize("name", sorted(NORMS))
def test_norms_and_rotary_reference_equals_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    model, feeds = NORMS[name]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, e in zip(glow.compile(model, backend="reference").run(feeds).values(), want):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norms_and_rotary_on_every_backend(name, backend):
    be, native = backend
    if backend_unavailable(be):
        pytest.skip(f"{be} unavailable")
    model, feeds = NORMS[name]
    want = glow.compile(model, backend="reference").run(feeds)
    got = glow.compile(model, backend=be, native=native, strict=True).run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("level", [lv for lv in jit.ISAS if jit.ISAS.index(lv) >= jit.ISAS.index(jit.host_isa())])
@pytest.mark.parametrize("d", [24, 64])
def test_cpu_prompt_tiles_at_every_level(level, d):
    """The prompt tiles' register tile depends on the level and the head size
    (attention.register_tile): each one against the reference."""
    rng = np.random.default_rng(d)
    model = gqa_model(1, 40, 4, 2, d, 80, rot_rows=128)
    feeds = gqa_feeds(rng, 1, 40, 4, 2, d, 80, [40], 40, rot_rows=128)
    want = list(glow.compile(model, backend="reference").run(feeds).values())
    got = list(glow.compile(model, backend="cpu", strict=True, options={"isa": level}).run(feeds).values())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("d", [8, 24, 64])
@pytest.mark.parametrize("form", ["packed-rotary", "interleaved-window", "softcap"])
def test_cpu_kernel_over_long_caches_and_head_sizes(d, form):
    """Keys in blocks of a vector's lanes (16, or 8 for head sizes that 16 does not divide): full
    and partial blocks, a window that starts mid-block, rows of other lengths."""
    kw = dict(FORMS[form])
    if form == "interleaved-window":
        kw["window"] = 37
    rng = np.random.default_rng(d)
    # s >= 16: a prompt, on the transposed-keys path (two rows of other lengths, one after a past)
    for b, s, past, lens, total in ((2, 1, 80, [70, 33], 80), (1, 40, 80, [40], 40), (1, 7, 96, [59], 96),
                                    (2, 20, 48, [20, 9], 20), (1, 17, 64, [50], 64)):
        model = gqa_model(b, s, 4, 2, d, past, rot_rows=128, **kw)
        feeds = gqa_feeds(rng, b, s, 4, 2, d, past, lens, total, packed=kw["packed"], rotary=kw["rotary"],
                          rot_rows=128)
        want = glow.compile(model, backend="reference").run(feeds)
        got = glow.compile(model, backend="cpu", strict=True).run(feeds)
        np.testing.assert_allclose(got["y"], want["y"], rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(got["present_key"], want["present_key"])
