"""The executable cache (core/compile_cache.py): `glow.compile(model, cache=True)` and `glow run`
open the executable an earlier compile of the same model file saved. A hit gives what a fresh
compile gives; any change to the model or to a setting is a miss; what cannot key the cache or
cannot be saved is compiled as usual; the folder stays within its bound.
"""

from __future__ import annotations

import os
import subprocess
import sys

import glow
import numpy as np
import pytest
from glow import compile_cache
from glow.errors import InputError
from helpers import backend_unavailable, make_model
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))


def mlp(scale=0.1):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((16, 32)) * scale).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "B"),
             numpy_helper.from_array(rng.standard_normal((20, 16)).astype(np.float32), "E")]
    nodes = [helper.make_node("Gather", ["E", "ids"], ["e"]),
             helper.make_node("MatMul", ["e", "W"], ["m"]),
             helper.make_node("Add", ["m", "B"], ["a"]),
             helper.make_node("Tanh", ["a"], ["y"])]
    return make_model(nodes, [("ids", TensorProto.INT64, [3, 4])], [("y", TensorProto.FLOAT, [3, 4, 32])], inits,
                      name="cached_mlp")


def feeds(seed):
    return {"ids": np.random.default_rng(seed).integers(0, 20, (3, 4)).astype(np.int64)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GLOW_EXE_CACHE_MB", raising=False)
    return tmp_path / "cache" / "exe"


def files(folder):
    return sorted(p.name for p in folder.glob("*.glowx")) if folder.exists() else []


def test_a_second_compile_opens_the_first_and_gives_its_outputs(cache, tmp_path):
    path = str(tmp_path / "mlp.onnx")
    with open(path, "wb") as f:
        f.write(mlp().SerializeToString())
    first = glow.compile(path, backend="cpu", cache=True)
    assert not first.stats.get("loaded") and len(files(cache)) == 1
    second = glow.compile(path, backend="cpu", cache=True)
    assert second.stats.get("loaded"), second.stats
    fresh = glow.compile(path, backend="reference")
    for seed in range(3):  # fresh values each time: no cached result can pass
        f = feeds(seed)
        want = fresh.run(f)["y"]
        np.testing.assert_allclose(first.run(f)["y"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(second.run(f)["y"], first.run(f)["y"])
    # the default compile neither reads nor writes the executable cache
    assert not glow.compile(path, backend="cpu").stats.get("loaded")


def test_a_rewritten_model_file_is_a_miss(cache, tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp().SerializeToString())
    glow.compile(str(path), backend="cpu", cache=True)
    assert glow.compile(str(path), backend="cpu", cache=True).stats.get("loaded")
    changed = mlp(scale=0.2).SerializeToString()  # the same size, other weights: the file's digest is
    assert len(changed) == path.stat().st_size      # remembered by size and mtime, and mtime moves
    path.write_bytes(changed)
    exe = glow.compile(str(path), backend="cpu", cache=True)
    assert not exe.stats.get("loaded")
    want = glow.compile(mlp(scale=0.2), backend="reference").run(feeds(4))["y"]
    np.testing.assert_allclose(exe.run(feeds(4))["y"], want, rtol=1e-5, atol=1e-6)


def test_a_change_to_the_model_or_a_setting_is_a_miss(cache):
    model = mlp()
    glow.compile(model, backend="cpu", cache=True)
    changed = mlp(scale=0.2)  # same graph, other weights
    exe = glow.compile(changed, backend="cpu", cache=True)
    assert not exe.stats.get("loaded")
    want = glow.compile(changed, backend="reference").run(feeds(5))["y"]
    np.testing.assert_allclose(exe.run(feeds(5))["y"], want, rtol=1e-5, atol=1e-6)
    assert not glow.compile(model, backend="cpu", cache=True, options={"isa": "generic"}).stats.get("loaded")
    assert not glow.compile(model, backend="cpu", cache=True, optimize=False).stats.get("loaded")
    assert len(files(cache)) == 4
    assert glow.compile(model, backend="cpu", cache=True, options={"isa": "generic"}).stats.get("loaded")


def test_a_damaged_file_is_a_miss_and_is_replaced(cache):
    model = mlp()
    glow.compile(model, backend="cpu", cache=True)
    (name,) = files(cache)
    data = bytearray((cache / name).read_bytes())
    data[-100] ^= 0xFF  # inside the last section: its checksum no longer matches
    (cache / name).write_bytes(bytes(data))
    exe = glow.compile(model, backend="cpu", cache=True)
    assert not exe.stats.get("loaded")
    want = glow.compile(model, backend="reference").run(feeds(2))["y"]
    np.testing.assert_allclose(exe.run(feeds(2))["y"], want, rtol=1e-5, atol=1e-6)
    assert glow.compile(model, backend="cpu", cache=True).stats.get("loaded")


def test_what_cannot_key_or_be_saved_compiles_as_usual(cache, tmp_path):
    graph = glow.load_onnx(mlp())  # a Graph: no file bytes to key by
    assert compile_cache.key(graph, "cpu", {}) is None
    glow.compile(graph, backend="cpu", cache=True)
    # tensors in a file of their own: the model file's bytes do not hold them
    import onnx

    model = mlp()
    onnx.save_model(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.bin", size_threshold=0)
    assert compile_cache.key(str(tmp_path / "ext.onnx"), "cpu", {}) is None
    glow.compile(str(tmp_path / "ext.onnx"), backend="cpu", cache=True)
    # symbolic dims: a specialising executable, which cannot be saved
    dyn = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, ["n", 4])],
                     [("y", TensorProto.FLOAT, ["n", 4])])
    exe = glow.compile(dyn, backend="cpu", cache=True)
    x = -np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(exe.run({"x": x})["y"], np.maximum(x, 0))
    # another backend: nothing saved either
    glow.compile(mlp(), backend="reference", cache=True)
    assert files(cache) == []


def test_the_folder_keeps_within_its_bound(cache, monkeypatch):
    monkeypatch.setenv("GLOW_EXE_CACHE_MB", "0")
    exe = glow.compile(mlp(), backend="cpu", cache=True)
    assert files(cache) == []  # saved, then the least recently used went first: itself
    assert exe.run(feeds(0))["y"].shape == (3, 4, 32)
    monkeypatch.setenv("GLOW_EXE_CACHE_MB", "lots")
    with pytest.raises(InputError, match="GLOW_EXE_CACHE_MB"):
        glow.compile(mlp(scale=0.3), backend="cpu", cache=True)


def test_glow_run_twice_opens_the_executable_cache(tmp_path):
    path = str(tmp_path / "mlp.onnx")
    with open(path, "wb") as f:
        f.write(mlp().SerializeToString())
    env = {**os.environ, "GLOW_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-m", "glow.cli", "run", path, "--seed", "3"], capture_output=True,
                           text=True, timeout=300, env=env) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "from the executable cache" not in runs[0].stderr and "from the executable cache" in runs[1].stderr
    assert runs[0].stdout == runs[1].stdout  # the same outputs, printed


def test_the_cache_bound_matches_the_importers():
    from glow import compile_cache, onnx_import

    assert compile_cache.MAX_MODEL_BYTES == onnx_import.MAX_MODEL_BYTES
