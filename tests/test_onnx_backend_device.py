"""glow.onnx_backend honours ONNX's `device` ("CPU" -> cpu, "CUDA" -> cuda, "CUDA:1") and, with
none, uses the registry's default backend; supports_device says what prepare would accept."""

import dataclasses

import glow
import glow.onnx_backend as gb
import numpy as np
import pytest
from glow.plugins import registry
from helpers import add_const_model, backend_unavailable
from onnx import helper

X = np.arange(6, dtype=np.float32).reshape(2, 3)
WANT = X + np.arange(3, dtype=np.float32)  # add_const_model: y = x + [0, 1, 2]


@pytest.fixture
def compiled_for(monkeypatch):
    """Records the backend (or devices) each glow.compile call was made for, and compiles."""
    calls = []
    real = glow.api.compile

    def spy(model, backend=None, **kw):
        calls.append(backend if backend else [d.id for d in kw.get("devices") or []] or None)
        return real(model, backend=backend, **kw)

    monkeypatch.setattr(glow.api, "compile", spy)
    return calls


def _run(rep):
    (y,) = rep.run([X])
    np.testing.assert_array_equal(y, WANT)


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
@pytest.mark.parametrize("device", ["CPU", "cpu", "Cpu", "CPU:0", "cpu:0"])
def test_cpu_device_compiles_for_the_cpu_backend(device, compiled_for):
    _run(gb.prepare(add_const_model(), device))
    assert compiled_for == ["cpu"]


def test_no_device_uses_the_registrys_default(compiled_for, monkeypatch):
    reg = registry()
    for name in ("cpu", "reference"):
        if backend_unavailable(name):
            continue
        monkeypatch.setattr(reg, "default", lambda n=name: reg.get(n))
        compiled_for.clear()
        _run(gb.prepare(add_const_model()))
        assert compiled_for == [name]


def test_backend_by_name_still_wins(compiled_for):
    _run(gb.prepare(add_const_model(), backend="reference"))
    _run(gb.prepare(add_const_model(), "CPU", backend="reference"))  # reference runs on the host CPU
    assert compiled_for == ["reference", "reference"]


@pytest.mark.parametrize("device", ["TPU", "GPU", "", "CPU:", "CPU:x", "CPU:-1", "CUDA:0:1", "cpu0"])
def test_unknown_device_is_a_backend_error(device):
    with pytest.raises(glow.BackendError, match="unknown ONNX device"):
        gb.prepare(add_const_model(), device)
    assert gb.supports_device(device) is False


def test_device_index_past_the_backends_devices():
    with pytest.raises(glow.BackendError, match=r"CPU:7: backend 'cpu' has 1 device"):
        gb.prepare(add_const_model(), "CPU:7")
    assert gb.supports_device("CPU:7") is False


def test_cuda_device_goes_to_the_cuda_backend(monkeypatch):
    """Unavailable here (no cupy, no GPU): the cuda backend's own reason, as a BackendError. Made
    unavailable on purpose so that the test means the same on a GPU machine."""
    rec = registry().records["cuda"]
    monkeypatch.setattr(rec, "available", False)
    monkeypatch.setattr(rec, "reason", "no GPU in this test")
    for device in ("CUDA", "cuda:0"):
        with pytest.raises(glow.BackendError, match="backend 'cuda' is unavailable: no GPU in this test"):
            gb.prepare(add_const_model(), device)
        assert gb.supports_device(device) is False


def test_unavailable_cpu_backend_is_a_backend_error_not_a_fallback(monkeypatch):
    rec = registry().records["cpu"]
    monkeypatch.setattr(rec, "available", False)
    monkeypatch.setattr(rec, "reason", "llvmlite missing in this test")
    with pytest.raises(glow.BackendError, match="'cpu' is unavailable: llvmlite missing"):
        gb.prepare(add_const_model(), "CPU")
    assert gb.supports_device("CPU") is False
    with pytest.raises(glow.BackendError, match="'cpu' is unavailable"):
        gb.run_node(helper.make_node("Relu", ["a"], ["b"]), [X], device="CPU")


def test_backend_without_a_device_of_that_kind():
    with pytest.raises(glow.BackendError, match="backend 'reference' has no CUDA device"):
        gb.prepare(add_const_model(), "CUDA", backend="reference")


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
def test_second_device_is_placed_on_that_device(compiled_for, monkeypatch):
    """"CPU:1" on a backend with two devices compiles for the second one (pretend the cpu backend
    has two: nothing else here has a second device)."""
    rec = registry().records["cpu"]
    d0 = rec.devices[0]
    monkeypatch.setattr(rec, "devices", [d0, dataclasses.replace(d0, name="1")])
    assert gb.supports_device("CPU:1")
    _run(gb.prepare(add_const_model(), "CPU:1"))
    assert compiled_for == [["cpu:1"]]


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
def test_run_node_and_run_model_take_the_device(compiled_for):
    (y,) = gb.run_node(helper.make_node("Relu", ["a"], ["b"]), [X - 3], device="CPU")
    np.testing.assert_array_equal(y, np.maximum(X - 3, 0))
    (y,) = gb.run_model(add_const_model(), [X], device="cpu")
    np.testing.assert_array_equal(y, WANT)
    assert compiled_for == ["cpu", "cpu"]


def test_supports_device_answers_for_what_is_available():
    assert gb.supports_device("CPU") == (backend_unavailable("cpu") is None)
    assert gb.supports_device("CUDA") == (backend_unavailable("cuda") is None)


def test_prepare_takes_a_path_or_a_graph_like_glow_compile(tmp_path):
    """Input and output names come from the compiled graph, not from a ModelProto's fields."""
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(add_const_model(), path)
    for model in (str(path), glow.load_onnx(add_const_model())):
        rep = gb.prepare(model, backend="reference")
        assert rep.input_names == ["x"] and rep.output_names == ["y"]
        _run(rep)
