"""Saved executables: `exe.save(path)` and `glow.load(path)` (core/saved.py, the cpu backend's
`load_saved`). A loaded executable runs in a fresh process that imports only glow, gives the
outputs the compiled one gave, and any file that is not one this glow wrote for this CPU is
refused with one line naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import glow
import numpy as np
import pytest
from glow.backends.cpu import jit
from helpers import backend_unavailable, make_model
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))

HERE = os.path.dirname(os.path.abspath(__file__))


def convnet():
    """Conv -> Relu -> Reshape -> MatMul -> Softmax, plus a Gather of token ids beside it: weights,
    several kernels and an index check whose error must still name its node after loading."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2, "W"),
             numpy_helper.from_array(rng.standard_normal((8 * 14 * 14, 10)).astype(np.float32) * 0.05, "M"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((50, 4)).astype(np.float32), "E")]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "M"], ["m"], name="matmul"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax"),
             helper.make_node("Gather", ["E", "ids"], ["emb"], name="embed")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [2, 3, 16, 16]), ("ids", TensorProto.INT64, [2, 5])],
                      [("y", TensorProto.FLOAT, [2, 10]), ("emb", TensorProto.FLOAT, [2, 5, 4])], inits,
                      name="savednet")


def feeds(seed=1):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32),
            "ids": rng.integers(0, 50, (2, 5)).astype(np.int64)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(path, the compiled executable) of convnet saved once."""
    exe = glow.compile(convnet(), backend="cpu")
    path = str(tmp_path_factory.mktemp("saved") / "net.glowx")
    exe.save(path)
    return path, exe


def _fresh(code: str, timeout: int = 300) -> dict:
    """Run `code` in a new interpreter that imports glow and numpy only; the JSON it printed last."""
    prelude = "import json, sys, numpy as np, glow\n"
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_loaded_in_a_fresh_process_gives_the_compiled_outputs(saved, tmp_path):
    path, exe = saved
    f = feeds()
    np.savez(tmp_path / "in.npz", **f)
    out = _fresh(f"""
        exe = glow.load({path!r})
        f = dict(np.load({str(tmp_path / 'in.npz')!r}))
        outs = exe.run(f)
        np.savez({str(tmp_path / 'out.npz')!r}, **outs)
        print(json.dumps({{"modules": sorted(m for m in sys.modules if m.startswith(("onnx", "torch")))
                          and "onnx-ish" or "none",
                          "inputs": [[i.name, list(i.shape), i.dtype] for i in exe.inputs],
                          "outputs": [[o.name, list(o.shape), o.dtype] for o in exe.outputs],
                          "stats": {{"loaded": exe.stats["loaded"], "load_s": exe.stats["load_s"]}}}}))
    """)
    got = dict(np.load(tmp_path / "out.npz"))
    want = exe.run(f)
    for name in ("y", "emb"):
        np.testing.assert_array_equal(got[name], want[name])  # the same machine code, the same bits
    ref = glow.compile(convnet(), backend="reference").run(f)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got["emb"], ref["emb"])
    assert out["modules"] == "none"  # loading needs neither onnx nor a compiler front end
    assert out["inputs"] == [["x", [2, 3, 16, 16], "float32"], ["ids", [2, 5], "int64"]]
    assert out["outputs"] == [["y", [2, 10], "float32"], ["emb", [2, 5, 4], "float32"]]
    assert out["stats"]["loaded"] is True


def test_loaded_executable_checks_inputs_and_names_a_bad_index(saved):
    path, _ = saved
    exe = glow.load(path, threads=1)
    bad = feeds()
    bad["ids"][1, 3] = 50
    with pytest.raises(glow.InputError, match=r"embed"):
        exe.run(bad)
    with pytest.raises(glow.InputError, match=r"shape"):
        exe.run({**feeds(), "x": np.zeros((1, 3, 16, 16), np.float32)})
    out = exe.run(feeds(2))  # a later good run is unaffected
    assert np.isfinite(out["y"]).all()
    prof = exe.profile(feeds(3))  # no IR in the file: one record for the run, not a failure
    assert prof.granularity == "run" and prof.records


def test_two_compiles_in_one_process_save_and_load_independently(tmp_path):
    a, b = glow.compile(convnet(), backend="cpu"), glow.compile(convnet(), backend="cpu")
    a.save(tmp_path / "a.glowx")
    b.save(str(tmp_path / "b.glowx"))
    la, lb = glow.load(tmp_path / "a.glowx"), glow.load(str(tmp_path / "b.glowx"))
    f = feeds(4)
    ra, rb = la.run(f), lb.run(f)
    np.testing.assert_array_equal(ra["y"], rb["y"])
    np.testing.assert_array_equal(ra["y"], a.run(f)["y"])


def _one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_another_glow_build_is_refused(monkeypatch, tmp_path):
    from glow import saved as saved_mod

    exe = glow.compile(convnet(), backend="cpu")
    monkeypatch.setattr(saved_mod, "code_fingerprint", lambda: "0" * 32)
    exe.save(tmp_path / "old.glowx")
    monkeypatch.undo()
    with pytest.raises(glow.ModelLoadError) as e:
        glow.load(tmp_path / "old.glowx")
    assert "old.glowx" in _one_line(e) and "compile the model again" in str(e.value)


@pytest.mark.parametrize("change, words", [
    ({"cpu": "bdver1"}, "CPU bdver1"),  # Bulldozer: no machine here is one (znver3 was: Zen 3 hosts)
    ({"triple": "aarch64-unknown-linux-gnu"}, "aarch64"),
    ({"features": "+avx2,+glow-imaginary-feature"}, "glow-imaginary-feature"),
    ({"isa": "avx1024"}, "instruction-set level avx1024"),
])
def test_code_for_another_cpu_is_refused(monkeypatch, tmp_path, change, words):
    real = jit.target

    monkeypatch.setattr(jit, "target", lambda: {**real(), **change})
    exe = glow.compile(convnet(), backend="cpu")  # the program records what it was compiled for
    monkeypatch.undo()
    exe.save(tmp_path / "other.glowx")
    with pytest.raises(glow.BackendError) as e:
        glow.load(tmp_path / "other.glowx")
    msg = _one_line(e)
    assert "other.glowx" in msg and words in msg and "compile the model again here" in msg


def test_a_lower_isa_build_loads_on_a_richer_host(monkeypatch, tmp_path):
    if jit.host_isa() == "generic":
        pytest.skip("this host runs only the generic level")
    monkeypatch.setenv("GLOW_CPU_ISA", "generic")
    exe = glow.compile(convnet(), backend="cpu")
    exe.save(tmp_path / "generic.glowx")
    monkeypatch.delenv("GLOW_CPU_ISA")
    loaded = glow.load(tmp_path / "generic.glowx")
    f = feeds(5)
    np.testing.assert_array_equal(loaded.run(f)["y"], exe.run(f)["y"])


def _write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_files_that_are_not_saved_executables_are_refused(saved, tmp_path):
    path, _ = saved
    with open(path, "rb") as f:
        good = f.read()
    cases = {
        "empty": b"",
        "text": b"hello, this is not a glow file\n",
        "onnx": convnet().SerializeToString(),
        "truncated-header": good[:20],
        "truncated-sections": good[:len(good) // 2],
        "bad-json": good[:16] + b"{" * 40,
    }
    for name, data in cases.items():
        p = _write(tmp_path / f"{name}.glowx", data)
        with pytest.raises(glow.ModelLoadError) as e:
            glow.load(p)
        assert p in _one_line(e), name
    with pytest.raises(glow.ModelLoadError, match="no such file"):
        glow.load(tmp_path / "missing.glowx")
    with pytest.raises(glow.ModelLoadError, match="folder"):
        glow.load(tmp_path)


def test_a_damaged_section_is_refused_before_anything_is_loaded(saved, tmp_path):
    from glow import saved as saved_mod

    path, _ = saved
    header, sections = saved_mod.read(path)
    with open(path, "rb") as f:
        good = bytearray(f.read())
    start = len(good) - sum(-(-s.size // saved_mod.ALIGN) * saved_mod.ALIGN for s in sections.values())
    for name in ("object0", "weights"):
        off, size, _ = header["sections"][name]
        bad = bytearray(good)
        bad[start + off + size // 2] ^= 0x40
        p = _write(tmp_path / f"bad-{name}.glowx", bytes(bad))
        with pytest.raises(glow.ModelLoadError) as e:
            glow.load(p)
        assert f"section '{name}' is damaged" in _one_line(e)


def test_what_cannot_be_saved_says_why(tmp_path):
    dyn = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, ["N", 4])],
                     [("y", TensorProto.FLOAT, ["N", 4])], name="dyn")
    with pytest.raises(glow.BackendError, match="dynamic input shapes.*--shape"):
        glow.compile(dyn, backend="cpu").save(tmp_path / "dyn.glowx")
    with pytest.raises(glow.BackendError, match="cannot be saved"):
        glow.compile(convnet(), backend="reference").save(tmp_path / "ref.glowx")
    assert not os.listdir(tmp_path)  # nothing half-written


def test_save_into_a_missing_folder_is_an_input_error(saved, tmp_path):
    _, exe = saved
    with pytest.raises(glow.InputError, match="missing"):
        exe.save(tmp_path / "missing" / "net.glowx")
    assert not (tmp_path / "missing").exists()


def run_cli(args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, timeout=300)


def test_an_exporter_model_saved_for_fixed_shapes_equals_onnxruntime(tmp_path):
    """A Llama-style decoder from the dynamo exporter: made static with --shape, its graph still
    leaves nodes for specialisation (GatherND, ReduceMean with axes from inputs), settled by
    shapes alone, so the one executable is saved; loaded in a fresh process, it gives
    onnxruntime's outputs (recorded in the .npz beside the model)."""
    data = os.path.join(HERE, "data", "exporters")
    out = tmp_path / "llama.glowx"
    r = run_cli(["compile", os.path.join(data, "llama_dynamo.onnx"), "--save", str(out),
                 "--shape", "input_ids=2x16", "--shape", "attention_mask=2x16"])
    assert r.returncode == 0, r.stderr
    ref = np.load(os.path.join(data, "llama_dynamo.npz"))
    np.savez(tmp_path / "in.npz", **{k.split(":")[1]: v for k, v in ref.items() if k.startswith("input:")})
    _fresh(f"""
        exe = glow.load({str(out)!r})
        np.savez({str(tmp_path / 'out.npz')!r}, **exe.run(dict(np.load({str(tmp_path / 'in.npz')!r}))))
        print("{{}}")
    """)
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["logits"], ref["output:logits"], rtol=1e-4, atol=1e-4)


def test_cli_compile_save_and_run(tmp_path):
    model = tmp_path / "dyn.onnx"
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32), "w")
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, ["N", 4])],
                   [("y", TensorProto.FLOAT, ["N", 6])], [w], name="dyn")
    model.write_bytes(m.SerializeToString())
    out = tmp_path / "dyn.glowx"
    r = run_cli(["compile", str(model), "--save", str(out), "--shape", "x=3x4"])
    assert r.returncode == 0, r.stderr
    assert "saved to" in r.stderr
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = run_cli(["run", str(out), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "o.npz")])
    assert r.returncode == 0, r.stderr
    assert "loaded from" in r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], x @ numpy_helper.to_array(w), rtol=1e-5)
    r = run_cli(["run", str(out), "--backend", "cpu"])
    assert r.returncode == 2 and "saved executable" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
