"""Start-up cost (issue 45): what a `glow` command imports before it does any work.

Import sets, not timings, so the tests hold on a busy machine: `glow --version` and `glow backends`
load no NumPy, op table, ONNX or device library (pyopencl, cupy, ray, llvmlite); `glow run` of a
model in the executable cache loads no ONNX (importing it, with ml_dtypes, takes a second or more)
and no op table. Measured wall times are in docs/compile-time.md.
"""

import json
import os
import subprocess
import sys

import pytest
from helpers import EXAMPLE_MODEL

HEAVY = ("numpy", "onnx", "ml_dtypes", "pyopencl", "cupy", "ray", "llvmlite", "glow.ops.activation", "glow.graph")


def modules_after(*args, cwd=None) -> set[str]:
    """The modules loaded once `glow ARGS` has run (in a fresh interpreter, as the command line does)."""
    code = ("import json, sys\nfrom glow.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                       env={k: v for k, v in os.environ.items() if k != "GLOW_PLUGINS_TOML"})
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("MODULES ")]
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    return set(json.loads(line[-1][len("MODULES "):]))


def heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY)


@pytest.mark.parametrize("args", [["--version"], ["backends"], ["--help"]])
def test_version_help_and_backends_load_nothing_heavy(args, tmp_path):
    mods = modules_after(*args, cwd=tmp_path)
    assert not heavy(mods), heavy(mods)


def test_backends_probe_asks_the_devices(tmp_path):
    mods = modules_after("backends", "--probe", cwd=tmp_path)
    assert "llvmlite" in mods  # the cpu backend's devices() asks LLVM about this CPU


def test_run_of_a_cached_model_imports_no_onnx(tmp_path):
    from glow.fileio import cache_dir
    from glow.plugins import registry

    if not registry().records["cpu"].available or cache_dir() is None:
        pytest.skip("the executable cache holds cpu executables (and GLOW_CACHE_DIR=off turns it off)")
    import uuid

    import onnx

    model = onnx.load(EXAMPLE_MODEL)
    model.doc_string = f"test_startup {uuid.uuid4()}"  # bytes no earlier run has cached
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    first = modules_after("run", path, "-b", "cpu", cwd=tmp_path)  # compiles (and caches)
    assert "onnx" in first
    again = modules_after("run", path, "-b", "cpu", cwd=tmp_path)
    assert "onnx" not in again and "ml_dtypes" not in again and "glow.ops.activation" not in again, \
        heavy(again)


def test_op_modules_are_all_loaded_on_first_use():
    """glow.ops loads its modules on the table's first use: every module of the package is listed."""
    import glow.ops
    from glow.ops import OP_MODULES, all_ops

    folder = os.path.dirname(glow.ops.__file__)
    files = {f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_")} - {"registry"}
    assert files == set(OP_MODULES)
    assert {o.name for o in all_ops()} >= {"Relu", "DFT", "MatMulNBits", "TreeEnsemble"}
