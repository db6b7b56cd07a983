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


#: Units in the last place of an accumulated output's largest value that any of its elements may be
#: off by (see `accumulated_atol`). A sum's rounding error grows with its terms; 4 ulps of the
#: largest output is well above the noise of any summation order on the node cases (a DFT whose
#: exact zeros come out 1.9e-7 next to values of 54: 0.03 ulps of 54) and far below a wrong value.
ACCUMULATED_ULPS = 4


def accumulated_atol(expected: np.ndarray, atol: float) -> float:
    """The absolute tolerance for an output whose elements are sums of many terms (ops in the
    `accumulates` group: MatMul, Conv, DFT, ReduceSum, ...): at least `atol`, and at least
    ACCUMULATED_ULPS units in the last place of the output's largest finite magnitude.

    Where terms cancel, an element that is 0 exactly comes out as rounding noise whose size is set
    by the terms (about the output's magnitude), in whichever order the sum runs; the test data's
    own expected values carry such noise (NumPy's order). A relative tolerance cannot accept noise
    around 0, and a fixed atol is right only for outputs of one size: this one scales with them."""
    if expected.dtype.kind not in "fc" or expected.size == 0:
        return atol
    finite = np.abs(expected[np.isfinite(expected)])
    if finite.size == 0:
        return atol
    eps = float(_finfo(expected.dtype).eps)
    return max(atol, ACCUMULATED_ULPS * eps * float(finite.max()))


def _finfo(dtype):
    try:
        return np.finfo(dtype)
    except ValueError:  # bfloat16 and the float8 types: ml_dtypes knows them
        import ml_dtypes

        return ml_dtypes.finfo(dtype)


def mismatch(expected, actual, rtol: float, atol: float, what: str = "output", *,
             accumulated: bool = False) -> str | None:
    """None when `actual` matches `expected`, else a short description of the first difference.
    `accumulated`: the output's elements are sums of many terms (see `accumulated_atol`)."""
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{what}: expected a sequence, got {type(actual).__name__}"
        if len(expected) != len(actual):
            return f"{what}: sequence length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            m = mismatch(e, a, rtol, atol, f"{what}[{i}]", accumulated=accumulated)
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
    if accumulated:
        atol = accumulated_atol(expected, atol)
    e = expected.astype(np.float64)
    a = actual.astype(np.float64)
    if e.dtype.kind == "c" or expected.dtype.kind == "c":
        e, a = expected.astype(np.complex128), actual.astype(np.complex128)
    ok = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    idx = np.argwhere(~ok)[0]
    return (f"{what}: {int((~ok).sum())}/{ok.size} values differ beyond rtol={rtol} atol={atol:.3g} "
            f"(at {idx.tolist()}: got {a[tuple(idx)]}, expected {e[tuple(idx)]})")


def accumulates(model_or_op) -> bool:
    """Whether the outputs of a one-node ONNX model (a node case) or of the op named are sums of
    many terms (the op table's `accumulates` group): compared with `accumulated_atol`."""
    from ..errors import UnsupportedOpError
    from ..ops.registry import ACCUMULATES, find_onnx_op, get_op

    if isinstance(model_or_op, str):
        try:
            op = get_op(model_or_op)
        except UnsupportedOpError:
            return False
    else:
        nodes = model_or_op.graph.node
        if len(nodes) != 1:  # an expanded case: its outputs come from many ops
            return False
        op = find_onnx_op(nodes[0].op_type, nodes[0].domain)
    return op is not None and op.in_group(ACCUMULATES)
