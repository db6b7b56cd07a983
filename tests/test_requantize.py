"""Requantize (glow-internal, ops/quant.py): the reference, its lowering rule (the float64 formula
every backend without the op runs) and the cpu backend's float32 shortcut (kernels/ewquant.py)
agree bit for bit, at exact ties, lanes just either side of a half step, saturation, int32 extremes
and scales that turn the shortcut off; QLinearConv and QLinearMatMul lower to it."""

import functools

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.ops import get_op

pytest.importorskip("llvmlite")
# the reference divides into infinities and casts NaN lanes to 8 bits on purpose (the extremes
# these tests are for: they saturate, and a NaN becomes 0, as glow's code gives)
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered in divide:RuntimeWarning")]

REQ = get_op("Requantize", "glow")
RNG = np.random.default_rng(7)
C = 5  # channels of the NCHW accumulator [2, C, 3, 7]: 42 lanes each, a partial vector at the end


def graph(a_scale, b_scale, y_scale, zp, then_cast: bool):
    """acc [2, C, 3, 7] -> Requantize with constant scales (b per channel) -> y (or int32 of y:
    a second op makes it a fused body, whose scalar constants are immediates)."""
    b = GraphBuilder("rq")
    acc = b.input("acc", dt.tensor([2, C, 3, 7], "int32"))
    ins = [acc, b.constant(np.float32(a_scale)), b.constant(np.asarray(b_scale, np.float32).reshape(C, 1, 1)),
           b.constant(np.float32(y_scale)), b.constant(zp)]
    y = b.add1(REQ, ins)
    return b.build([b.add1("Cast", [y], {"to": dt.int32}) if then_cast else y])


