"""The CPU backend's speed kernels against the reference: Gemm/MatMul on the packed micro-kernel,
convolutions (NHWC through layout.py, and NCHW when the graph is not optimised), fused epilogues,
pooling, Softmax/LogSoftmax and LayerNormalization, on one and two threads."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder

pytest.importorskip("llvmlite")

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def build(fn, *inputs):
    b = GraphBuilder("t")
    vals = [b.input(n, dt.tensor(s, "float32")) for n, s in inputs]
    outs = fn(b, *vals)
    return b.build(outs if isinstance(outs, (list, tuple)) else [outs])


def agree(graph, feeds, threads=(1, 2), optimize=True, rtol=1e-4, atol=1e-5):
    want = glow.compile(graph, "reference").run(feeds)
    for t in threads:
        got = glow.compile(graph, "cpu", threads=t, optimize=optimize).run(feeds)
        for k, v in want.items():
            np.testing.assert_allclose(got[k], v, rtol=rtol, atol=atol, err_msg=f"{k}, {t} thread(s)")


def program_ops(graph):
    """Op names in the graph the CPU backend compiles (after layout and fusion)."""
    from glow.flow import optimize_for_backend
    from glow.plugins import registry

    g = optimize_for_backend(graph, registry().get("cpu"))
    ops = []
    for n in g.nodes:
        ops.append(n.op.name)
        if n.op.name in ("FusedKernel", "FusedElementwise"):
            ops += [m.op.name for m in n.attrs["body"].nodes]
    return ops


# -- Gemm / MatMul ----------------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(1, 300, 70), (64, 784, 512), (15, 33, 32), (29, 8, 100)])
@pytest.mark.parametrize("trans_b,alpha,beta,c_shape", [
    (0, 1.0, 1.0, "row"), (1, 0.5, 2.0, "row"), (1, 1.0, 1.0, "scalar"), (0, 1.0, 1.0, "full"),
    (0, 2.0, 0.0, "row"), (0, 1.0, 1.0, None)])
def test_gemm(m, k, n, trans_b, alpha, beta, c_shape):
    b_ = rand(n, k) if trans_b else rand(k, n)
    c = {"row": rand(n), "scalar": rand(1), "full": rand(m, n), None: None}[c_shape]

    def fn(b, a, *rest):
        ins = [a, b.constant(b_)] + ([] if c is None else [rest[0] if c_shape == "full" else b.constant(c)])
        y = b.add1("Gemm", ins, {"transB": trans_b, "alpha": alpha, "beta": beta})
        return b.add1("Relu", [y])

    inputs = [("a", (m, k))] + ([("c", (m, n))] if c_shape == "full" else [])
    feeds = {"a": rand(m, k) / np.float32(np.sqrt(k))} | ({"c": c} if c_shape == "full" else {})
    agree(build(fn, *inputs), feeds)  # outputs of order 1: float32 sums of k terms agree to ~1e-6


def test_gemm_with_runtime_b_reads_it_in_place():
    g = build(lambda b, a, w: b.add1("Gemm", [a, w, b.constant(rand(45))]), ("a", (17, 40)), ("w", (40, 45)))
    agree(g, {"a": rand(17, 40), "w": rand(40, 45)})


@pytest.mark.parametrize("a_shape,b_shape,const_b", [
    ((1, 128, 256), (256, 256), True),  # batch rows fold into M
    ((4, 30, 16), (4, 16, 50), False),  # batched runtime B (attention)
    ((2, 3, 20, 17), (1, 3, 17, 40), True),  # broadcast batch, packed per batch
    ((2, 3, 20, 17), (3, 17, 40), False),
    ((7,), (7, 33), True), ((5, 6), (6,), False)])
def test_matmul_shapes(a_shape, b_shape, const_b):
    w = rand(*b_shape)
    g = build(lambda b, a, *r: b.add1("MatMul", [a, b.constant(w) if const_b else r[0]]),
              ("a", a_shape), *([] if const_b else [("w", b_shape)]))
    agree(g, {"a": rand(*a_shape)} | ({} if const_b else {"w": w}))


def test_matmul_bias_and_gelu_epilogue_runs_in_the_kernel():
    w, bias = rand(64, 96), rand(96)

    def fn(b, x):
        h = b.add1("Add", [b.add1("MatMul", [x, b.constant(w)]), b.constant(bias)])
        e = b.add1("Erf", [b.add1("Div", [h, b.constant(np.float32(np.sqrt(2)))])])
        return b.add1("Mul", [b.add1("Mul", [h, b.add1("Add", [e, b.constant(np.float32(1))])]),
                              b.constant(np.float32(0.5))])

    g = build(fn, ("x", (1, 50, 64)))
    assert "FusedKernel" in program_ops(g)
    agree(g, {"x": rand(1, 50, 64)})



def test_matmuls_of_other_sizes_share_one_kernel():
    """MatMuls with other row counts, and batched ones with other batch sizes over a run-time B,
    read their sizes from a table: one function per kind, each giving its own answer."""
    w = rand(32, 40) * 0.2

    def fn(b, x, y, q, k):
        return [b.add1("MatMul", [x, b.constant(w)]), b.add1("MatMul", [y, b.constant(w)]),
                b.add1("MatMul", [q, k]), b.add1("MatMul", [b.add1("Relu", [q]), k])]

    g = build(fn, ("x", (20, 32)), ("y", (3, 33, 32)), ("q", (2, 3, 17, 16)), ("k", (2, 1, 16, 24)))
    text = glow.compile(g, "cpu").program.module_text
    kernels = [line for line in text.splitlines() if line.startswith("define") and "MatMul" in line]
    assert len(kernels) == 2, kernels  # packed B, and run-time B
    agree(g, {"x": rand(20, 32), "y": rand(3, 33, 32), "q": rand(2, 3, 17, 16), "k": rand(2, 1, 16, 24)})

def test_a_weight_product_of_several_rows_asks_for_its_next_panel_in_l2():
    """A GEMM over packed weights asks for the next column panel (into L2: llvm.prefetch locality
    2) while its first row tiles compute; a product over a run-time B does not (nothing to stream
    ahead of), and the numbers are the same either way."""
    w = rand(32, 200) * 0.2

    def fn(b, x, q, k):
        return [b.add1("MatMul", [x, b.constant(w)]), b.add1("MatMul", [q, k])]

    g = build(fn, ("x", (20, 32)), ("q", (2, 17, 16)), ("k", (2, 16, 24)))
    text = glow.compile(g, "cpu").program.module_text
    bodies = [f for f in text.split("\ndefine") if f.split("\n", 1)[0].count("MatMul")]
    l2 = [f for f in bodies if "prefetch.p0\"(ptr" in f and ", i32 0, i32 2, i32 1)" in f]
    assert len(bodies) == 2 and len(l2) == 1, [f.split("\n", 1)[0] for f in bodies]
    agree(g, {"x": rand(20, 32), "q": rand(2, 17, 16), "k": rand(2, 16, 24)})

# -- convolutions -----------------------------------------------------------------------------------

CONVS = [  # (cin, hw, cout, k, stride, pads, dilation, group)
    (3, 17, 20, 3, 1, (1, 1, 1, 1), 1, 1),
    (16, 9, 40, 1, 2, (0, 0, 0, 0), 1, 1),
    (8, 12, 12, 3, 2, (0, 1, 1, 2), 2, 2),
    (24, 10, 24, 3, 1, (1, 1, 1, 1), 1, 24),  # depthwise
    (20, 7, 20, 5, 2, (2, 2, 2, 2), 1, 20),  # depthwise, channels not a multiple of 16
    (32, 6, 48, 3, 1, (0, 0, 0, 0), 1, 4),
    # ShuffleNet's grouped 1x1: 34 columns a group, so the last of several panels is partial
    # (stores branch between plain and masked), weights small enough to go tile-major
    (136, 7, 136, 1, 1, (0, 0, 0, 0), 1, 4),
    (40, 5, 72, 1, 1, (0, 0, 0, 0), 1, 1),  # 1x1, stride 1, unpadded: pixels are rows
]


@pytest.mark.parametrize("spec", CONVS)
@pytest.mark.parametrize("optimize", [True, False])
def test_conv(spec, optimize):
    cin, hw, cout, k, s, pads, d, grp = spec
    w, bias = rand(cout, cin // grp, k, k), rand(cout)
    attrs = {"kernel_shape": (k, k), "strides": (s, s), "pads": pads, "dilations": (d, d), "group": grp}
    g = build(lambda b, x: b.add1("Conv", [x, b.constant(w), b.constant(bias)], attrs), ("x", (2, cin, hw, hw)))
    agree(g, {"x": rand(2, cin, hw, hw)}, optimize=optimize)


DEPTHWISE = [  # (channels, h, w, k, stride, pads (top, left, bottom, right) or auto_pad, dilation)
    (24, 10, 10, 3, 1, (1, 1, 1, 1), 1),
    (96, 14, 9, 3, 2, (1, 1, 1, 1), 1),  # MobileNet's stride-2 block
    (20, 7, 7, 5, 2, (2, 2, 2, 2), 1),  # channels not a multiple of 16
    (16, 9, 12, 5, 1, (0, 2, 3, 1), 1),  # asymmetric
    (32, 8, 8, 3, 1, "SAME_UPPER", 2),  # dilated
    (16, 11, 11, 3, 2, "SAME_LOWER", 1),
    (8, 2, 3, 5, 1, (2, 2, 2, 2), 1),  # the kernel wider than the image: every pixel a border one
    (16, 1, 16, 3, 1, (1, 1, 1, 1), 1),  # one row: every row near the top and the bottom
    (16, 6, 6, 3, 1, (0, 0, 0, 0), 1),  # no padding: the path of before
]


@pytest.mark.parametrize("spec", DEPTHWISE)
def test_depthwise_conv_pads_implicitly(spec):
    """A depthwise convolution reads its border as zeros itself (no Pad in the program): inner
    columns of inner rows as before, border pixels tap by tap. A NaN and an infinity in the input's
    corners reach only the outputs whose taps read them (a clamped address read, its value then
    dropped, must not leak)."""
    c, h, w_, k, s, pads, d = spec
    w, bias = rand(c, 1, k, k), rand(c)
    attrs = {"kernel_shape": (k, k), "strides": (s, s), "dilations": (d, d), "group": c,
             **({"auto_pad": pads} if isinstance(pads, str) else {"pads": pads})}

    def fn(b, x):
        return b.add1("Relu", [b.add1("Conv", [x, b.constant(w), b.constant(bias)], attrs)])

    g = build(fn, ("x", (2, c, h, w_)))
    ops = program_ops(g)
    assert "ConvNHWC" in ops and "Pad" not in ops, ops
    x = rand(2, c, h, w_)
    x[0, 0, 0, 0], x[1, c - 1, h - 1, w_ - 1] = np.nan, np.inf
    agree(g, {"x": x})


def test_convolutions_of_other_geometries_share_one_kernel():
    """Three convolutions of different sizes, strides and dilations, whose output channels (24)
    leave the last panel partial and whose tiles straddle rows and images: one function serves
    them all (it reads their geometry from the packed weights), and each gives its own answer."""
    specs = [{"pads": (1, 1, 1, 1)}, {"pads": (1, 1, 1, 1), "strides": (2, 2)}, {"dilations": (2, 1)}]
    ws = [(rand(24, 24, 3, 3) * 0.07, rand(24)) for _ in specs]  # outputs stay near 1

    def fn(b, x):
        for (w, bias), attrs in zip(ws, specs):
            conv = b.add1("Conv", [x, b.constant(w), b.constant(bias)], {"kernel_shape": (3, 3), **attrs})
            x = b.add1("Relu", [conv])
        return x

    g = build(fn, ("x", (2, 24, 13, 11)))
    text = glow.compile(g, "cpu").program.module_text
    convs = [line for line in text.splitlines() if line.startswith("define") and "ConvNHWC" in line]
    assert len(convs) == 1, convs
    agree(g, {"x": rand(2, 24, 13, 11)})


def test_conv_auto_pad_same_and_no_bias():
    w = rand(8, 4, 3, 3)
    g = build(lambda b, x: b.add1("Conv", [x, b.constant(w)], {"auto_pad": "SAME_UPPER", "strides": (2, 2)}),
              ("x", (1, 4, 11, 11)))
    agree(g, {"x": rand(1, 4, 11, 11)})


@pytest.mark.parametrize("act", ["Relu", "Clip", "Sigmoid", "residual"])
def test_conv_epilogues(act):
    w, bias = rand(32, 16, 3, 3), rand(32)

    def fn(b, x, skip):
        y = b.add1("Conv", [x, b.constant(w), b.constant(bias)], {"pads": (1, 1, 1, 1)})
        if act == "Clip":
            return b.add1("Clip", [y, b.constant(np.float32(0)), b.constant(np.float32(6))])
        if act == "residual":
            return b.add1("Relu", [b.add1("Add", [y, skip])])
        return b.add1(act, [y])

    g = build(fn, ("x", (1, 16, 14, 14)), ("skip", (1, 32, 14, 14)))
    assert "ConvNHWC" in program_ops(g)
    agree(g, {"x": rand(1, 16, 14, 14), "skip": rand(1, 32, 14, 14)})


# -- pooling ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}),
    ("MaxPool", {"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1, 1, 1, 1)}),
    ("AveragePool", {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 0, 1, 1), "count_include_pad": 1,
                     "ceil_mode": 1}),
    ("GlobalAveragePool", {}),
])
@pytest.mark.parametrize("channels", [16, 21])
def test_pools(op, attrs, channels):
    def fn(b, x):  # a conv in front, so the pool runs NHWC
        y = b.add1("Conv", [x, b.constant(rand(channels, 3, 1, 1))])
        return b.add1(op, [y], attrs)

    g = build(fn, ("x", (2, 3, 11, 10)))
    agree(g, {"x": rand(2, 3, 11, 10)})
    agree(g, {"x": rand(2, 3, 11, 10)}, optimize=False, threads=(2,))


# -- Softmax, LogSoftmax, LayerNormalization ----------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(3, 10), (2, 4, 128), (1, 1000), (5, 17), (2, 64), (3, 79), (2, 1500)])
def test_softmax(op, shape):
    """Rows of every make: a tail alone, whole blocks of the four max/sum chains, blocks then whole
    vectors then a tail (79: one block of 64, a 15-lane tail; 1500: 23 blocks, a vector, 12 lanes)."""
    x = rand(*shape) * 5
    x[0, ..., 1] = -np.inf
    g = build(lambda b, v: b.add1(op, [v], {"axis": -1}), ("x", shape))
    assert op in program_ops(g)
    agree(g, {"x": x})


@pytest.mark.parametrize("shape,axis,bias", [((2, 128, 256), -1, True), ((3, 5, 7), 1, False),
                                             ((4, 33), -1, True)])
def test_layer_norm(shape, axis, bias):
    norm = shape[axis % len(shape):]
    scale, b_ = rand(*norm), rand(*norm)

    def fn(b, x):
        ins = [x, b.constant(scale)] + ([b.constant(b_)] if bias else [])
        return b.add1("LayerNormalization", ins, {"axis": axis, "epsilon": 1e-5})

    g = build(fn, ("x", shape))
    assert "LayerNormalization" in program_ops(g)
    agree(g, {"x": rand(*shape) * 3 + 1})


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1e-40, 1e-30, 1e38, 3.4e38, 0.3, 1.0,
                    7.25, 123456.7], np.float32)


def c_pow(x, e):
    """C's pow in float64 (NumPy's float ** 0.5 is sqrt, which reads -0 and -inf otherwise)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if e != int(e):  # a non-integer power of -0 or -inf is that of +0 or +inf
            x = np.where((x == 0) | (x == -np.inf), np.abs(x), x)
        return np.power(x, e)


