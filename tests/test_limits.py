"""Checked shape arithmetic and the memory budget (issue 14, findings 3 and 8).

Element counts are exact (they used to wrap in int64: [2**62 + 1, 4] counted 4 elements, so
Reshape + Slice read outside the buffer and Tile/Expand/ConstantOfShape crashed the cpu
backend); shapes past glow.limits.MAX_ELEMENTS are a GraphError naming the node; allocations past
the memory budget (GLOW_MEMORY_LIMIT) are an InputError naming the node, at compile time and at
run time, before anything is allocated; the C-style backends refuse tensors past their 32-bit
index range. The model cases run on each backend in one subprocess per backend that imports
only glow (a crash there fails the cases, not the test run).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import glow
import numpy as np
import onnx
import pytest
from glow import dtypes as dt
from glow import limits
from helpers import opencl_unavailable_reason
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
HUGE = 2**62 + 1  # times 4 wraps to 4 in int64


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


Y = _vi("y", T.FLOAT, None)


def reshape_slice():
    """Reshape 4 elements to [2**62+1, 4], then Slice a row: read outside the buffer before."""
    nodes = [h.make_node("Reshape", ["x", "s"], ["r"], name="big_reshape"),
             h.make_node("Slice", ["r", "st", "en"], ["y"], name="slice")]
    inits = [_i64("s", [HUGE, 4]), _i64("st", [0, 0]), _i64("en", [1, 4])]
    return _model(nodes, [_vi("x", T.FLOAT, [2, 2])], [Y], inits), {"x": np.ones((2, 2), np.float32)}


def tile():
    nodes = [h.make_node("Tile", ["x", "s"], ["y"], name="big_tile")]
    return (_model(nodes, [_vi("x", T.FLOAT, [1, 4])], [Y], [_i64("s", [HUGE, 1])]),
            {"x": np.ones((1, 4), np.float32)})


def expand():
    nodes = [h.make_node("Expand", ["x", "s"], ["y"], name="big_expand")]
    return (_model(nodes, [_vi("x", T.FLOAT, [1, 4])], [Y], [_i64("s", [HUGE, 4])]),
            {"x": np.ones((1, 4), np.float32)})


def constant_of_shape():
    nodes = [h.make_node("ConstantOfShape", ["s"], ["c"], name="big_cos"),
             h.make_node("Add", ["c", "x"], ["y"], name="add")]
    return (_model(nodes, [_vi("x", T.FLOAT, [4])], [Y], [_i64("s", [HUGE, 4])]),
            {"x": np.ones(4, np.float32)})


def empty_wide():
    """An empty tensor whose other dims multiply past the limit (its strides would wrap)."""
    nodes = [h.make_node("ConstantOfShape", ["s"], ["y"], name="wide_empty")]
    return _model(nodes, [], [Y], [_i64("s", [0, 2**40, 2**40])]), {}


def const_output_1e12():
    """A 10**12-element constant output (4 TB): over any memory budget."""
    nodes = [h.make_node("ConstantOfShape", ["s"], ["y"], name="cos_1e12")]
    return _model(nodes, [], [Y], [_i64("s", [10**6, 10**6])]), {}


def runtime_shape_1e12():
    """The shape comes at run time: exe.run let numpy's MemoryError escape before."""
    nodes = [h.make_node("ConstantOfShape", ["s"], ["y"], name="cos_runtime")]
    return (_model(nodes, [_vi("s", T.INT64, [2])], [Y]),
            {"s": np.array([10**6, 10**6], np.int64)})


def runtime_expand_1e12():
    nodes = [h.make_node("Expand", ["x", "s"], ["y"], name="expand_runtime")]
    return (_model(nodes, [_vi("x", T.FLOAT, [1]), _vi("s", T.INT64, [2])], [Y]),
            {"x": np.ones(1, np.float32), "s": np.array([10**6, 10**6], np.int64)})


