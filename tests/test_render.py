"""Golden-text tests of the shared C-style renderer: rendered kernels compared with files.

No device is needed. The files live in tests/golden/render/; after an intended change to the
kernels, regenerate them with `GLOW_UPDATE_GOLDEN=1 python -m pytest tests/test_render.py` and
review the diff.
"""

import os

import glow
import numpy as np
import onnx
import pytest
from glow.backends.cuda.backend import CudaBackend
from glow.backends.opencl.backend import OpenCLBackend
from glow.flow import optimize_for_backend
from glow.render import CPU, GPU
from onnx import TensorProto as T
from onnx import helper as h

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "render")
BACKENDS = {"opencl": OpenCLBackend, "cuda": CudaBackend}
EXT = {"opencl": "cl", "cuda": "cu"}


def model(nodes, inputs, output, inits=(), opset=17):
    ins = [h.make_tensor_value_info(n, dt, s) for n, dt, s in inputs]
    out = h.make_tensor_value_info(output, T.FLOAT, None)
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in inits]
    g = h.make_graph(nodes, "golden", ins, [out], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def render(m, dialect, params):
    be = BACKENDS[dialect]()
    g = optimize_for_backend(glow.load_onnx(m), be)
    return be.compile_graph(g, params).program


def _fused():
    bias = np.arange(8, dtype=np.float32).reshape(8, 1, 1)
    return model([h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("Add", ["m", "bias"], ["s"]),
                  h.make_node("Relu", ["s"], ["y"])],
                 [("a", T.FLOAT, [1, 8, 4, 4]), ("b", T.FLOAT, [1, 8, 4, 4])], "y", [("bias", bias)])


def _matmul(n):
    return model([h.make_node("MatMul", ["a", "b"], ["y"])],
                 [("a", T.FLOAT, [n, n]), ("b", T.FLOAT, [n, n])], "y")


def _conv():
    w = np.ones((16, 3, 3, 3), np.float32)
    b = np.zeros(16, np.float32)
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                  h.make_node("Relu", ["c"], ["y"])], [("x", T.FLOAT, [1, 3, 32, 32])], "y",
                 [("w", w), ("b", b)])


def _conv_depthwise():
    w = np.ones((8, 1, 3, 3), np.float32)
    return model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=8),
                  h.make_node("Relu", ["c"], ["y"])], [("x", T.FLOAT, [1, 8, 16, 16])], "y", [("w", w)])


def _conv_small():
    w = np.ones((32, 8, 3, 3), np.float32)
    return model([h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", T.FLOAT, [1, 8, 7, 7])], "y",
                 [("w", w)])


def _reduce():
    axes = np.array([1], np.int64)
    return model([h.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)],
                 [("x", T.FLOAT, [2, 5, 3])], "y", [("axes", axes)], opset=18)


def _maxpool():
    return model([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                 [("x", T.FLOAT, [1, 4, 9, 9])], "y")


def _transpose():
    return model([h.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], [("x", T.FLOAT, [2, 3, 4, 5])], "y")


def _half_add():
    m = model([h.make_node("Add", ["a", "b"], ["y"])], [("a", T.FLOAT16, [4, 3]), ("b", T.FLOAT16, [3])], "y")
    m.graph.output[0].type.tensor_type.elem_type = T.FLOAT16
    return m


def _narrow_cast():
    # float32 -> float8e4m3fn (saturating: the table decodes, the encoder rounds) and -> int4
    g = h.make_graph([h.make_node("Cast", ["x"], ["f8"], to=T.FLOAT8E4M3FN, saturate=1),
                      h.make_node("Cast", ["x"], ["i4"], to=T.INT4)], "golden",
                     [h.make_tensor_value_info("x", T.FLOAT, [4, 8])],
                     [h.make_tensor_value_info("f8", T.FLOAT8E4M3FN, None),
                      h.make_tensor_value_info("i4", T.INT4, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)])


CASES = [
    # (golden file stem, model builder, dialect, device parameters)
    ("fused_bias_relu", _fused, "opencl", CPU),
    ("fused_bias_relu", _fused, "cuda", GPU),
    ("matmul_naive", lambda: _matmul(8), "opencl", CPU),
    ("matmul_cpu_vec", lambda: _matmul(64), "opencl", CPU),
    ("matmul_tiled", lambda: _matmul(128), "cuda", GPU),
    ("conv_direct_relu", _conv_depthwise, "cuda", GPU),
    ("conv_gpu_tiled_relu", _conv, "cuda", GPU),
    ("conv_cpu_vec_relu", _conv, "opencl", CPU),
    ("conv_cpu_co16", _conv_small, "opencl", CPU),
    ("reduce_max", _reduce, "opencl", CPU),
    ("maxpool", _maxpool, "cuda", GPU),
    ("transpose", _transpose, "opencl", CPU),
    ("half_add", _half_add, "cuda", GPU),
    ("narrow_cast", _narrow_cast, "cuda", GPU),
]
IDS = [f"{stem}.{EXT[dialect]}" for stem, _, dialect, _ in CASES]


@pytest.mark.parametrize("stem,build,dialect,params", CASES, ids=IDS)
def test_golden_kernel(stem, build, dialect, params):
    text = render(build(), dialect, params).source
    path = os.path.join(GOLDEN, f"{stem}.{EXT[dialect]}")
    if os.environ.get("GLOW_UPDATE_GOLDEN") or not os.path.exists(path):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        if not os.environ.get("GLOW_UPDATE_GOLDEN"):
            pytest.fail(f"golden file {path} was missing: written, review it and rerun")
    with open(path) as f:
        assert text == f.read(), f"rendered {dialect} text differs from {path}"


def test_fused_chain_is_one_kernel():
    prg = render(_fused(), "opencl", CPU)
    assert len(prg.launches) == 1
    assert "fused_" in prg.launches[0].name


def test_same_shapes_share_a_kernel():
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["x"], ["s"]),
             h.make_node("MatMul", ["r", "r"], ["m1"]), h.make_node("MatMul", ["s", "s"], ["m2"]),
             h.make_node("Concat", ["m1", "m2"], ["y"], axis=0)]
    prg = render(model(nodes, [("x", T.FLOAT, [8, 8])], "y"), "cuda", GPU)
    names = [k.name for k in prg.launches]
    mm = [n for n in names if n.startswith("matmul_")]
    assert len(mm) == 2 and len(set(mm)) == 1, names  # the two MatMuls share one kernel
    assert prg.source.count(" matmul_") == 1


