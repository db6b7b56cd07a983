"""Records for the attention family: Attention (3-D/4-D, GQA/MQA, bool/float/short/low-rank masks,
causal, sliding windows, KV cache, nonpad_kv_seqlen, softcap, scale, softmax precision, every
qk_matmul_output mode, 16-bit types), FlexAttention, LinearAttention (every update rule, GQA,
past state, per-head and per-key decay), RotaryEmbedding and SwiGLU."""


import numpy as np

from ..op_records import Const, In, OpRecord

B, HQ, HKV, SQ, SKV, D, DV = 2, 4, 2, 3, 5, 8, 6


def _attn(name, q=(B, HQ, SQ, D), k=(B, HKV, SKV, D), v=(B, HKV, SKV, DV), mask=None, past=None,
          nonpad=None, dtype="float32", outputs=1, **attrs):
    ins = [In(q, dtype), In(k, dtype), In(v, dtype), mask, None, None, nonpad]
    if past is not None:
        heads, dk, dv = (HKV, D, DV) if len(k) == 3 else (k[1], k[3], v[3])
        ins[4], ins[5] = In((k[0], heads, past, dk), dtype), In((k[0], heads, past, dv), dtype)
    while ins[-1] is None:
        ins.pop()
    tol = {"float16": (3e-3, 3e-3), "bfloat16": (2e-2, 2e-2)}.get(dtype, (1e-5, 1e-6))
    return OpRecord("Attention", ins, attrs, name=name, num_outputs=outputs, rtol=tol[0], atol=tol[1])


PACKED = dict(q=(B, SQ, HQ * D), k=(B, SKV, HKV * D), v=(B, SKV, HKV * DV), q_num_heads=HQ, kv_num_heads=HKV)
BOOL_MASK = In((SQ, SKV), "bool")
NONPAD = Const(np.array([5, 3], np.int64))

RECORDS = [
    _attn("gqa"),
    _attn("mha", k=(B, HQ, SKV, D), v=(B, HQ, SKV, DV)),
    _attn("mqa", k=(B, 1, SKV, D), v=(B, 1, SKV, DV)),
    _attn("packed-3d", **PACKED),
    _attn("packed-3d-past-causal", past=2, outputs=3, is_causal=1, **PACKED),
    _attn("causal", is_causal=1),
    _attn("causal-square", k=(B, HKV, SQ, D), v=(B, HKV, SQ, DV), is_causal=1),
    _attn("float-mask-2d", mask=In((SQ, SKV))),
    _attn("float-mask-4d-causal", mask=In((B, HQ, SQ, SKV)), is_causal=1),
    _attn("bool-mask", mask=BOOL_MASK),
    _attn("bool-mask-3d-causal", mask=In((HQ, SQ, SKV), "bool"), is_causal=1),
    _attn("short-float-mask-past", mask=In((1, SKV)), past=3, outputs=4),
    _attn("short-bool-mask", mask=In((SKV - 2,), "bool")),
    _attn("fully-masked-rows", mask=Const(np.zeros((SQ, SKV), bool)), outputs=4, qk_matmul_output_mode=3),
    _attn("neg-inf-float-mask", mask=Const(np.where(np.eye(SQ, SKV) > 0, -np.inf, 0).astype(np.float32)),
          softcap=2.0),
    _attn("float16-mask-float32", mask=In((SQ, SKV), "float16")),
    _attn("past-causal", past=4, outputs=3, is_causal=1),
    _attn("windows", left_window_size=1, right_window_size=1),
    _attn("left-window-causal-past", left_window_size=2, is_causal=1, past=2),
    _attn("nonpad-causal", nonpad=NONPAD, is_causal=1),
    _attn("nonpad-decode-window", q=(B, HQ, 1, D), nonpad=In((B,), "int64", 1, SKV), is_causal=1,
          left_window_size=2),
    _attn("nonpad-negative-offset", nonpad=Const(np.array([1, 0], np.int64)), is_causal=1,
          right_window_size=0),
    _attn("scale-softcap", scale=0.3, softcap=1.5, outputs=4, qk_matmul_output_mode=1),
    _attn("qk-mode0", mask=In((SQ, SKV)), outputs=4),
    _attn("qk-mode2", mask=In((SQ, SKV)), is_causal=1, outputs=4, qk_matmul_output_mode=2),
    _attn("softmax-precision", dtype="float16", softmax_precision="float32", outputs=4,
          qk_matmul_output_mode=3),
    _attn("float16-causal", dtype="float16", is_causal=1, softcap=3.0),
    _attn("bfloat16-causal", dtype="bfloat16", is_causal=1),
    _attn("bfloat16-long", dtype="bfloat16", k=(1, HKV, 40, D), v=(1, HKV, 40, DV), q=(1, HQ, SQ, D)),
    _attn("float64", dtype="float64", mask=BOOL_MASK),
    _attn("single-query-key", q=(1, 1, 1, D), k=(1, 1, 1, D), v=(1, 1, 1, 1)),
    # long sequences with tiny heads: the scores are attended in blocks of query rows
    _attn("chunked-causal", q=(1, 2, 64, 2), k=(1, 1, 64, 2), v=(1, 1, 64, 2), is_causal=1),
    _attn("chunked-nonpad-window", q=(2, 2, 48, 2), k=(2, 1, 64, 2), v=(2, 1, 64, 2),
          nonpad=Const(np.array([64, 50], np.int64)), is_causal=1, left_window_size=20),
    _attn("chunked-bool-mask-rows", q=(1, 2, 64, 2), k=(1, 1, 64, 2), v=(1, 1, 64, 2),
          mask=In((64, 64), "bool")),
    _attn("chunked-float-mask-rows", q=(2, 4, 48, 2), k=(2, 2, 64, 2), v=(2, 2, 64, 2), mask=In((48, 64))),
    _attn("chunked-past-short-mask", q=(1, 2, 40, 2), k=(1, 1, 8, 2), v=(1, 1, 8, 2), past=56,
          mask=In((1, 60)), is_causal=1),
]