@pytest.mark.parametrize("e", [0.75, 0.5, 0.25, -0.75, -0.5, 1.5, 2.0, 3.0, 4.0, -1.0, -4.0, 2.75, 0.0, 1.0, 0.3])
def test_pow_with_a_constant_exponent_is_pow(e):
    """x ** e for an exponent known when compiling (LRN's 0.75): multiples of 1/4 are computed with
    multiplications and square roots in vector code, standalone and inside a fused body, and must
    still be C's pow in float64 rounded to float32 (signed zeros, infinities, NaN, negatives,
    subnormals) to within one unit in the last place; other exponents (0.3) take the libm path."""
    x = np.concatenate([SPECIAL, np.abs(rand(33)) * 10]).astype(np.float32)
    g = build(lambda b, x: [b.add1("Pow", [x, b.constant(np.float32(e))]),
                            b.add1("Mul", [b.add1("Pow", [b.add1("Add", [x, b.constant(np.float32(1))]),
                                                          b.constant(np.float32(e))]), x])], ("x", x.shape))
    got = glow.compile(g, "cpu", threads=1).run({"x": x})
    with np.errstate(all="ignore"):
        e32 = float(np.float32(e))  # the exponent the graph holds
        wants = [c_pow(x, e32).astype(np.float32), c_pow(x + np.float32(1), e32).astype(np.float32) * x]
    for k, want in enumerate(wants):
        y = got[g.outputs[k].name]
        assert np.array_equal(np.isnan(y), np.isnan(want)), (e, k, x[np.isnan(y) != np.isnan(want)])
        ok = ~np.isnan(want)
        assert np.array_equal(np.signbit(y[ok]), np.signbit(want[ok])), (e, k)
        np.testing.assert_array_max_ulp(y[ok], want[ok], maxulp=1)