def test_dialects_differ_only_in_spelling():
    cl, cu = render(_fused(), "opencl", GPU).source, render(_fused(), "cuda", GPU).source
    assert "get_global_id(0)" in cl and "kernel " in cl and "global float*" in cl
    assert 'extern "C" __global__' in cu and "blockIdx.x * blockDim.x + threadIdx.x" in cu
    body = [ln for ln in cl.splitlines() if "t0 =" in ln]
    assert body and body == [ln for ln in cu.splitlines() if "t0 =" in ln]


def test_packed_weights_replace_the_originals():
    be = OpenCLBackend()
    compiled = be.compile_graph(optimize_for_backend(glow.load_onnx(_conv_small()), be), CPU)
    (k,) = compiled.program.launches
    packed = [o for o in k.operands if o.name.startswith("derived")]
    assert len(packed) == 1 and packed[0].data.shape == (2, 8, 3, 3, 16)
    placed = [a.shape for _, a in compiled.layout.weights]
    assert placed == [(2, 8, 3, 3, 16)]  # the (32, 8, 3, 3) original is not uploaded


def test_cpu_and_gpu_parameters_pick_different_matmul_kernels():
    assert "float16" in render(_matmul(64), "opencl", CPU).source
    gpu = render(_matmul(128), "opencl", GPU).source
    assert "local float As" in gpu and "barrier(CLK_LOCAL_MEM_FENCE)" in gpu


# -- sizes that vary between calls (glow.render.sizes) ---------------------------------------------
def test_a_magic_divisor_divides_every_index_exactly():
    from glow.render.sizes import magic

    rng = np.random.default_rng(0)
    divisors = [1, 2, 3, 5, 7, 48, 127, 128, 641, 4095, 6144, (1 << 31) - 1, 1 << 30, 3 << 28]
    divisors += [int(d) for d in rng.integers(2, 1 << 31, 200)]
    for d in divisors:
        m, s = magic(d)
        assert 0 <= m < 1 << 32 and 0 <= s < 32
        ns = [0, 1, d - 1, d, d + 1, (1 << 31) - 1, (1 << 31) - 2]
        ns += [k * d + r for k in (1, 2, 1000, ((1 << 31) - 1) // d) for r in (-1, 0, 1)]
        ns += [int(n) for n in rng.integers(0, 1 << 31, 300)]
        for n in ns:
            if 0 <= n < 1 << 31:
                got = n if m == 0 else (n * m >> 32) >> s
                assert got == n // d, (n, d, m, s)


def test_a_varying_size_keeps_its_derivation_and_renders_as_arguments():
    from glow.render.sizes import Size, div, mod, rendering, unmark

    seq = Size(48, "seq")
    row = seq * 128
    assert row == 6144 and row.expr == "(seq*128)" and isinstance(row - 1, Size)
    assert f"{row}" == "6144"  # outside a kernel's rendering it is the int
    other = Size(6144, "batch")  # equal by chance: an argument of its own
    with rendering():
        text = f"a[{row}] b[{other}] c[{row}] {div('i', row)} {mod('i', 2)}"
    declared = {}

    def declare(name, value):
        declared.setdefault(name, value)
        return name

    out = unmark(text, declare)
    assert out == "a[S0] b[S1] c[S0] glow_udiv(i, S0m, S0h) i % 2", out
    assert declared["S0"] == declared["S1"] == 6144 and declared["S0h"] == 12
