"""Ahead-of-time bundles (`glow bundle`, backends/cpu/bundle.py): the C example links a bundle
with the system's C compiler and its outputs equal the reference; an aarch64 bundle links with
Debian's cross gcc and runs under qemu-user (where they are installed; .ci/run installs them);
a riscv64 object is checked for its machine type; bad requests are one-line errors.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import glow
import numpy as np
import pytest
from glow.backends.cpu import bundle, linking
from glow.plugins import registry
from helpers import backend_unavailable, make_model
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MAIN_C = os.path.join(ROOT, "examples", "bundle", "main.c")
CC = shutil.which("cc") or shutil.which("gcc")
CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")


def convnet():
    """Conv -> Relu -> MaxPool -> Reshape -> Gemm -> Softmax, and token ids -> Gather: random
    weights, so a wrong offset or a wrong kernel shows in the numbers."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "W"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, "B"),
             numpy_helper.from_array(rng.standard_normal((8 * 7 * 7, 10)).astype(np.float32) * 0.05, "M"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "C"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((50, 4)).astype(np.float32), "E")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "M", "C"], ["g"]),
             helper.make_node("Softmax", ["g"], ["y"]),
             helper.make_node("Gather", ["E", "ids"], ["emb"], name="embed")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [2, 3, 14, 14]), ("ids", TensorProto.INT64, [2, 5])],
                      [("y", TensorProto.FLOAT, [2, 10]), ("emb", TensorProto.FLOAT, [2, 5, 4])], inits,
                      name="bundled")


def convnet_feeds(seed=1):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((2, 3, 14, 14)).astype(np.float32),
            "ids": rng.integers(0, 50, (2, 5)).astype(np.int64)}


def write_bundle(model, out, **kw):
    return registry().get("cpu").bundle(glow.load_onnx(model.SerializeToString()), str(out), **kw)