def range_1e12():
    """Range's lowering built an iota of the output's length at compile time (MemoryError)."""
    f32 = lambda n, v: nh.from_array(np.array(v, np.float32), n)  # noqa: E731
    nodes = [h.make_node("Range", ["a", "b", "d"], ["y"], name="range_1e12")]
    return _model(nodes, [], [Y], [f32("a", 0.0), f32("b", 1e12), f32("d", 1.0)]), {}


def range_inf():
    """A Range whose count is not finite: an OverflowError escaped the shape rule before."""
    f32 = lambda n, v: nh.from_array(np.array(v, np.float32), n)  # noqa: E731
    nodes = [h.make_node("Range", ["a", "b", "d"], ["y"], name="range_inf")]
    return _model(nodes, [], [Y], [f32("a", 0.0), f32("b", 1e38), f32("d", 1e-38)]), {}


def resize_inf():
    """An infinite Resize scale: an OverflowError escaped the shape rule before."""
    nodes = [h.make_node("Resize", ["x", "", "sc"], ["y"], name="resize_inf")]
    inits = [nh.from_array(np.array([1, 1, np.inf, 1], np.float32), "sc")]
    return (_model(nodes, [_vi("x", T.FLOAT, [1, 1, 2, 2])], [Y], inits),
            {"x": np.ones((1, 1, 2, 2), np.float32)})


def unpool_1e12():
    nodes = [h.make_node("MaxUnpool", ["x", "ix", "os"], ["y"], kernel_shape=[2, 2], name="unpool_1e12")]
    inits = [_i64("ix", [[[[0, 1], [2, 3]]]]), _i64("os", [1, 1, 10**6, 10**6])]
    return (_model(nodes, [_vi("x", T.FLOAT, [1, 1, 2, 2])], [Y], inits),
            {"x": np.ones((1, 1, 2, 2), np.float32)})


def fits_1e6():
    """1M floats (4 MB): runs under a 1 GiB budget, refused under 1 MiB (the budget is honoured)."""
    nodes = [h.make_node("ConstantOfShape", ["s"], ["c"], name="cos_1e6"),
             h.make_node("Add", ["c", "x"], ["y"], name="add")]
    return (_model(nodes, [_vi("x", T.FLOAT, [1000, 1000])], [Y], [_i64("s", [1000, 1000])]),
            {"x": np.full((1000, 1000), 2.0, np.float32)})


MODELS = {f.__name__: f for f in (reshape_slice, tile, expand, constant_of_shape, empty_wide,
                                  const_output_1e12, runtime_shape_1e12, runtime_expand_1e12, range_1e12,
                                  range_inf, resize_inf, unpool_1e12, fits_1e6)}
#: case -> (error class, text the message must contain: the node's name)
TOO_LARGE = {"reshape_slice": ("GraphError", "big_reshape"), "tile": ("GraphError", "big_tile"),
             "expand": ("GraphError", "big_expand"), "constant_of_shape": ("GraphError", "big_cos"),
             "empty_wide": ("GraphError", "wide_empty"), "range_inf": ("GraphError", "range_inf"),
             "resize_inf": ("GraphError", "resize_inf")}
OVER_BUDGET = {"const_output_1e12": ("InputError", "cos_1e12"),
               "runtime_shape_1e12": ("InputError", "cos_runtime"),
               "runtime_expand_1e12": ("InputError", "expand_runtime"),
               "range_1e12": ("InputError", "range_1e12"), "unpool_1e12": ("InputError", "unpool_1e12")}

#: Runs in the subprocess: every case on one backend, one JSON line each.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import glow
from test_limits import MODELS
for case in sys.argv[3:]:
    model, feeds = MODELS[case]()
    try:
        out = glow.compile(model, backend=sys.argv[2]).run(feeds)
        res = {"ok": True, "y": np.asarray(out["y"]).ravel()[:4].tolist(), "shape": list(out["y"].shape)}
    except Exception as e:
        res = {"ok": False, "type": type(e).__name__, "glow": isinstance(e, glow.GlowError), "msg": str(e)}
    print(json.dumps({"case": case, **res}), flush=True)
