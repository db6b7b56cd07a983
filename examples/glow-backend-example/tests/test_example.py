"""The example backend's own tests: glow's conformance kit (op records of what it claims, ONNX node
cases it can run alone, light models partitioned with the reference), plus its memory cap.

    pytest                               # everything (a minute or two)
    pytest --glow-sections records       # the op records only (seconds)
"""

import glow
import pytest
from glow.testing import conformance


def pytest_generate_tests(metafunc):
    conformance.parametrize(metafunc, "example")


def test_conformance(check):
    conformance.pytest_check(check)


def test_a_graph_over_the_memory_cap_is_refused():
    b = glow.GraphBuilder("big")
    x = b.input("x", glow.dtypes.tensor((1024, 1536), "float32"))  # 6 MiB; two of them live at once
    y = b.add1("Relu", [b.add1("Add", [x, x])])
    with pytest.raises(glow.BackendError, match="needs .* bytes of device memory"):
        glow.compile(b.build([y]), backend="example")
