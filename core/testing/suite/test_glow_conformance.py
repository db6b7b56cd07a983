"""The conformance kit as a pytest suite: `pytest --pyargs glow.testing --glow-backend NAME`.

One test per check (op record, ONNX node case, light model); see glow.testing.conformance.
"""

from glow.testing import conformance


def pytest_generate_tests(metafunc):
    conformance.parametrize(metafunc)


def test_conformance(check):
    conformance.pytest_check(check)
