"""precision="bf16" on cpu: matrix products and convolutions with constant weights round their
operands to bfloat16 and accumulate in float32 (vdpbf16ps on AVX512-BF16 hosts, emulated with
FMAs elsewhere). Each result is checked bit for bit against a NumPy model of that rounding, on
every instruction-set level the host runs, so the native and emulated paths are checked equal."""

import glow
import numpy as np
import pytest
from glow.backends.cpu import jit
from glow.backends.cpu.kernels.gemm_emit import from_bf16_bits, pack_b_bf16, to_bf16_bits
from glow.errors import InputError
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

LEVELS = [lv for lv in jit.ISAS if jit.ISAS.index(lv) >= jit.ISAS.index(jit.host_isa())]
NATIVE = jit.host_isa() == "avx512" and "+avx512bf16" in jit._host_features_raw().split(",")


def bf16(x) -> np.ndarray:
    return from_bf16_bits(to_bf16_bits(x))


def model_matmul(a, w) -> np.ndarray:
    """What vdpbf16ps computes: per k pair, acc + a[2k+1] * w[2k+1] (rounded), then + a[2k] * w[2k]
    (rounded), from bfloat16-rounded operands (each product is exact in float32)."""
    a, w = bf16(a), bf16(w)
    acc = np.zeros(a.shape[:-1] + (w.shape[-1],), np.float32)
    K = a.shape[-1]
    for pair in range(0, K, 2):
        for k in (pair + 1, pair):
            if k < K:
                acc = (acc + a[..., k:k + 1] * w[k:k + 1, :]).astype(np.float32)
    return acc


def _model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "bf16", inputs, outputs, [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _run(m, feeds, level, **kw):
    return glow.compile(m, "cpu", precision="bf16", options={"isa": level}, **kw).run(feeds)


def test_rounding_matches_the_instruction():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.4e38],
                 np.float32)
    got = to_bf16_bits(x)
    assert got[:4].tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020]  # to nearest, ties to even
    assert got[4:6].tolist() == [0x0000, 0x8000]  # denormals: a signed zero, as vcvtneps2bf16
    assert got[6:8].tolist() == [0x7F80, 0xFF80]
    assert np.isnan(from_bf16_bits(got[8:9]))[0]
    assert np.isposinf(from_bf16_bits(got[9:]))[0]  # above bfloat16's largest finite: rounds to inf


def test_packed_pairs_put_even_k_in_the_low_half():
    w = np.arange(3 * 20, dtype=np.float32).reshape(3, 20)  # K 3 (odd: padded), N 20 (two panels of 16)
    p = pack_b_bf16(w, 16).view(np.uint32)
    assert p.shape == (2, 2, 16)
    assert from_bf16_bits(p[0, 0] & 0xFFFF).tolist() == w[0, :16].tolist()
    assert from_bf16_bits(p[0, 0] >> 16).tolist() == w[1, :16].tolist()
    assert (p[0, 1] >> 16).tolist() == [0] * 16  # k = 3 does not exist
    assert from_bf16_bits(p[1, 1, :4] & 0xFFFF).tolist() == w[2, 16:].tolist() and not p[1, :, 4:].any()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("M,K,N", [(5, 37, 40), (30, 64, 33), (1, 100, 70), (2, 1, 16), (17, 300, 129)])
def test_matmul_is_the_model_bit_for_bit(level, M, K, N):
    rng = np.random.default_rng(M * K + N)
    w = rng.standard_normal((K, N)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    m = _model([h.make_node("MatMul", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [M, K])],
               [h.make_tensor_value_info("y", T.FLOAT, [M, N])], {"w": w})
    y = _run(m, {"x": x}, level)["y"]
    np.testing.assert_array_equal(y, model_matmul(x, w))
    assert np.abs(y - x @ w).max() <= 0.02 * np.abs(x @ w).max()  # and near float32's


@pytest.mark.parametrize("level", LEVELS)
def test_batched_matmul_with_epilogue_and_gemm(level):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 24, 20)).astype(np.float32)
    x = rng.standard_normal((3, 6, 24)).astype(np.float32)
    bias = rng.standard_normal(20).astype(np.float32)
    m = _model([h.make_node("MatMul", ["x", "w"], ["p"]), h.make_node("Add", ["p", "b"], ["q"]),
                h.make_node("Relu", ["q"], ["y"])],
               [h.make_tensor_value_info("x", T.FLOAT, [3, 6, 24])],
               [h.make_tensor_value_info("y", T.FLOAT, [3, 6, 20])], {"w": w, "b": bias})
    want = np.maximum(np.stack([model_matmul(x[i], w[i]) for i in range(3)]) + bias, 0)
    np.testing.assert_array_equal(_run(m, {"x": x}, level)["y"], want)

    g = rng.standard_normal((20, 24)).astype(np.float32)  # Gemm, transB, alpha: B packed as alpha * B^T
    m = _model([h.make_node("Gemm", ["x", "g", "b"], ["y"], transB=1, alpha=0.5)],
               [h.make_tensor_value_info("x", T.FLOAT, [6, 24])], [h.make_tensor_value_info("y", T.FLOAT, [6, 20])],
               {"g": g, "b": bias})
    np.testing.assert_array_equal(_run(m, {"x": x[0]}, level)["y"], model_matmul(x[0], 0.5 * g.T) + bias)