# -- FlexAttention (without sub-graphs; node tests cover score_mod / prob_mod) -------------------

def _flex(name, q=(B, HQ, SQ, D), k=(B, HKV, SKV, D), v=(B, HKV, SKV, DV), dtype="float32", **attrs):
    tol = (3e-3, 3e-3) if dtype == "float16" else (1e-5, 1e-6)
    return OpRecord("FlexAttention", [In(q, dtype), In(k, dtype), In(v, dtype)], attrs, name=name,
                    rtol=tol[0], atol=tol[1], domain="ai.onnx.preview")


RECORDS += [
    _flex("gqa"),
    _flex("mha-scaled", k=(B, HQ, SKV, D), v=(B, HQ, SKV, DV), scale=0.2),
    _flex("float16", dtype="float16"),
    _flex("float64-precision32", dtype="float64", softmax_precision="float32"),
    _flex("chunked", q=(1, 2, 64, 2), k=(1, 1, 64, 2), v=(1, 1, 64, 2)),
]


# -- LinearAttention -------------------------------------------------------------------------------

T, DK, LDV = 4, 3, 2


def _lin(name, rule, hq=4, hkv=2, steps=T, past=False, decay=None, beta=None, dtype="float32", **attrs):
    ins = [In((B, steps, hq * DK), dtype, -1, 1), In((B, steps, hkv * DK), dtype, -1, 1),
           In((B, steps, hkv * LDV), dtype), In((B, hkv, DK, LDV), dtype) if past else None,
           None if decay is None else In((B, steps, decay), dtype, -0.5, 0),
           None if beta is None else In((B, steps, beta), dtype, 0, 1)]
    while ins[-1] is None:
        ins.pop()
    tol = (3e-3, 3e-3) if dtype == "float16" else (1e-5, 1e-5)
    attrs = {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule, **attrs}
    return OpRecord("LinearAttention", ins, attrs, name=name, num_outputs=2, rtol=tol[0], atol=tol[1])


RECORDS += [
    _lin("linear", "linear"),
    _lin("linear-past-scale", "linear", past=True, scale=0.5),
    _lin("linear-one-step", "linear", steps=1, hq=2, hkv=2),
    _lin("no-steps-past", "linear", steps=0, past=True),
    _lin("gated-per-head", "gated", decay=2, past=True),
    _lin("gated-per-key", "gated", decay=2 * DK),
    _lin("delta", "delta", beta=2),
    _lin("gated-delta-mqa-scalar-beta", "gated_delta", hkv=1, decay=1, beta=1, past=True),
    _lin("gated-delta-float16", "gated_delta", decay=2, beta=2, dtype="float16"),
]


# -- RotaryEmbedding -------------------------------------------------------------------------------

S, NH, HD, MAXPOS = 3, 2, 8, 10


def _rope(name, x, rot=HD, pos=True, dtype="float32", **attrs):
    b = x[0]
    cache = (MAXPOS, rot // 2) if pos else (b, S, rot // 2)
    ins = [In(x, dtype), In(cache, dtype, -1, 1), In(cache, dtype, -1, 1)]
    if pos:
        ins.append(In((b, S), "int64", 0, MAXPOS - 1))
    if rot != HD:
        attrs["rotary_embedding_dim"] = rot
    return OpRecord("RotaryEmbedding", ins, attrs, name=name)


RECORDS += [
    _rope("4d", (2, NH, S, HD)),
    _rope("4d-interleaved-no-pos", (2, NH, S, HD), pos=False, interleaved=1),
    _rope("3d", (2, S, NH * HD), num_heads=NH),
    _rope("3d-partial-interleaved", (2, S, NH * HD), rot=4, num_heads=NH, interleaved=1),
    _rope("4d-partial-no-pos", (1, NH, S, HD), rot=4, pos=False),
    _rope("float16", (1, NH, S, HD), dtype="float16"),
]


# -- SwiGLU ----------------------------------------------------------------------------------------

RECORDS += [
    OpRecord("SwiGLU", [In((2, 3)), In((2, 3))]),
    OpRecord("SwiGLU", [In((4,)), In((4,))], {"alpha": 1.702}, name="alpha"),
    OpRecord("SwiGLU", [In(()), In(())], name="scalar"),
    OpRecord("SwiGLU", [In((0, 3)), In((0, 3))], name="empty"),
    OpRecord("SwiGLU", [In((2, 5), "float16"), In((2, 5), "float16")], name="float16", rtol=2e-3, atol=2e-3),
    OpRecord("SwiGLU", [In((64,), low=-60, high=60), In((64,))], name="saturating"),
]
