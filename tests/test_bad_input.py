"""Bad input is the user's fault, everything else is glow's (issue 14, finding 8).

Bad input (a FIFO or device as the model, malformed external data or sparse tensors, a recursive
function, an output path that cannot be written, a plugins.toml with wrong value types) is a
GlowError: exit code 2 and one line from the CLI, in bounded time and memory, with no file left
behind. A bug inside glow is a glow.InternalError (not a GlowError): exit code 1 and one line
saying "glow bug", the traceback with GLOW_DEBUG=1. A graph output that is also a graph input
keeps its name on every backend.
"""

import os
import subprocess
import sys

import glow
import numpy as np
import onnx
import pytest
from helpers import backend_unavailable, make_model, relu_model
from onnx import TensorProto, helper, numpy_helper

TIMEOUT_S = 120  # generous for a loaded machine; a hang (the FIFO) would never finish
MAX_RSS_MB = 700  # reading a 1 GiB file into memory would exceed it
TINY = os.path.join(os.path.dirname(__file__), "..", "core", "data", "tiny_cnn.onnx")


def glow_cli(*args, env=None, code=None):
    """Run the CLI (or `code`, a script that ends by calling it) in a fresh process; return
    (returncode, stdout, stderr). Fails the test if it does not finish (a hang)."""
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "glow.cli", *args]
    full_env = {k: v for k, v in os.environ.items() if k != "GLOW_DEBUG"}
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           env={**full_env, **(env or {})}, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"glow {' '.join(args)} did not finish in {TIMEOUT_S}s (a hang)")
    return r.returncode, r.stdout, r.stderr


# A small launcher runs the CLI as its own child and reports that child's peak RSS: Linux carries
# a process's RSS high-water mark across fork and exec, so a child forked straight from this (by
# then large) test process would report this process's size, not its own.
_LAUNCHER = """
import resource, subprocess, sys
p = subprocess.run([sys.executable, "-m", "glow.cli", *sys.argv[1:]], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)
sys.exit(p.returncode)
"""


def bounded_run(*args):
    """glow CLI in a fresh child, bounded in time: (returncode, stderr, its peak RSS in MiB)."""
    with open(os.devnull, "rb") as devnull:
        p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, *args], stdin=devnull,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        pytest.fail(f"glow {' '.join(args)} did not finish in {TIMEOUT_S}s")
    return p.returncode, err.decode(errors="replace"), int(out.split()[-1]) / 1024


def assert_bad_input(result, *needles):
    rc, _, err = result[:3] if len(result) == 3 else (result[0], "", result[1])
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("glow: error: ") and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]


def entries(folder) -> list[str]:
    return sorted(os.listdir(folder))


# -- model files that are not regular files ----------------------------------------------------------
def test_fifo_model_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    assert_bad_input(glow_cli("run", str(fifo)), str(fifo), "FIFO", "not a regular file")
    with pytest.raises(glow.ModelLoadError, match="FIFO"):
        glow.load_onnx(str(fifo))


@pytest.mark.parametrize("path,kind", [("/dev/zero", "character device"), ("/dev/null", "character device")])
def test_device_model_is_refused_without_reading(path, kind):
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    rc, err, rss = bounded_run("run", path)
    assert_bad_input((rc, err), path, kind)
    assert rss < MAX_RSS_MB, rss
    with pytest.raises(glow.ModelLoadError, match=kind):
        glow.load_onnx(path)


def test_folder_as_model(tmp_path):
    assert_bad_input(glow_cli("run", str(tmp_path)), str(tmp_path), "is a folder")
    with pytest.raises(glow.ModelLoadError, match="is a folder"):
        glow.load_onnx(tmp_path)


def test_model_larger_than_protobuf_can_parse_is_refused_unread(tmp_path):
    p = tmp_path / "huge.onnx"
    with open(p, "wb") as f:
        f.truncate(2**31 + 16)  # sparse: no disk used
    rc, err, rss = bounded_run("run", str(p))
    assert_bad_input((rc, err), str(p), "protobuf")
    assert rss < MAX_RSS_MB, rss


