"""Block-quantized weights (glow.ops.nbits): the reference against onnxruntime's own MatMulNBits and
GatherBlockQuantized where onnxruntime is installed, every backend against the reference, and
bad attributes or shapes as one error naming the node."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.ops.nbits import unpack_codes
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

MS = "com.microsoft"


def nbits_model(rng, m, k, n, bits, bs, zp=None, bias=False, accuracy_level=0):
    kb = -(-k // bs)
    inits = [nh.from_array(rng.integers(0, 256, (n, kb, bs * bits // 8), dtype=np.uint8), "B"),
             nh.from_array((rng.standard_normal((n, kb)) * 0.1).astype(np.float32), "S")]
    ins = ["A", "B", "S"]
    if zp == "packed":
        inits.append(nh.from_array(rng.integers(0, 256, (n * -(-kb * bits // 8),), dtype=np.uint8), "Z"))
        ins.append("Z")
    elif zp == "float":
        inits.append(nh.from_array(rng.uniform(0, 2 ** bits - 1, (n * kb,)).astype(np.float32), "Z"))
        ins.append("Z")
    if bias:
        ins += [""] * (5 - len(ins)) + ["bias"]
        inits.append(nh.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
    node = h.make_node("MatMulNBits", ins, ["Y"], domain=MS, K=k, N=n, bits=bits, block_size=bs,
                       accuracy_level=accuracy_level)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("A", T.FLOAT, [m, k])],
                     [h.make_tensor_value_info("Y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)], ir_version=10)


CASES = [(3, 64, 8, 4, 32, None, False), (2, 70, 5, 4, 32, "packed", False), (2, 128, 6, 8, 64, "packed", False),
         (1, 96, 4, 4, 16, "float", False), (2, 64, 8, 2, 32, "packed", False), (2, 64, 8, 4, 32, None, True)]


def test_codes_unpack_low_bits_first():
    assert unpack_codes(np.array([0x21, 0x43], np.uint8), 4, 4).tolist() == [1, 2, 3, 4]
    assert unpack_codes(np.array([0b11100100], np.uint8), 2, 4).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_matmul_nbits_reference_equals_onnxruntime(case):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    model = nbits_model(rng, *case)
    a = rng.standard_normal(case[:2]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    got = glow.compile(model, backend="reference").run({"A": a})["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: "-".join(map(str, c)))
def test_matmul_nbits_backends_equal_the_reference(case, backend):
    if backend_unavailable(backend):
        pytest.skip(f"{backend} unavailable")
    rng = np.random.default_rng(1)
    model = nbits_model(rng, *case)
    a = rng.standard_normal(case[:2]).astype(np.float32)
    want = glow.compile(model, backend="reference").run({"A": a})["Y"]
    got = glow.compile(model, backend=backend).run({"A": a})["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# -- the cpu backend's own kernel: codes kept packed (backends/cpu/kernels/nbits.py) ----------------

# (M, K, N, block, zero points, bias): rows 4 at a time and a tail, K past the last whole block, N
# past the last panel of 16, every zero-point form, blocks 16..128
NATIVE = [(1, 512, 64, 32, None, False), (5, 70, 33, 32, "packed", True), (6, 256, 48, 64, "packed", False),
          (3, 96, 20, 16, "float", True), (4, 256, 17, 128, None, True), (9, 64, 16, 16, None, False)]


def _native(model, a, level=None):
    opts = {} if level is None else {"isa": level}
    exe = glow.compile(model, backend="cpu", threads=2, options=opts)
    assert any(r.op == "MatMulNBits" for r in exe.profile({"A": a}).records)  # the kernel, not the lowering
    return exe.run({"A": a})["Y"]


def _close(got, want, tol=1e-5):
    err = float(np.abs(got - want).max()) / float(np.abs(want).max())
    assert err <= tol, err


@pytest.mark.parametrize("level", [None, "avx2", "generic"])
@pytest.mark.parametrize("case", NATIVE, ids=lambda c: "-".join(map(str, c)))
def test_cpu_kernel_at_accuracy_level_0_equals_the_reference(case, level):
    from glow.backends.cpu import jit

    if level is not None and level not in jit.ISAS[jit.ISAS.index(jit.host_isa()):]:
        pytest.skip(f"{level} is not a lower level this host runs")
    rng = np.random.default_rng(2)
    m, k, n, bs, zp, bias = case
    model = nbits_model(rng, m, k, n, 4, bs, zp, bias, accuracy_level=0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    _close(_native(model, a, level), glow.compile(model, backend="reference").run({"A": a})["Y"])


@pytest.mark.parametrize("level", [None, "avx2", "generic"])
@pytest.mark.parametrize("case", NATIVE, ids=lambda c: "-".join(map(str, c)))
def test_cpu_kernel_at_accuracy_level_4_equals_int8_activations(case, level):
    """accuracy_level 4 on AVX2/AVX-512: A quantized to int8 per block as onnxruntime does
    (matmul_nbits_int8); float zero points and the generic level keep the exact product."""
    from glow.backends.cpu import jit
    from glow.ops.nbits import matmul_nbits_int8

    if level is not None and level not in jit.ISAS[jit.ISAS.index(jit.host_isa()):]:
        pytest.skip(f"{level} is not a lower level this host runs")
    rng = np.random.default_rng(3)
    m, k, n, bs, zp, bias = case
    model = nbits_model(rng, m, k, n, 4, bs, zp, bias, accuracy_level=4)
    a = rng.standard_normal((m, k)).astype(np.float32)
    exact = glow.compile(model, backend="reference").run({"A": a})["Y"]
    if zp == "float" or (level or jit.host_isa()) == "generic":
        want = exact
    else:
        init = {i.name: nh.to_array(i) for i in model.graph.initializer}
        want = matmul_nbits_int8(a, init["B"], init["S"], init.get("Z"), init.get("bias"), K=k, N=n, bits=4,
                                 block_size=bs)
        assert np.abs(want - exact).max() > 1e-4 * np.abs(exact).max()  # the int8 formula is not the exact one
    _close(_native(model, a, level), want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("accuracy_level", [0, 4])
@pytest.mark.parametrize("m,k,n", [(70, 256, 48), (37, 1024, 1040), (33, 64, 2100), (9, 128, 64)])
def test_cpu_kernel_on_prompts_splits_rows_into_bands(m, k, n, accuracy_level, threads):
    """A prompt's chunks are bands of row steps over every panel (70 rows: eight bands, two rows
    past the last step; 9 rows: fewer steps than chunks, so its panels are split instead); every
    row and column computed once, at 1 and 2 threads."""
    from glow.backends.cpu.kernels.nbits import int8_path
    from glow.ops.nbits import matmul_nbits_int8

    rng = np.random.default_rng(m)
    model = nbits_model(rng, m, k, n, 4, 32, "packed", True, accuracy_level=accuracy_level)
    a = rng.standard_normal((m, k)).astype(np.float32)
    init = {i.name: nh.to_array(i) for i in model.graph.initializer}
    if int8_path(accuracy_level, dt.uint8):
        want = matmul_nbits_int8(a, init["B"], init["S"], init.get("Z"), init.get("bias"), K=k, N=n, bits=4,
                                 block_size=32)
    else:
        want = glow.compile(model, backend="reference").run({"A": a})["Y"]
    exe = glow.compile(model, backend="cpu", threads=threads)
    assert any(r.op == "MatMulNBits" for r in exe.profile({"A": a}).records)  # the kernel, not the lowering
    _close(exe.run({"A": a})["Y"], want)


@pytest.mark.parametrize("case", NATIVE[:3], ids=lambda c: "-".join(map(str, c)))
def test_int8_activation_formula_equals_onnxruntime_at_accuracy_level_4(case):
    ort = pytest.importorskip("onnxruntime")
    from glow.ops.nbits import matmul_nbits_int8

    rng = np.random.default_rng(4)
    m, k, n, bs, zp, bias = case
    model = nbits_model(rng, m, k, n, 4, bs, zp, bias, accuracy_level=4)
    a = rng.standard_normal((m, k)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    init = {i.name: nh.to_array(i) for i in model.graph.initializer}
    got = matmul_nbits_int8(a, init["B"], init["S"], init.get("Z"), init.get("bias"), K=k, N=n, bits=4, block_size=bs)
    _close(got, want)


@pytest.mark.parametrize("level", [0, 4])
def test_cpu_kernel_with_all_zero_blocks_and_a_nan(level):
    """A block of zeros quantizes with scale 0 (no division by zero); a NaN makes its row NaN, as
    in the reference (quantizing it would have dropped it silently)."""
    rng = np.random.default_rng(5)
    model = nbits_model(rng, 3, 64, 16, 4, 32, None, False, accuracy_level=level)
    a = rng.standard_normal((3, 64)).astype(np.float32)
    a[0] = 0.0
    a[1, :32] = 0.0
    a[2, 40] = np.nan
    got = glow.compile(model, backend="cpu").run({"A": a})["Y"]
    want = glow.compile(model, backend="reference").run({"A": a})["Y"]
    assert np.all(got[0] == 0.0) and np.all(np.isnan(want[2])) and np.all(np.isnan(got[2]))
    _close(got[1], want[1], 1e-5 if level == 0 else 2e-2)


def test_gather_block_quantized_reference_equals_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, (10, 16), dtype=np.uint8)  # 10 rows of 32 4-bit codes
    scales = (rng.standard_normal((10, 2)) * 0.1).astype(np.float32)
    node = h.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"], domain=MS, block_size=16,
                       bits=4, gather_axis=0, quantize_axis=1)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("ids", T.INT64, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(data, "data"), nh.from_array(scales, "scales")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)], ir_version=10)
    ids = np.array([[0, 9, 3], [4, 4, 1]], np.int64)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"ids": ids})[0]
    for backend in ("reference", "cpu"):
        np.testing.assert_allclose(glow.compile(model, backend=backend).run({"ids": ids})["y"], want, rtol=1e-6)


@pytest.mark.parametrize("zero_points", [False, True])
def test_gather_block_quantized_cpu_kernel_equals_the_reference(zero_points):
    """The cpu kernel (rows dequantized as gathered, never the whole table): K = 40 (the last block
    partial), three blocks so zero points fill one and a half bytes a row, int32 and negative ids;
    an id past the table is one InputError."""
    from glow.errors import InputError

    rng = np.random.default_rng(6)
    V, K, bs = 37, 40, 16
    data = rng.integers(0, 256, (V, K // 2), dtype=np.uint8)
    scales = (rng.standard_normal((V, 3)) * 0.1).astype(np.float32)
    inits = [nh.from_array(data, "data"), nh.from_array(scales, "scales")]
    ins = ["data", "ids", "scales"]
    if zero_points:
        inits.append(nh.from_array(rng.integers(0, 256, (V, 2), dtype=np.uint8), "zp"))
        ins.append("zp")
    node = h.make_node("GatherBlockQuantized", ins, ["y"], domain=MS, block_size=bs, bits=4, gather_axis=0,
                       quantize_axis=1)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("ids", T.INT32, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)], ir_version=10)
    ids = np.array([[0, 36, -1], [5, 5, -37]], np.int32)
    exe = glow.compile(model, backend="cpu")
    assert any(r.op == "GatherBlockQuantized" for r in exe.profile({"ids": ids}).records)
    want = glow.compile(model, backend="reference").run({"ids": ids})["y"]
    np.testing.assert_array_equal(exe.run({"ids": ids})["y"], want)
    with pytest.raises(InputError, match="37"):
        exe.run({"ids": np.array([[0, 37, 1], [0, 0, 0]], np.int32)})


@pytest.mark.parametrize("attrs,match", [(dict(bits=3), "bits 3 is not supported"),
                                          (dict(block_size=24), "block_size 24 must be a power of 2"),
                                          (dict(N=9), r"B has 256 elements .* need 288")])
def test_bad_matmul_nbits_is_one_error_naming_the_node(attrs, match):
    model = nbits_model(np.random.default_rng(3), 2, 64, 8, 4, 32)
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name in attrs:
            a.i = attrs[a.name]
    with pytest.raises(glow.GlowError, match=f"MatMulNBits.*{match}"):
        glow.compile(model, backend="cpu")


def test_gather_block_quantized_with_zero_points_of_the_wrong_shape_is_one_error_naming_the_node():
    node = h.make_node("GatherBlockQuantized", ["data", "ids", "scales", "zp"], ["y"], domain=MS, block_size=16,
                       bits=4)
    inits = [nh.from_array(np.zeros((10, 16), np.uint8), "data"), nh.from_array(np.ones((10, 2), np.float32), "scales"),
             nh.from_array(np.zeros((3, 1), np.uint8), "zp")]
    g = h.make_graph([node], "g", [h.make_tensor_value_info("ids", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid(MS, 1)])
    with pytest.raises(glow.GlowError, match=r"GatherBlockQuantized.*zero_points has shape \[3, 1\].*needs \[10, 1\]"):
        glow.compile(model, backend="cpu")
