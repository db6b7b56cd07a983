"""Records for onnxruntime-genai's decoder ops (glow.ops.genai): GroupQueryAttention (packed or
separate QKV, a first prompt, decoding from a max_length buffer, a chunk after a past, a cache that
grows, rotary fused, a sliding window, softcap), RotaryEmbedding, and the (Skip)(Simplified)
LayerNormalization family.

Row lengths and total_sequence_length are constants: random ones would name rows past the cache,
which is an input error, not an op to compare. No row of a first prompt is padded here (a padded
position's output is read by no one, so backends may differ there; tests/test_genai_ops.py covers
padding with its own comparison).
"""

import numpy as np

from ..op_records import Const, In, OpRecord

MS = "com.microsoft"
H, KVH, D = 4, 2, 8
ROT = In((16, D // 2), low=-1.0, high=1.0)  # a cos/sin cache of 16 positions


def _gqa(name, b, s, past, lens, total, *, packed=True, rotary=True, **attrs):
    q = (b, s, (H + 2 * KVH) * D if packed else H * D)
    ins = [In(q), None if packed else In((b, s, KVH * D)), None if packed else In((b, s, KVH * D)),
           None if past is None else In((b, KVH, past, D)), None if past is None else In((b, KVH, past, D)),
           Const(np.array([n - 1 for n in lens], np.int32)), Const(np.array(total, np.int32)),
           ROT if rotary else None, ROT if rotary else None]
    while ins[-1] is None:
        ins.pop()
    return OpRecord("GroupQueryAttention", ins, dict(num_heads=H, kv_num_heads=KVH, do_rotary=int(rotary), **attrs),
                    name=name, num_outputs=3, rtol=1e-5, atol=1e-5, domain=MS)


RECORDS = [
    _gqa("first-prompt", 1, 5, None, [5], 5),
    _gqa("first-prompt-separate", 2, 4, None, [4, 4], 4, packed=False, rotary=False),
    _gqa("decode-buffer", 2, 1, 8, [7, 3], 8),
    _gqa("decode-window-interleaved", 2, 1, 8, [8, 5], 8, rotary_interleaved=1, local_window_size=3),
    _gqa("chunk-after-past-softcap", 1, 5, 12, [9], 12, packed=False, softcap=2.5),
    _gqa("growing-cache", 1, 3, 4, [7], 7, scale=0.3),
]

X, G, P = In((2, 3, 16)), In((16,), low=0.5, high=1.5), In((2, 3, 16))
RECORDS += [
    OpRecord("SimplifiedLayerNormalization", [X, G], dict(epsilon=1e-6), name="last-axis", num_outputs=2),
    OpRecord("SimplifiedLayerNormalization", [X, In((3, 16))], dict(axis=-2, epsilon=1e-5), name="two-axes"),
    OpRecord("SkipSimplifiedLayerNormalization", [X, P, G], dict(epsilon=1e-6), name="no-bias", num_outputs=4,
             domain=MS),
    OpRecord("SkipSimplifiedLayerNormalization", [X, In((3, 16)), G, In((16,))], name="bias-2d-skip",
             num_outputs=4, domain=MS),
    OpRecord("SkipLayerNormalization", [X, P, G, In((16,)), In((16,))], dict(epsilon=1e-6), name="beta-bias",
             num_outputs=4, domain=MS),
    OpRecord("SkipLayerNormalization", [X, P, G], name="gamma-only", domain=MS),
    OpRecord("RotaryEmbedding", [In((2, 3, 16)), Const(np.array([[0, 1, 2], [5, 6, 7]], np.int64)),
                                 ROT, ROT], dict(num_heads=2), name="positions", domain=MS),
    OpRecord("RotaryEmbedding", [In((2, 3, 16)), Const(np.array([4], np.int64)), ROT, ROT],
             dict(num_heads=2, interleaved=1), name="offset-interleaved", domain=MS),
    OpRecord("RotaryEmbedding", [In((1, 2, 3, 8)), Const(np.array([[1, 2, 3]], np.int64)), ROT, ROT],
             name="4d", domain=MS),
]