# -- external data ---------------------------------------------------------------------------------
def external_model(folder, location, data=None, dims=(4,), **keys):
    """A model y = x + w with w (float32[dims]) stored in `location` with the given keys."""
    w = numpy_helper.from_array(np.zeros(dims, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in {"location": location, **keys}.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", TensorProto.FLOAT, list(dims))],
                   [("y", TensorProto.FLOAT, list(dims))], [w])
    if data is not None:
        (folder / "w.bin").write_bytes(data)
    path = folder / "m.onnx"
    onnx.save(m, path)
    return str(path)


W = np.arange(4, dtype=np.float32)


@pytest.mark.parametrize("keys,needle", [
    ({"location": "w.bin\0x"}, "NUL"),
    ({"offset": "-4"}, "offset '-4' is not a non-negative integer"),
    ({"offset": "abc"}, "offset 'abc' is not a non-negative integer"),
    ({"offset": "1e3"}, "offset '1e3' is not a non-negative integer"),
    ({"length": "-1"}, "length '-1' is not a non-negative integer"),
    ({"length": "12"}, "length 12 does not match"),
    ({"offset": "64"}, "past the end"),
    ({"offset": "8", "length": "16"}, "too short"),
    ({"offset": "4"}, "has 12 bytes from offset 4"),
    ({"location": ""}, "empty"),
])
def test_malformed_external_data(tmp_path, keys, needle):
    keys = dict(keys)
    path = external_model(tmp_path, keys.pop("location", "w.bin"), W.tobytes(), **keys)
    assert_bad_input(glow_cli("run", path, "-b", "reference"), "tensor 'w'", needle)
    with pytest.raises(glow.ModelLoadError, match="tensor 'w'"):
        glow.load_onnx(path)


def test_external_data_without_length_reads_only_what_the_shape_needs(tmp_path):
    # No length: "to the end of the file", which is 1 GiB here (sparse on disk) for a 16-byte
    # tensor. Refused before reading, not read into memory first.
    with open(tmp_path / "w.bin", "wb") as f:
        f.write(W.tobytes())
        f.truncate(2**30)
    path = external_model(tmp_path, "w.bin")
    rc, err, rss = bounded_run("run", path, "-b", "reference")
    assert_bad_input((rc, err), "tensor 'w'", "more than the 16 bytes")
    assert rss < MAX_RSS_MB, rss


def test_external_data_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "w.bin")
    path = external_model(tmp_path, "w.bin")
    assert_bad_input(glow_cli("run", path, "-b", "reference"), "tensor 'w'", "FIFO")


def test_valid_external_data_still_loads(tmp_path):
    # With and without length and offset, as onnx itself writes them.
    for keys in ({}, {"offset": "0", "length": "16"}, {"offset": "16", "length": "16"}):
        data = W.tobytes() * (2 if keys.get("offset") == "16" else 1)
        g = glow.load_onnx(external_model(tmp_path, "w.bin", data, **keys))
        y = glow.compile(g, "reference").run({"x": np.ones(4, np.float32)})["y"]
        np.testing.assert_array_equal(y, W + 1)


# -- sparse initializers and functions ---------------------------------------------------------------
def sparse_model(tmp_path, values, indices, dims):
    vals = numpy_helper.from_array(np.asarray(values, np.float32), "w")
    idx = numpy_helper.from_array(np.asarray(indices, np.int64), "w_idx")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))],
                          sparse_initializer=[helper.make_sparse_tensor(vals, idx, list(dims))])
    path = tmp_path / "sparse.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.mark.parametrize("indices,dims,needle", [
    ([0, 99], [4], "index 99"),
    ([0, -1], [4], "index -1"),
    ([[0, 0], [1, 3]], [2, 3], "index 3"),
    ([[0, 0]], [2, 3], "indices of shape [1, 2]"),  # 2 values, 1 coordinate
])
def test_sparse_initializer_with_bad_indices(tmp_path, indices, dims, needle):
    path = sparse_model(tmp_path, [1.0, 2.0], indices, dims)
    assert_bad_input(glow_cli("run", path, "-b", "reference"), "sparse tensor 'w'", needle)
    with pytest.raises(glow.ModelLoadError, match="sparse tensor 'w'"):
        glow.load_onnx(path)