def _conv_model(x, w, bias, stride, pad, group):
    n, c, hw, _ = x.shape
    m, _, k, _ = w.shape
    ho = (hw + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).transpose(0, 2, 3, 1)
    cg, mg = c // group, m // group
    out = np.zeros((n, ho, ho, m), np.float32)
    even = cg + cg % 2  # an odd group's channels gain a zero one per tap: pairs never straddle taps
    for gi in range(group):  # k runs over (dy, dx, channel), as the kernel's
        cols = np.stack([xp[:, dy:dy + stride * ho:stride, dx:dx + stride * ho:stride, gi * cg:(gi + 1) * cg]
                         for dy in range(k) for dx in range(k)], axis=3)
        cols = np.pad(cols, [(0, 0)] * 4 + [(0, even - cg)]).reshape(n * ho * ho, k * k * even)
        wk = np.pad(w[gi * mg:(gi + 1) * mg].transpose(2, 3, 1, 0), [(0, 0), (0, 0), (0, even - cg), (0, 0)])
        wk = wk.reshape(k * k * even, mg)
        out[..., gi * mg:(gi + 1) * mg] = model_matmul(cols, wk).reshape(n, ho, ho, mg)
    return (out + bias).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("optimize", [True, False])  # ConvNHWC, and Conv through its NCHW scratch
@pytest.mark.parametrize("shape", [(1, 3, 9, 20, 3, 1, 1, 1), (2, 17, 8, 40, 3, 2, 1, 1), (1, 64, 7, 64, 1, 1, 0, 1),
                                   (1, 8, 6, 12, 3, 1, 0, 2), (1, 33, 5, 50, 5, 1, 2, 1), (1, 3, 5, 20, 1, 1, 0, 1),
                                   (1, 6, 7, 12, 3, 1, 1, 3)])  # RGB stems, groups of odd channels
def test_conv_is_the_model_bit_for_bit(level, optimize, shape):
    n, c, hw, m, k, stride, pad, group = shape
    x, w, bias, mdl = _conv_case(shape)
    np.testing.assert_array_equal(_run(mdl, {"x": x}, level, optimize=optimize)["y"], _conv_model(x, w, bias, stride,
                                                                                                    pad, group))


def _conv_case(shape):
    n, c, hw, m, k, stride, pad, group = shape
    rng = np.random.default_rng(sum(shape))
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    ho = (hw + 2 * pad - k) // stride + 1
    mdl = _model([h.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride] * 2, pads=[pad] * 4, group=group)],
                 [h.make_tensor_value_info("x", T.FLOAT, [n, c, hw, hw])],
                 [h.make_tensor_value_info("y", T.FLOAT, [n, m, ho, ho])], {"w": w, "b": bias})
    return x, w, bias, mdl


def test_nan_and_inf_reach_the_output():
    w = np.ones((32, 16), np.float32)
    x = np.ones((3, 32), np.float32)
    x[1, 5], x[2, 7] = np.nan, np.inf
    m = _model([h.make_node("MatMul", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [3, 32])],
               [h.make_tensor_value_info("y", T.FLOAT, [3, 16])], {"w": w})
    y = glow.compile(m, "cpu", precision="bf16").run({"x": x})["y"]
    assert (y[0] == 32).all() and np.isnan(y[1]).all() and np.isposinf(y[2]).all()


