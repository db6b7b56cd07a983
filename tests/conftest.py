"""Shared test setup: verification on, backend selection (--glow-backend / --glow-native)."""

import os

# Verify every graph after every pass, and every interpreted value against its inferred type.
os.environ.setdefault("GLOW_VERIFY", "2")
# A code-generating backend answers a new input signature with the reference interpreter while it
# compiles in the background (glow.flow.tiered): off here, so that every test of a backend checks
# the backend's own code; tests/test_dynamic_inputs.py turns it on where it tests it.
os.environ.setdefault("GLOW_TIERED", "0")

import pytest  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--glow-backend", default="reference", help="backend the suites run on")
    parser.addoption("--glow-native", default=None, help="restrict native ops, e.g. 'floor'")


@pytest.fixture(scope="session")
def glow_backend(request):
    return request.config.getoption("--glow-backend")


@pytest.fixture(scope="session")
def glow_native(request):
    return request.config.getoption("--glow-native")


def known_failures_key(backend: str, native: str | None) -> str:
    return backend if not native else f"{backend}-{native}"
