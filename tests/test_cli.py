"""The `glow` command line: the main job, listing, and one-line errors with exit code 2."""

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from helpers import EXAMPLE_MODEL, make_model, relu_model
from onnx import TensorProto, helper


def glow(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True,
                          cwd=cwd)


def assert_bad_input(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_run_example_model_prints_outputs():
    r = glow("run", EXAMPLE_MODEL)
    assert r.returncode == 0, r.stderr
    assert "probs: shape=[1, 10] dtype=float32" in r.stdout


def test_run_with_npz_inputs_and_outputs(tmp_path):
    path = tmp_path / "relu.onnx"
    onnx.save(relu_model(), path)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = glow("run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_array_equal(z["y"], np.maximum(x, 0))


def test_generated_inputs_are_deterministic(tmp_path):
    a = glow("run", EXAMPLE_MODEL, "--outputs", str(tmp_path / "a.npz"))
    b = glow("run", EXAMPLE_MODEL, "--outputs", str(tmp_path / "b.npz"))
    assert a.returncode == b.returncode == 0
    with np.load(tmp_path / "a.npz") as za, np.load(tmp_path / "b.npz") as zb:
        np.testing.assert_array_equal(za["probs"], zb["probs"])


def test_backends_lists_reference():
    r = glow("backends")
    assert r.returncode == 0 and "reference" in r.stdout and "available" in r.stdout


def test_compile_dump_graph_and_dot():
    r = glow("compile", EXAMPLE_MODEL, "--dump", "graph", "--backend", "reference")
    assert r.returncode == 0, r.stderr
    assert "Conv(%image, %conv1_w, %conv1_b)" in r.stdout
    r = glow("compile", EXAMPLE_MODEL, "--dump", "dot")
    assert r.returncode == 0 and r.stdout.startswith("digraph")


@pytest.mark.parametrize("cmd", [[], ["run"], ["run", "--help"], ["backends", "--help"],
                                 ["compile", "--help"]])
def test_help_everywhere(cmd):
    r = glow(*cmd) if cmd != [] else glow("--help")
    assert r.returncode in (0, 2)
    assert "usage: glow" in (r.stdout + r.stderr)


def test_every_argument_of_every_command_says_what_it_is():
    import argparse

    from glow.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [f"glow {name} {' / '.join(x.option_strings) or x.dest}" for name, sub in commands.choices.items()
              for x in sub._actions if not x.help and not isinstance(x, argparse._HelpAction)]
    assert not silent, silent
    r = glow("bench", "--help")
    assert r.returncode == 0 and "pip install 'glow-compiler[bench]'" in r.stdout and "'glow[" not in r.stdout


# -- bad input -------------------------------------------------------------------------------------
def test_missing_file():
    assert_bad_input(glow("run", "/no/such/model.onnx"), "no such file")


def test_garbage_file(tmp_path):
    p = tmp_path / "garbage.onnx"
    p.write_bytes(b"\x00\xffthis is not a protobuf\x12\x99" * 10)
    assert_bad_input(glow("run", str(p)), "garbage.onnx", "not a valid ONNX model")


def test_truncated_file(tmp_path):
    data = open(EXAMPLE_MODEL, "rb").read()
    p = tmp_path / "truncated.onnx"
    p.write_bytes(data[: len(data) // 2])
    assert_bad_input(glow("run", str(p)), "truncated.onnx")


def test_several_unknown_ops_all_named(tmp_path):
    nodes = [helper.make_node("FooOp", ["x"], ["a"]), helper.make_node("BarOp", ["a"], ["b"]),
             helper.make_node("FooOp", ["b"], ["y"])]
    m = make_model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "unknown.onnx"
    onnx.save(m, p)
    assert_bad_input(glow("run", str(p)), "2 unsupported op type(s)", "BarOp (x1)", "FooOp (x2)")


def test_npz_missing_input(tmp_path):
    onnx.save(relu_model(), tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", not_x=np.zeros((2, 3), np.float32))
    out = tmp_path / "out.npz"
    r = glow("run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out))
    assert_bad_input(r, "missing input(s) ['x']")
    assert not out.exists()


@pytest.mark.parametrize("arr, needle", [
    (np.zeros((3, 3), np.float32), "expected shape [2, 3], got [3, 3]"),
    (np.zeros((2, 3), np.int32), "expected element type float32, got int32"),
])
def test_npz_wrong_shape_or_dtype(tmp_path, arr, needle):
    onnx.save(relu_model(), tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=arr)
    out = tmp_path / "out.npz"
    r = glow("run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out))
    assert_bad_input(r, needle)
    assert not out.exists()


def test_not_an_npz(tmp_path):
    onnx.save(relu_model(), tmp_path / "m.onnx")
    (tmp_path / "in.npz").write_text("hello")
    assert_bad_input(glow("run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz")),
                     "not a readable .npz")


def test_external_data_outside_model_folder(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    m = _external_model("../secret.bin")
    onnx.save(m, model_dir / "m.onnx")
    out = tmp_path / "out.npz"
    r = glow("run", str(model_dir / "m.onnx"), "--outputs", str(out))
    assert_bad_input(r, "points outside the model's folder")
    assert not out.exists()


def test_external_data_inside_model_folder(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    onnx.save(_external_model("w.bin"), tmp_path / "m.onnx")
    r = glow("run", str(tmp_path / "m.onnx"))
    assert r.returncode == 0, r.stderr


def test_unknown_backend():
    assert_bad_input(glow("run", EXAMPLE_MODEL, "--backend", "nosuch"), "unknown backend 'nosuch'")


def test_outputs_into_missing_folder(tmp_path):
    out = tmp_path / "nope" / "out.npz"
    assert_bad_input(glow("run", EXAMPLE_MODEL, "--outputs", str(out)), "does not exist")


def _external_model(location):
    w = onnx.TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([2, 3])
    w.data_location = TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": "0", "length": "24"}.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    return make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, [2, 3])],
                      [("y", TensorProto.FLOAT, [2, 3])], [w])


def test_cli_run_from_other_cwd(tmp_path):
    r = glow("run", os.path.abspath(EXAMPLE_MODEL), cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_native_floor_gives_the_same_outputs(tmp_path):
    a = glow("run", EXAMPLE_MODEL, "--outputs", str(tmp_path / "a.npz"))
    b = glow("run", EXAMPLE_MODEL, "--native", "floor", "--outputs", str(tmp_path / "b.npz"))
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    with np.load(tmp_path / "a.npz") as za, np.load(tmp_path / "b.npz") as zb:
        np.testing.assert_allclose(za["probs"], zb["probs"], rtol=1e-4, atol=1e-6)


def test_backends_json_reports_native_ops():
    import json

    rows = {r["name"]: r for r in json.loads(glow("backends", "--json").stdout)}
    ref = rows["reference"]
    assert ref["available"] and "Conv" in ref["native_ops"] and ref["native_op_count"] > 150