def _mm():
    w = np.ones((64, 32), np.float32)
    return _model([h.make_node("MatMul", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [4, 64])],
                  [h.make_tensor_value_info("y", T.FLOAT, [4, 32])], {"w": w})


def test_the_emulated_path_gives_the_native_bits(monkeypatch):
    """At the avx512 level without AVX512-BF16 (turned off by $GLOW_CPU_FEATURES where the host
    has it): FMAs, the same results as the model and so as vdpbf16ps."""
    if jit.host_isa() != "avx512":
        pytest.skip("needs an AVX-512 host")
    monkeypatch.setenv("GLOW_CPU_FEATURES", "-avx512bf16")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((70, 40)).astype(np.float32)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    m = _model([h.make_node("MatMul", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [9, 70])],
               [h.make_tensor_value_info("y", T.FLOAT, [9, 40])], {"w": w})
    exe = glow.compile(m, "cpu", precision="bf16", options={"isa": "avx512"})
    assert "dpbf16ps" not in exe.program.module_text and not jit.bf16_native()
    np.testing.assert_array_equal(exe.run({"x": x})["y"], model_matmul(x, w))


def test_the_code_uses_vdpbf16ps_only_where_asked_and_present():
    exe = glow.compile(_mm(), "cpu", precision="bf16")
    assert ("dpbf16ps" in exe.program.module_text) == NATIVE
    assert "bfloat" not in glow.compile(_mm(), "cpu").program.module_text  # fp32: unchanged code
    assert "dpbf16ps" not in glow.compile(_mm(), "cpu", precision="bf16", options={"isa": "avx2"}).program.module_text


def test_bad_precisions_are_one_line_errors(monkeypatch):
    with pytest.raises(InputError, match="precision must be one of fp32, bf16, got 'fp16'"):
        glow.compile(_mm(), "cpu", precision="fp16")
    with pytest.raises(InputError, match="backend 'reference' has no option 'precision'"):
        glow.compile(_mm(), "reference", precision="bf16")
    monkeypatch.setenv("GLOW_PRECISION", "bf16")  # the environment's default, and an explicit fp32 wins
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    y16 = glow.compile(_mm(), "cpu").run({"x": x})["y"]
    y32 = glow.compile(_mm(), "cpu", precision="fp32").run({"x": x})["y"]
    np.testing.assert_array_equal(y16, model_matmul(x, np.ones((64, 32), np.float32)))
    np.testing.assert_allclose(y32, x @ np.ones((64, 32), np.float32), rtol=1e-5, atol=1e-5)


def test_bench_reports_the_error_against_fp32(capsys):
    from glow.bench import bench, format_result
    from glow.cli import main

    r = bench("mlp", backend="cpu", rounds=2, warmup=0, vs="none", precision="bf16")
    err, cos = r.extra["accuracy"]["h2"]
    assert 0 < err < 0.02 and 0.9999 < cos < 1  # rounded, and close
    assert "bf16 against glow fp32: max error" in format_result(r)
    assert bench("mlp", backend="cpu", rounds=1, warmup=0, vs="none").extra == {}  # fp32: nothing to compare
    assert main(["bench", "mlp", "--backend", "cpu", "--rounds", "1", "--vs", "none", "--precision", "bf16"]) == 0
    assert "h2: bf16 against glow fp32" in capsys.readouterr().out


def test_vdpbf16ps_code_is_made_for_a_bf16_cpu_on_any_host():
    """The native path's code generation, checked where the host cannot run it: a bf16 GEMM and
    a bf16 convolution made for a Zen 4 (AVX512-BF16), verified by LLVM and assembled."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir
    from glow.backends.cpu.kernels.conv_emit import ConvGeometry, emit_conv
    from glow.backends.cpu.kernels.gemm_emit import GemmShape, emit_gemm, kernel_factory

    features = "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512bf16,+avx2,+fma,+f16c"
    with jit.for_target(llvm.get_process_triple(), "znver4", features, "avx512"):
        assert jit.bf16_native()
        module = ir.Module("bf16_check")
        emit_gemm(kernel_factory(module, "gemm"), GemmShape(30, 64, 100, mr=6, nv=4, bf16=True))
        emit_conv(kernel_factory(module, "conv"), ConvGeometry(1, 9, 9, 3, 7, 7, 64, 3, 3, mr=6, nv=4, bf16=True))
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
        asm = jit.target_machine().emit_assembly(parsed)
    assert asm.count("vdpbf16ps") >= 2