def test_sparse_initializer_too_large_to_make_dense(tmp_path):
    """Two values in a [10**6, 10**6] tensor: its dense form (4 TB) is refused before NumPy is asked."""
    path = sparse_model(tmp_path, [1.0, 2.0], [[0, 0], [5, 7]], [10**6, 10**6])
    assert_bad_input(glow_cli("run", path, "-b", "reference"), "sparse tensor 'w'", "memory budget")
    with pytest.raises(glow.ModelLoadError, match="sparse tensor 'w'"):
        glow.load_onnx(path)


def test_sparse_initializer_in_range_is_made_dense(tmp_path):
    path = sparse_model(tmp_path, [1.0, 2.0], [[0, 1], [1, 2]], [2, 3])
    y = glow.compile(path, "reference").run({"x": np.zeros((2, 3), np.float32)})["y"]
    np.testing.assert_array_equal(y, [[0, 1, 0], [0, 0, 2]])


def function_model(tmp_path, bodies):
    """Model-local functions {name: callee}: each calls `callee` (a function name or Relu)."""
    fns = [helper.make_function("local", name, ["a"], ["b"],
                                [helper.make_node(callee, ["a"], ["b"], domain="local" if callee != "Relu" else "")],
                                [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
           for name, callee in bodies.items()]
    g = helper.make_graph([helper.make_node(next(iter(bodies)), ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=fns)
    path = tmp_path / "fn.onnx"
    onnx.save(m, path)
    return str(path)


@pytest.mark.parametrize("bodies,cycle", [
    ({"F": "F"}, "local.F -> local.F"),
    ({"F": "G", "G": "H", "H": "G"}, "local.G -> local.H -> local.G"),
])
def test_recursive_model_local_function(tmp_path, bodies, cycle):
    path = function_model(tmp_path, bodies)
    assert_bad_input(glow_cli("run", path, "-b", "reference"), "calls itself", cycle)
    with pytest.raises(glow.ModelLoadError, match="calls itself"):
        glow.load_onnx(path)


def test_functions_that_expand_exponentially(tmp_path):
    # F0 calls F1 twice, F1 calls F2 twice, ...: 2**40 nodes once inlined. Refused at once.
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    fns = [helper.make_function("local", f"F{i}", ["a"], ["b"],
                                [helper.make_node(f"F{i + 1}", ["a"], ["t"], domain="local"),
                                 helper.make_node(f"F{i + 1}", ["t"], ["b"], domain="local")], opsets)
           for i in range(40)]
    fns.append(helper.make_function("local", "F40", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], opsets))
    g = helper.make_graph([helper.make_node("F0", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "exp.onnx"
    onnx.save(helper.make_model(g, opset_imports=opsets, functions=fns), path)
    assert_bad_input(glow_cli("run", str(path), "-b", "reference"), f"expand to {2**40} nodes")


def test_nested_functions_still_inline(tmp_path):
    path = function_model(tmp_path, {"F": "G", "G": "Relu"})
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(glow.compile(path, "reference").run({"x": x})["y"], np.maximum(x, 0))


# -- files glow writes -----------------------------------------------------------------------------
@pytest.fixture
def unwritable_dir(tmp_path):
    """A folder this process cannot create files in (as root, mode bits do not stop it: /sys)."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    for cand in (d, "/sys"):
        try:
            probe = os.path.join(cand, ".probe")
            open(probe, "w").close()
            os.unlink(probe)
        except OSError:
            yield str(cand)
            break
    else:
        pytest.skip("no unwritable folder here")
    d.chmod(0o700)


@pytest.fixture
def relu_path(tmp_path):
    p = tmp_path / "relu.onnx"
    onnx.save(relu_model(), p)
    return str(p)


def test_outputs_into_unwritable_folder(relu_path, unwritable_dir):
    before = entries(unwritable_dir)
    target = os.path.join(unwritable_dir, "out.npz")
    assert_bad_input(glow_cli("run", relu_path, "-b", "reference", "--outputs", target), target,
                     "cannot write")
    assert entries(unwritable_dir) == before


def test_outputs_onto_a_folder(relu_path, tmp_path):
    target = tmp_path / "outdir"
    target.mkdir()
    before = entries(tmp_path)
    assert_bad_input(glow_cli("run", relu_path, "-b", "reference", "--outputs", str(target)), str(target),
                     "is a folder")
    assert entries(tmp_path) == before and entries(target) == []


def test_outputs_written_whole_with_the_usual_mode(relu_path, tmp_path):
    target = tmp_path / "out.npz"
    rc, _, err = glow_cli("run", relu_path, "-b", "reference", "--outputs", str(target))
    assert rc == 0, err
    assert [e for e in entries(tmp_path) if e.startswith(".glow-")] == []  # no temporary left
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~mask
    with np.load(target) as z:
        assert list(z.files) == ["y"]


@pytest.mark.parametrize("where", ["unwritable", "folder"])
def test_partition_report_that_cannot_be_written(relu_path, tmp_path, unwritable_dir, where):
    target = os.path.join(unwritable_dir, "r.txt") if where == "unwritable" else str(tmp_path)
    folder = os.path.dirname(target) if where == "unwritable" else target
    before = entries(folder)
    assert_bad_input(glow_cli("partition", relu_path, "-d", "reference", "--report", target), target)
    assert entries(folder) == before


def test_new_backend_into_unwritable_folder(unwritable_dir):
    before = entries(unwritable_dir)
    assert_bad_input(glow_cli("new-backend", "zz", "--dir", unwritable_dir), unwritable_dir, "cannot")
    assert entries(unwritable_dir) == before


# -- plugins.toml ----------------------------------------------------------------------------------
@pytest.mark.parametrize("toml,needle", [
    ('plugins = 3', "[plugins] must be a table"),
    ('[plugins]\ndisabled = "opencl"', "[plugins] disabled must be a list of strings"),
    ('[plugins]\nmodules = "my_pkg"', "[plugins] modules must be a list of strings"),
    ('[plugins]\nmodules = [1]', "[plugins] modules must be a list of strings"),
    ('devices = 5', "[[devices]] must be an array of tables"),
    ('[[devices]]\nname = 3\nbackend = "reference"', "[[devices]] #1 name must be a non-empty string"),
    ('[[devices]]\nname = "d"\nbackend = ["reference"]', "[[devices]] #1 backend must be a non-empty string"),
])
def test_plugins_toml_wrong_value_types(tmp_path, toml, needle):
    cfg = tmp_path / "plugins.toml"
    cfg.write_text(toml + "\n")
    assert_bad_input(glow_cli("backends", env={"GLOW_PLUGINS_TOML": str(cfg)}), str(cfg), needle)
    from glow.plugins import load_config

    with pytest.raises(glow.BackendError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_config(str(cfg))


@pytest.mark.parametrize("line,needle", [
    ('threads = "x"', "threads must be"),
    ("threads = 0", "threads must be"),
    ('launch_us = "fast"', "launch_us must be"),
    ("kind = 3", "kind must be"),
    ("peak_gflops = true", "peak_gflops must be"),
])
def test_logical_device_wrong_value_types(tmp_path, relu_path, line, needle):
    cfg = tmp_path / "plugins.toml"
    cfg.write_text(f'[[devices]]\nname = "d"\nbackend = "reference"\n{line}\n')
    assert_bad_input(glow_cli("run", relu_path, "-d", "d", env={"GLOW_PLUGINS_TOML": str(cfg)}),
                     str(cfg), "logical device 'd'", needle)


def test_plugins_toml_that_is_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "plugins.toml")
    assert_bad_input(glow_cli("backends", env={"GLOW_PLUGINS_TOML": str(tmp_path / "plugins.toml")}), "FIFO")


# -- glow bugs: InternalError, exit code 1 -----------------------------------------------------------
INJECT_RUN = """
import sys
from glow.backends.reference import backend
def broken(self, feeds):
    raise KeyError("boom")
backend.ReferenceExecutable._run = broken
from glow.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_injected_run_bug_is_an_internal_error(relu_path, monkeypatch):
    from glow.backends.reference import backend

    def broken(self, feeds):
        raise KeyError("boom")

    exe = glow.compile(relu_path, "reference")
    monkeypatch.setattr(backend.ReferenceExecutable, "_run", broken)
    with pytest.raises(glow.InternalError, match=r"glow bug: running graph .* KeyError: 'boom'") as info:
        exe.run({"x": np.zeros((2, 3), np.float32)})
    assert not isinstance(info.value, glow.GlowError)
    assert isinstance(info.value.__cause__, KeyError)
    # Bad input still passes through as itself.
    with pytest.raises(glow.InputError):
        exe.run({"x": np.zeros((5,), np.float32)})


def test_injected_bug_through_the_cli(relu_path, tmp_path):
    out = tmp_path / "out.npz"
    rc, _, err = glow_cli("run", relu_path, "-b", "reference", "--outputs", str(out), code=INJECT_RUN)
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("glow: internal error (glow bug): running graph") and "KeyError: 'boom'" in lines[0]
    assert "GLOW_DEBUG=1" in lines[0]
    assert not out.exists()
    rc, _, err = glow_cli("run", relu_path, "-b", "reference", code=INJECT_RUN, env={"GLOW_DEBUG": "1"})
    assert rc == 1 and "Traceback" in err and "KeyError: 'boom'" in err


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason="cpu backend unavailable")
def test_injected_compile_bug_names_the_instruction(relu_path, monkeypatch):
    from glow.backends.cpu import codegen

    def broken(self, instr):
        raise KeyError("Gelu")

    monkeypatch.setattr(codegen.Codegen, "kernel_for", broken)
    with pytest.raises(glow.InternalError, match=r"compiling graph 'g' for backend 'cpu' failed in instruction "
                       r"'\w+' \(op Relu\): KeyError: 'Gelu'"):
        glow.compile(relu_path, "cpu")


def test_glow_errors_are_not_wrapped(relu_path):
    with pytest.raises(glow.BackendError, match="unknown backend"):
        glow.compile(relu_path, "nosuch")
    assert not issubclass(glow.InternalError, glow.GlowError)


# -- outputs named like inputs -----------------------------------------------------------------------
BACKENDS = ["reference", "reference-ir", "cpu", "opencl"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_that_is_an_input_keeps_its_name(backend):
    why = backend_unavailable(backend)
    if why:
        pytest.skip(why)
    w = numpy_helper.from_array(np.array([5, 6, 7], np.float32), "w")
    # Outputs: the input itself, a computed value named like a would-be renamed buffer, a weight.
    m = make_model([helper.make_node("Relu", ["x"], ["x_1"])], [("x", TensorProto.FLOAT, [3])],
                   [("x", TensorProto.FLOAT, [3]), ("x_1", TensorProto.FLOAT, [3]), ("w", TensorProto.FLOAT, [3])],
                   [w])
    x = np.array([-1, 2, -3], np.float32)
    got = glow.compile(m, backend).run({"x": x})
    assert list(got) == ["x", "x_1", "w"]
    np.testing.assert_array_equal(got["x"], x)
    np.testing.assert_array_equal(got["x_1"], np.maximum(x, 0))
    np.testing.assert_array_equal(got["w"], [5, 6, 7])
    only = make_model([], [("x", TensorProto.FLOAT, [3])], [("x", TensorProto.FLOAT, [3])])
    assert list(glow.compile(only, backend).run({"x": x})) == ["x"]


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_bad_thread_count_in_the_environment_is_bad_input(value):
    """Not a reason to call cpu unavailable (the default would quietly become another backend)."""
    assert_bad_input(glow_cli("run", TINY, "-b", "cpu", env={"GLOW_CPU_THREADS": value}), "GLOW_CPU_THREADS")
    assert_bad_input(glow_cli("run", TINY, env={"GLOW_CPU_THREADS": value}), "GLOW_CPU_THREADS")


@pytest.mark.parametrize("value", ["abc", "0", "1.5"])
def test_a_bad_compile_thread_count_is_bad_input_even_without_a_cache(value):
    """Not a reason to call cpu unavailable either (measuring the host compiles one object)."""
    env = {"GLOW_COMPILE_THREADS": value, "GLOW_CACHE_DIR": "off"}
    assert_bad_input(glow_cli("run", TINY, env=env), "GLOW_COMPILE_THREADS")


def test_a_closed_pipe_is_not_a_glow_bug():
    from glow.errors import internal_errors

    with pytest.raises(BrokenPipeError):
        with internal_errors("listing backends"):
            raise BrokenPipeError(32, "Broken pipe")