"""


BACKENDS = ["reference", "reference-ir", "cpu", pytest.param("opencl", marks=pytest.mark.opencl)]


def _skip_unavailable(backend):
    if backend == "opencl":
        reason = opencl_unavailable_reason()
        if reason:
            pytest.skip(f"no OpenCL platform: {reason}")


_results: dict = {}


def run_cases(backend: str, cases, env=None) -> dict:
    """{case: result} from one crash-isolated subprocess (a crash marks the cases it left)."""
    key = (backend, tuple(cases), tuple(sorted((env or {}).items())))
    if key not in _results:
        full = {**os.environ, "GLOW_VERIFY": "2", **(env or {})}
        p = subprocess.run([sys.executable, "-c", CHILD, HERE, backend, *cases], capture_output=True,
                           text=True, timeout=600, env=full)
        got = {}
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                got[r.pop("case")] = r
        for c in cases:
            got.setdefault(c, {"ok": False, "type": f"crash rc={p.returncode}", "glow": False,
                               "msg": p.stderr[-500:]})
        _results[key] = got
    return _results[key]


ALL_REFUSED = list(TOO_LARGE) + list(OVER_BUDGET)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ALL_REFUSED)
def test_refused_cleanly_naming_the_node(backend, case):
    _skip_unavailable(backend)
    res = run_cases(backend, ALL_REFUSED)[case]
    kind, node = {**TOO_LARGE, **OVER_BUDGET}[case]
    assert not res["ok"], f"{case} on {backend} ran: {res}"
    assert res["type"] == kind and res["glow"], res
    assert node in res["msg"], res["msg"]
    assert "\n" not in res["msg"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_budget_is_the_configured_one(backend):
    _skip_unavailable(backend)
    model, feeds = fits_1e6()
    small = run_cases(backend, ["fits_1e6"], {"GLOW_MEMORY_LIMIT": "1MiB"})["fits_1e6"]
    assert not small["ok"] and small["type"] == "InputError", small
    assert "1.0 MiB" in small["msg"] and "GLOW_MEMORY_LIMIT" in small["msg"], small["msg"]
    big = run_cases(backend, ["fits_1e6"], {"GLOW_MEMORY_LIMIT": "1GiB"})["fits_1e6"]
    assert big["ok"], big
    assert big["shape"] == [1000, 1000] and big["y"] == [2.0] * 4  # 0 + 2, as numpy says


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", ["-5", "lots", "nan", "9" * 400, "1e9"],
                         ids=["negative", "word", "nan", "400-digits", "float-syntax"])
def test_absurd_memory_limit_is_a_glow_error(backend, value, monkeypatch):
    _skip_unavailable(backend)
    monkeypatch.setenv("GLOW_MEMORY_LIMIT", value)
    model, feeds = fits_1e6()
    with pytest.raises(glow.GlowError, match="GLOW_MEMORY_LIMIT"):
        glow.compile(model, backend=backend).run(feeds)


def test_element_counts_are_exact():
    t = dt.TensorType((HUGE, 4), dt.float32)
    assert t.numel == HUGE * 4 and t.nbytes == HUGE * 16  # int64 said 4 and 16
    from glow.ops._shape import numel

    assert numel((HUGE, 4)) == HUGE * 4
    assert limits.nonzero_product((0, 2**40, 2**40)) == 2**80


def test_graph_input_past_the_limit_is_a_graph_error():
    x = _vi("x", T.FLOAT, [2**63 - 1])
    m = _model([h.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", T.FLOAT, [2**63 - 1])])
    with pytest.raises(glow.GraphError, match="input 'x'.*too large"):
        glow.load_onnx(m)


def test_live_profile_is_exact_past_int64():
    from glow.ir.memory import Interval, live_profile

    ivs = [Interval(k, f"b{k}", 2**61, 0, 3) for k in range(5)]
    assert int(live_profile(ivs, 3).max()) == 5 * 2**61  # wrapped negative in int64


def test_memory_sizes_are_parsed_exactly():
    from glow.partition import parse_size

    assert limits.parse_bytes("8GiB") == 8 << 30 and limits.parse_bytes("1.5K") == 1500
    assert parse_size("40MiB") == 40 << 20 and parse_size("5") == 5 << 20
    for bad in ["9" * 400, "9" * 400 + "GiB", "-1", "nan", "inf", "2EiB"]:
        with pytest.raises(glow.GlowError, match="memory size"):  # OverflowError before
            parse_size(bad)


@pytest.mark.parametrize("mb", [float("inf"), float("nan"), 1e300, True])
def test_absurd_memory_mb_in_plugins_toml(mb):
    from glow import plugins
    from multidevice import use_repo_devices

    reg = plugins.reload({"devices": [{"name": "bad", "backend": "reference", "memory_mb": mb}]})
    try:
        with pytest.raises(glow.GlowError, match="memory_mb must be a positive number"):
            reg.logical_device("bad")  # int(inf) raised OverflowError before
    finally:
        use_repo_devices()


@pytest.mark.opencl
def test_opencl_refuses_past_32_bit_indexing(monkeypatch):
    """Its kernels index with 32-bit ints: a tensor of 2**31+8 elements is refused at compile
    time (it raised a bare ValueError), naming the node; nothing is allocated."""
    reason = opencl_unavailable_reason()
    if reason:
        pytest.skip(f"no OpenCL platform: {reason}")
    monkeypatch.setenv("GLOW_MEMORY_LIMIT", "64GiB")  # the index range decides, not this machine
    nodes = [h.make_node("Expand", ["x", "s"], ["y"], name="wide")]
    m = _model(nodes, [_vi("x", T.UINT8, [1])], [_vi("y", T.UINT8, None)], [_i64("s", [2**31 + 8])])
    with pytest.raises(glow.BackendError, match="node 'wide'.*32-bit"):
        glow.compile(m, backend="opencl")


@pytest.mark.parametrize("dim", [2**31 + 1, 2**63 - 1])
def test_glow_run_made_inputs_past_limits(dim, tmp_path):
    """`glow run` making an input of this size: exit 2 and one line (internal error before)."""
    x = _vi("x", T.FLOAT, [dim])
    m = _model([h.make_node("Relu", ["x"], ["y"], name="relu")], [x], [_vi("y", T.FLOAT, [dim])])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    env = {**os.environ, "GLOW_MEMORY_LIMIT": "1GiB"}
    p = subprocess.run([sys.executable, "-c", "import sys; from glow.cli import main; sys.exit(main())",
                        "run", str(path), "--backend", "cpu"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "input 'x'" in lines[0], lines
    assert ("too large" if dim > limits.MAX_ELEMENTS else "memory budget") in lines[0]


def test_limits_are_consistent():
    # Every partial product of an accepted shape, times the widest itemsize, fits int64.
    assert limits.MAX_ELEMENTS * 16 < 2**63 and math.log2(limits.MAX_ELEMENTS) == 50


def test_cuda_dialect_refuses_past_32_bit_indexing(monkeypatch):
    """The same check for CUDA's dialect, through compile_graph (which needs no GPU)."""
    from glow.flow import optimize_for_backend
    from glow.render.params import GPU

    cuda = pytest.importorskip("glow.backends.cuda.backend")
    monkeypatch.setenv("GLOW_MEMORY_LIMIT", "64GiB")
    nodes = [h.make_node("Expand", ["x", "s"], ["y"], name="wide")]
    m = _model(nodes, [_vi("x", T.UINT8, [1])], [_vi("y", T.UINT8, None)], [_i64("s", [2**31 + 8])])
    be = cuda.CudaBackend()
    g = optimize_for_backend(glow.load_onnx(m), be, None)
    with pytest.raises(glow.BackendError, match="node 'wide'.*32-bit"):  # a bare ValueError before
        be.compile_graph(g, GPU)
