"""Compare a backend's outputs with expected ones, the way ONNX's backend test runner does."""

from __future__ import annotations

import numpy as np


def to_array(x):
    """Expected/feed values as glow takes them: numpy scalars as 0-d arrays, TensorProto decoded."""
    import onnx
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        x = numpy_helper.to_array(x)
    if isinstance(x, (list, tuple)):
        return [to_array(e) for e in x]
    if x is None:
        return None
    a = np.asarray(x)
    if a.dtype.kind in "US":
        a = a.astype(object)
    return a


def mismatch(expected, actual, rtol: float, atol: float, what: str = "output") -> str | None:
    """None when `actual` matches `expected`, else a short description of the first difference."""
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{what}: expected a sequence, got {type(actual).__name__}"
        if len(expected) != len(actual):
            return f"{what}: sequence length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            m = mismatch(e, a, rtol, atol, f"{what}[{i}]")
            if m:
                return m
        return None
    if expected is None:
        return None if actual is None else f"{what}: expected an empty optional"
    if not isinstance(actual, np.ndarray):
        return f"{what}: expected an array, got {type(actual).__name__}"
    if expected.dtype != actual.dtype:
        return f"{what}: dtype {actual.dtype} != expected {expected.dtype}"
    if expected.shape != actual.shape:
        return f"{what}: shape {list(actual.shape)} != expected {list(expected.shape)}"
    if expected.dtype == object:
        return None if np.array_equal(expected, actual) else f"{what}: values differ"
    if expected.dtype.kind in "biu":
        if np.array_equal(expected, actual):
            return None
        bad = np.argwhere(expected != actual)
        return f"{what}: {len(bad)} values differ (first at {bad[0].tolist()})"
    e = expected.astype(np.float64)
    a = actual.astype(np.float64)
    if e.dtype.kind == "c" or expected.dtype.kind == "c":
        e, a = expected.astype(np.complex128), actual.astype(np.complex128)
    ok = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    idx = np.argwhere(~ok)[0]
    return (f"{what}: {int((~ok).sum())}/{ok.size} values differ beyond rtol={rtol} atol={atol} "
            f"(at {idx.tolist()}: got {a[tuple(idx)]}, expected {e[tuple(idx)]})")
