"""The cpu backend's integer GEMM (backends/cpu/kernels/int8_gemm.py): MatMulInteger with a
constant B on int8 products, at every instruction-set level this host runs (VNNI where the code
may use it, int16 pair products on AVX2, plain vector IR on generic x86-64). Results must equal
the reference's int32 exactly, wrap-around included."""

from __future__ import annotations

import glow
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _levels():
    from glow.backends.cpu import jit

    return list(jit.ISAS[jit.ISAS.index(jit.host_isa()):])


def _model(rng, a_shape, n, adt, bdt, za=None, zb=None):
    k = a_shape[-1]
    lo, hi = (0, 256) if bdt == np.uint8 else (-128, 128)
    inits = [nh.from_array(rng.integers(lo, hi, (k, n)).astype(bdt), "B")]
    ins = ["A", "B"]
    if za is not None:
        inits.append(nh.from_array(np.array(za, adt), "za"))
        ins.append("za")
    if zb is not None:
        if za is None:
            ins.append("")
        inits.append(nh.from_array(np.asarray(zb, bdt), "zb"))
        ins.append("zb")
    g = h.make_graph([h.make_node("MatMulInteger", ins, ["Y"])], "g",
                     [h.make_tensor_value_info("A", T.UINT8 if adt == np.uint8 else T.INT8, list(a_shape))],
                     [h.make_tensor_value_info("Y", T.INT32, [*a_shape[:-1], n])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def _cases():
    out = []
    for adt in (np.uint8, np.int8):
        for bdt in (np.int8, np.uint8):
            za = 201 if adt == np.uint8 else -7
            out += [((1, 1), 1, adt, bdt, None, None),  # one element
                    ((5, 7), 17, adt, bdt, za, None),  # K and N past whole groups and panels
                    ((33, 130), 48, adt, bdt, None, 5),  # rows past whole tiles; a B zero point
                    ((2, 3, 6, 64), 40, adt, bdt, za, list(range(40)))]  # batched A; per-column zb
    return out


@pytest.mark.parametrize("level", ["avx512", "avx2", "generic"])
def test_matmul_integer_equals_the_reference_exactly(level):
    if level not in _levels():
        pytest.skip(f"this CPU does not execute {level}")
    rng = np.random.default_rng(3)
    for a_shape, n, adt, bdt, za, zb in _cases():
        m = _model(rng, a_shape, n, adt, bdt, za, zb)
        exe = glow.compile(m, "cpu", options={"isa": level})
        ref = glow.compile(m, "reference")
        lo, hi = (0, 256) if adt == np.uint8 else (-128, 128)
        for _ in range(2):  # fresh values each call
            a = rng.integers(lo, hi, a_shape).astype(adt)
            got, want = exe.run({"A": a})["Y"], ref.run({"A": a})["Y"]
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want, err_msg=f"{level} {a_shape} {n} {adt} {bdt} {za} {zb}")


def test_int32_accumulation_wraps_as_the_reference_does():
    """K x 255 x 128 past 2**31: every term of the split wraps modulo 2**32, like the int32 result."""
    rng = np.random.default_rng(4)
    k = 70_000
    g = h.make_graph([h.make_node("MatMulInteger", ["A", "B"], ["Y"])], "g",
                     [h.make_tensor_value_info("A", T.UINT8, [2, k])], [h.make_tensor_value_info("Y", T.INT32, [2, 3])],
                     [nh.from_array(np.full((k, 3), -128, np.int8), "B")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    a = np.full((2, k), 255, np.uint8)
    a[1] = rng.integers(0, 256, k)
    got = glow.compile(m, "cpu").run({"A": a})["Y"]
    np.testing.assert_array_equal(got, glow.compile(m, "reference").run({"A": a})["Y"])


def test_the_kernel_runs_matmul_integer_itself():
    """The backend runs MatMulInteger (not the lowering's float32 slices) and uses vpdpbusd
    exactly where the code may use AVX-512 VNNI."""
    from glow.backends.cpu import jit
    from glow.backends.cpu.kernels.int8_gemm import vnni

    m = _model(np.random.default_rng(5), (8, 64), 32, np.uint8, np.int8, 3, None)
    a = np.random.default_rng(6).integers(0, 256, (8, 64)).astype(np.uint8)
    for level in _levels():
        exe = glow.compile(m, "cpu", options={"isa": level})
        ops = {r.op for r in exe.profile({"A": a}).records}
        assert "MatMulInteger" in ops and "MatMul" not in ops, (level, ops)
        with jit.level(level):
            uses = vnni()
        assert uses == (level == "avx512" and "+avx512vnni" in jit._host_features_raw().split(","))
        assert ("vpdpbusd" in exe.program.module_text) == uses, level


def test_a_new_row_count_compiles_no_code(monkeypatch, tmp_path):
    """The row count is an argument: a quantized projection over a symbolic sequence serves every
    length with the code compiled for the first."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))  # an empty object cache
    rng = np.random.default_rng(7)
    m = _model(rng, ("rows", 96), 40, np.uint8, np.int8, 9, 3)
    exe, ref = glow.compile(m, "cpu"), glow.compile(m, "reference")
    for rows in (20, 37, 5):
        a = rng.integers(0, 256, (rows, 96)).astype(np.uint8)
        np.testing.assert_array_equal(exe.run({"A": a})["Y"], ref.run({"A": a})["Y"])
        if rows != 20:
            assert exe.stats["objects_compiled"] == 0, (rows, exe.stats)


def test_a_zero_point_computed_at_run_time():
    """quantize_dynamic's pattern: DynamicQuantizeLinear makes A and its zero point per call, so
    the kernel reads a_zero_point when it runs (the column term is za' times a row made at
    compile time)."""
    rng = np.random.default_rng(8)
    w = rng.integers(-128, 128, (50, 24)).astype(np.int8)
    g = h.make_graph([h.make_node("DynamicQuantizeLinear", ["X"], ["xq", "xs", "xz"]),
                      h.make_node("MatMulInteger", ["xq", "W", "xz"], ["Y"])], "g",
                     [h.make_tensor_value_info("X", T.FLOAT, [9, 50])],
                     [h.make_tensor_value_info("Y", T.INT32, [9, 24])], [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    for level in _levels():
        exe, ref = glow.compile(m, "cpu", options={"isa": level}), glow.compile(m, "reference")
        for shift in (0.0, 3.0, -2.5):  # zero points far from 0 and from 128
            x = (rng.standard_normal((9, 50)) + shift).astype(np.float32)
            np.testing.assert_array_equal(exe.run({"X": x})["Y"], ref.run({"X": x})["Y"], err_msg=f"{level} {shift}")
        assert "MatMulInteger" in {r.op for r in exe.profile({"X": x}).records}


@pytest.mark.parametrize("limit", [64, 65])
def test_weights_of_seven_bits_take_vpmaddubsw_below_vnni_and_stay_exact(limit):
    """Without VNNI, weights within [-64, 64] (checked on B at compile time) take vpmaddubsw, whose
    int16 pair sums cannot saturate then; one weight past that takes the exact int16 pairs."""
    if "avx2" not in _levels():
        pytest.skip("this CPU does not execute avx2")
    rng = np.random.default_rng(9)
    w = rng.choice(np.array([-64, 64, 63, -63, 0, 1], np.int8), (40, 32))
    w[2, 5] = w[3, 5] = limit  # one pair of products at its largest
    g = h.make_graph([h.make_node("MatMulInteger", ["A", "W"], ["Y"])], "g",
                     [h.make_tensor_value_info("A", T.UINT8, [6, 40])],
                     [h.make_tensor_value_info("Y", T.INT32, [6, 32])], [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    exe, ref = glow.compile(m, "cpu", options={"isa": "avx2"}), glow.compile(m, "reference")
    a = np.full((6, 40), 255, np.uint8)  # the largest pair sums: 2 x 255 x 64
    a[1::2] = rng.integers(0, 256, (3, 40))
    np.testing.assert_array_equal(exe.run({"A": a})["Y"], ref.run({"A": a})["Y"])
    assert ("pmadd.ub.sw" in exe.program.module_text) == (limit <= 64)