def link(out, cc, *extra):
    exe = out / "run-net"
    r = subprocess.run([cc, "-O2", "-std=c11", "-I", str(out), MAIN_C, str(out / "net.o"), "-lm", "-o", str(exe),
                        *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def run_bundle(cmd, out, info, feeds):
    """Run a linked example with these inputs; the outputs by name."""
    tensors = info["tensors"]
    packed = b"".join(np.ascontiguousarray(feeds[t["name"]]).tobytes() for t in tensors if t["kind"] == "input")
    (out / "in.bin").write_bytes(packed)
    r = subprocess.run([*cmd, str(out / "net.weights.bin"), str(out / "in.bin"), str(out / "out.bin")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    raw, at, outs = (out / "out.bin").read_bytes(), 0, {}
    for t in (t for t in tensors if t["kind"] == "output"):
        dtype = glow.dtypes.from_name(t["dtype"]).np
        outs[t["name"]] = np.frombuffer(raw[at:at + t["bytes"]], dtype).reshape(t["shape"])
        at += t["bytes"]
    assert at == len(raw)
    return outs


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_host_bundle_runs_from_c_and_equals_the_reference(tmp_path):
    info = write_bundle(convnet(), tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["net.h", "net.o", "net.weights.bin"]
    assert set(info["external"]) <= bundle.ALLOWED and "syscall" not in info["external"]
    assert set(linking.undefined_symbols((tmp_path / "net.o").read_bytes())) <= bundle.ALLOWED
    exe = link(tmp_path, CC)
    f = convnet_feeds()
    got = run_bundle([str(exe)], tmp_path, info, f)
    ref = glow.compile(convnet(), backend="reference").run(f)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got["emb"], ref["emb"])
    header = (tmp_path / "net.h").read_text()
    assert "int net(uint8_t *constant_weights, uint8_t *mutable_weights, uint8_t *activations);" in header
    assert f"#define NET_CONSTANT_WEIGHTS_SIZE {(tmp_path / 'net.weights.bin').stat().st_size}" in header
    assert '{"ids", "int64", 0,' in header and '{"emb", "float32", 1,' in header


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_a_bad_index_returns_an_error_code_and_reads_nothing_outside(tmp_path):
    info = write_bundle(convnet(), tmp_path)
    exe = link(tmp_path, CC)
    f = convnet_feeds()
    f["ids"][0, 2] = 99
    packed = b"".join(np.ascontiguousarray(f[t["name"]]).tobytes() for t in info["tensors"] if t["kind"] == "input")
    (tmp_path / "in.bin").write_bytes(packed)
    r = subprocess.run([str(exe), str(tmp_path / "net.weights.bin"), str(tmp_path / "in.bin"), "-"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3 and "out of range" in r.stderr


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_transformer_encoder_bundle_equals_the_reference(tmp_path):
    from glow.testing import nlp_models

    model = nlp_models.encoder(dynamic=False)
    info = write_bundle(model, tmp_path)
    exe = link(tmp_path, CC)
    f = nlp_models.token_feeds(model, 2, 32, np.random.default_rng(3))
    got = run_bundle([str(exe)], tmp_path, info, f)
    ref = glow.compile(model, backend="reference").run(f)
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], want, rtol=2e-4, atol=2e-5)


@pytest.mark.skipif(CROSS is None or QEMU is None,
                    reason="no aarch64 cross gcc or qemu-aarch64 (Debian: gcc-aarch64-linux-gnu, "
                    "libc6-dev-arm64-cross, qemu-user)")
def test_aarch64_bundle_runs_under_qemu_and_equals_the_reference(tmp_path):
    info = write_bundle(convnet(), tmp_path, target="aarch64-linux-gnu")
    obj = (tmp_path / "net.o").read_bytes()
    assert int.from_bytes(obj[18:20], "little") == 183  # EM_AARCH64
    assert info["target"]["triple"] == "aarch64-linux-gnu" and info["target"]["isa"] == "generic"
    exe = link(tmp_path, CROSS, "-static")
    f = convnet_feeds(2)
    got = run_bundle([QEMU, str(exe)], tmp_path, info, f)
    ref = glow.compile(convnet(), backend="reference").run(f)
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got["emb"], ref["emb"])


def test_riscv64_object_has_the_right_machine_and_needs_nothing_else(tmp_path):
    info = write_bundle(convnet(), tmp_path, target="riscv64-linux-gnu")
    obj = (tmp_path / "net.o").read_bytes()
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 243  # EM_RISCV
    assert set(info["external"]) <= bundle.ALLOWED


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_weights_as_a_c_array_hold_the_same_bytes(tmp_path):
    write_bundle(convnet(), tmp_path, weights_c=True)
    prog = tmp_path / "dump.c"
    prog.write_text('#include <stdio.h>\n#include <stdint.h>\nextern const uint8_t net_constant_weights[];\n'
                    '#include "net.h"\nint main(void) { fwrite(net_constant_weights, 1, NET_CONSTANT_WEIGHTS_SIZE, '
                    'stdout); return 0; }\n')
    exe = tmp_path / "dump"
    r = subprocess.run([CC, "-std=c11", "-I", str(tmp_path), str(prog), str(tmp_path / "net.weights.c"),
                        "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, timeout=60).stdout
    assert out == (tmp_path / "net.weights.bin").read_bytes()


def cli(*args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, timeout=300)


def test_cli_bundle_and_its_errors(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(convnet().SerializeToString())
    r = cli("bundle", str(model), "-o", str(tmp_path / "b"), "--json")
    assert r.returncode == 0, r.stderr
    assert "net.o" in r.stdout and (tmp_path / "b" / "net.o").exists()
    for args, words in ((["--target", "no-such-arch-linux"], "--target no-such-arch-linux"),
                        (["--name", "3net"], "C identifier"),
                        (["--cpu", "notacpu"], "--cpu notacpu")):  # LLVM would abort the process
        r = cli("bundle", str(model), "-o", str(tmp_path / "bad"), *args)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "bad").exists() or not os.listdir(tmp_path / "bad")
    r = cli("bundle", str(model), "-o", str(tmp_path / "named"), "--name", "tiny_net")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "named")) == ["tiny_net.h", "tiny_net.o", "tiny_net.weights.bin"]
    if CC is not None:  # the header and the object agree on the name: a program using them links
        prog = tmp_path / "use.c"
        prog.write_text('#include "tiny_net.h"\nint main(int argc, char **argv) { (void)argv; return argc > 5 ? '
                        'tiny_net(0, 0, 0) : TINY_NET_NUM_INPUTS - 2; }\n')
        r = subprocess.run([CC, "-std=c11", "-I", str(tmp_path / "named"), str(prog),
                            str(tmp_path / "named" / "tiny_net.o"), "-lm", "-o", str(tmp_path / "use")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(tmp_path / "use")], timeout=60).returncode == 0
    dyn = tmp_path / "dyn.onnx"
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    dyn.write_bytes(make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, ["N", 4])],
                               [("y", TensorProto.FLOAT, ["N", 3])], [w]).SerializeToString())
    r = cli("bundle", str(dyn), "-o", str(tmp_path / "d"), "--shape", "x=5x4")
    assert r.returncode == 0, r.stderr
    assert "#define NET_X_SIZE 80" in (tmp_path / "d" / "net.h").read_text()


def test_only_the_cpu_backend_bundles():
    with pytest.raises(glow.BackendError, match="cannot make ahead-of-time bundles"):
        registry().get("reference").bundle(glow.load_onnx(convnet().SerializeToString()), "/nonexistent")


def test_32_bit_targets_say_what_their_objects_would_need(tmp_path):
    """Code for armv7 compiles, but calls the C compiler's runtime (64-bit division): refused
    with the names, in one line, and nothing is written."""
    with pytest.raises(glow.BackendError) as e:
        write_bundle(convnet(), tmp_path / "arm", target="armv7-linux-gnueabihf")
    assert "__udivdi3" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "arm").exists()
