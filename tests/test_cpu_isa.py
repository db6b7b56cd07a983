"""The cpu backend's instruction-set levels (GLOW_CPU_ISA=avx512|avx2|generic).

Every level the host can execute runs the kernels of a CNN and a transformer block and matches
the reference; the code made for a level holds no instruction of a richer one (no zmm register
at avx2, no ymm or zmm at generic); the AVX-512 code is at least compiled (object emitted) on any
host; a level the host lacks, or a bad value, is a one-line error.
"""

import json
import os
import subprocess
import sys

import pytest
from helpers import backend_unavailable

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))

# Runs in a fresh process (GLOW_CPU_ISA is read when code is made; a fresh cache directory so no
# object made for another level is reused): compiles, compares with the reference, and reports
# which vector registers the program's assembly names.
CHILD = r"""
import json, re, sys
import numpy as np
import glow
import llvmlite.binding as llvm
from glow.backends.cpu import jit
from glow.testing.bench_models import small_cnn, transformer

out = {"isa": jit.isa(), "cpu": jit.cpu_name(), "models": {}}
for name, model in (("small_cnn", small_cnn()), ("transformer", transformer(seq=16, hidden=64, heads=2, ffn=128))):
    exe = glow.compile(model, backend="cpu", threads=1)
    feeds = {i.name: np.random.default_rng(0).standard_normal(i.shape).astype(np.float32) for i in exe.inputs}
    got, want = exe.run(feeds), glow.compile(model, backend="reference").run(feeds)
    err = max(float(np.abs(got[k] - want[k]).max()) for k in want)
    asm = jit.target_machine().emit_assembly(llvm.parse_assembly(exe.program.module_text))
    out["models"][name] = {"err": err, "zmm": "%zmm" in asm, "ymm": "%ymm" in asm,
                           "libm_fma": bool(re.search(r"\bfmaf?\b", asm))}
print(json.dumps(out))
"""


def _levels():
    from glow.backends.cpu import jit

    host = jit.host_isa()
    return list(jit.ISAS[jit.ISAS.index(host):])


@pytest.mark.parametrize("level", ["avx512", "avx2", "generic"])
def test_each_level_runs_and_emits_nothing_richer(level, tmp_path):
    if level not in _levels():
        pytest.skip(f"this CPU does not execute {level}")
    env = {**os.environ, "GLOW_CPU_ISA": level, "GLOW_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["isa"] == level
    for name, m in out["models"].items():
        assert m["err"] < 1e-3, (level, name, m)
        # a multiply-add is an instruction, or a multiply and an add, never a libm call per lane
        # (llvm.fma on a target without FMA made the generic GEMM 30 times slower)
        assert not m["libm_fma"], f"{name}: calls fma/fmaf at the {level} level"
        if level == "avx2":
            assert not m["zmm"], f"{name}: AVX-512 registers in code made for avx2"
        if level == "generic":
            assert not m["zmm"] and not m["ymm"], f"{name}: AVX registers in code made for generic x86-64"
        if level == "avx512":
            assert m["zmm"], f"{name}: no AVX-512 register used at the avx512 level"


def test_the_avx512_code_compiles_on_any_host():
    """The richest path is at least compiled (IR verified, object emitted) where it cannot run."""
    import glow
    import llvmlite.binding as llvm
    from glow.backends.cpu import jit
    from glow.testing.bench_models import small_cnn

    text = glow.compile(small_cnn(), backend="cpu", threads=1).program.module_text
    jit.check_host()
    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu="skylake-avx512", features="+avx512f,+avx512bw,+avx512dq,+avx512vl", opt=2)
    assert "zmm" in tm.emit_assembly(mod)
    assert len(tm.emit_object(mod)) > 0


def test_a_level_the_host_lacks_is_an_error(monkeypatch):
    from glow.backends.cpu import jit
    from glow.errors import BackendError

    monkeypatch.setattr(jit, "host_isa", lambda: "avx2")
    monkeypatch.setenv("GLOW_CPU_ISA", "avx512")
    with pytest.raises(BackendError, match="runs at most avx2"):
        jit.isa()


