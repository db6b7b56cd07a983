"""TopK on the CPU backend's own kernel (backends/cpu/kernels/topk.py: a bounded heap per row)
against the reference, bit for bit: values and indices, largest 0/1, ties to the lower index,
NaN above every number, -0.0 equal to 0.0, every axis, k = 0 and k = n, several element types,
one and two threads, k fed at run time; and the primitive floor (which lowers TopK) on the same
rows, NaN included."""

import glow
import ml_dtypes
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder

pytest.importorskip("llvmlite")

RNG = np.random.default_rng(7)


def topk_graph(shape, dtype, k, axis=-1, largest=1, sorted_=1, runtime_k=False):
    b = GraphBuilder("topk")
    x = b.input("x", dt.tensor(shape, dtype))
    kv = b.input("k", dt.tensor((1,), "int64")) if runtime_k else b.constant(np.array([k], np.int64))
    v, i = b.add("TopK", [x, kv], {"axis": axis, "largest": largest, "sorted": sorted_})
    return b.build([v, i])


def data(shape, np_dtype, special=True):
    """Few distinct values (many ties); for floats also NaN, +-inf, -0.0 and 0.0."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        lo, hi = max(info.min, -4), min(info.max, 4)
        x = RNG.integers(lo, hi + 1, size=shape).astype(np_dtype)
        flat = x.reshape(-1)
        if flat.size >= 4:  # the extremes too
            flat[RNG.integers(0, flat.size, 2)] = info.min
            flat[RNG.integers(0, flat.size, 2)] = info.max
        return x
    x = RNG.integers(-4, 5, size=shape).astype(np.float64) * 0.5
    x += (RNG.random(shape) < 0.3) * RNG.standard_normal(shape)  # some distinct values too
    if special:
        pick = RNG.random(shape)
        x[pick < 0.08] = np.nan
        x[(pick >= 0.08) & (pick < 0.11)] = np.inf
        x[(pick >= 0.11) & (pick < 0.14)] = -np.inf
        x[(pick >= 0.14) & (pick < 0.18)] = -0.0
        x[(pick >= 0.18) & (pick < 0.22)] = 0.0
    return x.astype(np_dtype)


def bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind not in "iu" else a


def check(graph, feeds, threads=(1, 2), native=None):
    """cpu (strict: nothing runs on the host) against the reference, bit for bit."""
    want = glow.compile(graph, "reference").run(feeds)
    for t in threads:
        got = glow.compile(graph, "cpu", threads=t, native=native, strict=True).run(feeds)
        for name, w in want.items():
            g = got[name]
            assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
            assert np.array_equal(bits(g), bits(w)), f"{name}, {t} thread(s), native={native}\n{g}\n{w}"


def kernel_ran(graph) -> bool:
    """Whether the CPU backend keeps TopK as one node (its kernel) rather than lowering it."""
    from glow.flow import optimize_for_backend
    from glow.plugins import registry

    return any(n.op.name == "TopK" for n in optimize_for_backend(graph, registry().get("cpu")).nodes)


CASES = [  # shape, axis, k
    ((5, 37), -1, 7),
    ((5, 37), 1, 37),
    ((5, 37), -1, 1),
    ((64,), 0, 20),
    ((3, 50, 4), 1, 9),
    ((3, 50, 4), -2, 50),
    ((6, 3, 11), 0, 4),
    ((2, 3, 40), 2, 0),
    ((4, 1), 1, 1),
]


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("shape,axis,k", CASES)
def test_topk_float32_ties_nan_every_axis(shape, axis, k, largest):
    g = topk_graph(shape, "float32", k, axis, largest)
    assert kernel_ran(g)
    check(g, {"x": data(shape, np.float32)})


@pytest.mark.parametrize("dtype", ["float16", "float64", "bfloat16", "int32", "int64", "uint8", "int8",
                                   "uint64", "int16"])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_element_types(dtype, largest):
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    for shape, axis, k in ((7, 45), -1, 12), ((9, 5, 3), 1, 5):
        g = topk_graph(shape, dtype, k, axis, largest)
        assert kernel_ran(g), dtype
        check(g, {"x": data(shape, np_dtype)})


def test_topk_nan_rows_and_signed_zeros():
    x = np.array([[1, np.nan, 3, -np.nan, -np.inf, 3, np.inf, np.nan],
                  [np.nan] * 8,
                  [0.0, -0.0, 0.0, -0.0, -0.0, 0.0, np.inf, -np.inf],
                  [2.0] * 8], np.float32)
    x[0, 7] = np.frombuffer(np.uint32(0x7FC01234).tobytes(), np.float32)[0]  # a NaN with a payload
    for largest in (1, 0):
        for k in (0, 3, 8):
            g = topk_graph(x.shape, "float32", k, -1, largest)
            check(g, {"x": x})
            check(g, {"x": x}, threads=(1,), native="floor")


def test_topk_sorted_0_gives_the_sorted_order():
    g = topk_graph((4, 30), "float32", 10, -1, 1, sorted_=0)
    check(g, {"x": data((4, 30), np.float32)})


def test_topk_k_fed_at_run_time():
    g = topk_graph((6, 80), "float32", None, -1, 1, runtime_k=True)
    for t in (1, 2):
        exe = glow.compile(g, "cpu", threads=t, strict=True)
        ref = glow.compile(g, "reference")
        for k in (0, 5, 80, 17):
            feeds = {"x": data((6, 80), np.float32), "k": np.array([k], np.int64)}
            want, got = ref.run(feeds), exe.run(feeds)
            for name in want:
                assert np.array_equal(bits(got[name]), bits(want[name])), (t, k, name)


def test_topk_ssd_sized_rows_one_and_many():
    """An SSD detector's per-class candidates: a few thousand scores per row, k = 300. The
    lowering's O(n^2) ranking gives up on these rows; the kernel runs them."""
    for rows in (1, 90):
        x = RNG.standard_normal((rows, 3000)).astype(np.float32)
        x[:, ::7] = np.round(x[:, ::7], 1)  # ties
        g = topk_graph((rows, 3000), "float32", 300)
        assert kernel_ran(g)
        check(g, {"x": x})