@pytest.mark.parametrize("n", [32, 37])
def test_pack_b_reads_a_transposed_view_as_its_rows(n):
    """A folded Transpose of a weight reaches code generation as a view (irgen keeps it; VGG-19's
    25088 x 4096 fc weight once took 1.1 s to copy into C order first): packing it gives the
    panels that packing its contiguous copy gives."""
    from glow.backends.cpu.kernels.gemm_emit import pack_b

    wt = np.random.default_rng(0).normal(size=(n, 24)).astype(np.float32)  # [N, K]
    view = wt.T  # B [K, N], not C-contiguous
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(pack_b(view), pack_b(np.ascontiguousarray(view)))
    np.testing.assert_array_equal(pack_b(view), pack_b(wt, transposed=True))


@pytest.mark.parametrize("c", [255.0, -3.5, 0.0, -0.0, np.inf])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_against_a_constant_keep_nan_and_the_sign_of_zero(op, c):
    """Max/Min with a constant operand take one compare-and-select (maxps/minps with the constant
    first) instead of the general form's NaN test; results stay the reference's bit for bit: a NaN
    wins, and of two equal values (+0.0 and -0.0) the second operand comes out, with the constant
    first or second, alone and inside a fused clamp; at each width, tails included."""
    x = np.concatenate([SPECIAL, -SPECIAL, np.float32(c) + np.zeros(3, np.float32), rand(20) * 300]).astype(np.float32)
    k = np.float32(c)

    def fn(b, x):
        cst, one = b.constant(k), b.constant(np.float32(1))
        clamp = b.add1("Max", [b.add1("Min", [b.add1("Add", [x, one]), cst]), b.constant(np.float32(-1))])
        return [b.add1(op, [x, cst]), b.add1(op, [cst, x]), clamp]

    g = build(fn, ("x", x.shape))
    want = glow.compile(g, "reference").run({"x": x})
    for t in (1, 2):
        got = glow.compile(g, "cpu", threads=t).run({"x": x})
        for name, w in want.items():
            y = got[name]
            assert np.array_equal(y.view(np.uint32), w.view(np.uint32)) or (
                np.array_equal(np.isnan(y), np.isnan(w))
                and np.array_equal(y[~np.isnan(w)].view(np.uint32), w[~np.isnan(w)].view(np.uint32))), (name, x, y, w)