@functools.cache
def near_ties(a_scale, b_scale, y_scale, n=42):
    """Accumulators whose quotient lies within 2^-9 of a half-integer (by the reference's float64
    formula), first those where float32 arithmetic alone (the shortcut without its check) rounds
    the other way, per channel, padded with random ones."""
    out = np.zeros((2, C, 3, 7), np.int64)
    cand = np.arange(-3_000_000, 3_000_000, dtype=np.int64)
    c = np.float32(np.float32(a_scale) / np.float32(y_scale))
    for ch in range(C):
        s = np.float64(np.float32(a_scale)) * np.float64(np.float32(b_scale[ch]))
        q = (cand.astype(np.float64) * s).astype(np.float32) / np.float32(y_scale)
        fast = cand.astype(np.float32) * (np.float32(b_scale[ch]) * c)
        wrong = cand[np.rint(fast) != np.rint(q)]
        near = cand[np.abs(q - np.floor(q) - 0.5) < 2.0 ** -9]
        pick = np.concatenate([RNG.permutation(wrong)[:n // 2], RNG.permutation(near)[:n]])
        out[:, ch] = np.concatenate([pick, RNG.integers(-300_000, 300_000, n)])[:n].reshape(2, 3, 7)
    return out.astype(np.int32)


def check(g, acc):
    want = glow.compile(g, "reference").run({"acc": acc})
    runs = [glow.compile(g, "cpu", threads=t).run({"acc": acc}) for t in (1, 2)]
    runs.append(glow.compile(g, "cpu", native="floor").run({"acc": acc}))  # the lowering rule
    for got in runs:
        for name, w in want.items():
            assert got[name].dtype == w.dtype
            bad = np.flatnonzero(got[name] != w)
            flat = got[name].reshape(-1)
            assert bad.size == 0, (name, acc.reshape(-1)[bad[:5]], flat[bad[:5]], w.reshape(-1)[bad[:5]])


SCALES = [
    (0.25, [1.0, 0.5, 2.0, 0.75, 1.5], 0.5),  # powers of two: exact ties at odd accumulators
    (0.0123, [0.0031, 0.0007, 0.011, 0.00093, 0.0042], 0.0517),  # a QDQ model's sort
    (1.7e-3, [2.2e-4, 9.1e-5, 3.3e-4, 1.2e-4, 7.7e-5], 6.1e-2),
]


@pytest.mark.parametrize("zp", [np.uint8(0), np.uint8(131), np.int8(-7), np.int8(127)], ids=str)
@pytest.mark.parametrize("then_cast", [False, True], ids=["alone", "fused"])
@pytest.mark.parametrize("scales", range(len(SCALES)))
def test_near_half_steps_round_as_the_reference(scales, then_cast, zp):
    a, bs, y = SCALES[scales]
    g = graph(a, bs, y, zp, then_cast)
    check(g, near_ties(a, tuple(bs), y))
    check(g, RNG.integers(-(2 ** 31), 2 ** 31, (2, C, 3, 7), dtype=np.int64).astype(np.int32))


@pytest.mark.parametrize("b_scale", [
    [0.0, -0.003, 1e-40, 3e38, np.inf],  # zero, negative, subnormal, huge, infinite per-channel scales
    [np.nan, 1e-30, 2.0 ** -126, 1.0, -np.inf],
], ids=["zero-neg-sub-huge-inf", "nan-tiny-min-one-neginf"])
@pytest.mark.parametrize("a_y", [(0.01, 0.02), (1e-30, 1e-35), (3e30, 2.0 ** 118), (0.0, 0.1), (0.1, 0.0),
                                 (1e-40, 0.1), (0.1, np.inf), (np.nan, 0.1), (-0.02, 0.3)],
                         ids=["plain", "tiny", "y-above-2^117", "a-zero", "y-zero", "a-subnormal", "y-inf", "a-nan",
                              "a-negative"])
@pytest.mark.parametrize("zp", [np.uint8(128), np.int8(-3)], ids=str)
def test_extreme_scales_and_accumulators(a_y, b_scale, zp):
    """Scales that turn the shortcut off (per kernel: a_scale or y_scale zero, subnormal, not
    finite, y_scale above 2^117) or send single lanes to the reference's path (infinite or NaN
    products), with int32's extremes among the accumulators."""
    acc = RNG.integers(-(2 ** 31), 2 ** 31, (2, C, 3, 7), dtype=np.int64)
    acc.reshape(-1)[:6] = [2 ** 31 - 1, -(2 ** 31), 0, 1, -1, 1 << 24]
    with np.errstate(all="ignore"):
        check(graph(a_y[0], b_scale, a_y[1], zp, True), acc.astype(np.int32))


def test_qlinear_conv_and_matmul_lower_to_requantize():
    """QLinearConv (bias provably within int32: added in int32 first) and QLinearMatMul lower to
    ConvInteger / MatMulInteger and Requantize for the cpu backend, and agree with the reference."""
    from glow.flow import optimize_for_backend
    from glow.plugins import registry

    b = GraphBuilder("q")
    x = b.input("x", dt.tensor([1, 3, 6, 6], "uint8"))
    c = lambda v: b.constant(v)  # noqa: E731
    w = RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    bias = RNG.integers(-5000, 5000, 4).astype(np.int32)
    y = b.add1("QLinearConv", [x, c(np.float32(0.02)), c(np.uint8(120)), c(w),
                               c(np.asarray([0.003, 0.004, 0.002, 0.005], np.float32)), c(np.int8(0)),
                               c(np.float32(0.05)), c(np.uint8(128)), c(bias)], {"pads": [1, 1, 1, 1]})
    m = b.input("m", dt.tensor([3, 8], "int8"))
    z = b.add1("QLinearMatMul", [m, c(np.float32(0.1)), c(np.int8(3)), c(RNG.integers(0, 256, (8, 4)).astype(np.uint8)),
                                 c(np.float32(0.01)), c(np.uint8(128)), c(np.float32(0.2)), c(np.int8(-1))])
    g = b.build([y, z])
    ops = [n.op.name for n in optimize_for_backend(g, registry().get("cpu")).nodes]
    fused = [m.op.name for n in optimize_for_backend(g, registry().get("cpu")).nodes
             if n.op.name == "FusedElementwise" for m in n.attrs["body"].nodes]
    assert "Requantize" in ops + fused, ops
    feeds = {"x": RNG.integers(0, 256, (1, 3, 6, 6)).astype(np.uint8),
             "m": RNG.integers(-128, 128, (3, 8)).astype(np.int8)}
    want = glow.compile(g, "reference").run(feeds)
    got = glow.compile(g, "cpu").run(feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def _quantize_graph(scale, zp, axis_scale: bool):
    b = GraphBuilder("q")
    x = b.input("x", dt.tensor([4, 3, 50], "float32"))
    if zp is not None and axis_scale:
        zp = np.full(3, zp)  # per axis, as the scale
    ins = [x, b.constant(np.asarray(scale, np.float32))] + ([] if zp is None else [b.constant(zp)])
    y = b.add1("QuantizeLinear", ins, {"axis": 1})
    return b.build([b.add1("Cast", [y], {"to": dt.int32})])  # y's one reader: a fused body


@pytest.mark.parametrize("zp", [None, np.uint8(77), np.int8(-128), np.int8(100)], ids=str)
@pytest.mark.parametrize("scale", [0.0517, 0.25, 3e-3, 2.0 ** -120, [0.02, 0.5, 7e-4]],
                         ids=["0.0517", "0.25", "3e-3", "2^-120", "per-axis"])
def test_quantize_linear_of_float32_rounds_as_the_reference(scale, zp):
    """QuantizeLinear of float32 to 8 bits on cpu in a fused body, as the reference: half steps
    exactly, lanes within one float32 ulp of them, NaN, infinities, subnormals, saturation."""
    s = np.asarray(scale, np.float32).reshape(-1)
    steps = (np.arange(-300, 300, dtype=np.float32)[:, None] + np.float32(0.5)) * s[None, :]  # (k + 0.5) s
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 3e38, -3e38]
    x = np.concatenate([steps.reshape(-1), np.nextafter(steps, np.inf).reshape(-1),
                        np.nextafter(steps, -np.inf).reshape(-1), special]).astype(np.float32)
    x = RNG.permutation(x)
    if len(s) == 1:  # first the values where x * float32(1 / scale) (a multiply for the divide)
        # rounds the other way from x / scale
        with np.errstate(all="ignore"):
            wrong = x[np.rint(x * (np.float32(1) / s[0])) != np.rint(x / s[0])]
        assert wrong.size or s[0] in (0.25, 2.0 ** -120)  # powers of two divide exactly
        x = np.concatenate([wrong[:150], x])
    x = np.resize(x, (4, 3, 50)).astype(np.float32)
    x[0, 0, :9] = special
    g = _quantize_graph(scale, zp, len(s) > 1)
    want = glow.compile(g, "reference").run({"x": x})
    for kw in ({"threads": 1}, {"threads": 2}, {"native": "floor"}):
        got = glow.compile(g, "cpu", **kw).run({"x": x})
        for k, w in want.items():
            np.testing.assert_array_equal(got[k], w, err_msg=f"{k} {kw}")
