"""The real-architecture models and model folders shipped in the onnx wheel."""

import pytest
from conftest import known_failures_key
from glow.testing.models import folder_cases, light_models, run_model_case
from glow.testing.node_suite import check_known, load_known_failures

LIGHT = light_models()
FOLDERS = folder_cases("pytorch-converted") + folder_cases("pytorch-operator") + folder_cases("simple")


@pytest.fixture(scope="module")
def known(glow_backend, glow_native):
    return load_known_failures(known_failures_key(glow_backend, glow_native) + "-models")


def test_all_light_models_present():
    assert len(LIGHT) == 9


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model(case, glow_backend, glow_native):
    err = run_model_case(case, glow_backend, glow_native)
    assert err is None, err


@pytest.mark.parametrize("case", FOLDERS, ids=[c.name for c in FOLDERS])
def test_model_folder(case, glow_backend, glow_native, known):
    check_known(run_model_case(case, glow_backend, glow_native), known.get(case.name))
