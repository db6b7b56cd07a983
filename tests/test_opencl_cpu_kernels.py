"""The CPU-shaped OpenCL kernel variants against the reference backend, over the geometries that
pick each code path: pools (stride 1/2/3 lane loads, padding, ceil_mode, count_include_pad, NaN),
grouped and depthwise convolutions (channel blocks 8/4/2/1, narrow staged rows, several rows per
work-item) and MatMul row blocks (1 to 16 rows per work-item).

Each test also checks that the variant under test was rendered, so a change in the variant
choice cannot silently turn these into tests of the generic kernels.
"""

from __future__ import annotations

import itertools

import glow
import numpy as np
import onnx
import pytest
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h

REASON = backend_unavailable("opencl")
pytestmark = [pytest.mark.opencl,
              pytest.mark.skipif(REASON is not None, reason=f"no OpenCL platform: {REASON}")]


def _model(nodes, inputs, inits=()):
    g = h.make_graph(nodes, "m", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(a, n) for n, a in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)])


def _compare(model, feeds, marker: str, rtol=1e-5, atol=1e-5):
    exe = glow.compile(model, backend="opencl")
    assert marker in exe.compiled.program.source, f"the CPU variant ({marker!r}) was not rendered"
    ref = glow.compile(model, backend="reference").run(feeds)["y"]
    got = exe.run(feeds)["y"]
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


POOLS = [(op, k, s, p, ceil, incl, hw)
         for op, k, s, p, ceil, incl, hw in itertools.product(
             ["MaxPool", "AveragePool"], [2, 3], [1, 2, 3], [0, 1], [0, 1], [0, 1], [7, 45])
         if p < k and not (op == "MaxPool" and incl)]


@pytest.mark.parametrize("op,k,s,p,ceil,incl,hw", POOLS)
def test_pool(op, k, s, p, ceil, incl, hw):
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, ceil_mode=ceil)
    if op == "AveragePool":
        attrs["count_include_pad"] = incl
    m = _model([h.make_node(op, ["x"], ["y"], **attrs)], [("x", [2, 3, hw, hw])])
    x = np.random.default_rng(hw + k).standard_normal((2, 3, hw, hw)).astype(np.float32)
    x[0, 0, 0, :3] = np.nan  # the first tap of a window: NaN wins; a later tap: it does not
    x[1, 2, 3, 3] = np.nan
    _compare(m, {"x": x}, "msk[" if op == "AveragePool" else "row[")


@pytest.mark.parametrize("cin,cout,group,hw,k,s", [
    (16, 16, 16, 14, 3, 1), (16, 16, 16, 28, 3, 2), (8, 8, 8, 7, 3, 1), (12, 12, 12, 40, 5, 2),
    (8, 12, 4, 20, 1, 1), (12, 12, 4, 9, 3, 1), (6, 10, 2, 17, 3, 1), (4, 16, 1, 33, 3, 1)])
def test_grouped_and_depthwise_conv(cin, cout, group, hw, k, s):
    rng = np.random.default_rng(cin * hw + k)
    w = rng.standard_normal((cout, cin // group, k, k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    m = _model([h.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s],
                            pads=[k // 2] * 4, group=group), h.make_node("Relu", ["c"], ["y"])],
               [("x", [1, cin, hw, hw])], [("w", w), ("b", b)])
    x = rng.standard_normal((1, cin, hw, hw)).astype(np.float32)
    _compare(m, {"x": x}, "float16 c0", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("const_b", [True, False], ids=["packed-b", "b-input"])
@pytest.mark.parametrize("m,k,n", [(1, 128, 64), (3, 64, 32), (8, 33, 40), (17, 64, 64), (64, 100, 80), (2, 96, 1050)])
def test_matmul_row_blocks(m, k, n, const_b):
    """Row blocks of 1 to 16; a constant B is packed into K x 16 panels (ragged N zero-padded)."""
    rng = np.random.default_rng(m + n)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    if const_b:
        model = _model([h.make_node("MatMul", ["a", "b"], ["y"])], [("a", [m, k])], [("b", b)])
        _compare(model, {"a": a}, "vload16(kk, bp)", rtol=1e-4, atol=1e-4)
    else:
        model = _model([h.make_node("MatMul", ["a", "b"], ["y"])], [("a", [m, k]), ("b", [k, n])])
        _compare(model, {"a": a, "b": b}, "float16 c0", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["Exp", "Log", "Tanh", "Erf", "Sigmoid"])
def test_fast_math_helpers(op):
    """float32 exp/log/tanh/erf/sigmoid render as fastmath.py's helpers on a CPU-kind device and
    agree with float64 NumPy as tightly as the LLVM backend's vmath (same inputs and bound)."""
    from test_cpu_vmath import REFERENCE, _inputs

    x = _inputs(op)
    m = _model([h.make_node(op, ["x"], ["y"])], [("x", [x.size])])
    exe = glow.compile(m, backend="opencl")
    src = exe.compiled.program.source
    assert "glow_expf" in src or "glow_logf" in src, "the fast-math helper was not rendered"
    with np.errstate(all="ignore"):
        ref = REFERENCE[op](x.astype(np.float64)).astype(np.float32)
        y = exe.run({"x": x})["y"]
    tiny = np.abs(ref) < 1e-37  # subnormal results may flush to zero
    ok = np.isclose(y, ref, rtol=4e-7, atol=0, equal_nan=True) | (tiny & (np.abs(y) < 1e-37))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(float(x[i]), float(y[i]), float(ref[i])) for i in bad[:8]]