def test_topk_ties_in_a_long_row_go_to_the_lower_index():
    x = np.zeros((2, 2500), np.float32)
    x[0, RNG.integers(0, 2500, 100)] = 1.0
    x[1, ::3] = np.nan
    for largest in (1, 0):
        g = topk_graph(x.shape, "float32", 300, -1, largest)
        assert kernel_ran(g)
        check(g, {"x": x})


@pytest.mark.parametrize("shape,axis,k", [((5, 37), -1, 7), ((3, 50, 4), 1, 9), ((6, 3, 11), 0, 6)])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_floor_still_lowers(shape, axis, k, largest):
    """The primitive floor excludes TopK: it is lowered there, and right, NaN included."""
    from glow.flow import optimize_for_backend
    from glow.plugins import registry

    g = topk_graph(shape, "float32", k, axis, largest)
    lowered = optimize_for_backend(g, registry().get("cpu"), "floor")
    assert not any(n.op.name == "TopK" for n in lowered.nodes)
    check(g, {"x": data(shape, np.float32)}, threads=(1,), native="floor")


@pytest.mark.parametrize("native", [None, "floor"])
def test_topk_symbolic_dims(native):
    """A symbolic dim: deferred to specialisation, then the kernel (or, on the floor, the
    lowering, which needs static shapes: the kernel must not claim the node before that)."""
    b = GraphBuilder("topk")
    x = b.input("x", dt.tensor(("n", 30), "float32"))
    v, i = b.add("TopK", [x, b.constant(np.array([5], np.int64))], {"axis": -1, "largest": 0})
    g = b.build([v, i])
    exe = glow.compile(g, "cpu", native=native, strict=True)
    ref = glow.compile(g, "reference")
    for rows in (3, 7):
        feeds = {"x": data((rows, 30), np.float32)}
        want, got = ref.run(feeds), exe.run(feeds)
        for name in want:
            assert np.array_equal(bits(got[name]), bits(want[name])), (rows, name)


def test_topk_floor_with_k_fed_at_run_time():
    g = topk_graph((3, 20), "float32", None, -1, 0, runtime_k=True)
    exe = glow.compile(g, "cpu", native="floor", strict=True)
    feeds = {"x": data((3, 20), np.float32), "k": np.array([6], np.int64)}
    want, got = glow.compile(g, "reference").run(feeds), exe.run(feeds)
    for name in want:
        assert np.array_equal(bits(got[name]), bits(want[name])), name
