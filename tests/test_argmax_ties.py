"""Ties in Hardmax, ArgMax and ArgMin on every backend: ONNX gives the 1 (the index) to the FIRST
maximum (minimum), or to the last with select_last_index=1. Rows with the extreme tied at the
first, middle and last positions, all equal, all -inf, NaN (NumPy's order: the first NaN is the
extreme), -0.0 against 0.0 and denormals; every axis of 2-D and 3-D inputs; three float types.
Each backend is checked against the reference, the reference against the ONNX rule written out
here, on reference, cpu, cpu with native="floor", opencl, opencl floor and opencl with the
GPU-shaped kernels (the ones CUDA runs)."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from helpers import backend_unavailable

ROWS = np.array([
    [3, 1, 3, 2, 0, 3],  # max tied at the first, middle and last positions
    [1, 2, 5, 5, 0, 1],  # tied in the middle
    [0, 1, 2, 3, 4, 4],  # tied at the end
    [7, 7, 7, 7, 7, 7],  # all equal
    [-np.inf] * 6,
    [1, np.nan, 2, np.nan, 0, 2],  # NaN wins, the first one
    [-np.inf, -np.inf, -5, -5, -np.inf, -6],  # min tied at the first, second and fifth
    [2, 2, 1, 1, 0, 0],
    [-0.0, 0.0, -0.0, 0.0, -1, -1],  # signed zeros are equal
    [1e-40, 2e-40, 2e-40, 0, -1e-45, 0],  # denormals (float32)
], np.float64)


def graph(op, shape, dtype, attrs):
    b = GraphBuilder("ties")
    x = b.input("x", dt.tensor(shape, dtype))
    return b.build([b.add1(op, [x], attrs)])


def onnx_rule(op, x, axis, keepdims=1, select_last_index=0):
    """The ONNX answer: first (or last) index of the max (min); a NaN is the extreme."""
    ax = axis % x.ndim
    moved = np.moveaxis(x.astype(np.float64), ax, -1)
    best = np.nanmin(moved, -1, keepdims=True) if op == "ArgMin" else np.nanmax(moved, -1, keepdims=True)
    has_nan = np.isnan(moved).any(-1, keepdims=True)
    hit = np.where(has_nan, np.isnan(moved), moved == best)
    n = moved.shape[-1]
    idx = (n - 1 - np.argmax(hit[..., ::-1], -1)) if select_last_index else np.argmax(hit, -1)
    if op == "Hardmax":
        return np.moveaxis(np.arange(n) == idx[..., None], -1, ax).astype(x.dtype)
    idx = np.expand_dims(idx, ax) if keepdims else idx
    return idx.astype(np.int64)


def configs():
    out = []
    for b, n, g in [("reference", None, False), ("cpu", None, False), ("cpu", "floor", False),
                    ("opencl", None, False), ("opencl", "floor", False), ("opencl", None, True)]:
        name = f"{b}{'-' + n if n else ''}{'-gpu-shaped' if g else ''}"
        out.append(pytest.param(b, n, g, id=name, marks=[pytest.mark.opencl] if b == "opencl" else []))
    return out


CONFIGS = configs()
INPUTS = [(ROWS, -1), (ROWS.T.copy(), 0), (ROWS.reshape(2, 5, 6), 1), (ROWS.reshape(2, 5, 6), 2),
          (ROWS.reshape(5, 2, 6).transpose(1, 0, 2).copy(), 0)]
CASES = [("Hardmax", {}), ("ArgMax", {"select_last_index": 0, "keepdims": 1}),
         ("ArgMax", {"select_last_index": 1, "keepdims": 0}), ("ArgMin", {"select_last_index": 0, "keepdims": 0}),
         ("ArgMin", {"select_last_index": 1, "keepdims": 1})]


@pytest.mark.parametrize("backend,native,gpu_shaped", CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_ties_go_to_the_first_extreme(backend, native, gpu_shaped, dtype, monkeypatch):
    why = backend_unavailable(backend)
    if why:
        pytest.skip(why)
    if gpu_shaped:
        from glow.backends.opencl.runtime import ClDevice
        from glow.render import DeviceParams

        monkeypatch.setattr(ClDevice, "params", lambda self: DeviceParams(kind="gpu", max_local=256, flat_local=64))
    failures = []
    for x, axis in INPUTS:
        x = x.astype(dtype)
        for op, attrs in CASES:
            attrs = {"axis": axis, **attrs}
            g = graph(op, x.shape, dtype, attrs)
            want = onnx_rule(op, x, axis, attrs.get("keepdims", 1), attrs.get("select_last_index", 0))
            kw = {} if backend == "reference" else {"strict": True}
            got = list(glow.compile(g, backend, native=native, **kw).run({"x": x}).values())[0]
            if got.shape != want.shape or not np.array_equal(got, want):
                bad = int(np.sum(got != want)) if got.shape == want.shape else "shape"
                failures.append(f"{op} {attrs} on {list(x.shape)}: {bad} of {want.size} wrong")
    assert not failures, "\n".join(failures)
