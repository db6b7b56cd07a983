"""ONNX's operator test cases on the chosen backend, against the known-failures list.

A case fails the test when it fails and is not listed, and when it is listed but passes (so the
list stays true). Listed failures are reported as xfail with their reason.
"""

import pytest
from conftest import known_failures_key
from glow.testing.node_suite import check_known, collect_cases, load_known_failures, run_case

CASES = collect_cases()


@pytest.fixture(scope="module")
def known(glow_backend, glow_native):
    return load_known_failures(known_failures_key(glow_backend, glow_native))


def test_suite_is_present():
    assert len(CASES) > 1800, "the onnx wheel's node test cases were not found"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case, glow_backend, glow_native, known):
    check_known(run_case(case, glow_backend, glow_native), known.get(case.name))
