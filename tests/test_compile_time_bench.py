"""benchmarks/compile_time.py measures what it claims: a cold compile, a cached one that reuses the
objects, one that opens the saved executable, the peers' set-up; a model that cannot be made fails
in its row, not the whole run."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import compile_time  # noqa: E402

TINY = os.path.join(ROOT, "core", "data", "tiny_cnn.onnx")


def test_tiny_cnn_cold_cached_and_peers(capsys):
    data = compile_time.main(["--models", TINY, "no_such_model", "--no-write", "--timeout", "120"])
    tiny, missing = data["rows"]
    cold, cached = tiny["glow_cold"], tiny["glow_cached"]
    assert "error" not in cold and "error" not in cached, (cold, cached)
    assert cold["compile_s"] > 0 and cold["seconds"]["llvm"] > 0 and cold["import_s"] > 0
    assert cold["objects_cached"] == 0 and cold["objects_compiled"] == cold["objects"]
    assert cached["objects_cached"] == cached["objects"]  # every object from the warm cache folder
    assert 0 < cached["compile_s"] < cold["compile_s"]
    assert tiny["glow_exe_cache"]["loaded"] and 0 < tiny["glow_exe_cache"]["compile_s"], tiny["glow_exe_cache"]
    assert tiny["onnxruntime"]["compile_s"] > 0
    assert "na" in tiny["openvino"] or tiny["openvino"]["compile_s"] > 0
    # the missing model: every cell says why, and the table still prints
    assert all("no_such_model" in missing[r]["error"] for r in compile_time.RUNTIMES)
    out = capsys.readouterr().out
    assert "| tiny_cnn | " in out and "| no_such_model | failed: " in out


def test_floor_ratio_alternates_default_and_floor(capsys):
    data = compile_time.main(["--floor-ratio", "2", "--models", TINY, "no_such_model", "--no-write",
                              "--timeout", "120"])
    tiny, missing = data["rows"]
    assert len(tiny["default"]) == len(tiny["floor"]) == 2 and not tiny["errors"], tiny
    assert tiny["ratio"] == tiny["median_floor"] / tiny["median_default"] > 0
    assert "no_such_model" in missing["errors"][0] and "ratio" not in missing
    out = capsys.readouterr().out
    assert "| tiny_cnn | " in out and "| no_such_model | failed: " in out
