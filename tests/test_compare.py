"""Output comparison (glow.testing.compare): the tolerance of outputs that are sums of many terms."""

import numpy as np
from glow.testing.compare import ACCUMULATED_ULPS, accumulated_atol, accumulates, mismatch
from glow.testing.node_suite import case_by_name


def test_rounding_noise_around_zero_is_accepted_where_terms_cancel():
    # ONNX's test_dft_inverse: exact zeros next to values of 54 come out 1.9e-7 in the expected data
    expected = np.array([54.0, -27.0, 1.9073486e-07, 0.0], np.float32)
    exact = np.array([54.0, -27.0, 0.0, 0.0], np.float32)
    assert "values differ" in mismatch(expected, exact, 1e-3, 1e-7)
    assert mismatch(expected, exact, 1e-3, 1e-7, accumulated=True) is None


def test_the_scaled_tolerance_still_catches_wrong_values():
    expected = np.array([54.0, -27.0, 0.0], np.float32)
    wrong = np.array([54.0, -27.0, 1e-3], np.float32)  # far beyond rounding of 54 (6.4e-6 per ulp)
    assert "1/3 values differ" in mismatch(expected, wrong, 1e-3, 1e-7, accumulated=True)
    eps = float(np.finfo(np.float32).eps)
    assert accumulated_atol(expected, 1e-7) == ACCUMULATED_ULPS * eps * 54.0
    assert accumulated_atol(np.zeros(3, np.float32), 1e-7) == 1e-7  # never below the given atol
    assert accumulated_atol(np.array([np.inf, 1.0], np.float32), 0.0) == ACCUMULATED_ULPS * eps  # finite only
    assert accumulated_atol(np.arange(3), 0.0) == 0.0  # integers are exact


def test_which_ops_accumulate():
    for op in ("MatMul", "Gemm", "Conv", "DFT", "ReduceSum"):
        assert accumulates(op), op
    for op in ("Add", "Exp", "ReduceMax", "Relu"):
        assert not accumulates(op), op
    cases = case_by_name()
    assert accumulates(cases["test_dft_inverse"].model)
    assert not accumulates(cases["test_softmax_example_expanded"].model)  # many nodes: not one sum