@pytest.mark.parametrize("value", ["sse", "avx-512", "1"])
def test_a_bad_level_is_a_one_line_error_not_another_backend(value):
    from helpers import EXAMPLE_MODEL

    env = {**os.environ, "GLOW_CPU_ISA": value}
    env.pop("GLOW_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "glow.cli", "run", EXAMPLE_MODEL], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "GLOW_CPU_ISA" in r.stderr


@pytest.mark.parametrize("level", ["avx2", "generic"])
def test_the_kernel_suite_passes_at_each_lower_level(level, tmp_path):
    """tests/test_cpu_kernels.py (every kernel against NumPy) again with the code made for a lower
    level than the host's, in a child pytest (the level is read when code is made)."""
    if level not in _levels() or level == _levels()[0]:
        pytest.skip(f"{level} is not a lower level this CPU executes (that one is the main suite's)")
    suite = os.path.join(os.path.dirname(__file__), "test_cpu_kernels.py")
    env = {**os.environ, "GLOW_CPU_ISA": level, "GLOW_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", suite],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=os.path.dirname(suite))
    assert r.returncode == 0, r.stdout[-3000:]


def test_the_compile_option_isa_makes_code_for_that_level(monkeypatch, tmp_path):
    """glow.compile(..., options={"isa": level}): the level for this executable only, in every
    LLVM worker thread (context variables), and for programs a specialising executable makes later."""
    import glow
    import numpy as np
    from glow.backends.cpu import jit
    from glow.testing.bench_models import small_cnn

    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("GLOW_COMPILE_THREADS", "2")
    seen = []
    compile_object = jit.compile_object

    def recording(text, glue=False):
        seen.append(jit.isa())
        return compile_object(text, glue)

    monkeypatch.setattr(jit, "compile_object", recording)
    model = small_cnn()
    exe = glow.compile(model, "cpu", threads=1, options={"isa": "generic"})
    assert exe.program.target["isa"] == "generic" and exe.program.target["cpu"] == "x86-64"
    assert len(seen) > 1 and set(seen) == {"generic"}  # several objects, each compiled for generic
    assert jit.isa() == jit.host_isa()  # nothing leaks out of the compile
    x = np.random.default_rng(0).standard_normal(exe.inputs[0].shape).astype(np.float32)
    want = glow.compile(model, "reference").run({exe.inputs[0].name: x})
    got = exe.run({exe.inputs[0].name: x})
    assert max(float(np.abs(got[k] - want[k]).max()) for k in want) < 1e-3

    # a dynamic batch: the program made on the first run is for the option's level too
    from glow import dtypes as dt
    from glow.graph import GraphBuilder

    b = GraphBuilder("dyn")
    v = b.input("x", dt.tensor(("N", 40), "float32"))
    g = b.build([b.add1("Relu", [b.add1("MatMul", [v, b.constant(np.ones((40, 24), np.float32))])])])
    seen.clear()
    dyn = glow.compile(g, "cpu", threads=1, options={"isa": "generic"})
    dyn.run({"x": np.ones((3, 40), np.float32)})
    assert seen and set(seen) == {"generic"}


def test_a_bad_compile_option_is_a_one_line_input_error(monkeypatch):
    import glow
    from glow.backends.cpu import jit
    from glow.errors import InputError
    from glow.testing.bench_models import small_cnn

    with pytest.raises(InputError, match=r"backend 'cpu' has no option 'isas' \(its options: isa, precision\)"):
        glow.compile(small_cnn(), "cpu", options={"isas": "avx2"})
    with pytest.raises(InputError, match="compile option isa must be one of avx512, avx2, generic, got 'sse9'"):
        glow.compile(small_cnn(), "cpu", options={"isa": "sse9"})
    monkeypatch.setattr(jit, "host_isa", lambda: "generic")  # a host with no AVX at all
    with pytest.raises(InputError, match="compile option isa=avx2: this CPU .* runs at most generic"):
        glow.compile(small_cnn(), "cpu", options={"isa": "avx2"})
    with pytest.raises(InputError, match="options= apply to one backend"):
        glow.compile(small_cnn(), devices=["cpu"], options={"isa": "generic"})