PADS = [  # (input shape, pads (begins then ends), constant value or None, axes or None)
    ((2, 5, 7, 3), [0, 1, 2, 0, 0, 1, 2, 0], None, None),  # NHWC border of a padded convolution
    ((4, 6), [2, -1, 0, 3], 1.5, None),  # a crop on one side, a pad on the other
    ((3, 4, 5), [1, 0, 2, 0, 3, 1], -7.0, None),
    ((6,), [3, 0], None, None),
    ((2, 3, 4, 5, 2), [0, 1, 1, 1, 0, 0, 1, 0, 2, 0], 2.0, None),
    ((2, 4, 4, 3), [1, 1, 1, 1], 0.5, [1, 2]),  # axes given
    ((3, 3), [-1, -1, -1, -1], None, None),  # a crop only
]


@pytest.mark.parametrize("shape,pads,value,axes", PADS)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_pad_writes_every_element_once(shape, pads, value, axes, dtype):
    """The border is filled box by box and the region copied into the rest: into an output array
    holding other values, every element is written (none left from before)."""
    np_t = np.dtype(dtype)
    b = GraphBuilder("t")
    x = b.input("x", dt.tensor(shape, dtype))
    ins = [x, b.constant(np.array(pads, np.int64)),
           b.constant(np.array(value if value is not None else 0, np_t)) if value is not None or axes else None]
    if axes is not None:
        ins.append(b.constant(np.array(axes, np.int64)))
    g = b.build([b.add1("Pad", ins, {"mode": "constant"})])
    feeds = {"x": (RNG.standard_normal(shape) * 10).astype(np_t)}
    want = glow.compile(g, "reference").run(feeds)
    for t in (1, 2):
        exe = glow.compile(g, "cpu", threads=t)
        name = g.outputs[0].name
        out = np.full(want[name].shape, 99, np_t)
        exe.run(feeds, into={name: out})
        np.testing.assert_array_equal(out, want[name], err_msg=f"{t} thread(s)")
