"""Records for recurrent ops (RNN, GRU, LSTM) and CausalConvWithState: every direction and layout,
ragged batches (sequence_lens as a constant and as a run-time input, including empty sequences),
initial states, peepholes, clip, activation attributes, 16/64-bit floats."""

import numpy as np

from ..op_records import Const, In, OpRecord

T, N, I, H = 4, 3, 5, 2
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rec(op, name, dirs=1, layout=0, bias=True, lens=None, init=False, peep=False, dtype="float32",
         outputs=None, **attrs):
    g = _GATES[op] * H
    xs = (T, N, I) if layout == 0 else (N, T, I)
    state = (dirs, N, H) if layout == 0 else (N, dirs, H)
    ins = [In(xs, dtype, -2, 2), In((dirs, g, I), dtype, -1, 1), In((dirs, g, H), dtype, -1, 1),
           In((dirs, 2 * g), dtype, -1, 1) if bias else None, lens,
           In(state, dtype) if init else None]
    if op == "LSTM":
        ins += [In(state, dtype) if init else None, In((dirs, 3 * H), dtype, -1, 1) if peep else None]
    while ins[-1] is None:
        ins.pop()
    direction = {1: attrs.pop("direction", "forward"), 2: "bidirectional"}[dirs]
    tol = {"float16": (2e-3, 2e-3)}.get(dtype, (1e-5, 1e-5))
    return OpRecord(op, ins, {"hidden_size": H, "direction": direction, "layout": layout, **attrs},
                    name=name, num_outputs=outputs or (3 if op == "LSTM" else 2), rtol=tol[0], atol=tol[1])


RUNTIME_LENS = In((N,), "int32", 0, T)  # random lengths in [0, T], empties included
CONST_LENS = Const(np.array([4, 0, 2], np.int32))

RECORDS = []
for op in ("RNN", "GRU", "LSTM"):
    RECORDS += [
        _rec(op, "forward"),
        _rec(op, "no-bias", bias=False),
        _rec(op, "reverse", direction="reverse"),
        _rec(op, "bidirectional-init", dirs=2, init=True),
        _rec(op, "layout1-bidirectional", dirs=2, layout=1, init=True),
        _rec(op, "lens-const-forward", lens=CONST_LENS, init=True),
        _rec(op, "lens-const-reverse", lens=Const(np.array([1, 3, 2], np.int32)), direction="reverse"),
        _rec(op, "lens-runtime-bidirectional", dirs=2, lens=RUNTIME_LENS, init=True),
        _rec(op, "lens-runtime-layout1", dirs=2, layout=1, lens=RUNTIME_LENS),
        _rec(op, "lens-full", lens=Const(np.full(N, T, np.int32)), direction="reverse"),
        _rec(op, "clip", clip=0.5, dirs=2),
        _rec(op, "float16", dtype="float16", dirs=2, init=True),
        _rec(op, "float64", dtype="float64", lens=RUNTIME_LENS, direction="reverse"),
        _rec(op, "y-only", outputs=1),
    ]
RECORDS += [
    _rec("RNN", "relu", activations=["Relu"]),
    _rec("RNN", "affine-both-dirs", dirs=2, activations=["Affine", "ScaledTanh"],
         activation_alpha=[0.5, 0.7], activation_beta=[0.1, 1.3]),
    _rec("GRU", "linear-before-reset", linear_before_reset=1, dirs=2, lens=RUNTIME_LENS, init=True),
    _rec("GRU", "hardsigmoid-leakyrelu", activations=["HardSigmoid", "LeakyRelu"],
         activation_alpha=[0.3, 0.2], activation_beta=[0.4]),
    _rec("LSTM", "peepholes", peep=True, init=True, dirs=2, lens=RUNTIME_LENS),
    _rec("LSTM", "input-forget-peepholes", peep=True, input_forget=1),
    _rec("LSTM", "activations", activations=["HardSigmoid", "Elu", "Softsign"], activation_alpha=[0.25, 0.9]),
    _rec("LSTM", "thresholdedrelu-softplus", activations=["Sigmoid", "ThresholdedRelu", "Softplus"],
         activation_alpha=[0.1]),
]


# -- CausalConvWithState -----------------------------------------------------------------------------

def _conv(name, n=2, c=3, length=5, k=3, bias=True, past=True, dtype="float32", **attrs):
    ins = [In((n, c, length), dtype), In((c, 1, k), dtype), In((c,), dtype) if bias else None,
           In((n, c, k - 1), dtype) if past else None]
    while ins[-1] is None:
        ins.pop()
    tol = (2e-3, 2e-3) if dtype == "float16" else (1e-5, 1e-5)
    return OpRecord("CausalConvWithState", ins, attrs, name=name, num_outputs=2, rtol=tol[0], atol=tol[1])


RECORDS += [
    _conv("basic"),
    _conv("no-bias-no-past", bias=False, past=False),
    _conv("silu", activation="silu"),
    _conv("swish-no-past", activation="swish", past=False),
    _conv("kernel1", k=1),
    _conv("short-input", length=1, k=4),
    _conv("b1-c1", n=1, c=1),
    _conv("float16-silu", dtype="float16", activation="silu"),
]
