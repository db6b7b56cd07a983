"""Cold compiles on cpu (issue 17): one object per distinct kernel, compiled once and cached per kernel.

A program's LLVM module is cut into one module per kernel and one for the entry
(`linking.split_module`); identical kernels become one object, each object is cached on disk by its
own IR text, and `exe.stats` says where the compile time went. LLVM compiles are counted by
spying on `jit.compile_object`, the one place that runs LLVM on an object's text.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import glow
import llvmlite.binding as llvm
import numpy as np
import onnx
import pytest
from glow.backends.cpu import jit, linking
from helpers import backend_unavailable, make_model
from onnx import TensorProto, helper

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))

PHASES = ("ir_s", "codegen_s", "llvm_s", "llvm_parse_s", "llvm_opt_s", "llvm_emit_s", "load_s")


def layers(n: int, width: int = 32, rows: int = 8, tail: str | None = None, seed: int = 0) -> onnx.ModelProto:
    """n identical layers y = Relu(x @ W_k) (W_k different numbers, the same shape), then an
    optional `tail` op (Sigmoid, Tanh...)."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for k in range(n):
        inits.append(onnx.numpy_helper.from_array(rng.normal(0, 0.2, (width, width)).astype(np.float32), f"w{k}"))
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"m{k}"]), helper.make_node("Relu", [f"m{k}"], [f"r{k}"])]
        x = f"r{k}"
    if tail:
        nodes.append(helper.make_node(tail, [x], ["t"]))
        x = "t"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    return make_model(nodes, [("x", TensorProto.FLOAT, [rows, width])], [("y", TensorProto.FLOAT, [rows, width])],
                      inits, name=f"layers{n}")


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    """An empty object cache, and the list of texts LLVM compiled (appended as it happens)."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    seen: list[str] = []
    real = jit.compile_object

    def spy(text, *args):
        seen.append(text)
        return real(text, *args)

    monkeypatch.setattr(jit, "compile_object", spy)
    return seen


def kernels(texts) -> set[str]:
    """The kernel symbols among compiled texts (the entry's object defines none)."""
    return {n for t in texts for n, e in linking.parse_module(t)[1].items()
            if e.kind == "define" and n.startswith(linking.EXPORT_PREFIX)}


def test_stats_break_the_compile_down_by_phase(compiles):
    exe = glow.compile(layers(2, tail="Tanh"), "cpu")
    s = exe.stats
    assert all(isinstance(s[k], float) and s[k] >= 0 for k in PHASES), {k: s.get(k) for k in PHASES}
    assert s["objects"] == s["objects_compiled"] == len(compiles) and s["objects_cached"] == 0
    slow = s["slowest_kernels"]
    assert slow and slow == sorted(slow, key=lambda k: -k["llvm_s"])
    ops = {i["op"] for k in slow for i in k["instrs"]}
    assert "MatMul" in ops and all("->" in i["shapes"] for k in slow for i in k["instrs"])


def test_identical_layers_compile_one_kernel(compiles, monkeypatch, tmp_path):
    """A second and a third layer like the first add no kernel to compile: only the entry grows."""
    glow.compile(layers(1), "cpu")
    one = kernels(compiles)
    compiles.clear()
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path / "empty"))
    exe = glow.compile(layers(3), "cpu")
    assert kernels(compiles) == one  # the same kernels, each compiled once
    assert len(compiles) == len(one) + 1  # and the entry
    x = np.random.default_rng(1).normal(size=(8, 32)).astype(np.float32)
    ref = glow.compile(layers(3), "reference").run({"x": x})["y"]
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


def test_the_entry_is_a_few_lines_per_phase(compiles):
    """Each kernel call of the entry is one call to a runner that holds the threads' claim loop
    (sync.PhaseEmitter): inlined per phase, that loop made the entry of ResNet-50 on the primitive
    floor a megabyte of IR and its longest object to compile. What is left per phase is the call
    and the loads of its values (offsets, sizes, waits) from the value table. 30 phases here; the
    answer is the same on one thread and on two."""
    model = layers(30)
    exe = glow.compile(model, "cpu", threads=2)
    entry = next(t for t in compiles if 'define void @"glow_run"' in t)
    body = entry.split('define void @"glow_run"', 1)[1].split("\n}", 1)[0]
    phases = body.count("call void @\"glow_phase.")
    assert phases >= 30, phases
    assert "atomicrmw" not in body  # no claim loop here
    assert len(body.splitlines()) < 25 * phases, len(body.splitlines())  # inlined: about 65 per phase
    x = np.random.default_rng(2).normal(size=(8, 32)).astype(np.float32)
    ref = glow.compile(model, "reference").run({"x": x})["y"]
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)
    one = glow.compile(model, "cpu", threads=1).run({"x": x})["y"]
    np.testing.assert_array_equal(exe.run({"x": x})["y"], one)


def test_a_second_model_reuses_the_kernels_it_shares(compiles):
    """Model B shares model A's layer kernel (same shapes, other weights): compiling B after A
    compiles only what is new to B, and takes the shared kernel from the per-kernel cache."""
    glow.compile(layers(2, tail="Tanh", seed=1), "cpu")
    first = kernels(compiles)
    compiles.clear()
    exe = glow.compile(layers(2, tail="Sigmoid", seed=2), "cpu")
    shared = first & {n for r in exe.program.module.parts for n in [r.part.defines] if n}
    assert shared, "the two models share no kernel"
    assert not shared & kernels(compiles)  # not compiled again
    assert exe.stats["objects_cached"] >= len(shared)
    x = np.random.default_rng(3).normal(size=(8, 32)).astype(np.float32)
    ref = glow.compile(layers(2, tail="Sigmoid", seed=2), "reference").run({"x": x})["y"]
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


def test_a_warm_compile_runs_no_llvm(compiles):
    glow.compile(layers(2), "cpu")
    compiles.clear()
    exe = glow.compile(layers(2), "cpu")
    assert compiles == [] and exe.stats["cached"] and exe.stats["objects_compiled"] == 0


# -- the splitter ---------------------------------------------------------------------------------

MODULE = """; ModuleID = "m"
target triple = "x86_64-unknown-linux-gnu"

@"scratch.0" = internal global [64 x i8] zeroinitializer, align 64
@"table" = internal constant [2 x float] [float 1.0, float 2.0]
define void @"glow_run"(ptr %".1", i64 %".2", i64 %".3")
{
entry:
  call void @"k0.Neg"(ptr %".1", i64 %".2", i64 %".3")
  call void @"k7.Neg"(ptr %".1", i64 %".2", i64 %".3")
  call void @"k8.Use"(ptr %".1")
  ret void
}

define internal void @"k0.Neg"(ptr %".1", i64 %".2", i64 %".3") nounwind
{
entry:
  %".4" = load float, ptr @"table"
  store float %".4", ptr %".1", !nontemporal !0
  ret void
}

define internal void @"k7.Neg"(ptr %".1", i64 %".2", i64 %".3") nounwind
{
entry:
  %".4" = load float, ptr @"table"
  store float %".4", ptr %".1", !nontemporal !0
  ret void
}

define internal void @"k8.Use"(ptr %".1") nounwind
{
entry:
  call void @"llvm.memcpy.p0.p0.i64"(ptr @"scratch.0", ptr %".1", i64 64, i1 0)
  ret void
}

declare void @"llvm.memcpy.p0.p0.i64"(ptr %".1", ptr %".2", i64 %".3", i1 %".4")

!0 = !{ i32 1 }
"""


def test_split_module_one_part_per_distinct_kernel():
    entry, *parts = linking.split_module(MODULE)
    assert [p.sources for p in parts] == [["k0.Neg", "k7.Neg"], ["k8.Use"]]  # identical kernels: one part
    assert entry.glue and not any(p.glue for p in parts)  # only the entry is compiled as glue (O1)
    (alone,) = linking.split_module(MODULE.split("define internal")[0].replace("call void @\"k", "; "))
    assert not alone.glue  # a module without kernels is all code: O3
    neg, use = parts
    # the kernel's module: itself (exported under the hash of its text), its constants, metadata
    assert neg.defines.startswith(linking.EXPORT_PREFIX) and f"define void @{neg.defines}(" in neg.text
    assert '@"f.1" = internal constant' in neg.text and "!0 = !{ i32 1 }" in neg.text
    # writable globals: defined (exported) by the entry, declared by the kernels using them
    assert '@"scratch.0" = external global [64 x i8]' in use.text
    assert '@"scratch.0" = global [64 x i8]' in entry.text
    assert f"declare void @{neg.defines}(" in entry.text and "k0.Neg" not in entry.text
    for p in (entry, neg, use):
        llvm.parse_assembly(p.text, llvm.create_context()).verify()
    # the same kernel at another instruction index, in another model: the same part
    again = linking.split_module(MODULE.replace("k0.Neg", "k41.Neg").replace("k7.Neg", "k3.Neg"))
    assert again[1].text == neg.text


def test_the_program_links_its_objects_into_one_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    cm = jit.CompiledModule(MODULE)
    assert len(cm.parts) == 3
    out = np.zeros(16, np.float32)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(cm.address("glow_run"))(
        out.ctypes.data, 0, 1)
    assert out[0] == 1.0
    assert (ctypes.c_uint8 * 64).from_address(cm.engine.get_global_value_address("scratch.0"))[:4] == [0, 0, 128, 63]


def test_a_kernel_symbol_no_sibling_defines_is_refused():
    with pytest.raises(Exception, match="glow_k_missing"):
        linking.check_objects([{"glow_k_missing": {"glow_run"}}, {}], [set(), {"glow_k_other"}], "m")
    linking.check_objects([{"glow_k_other": {"glow_run"}}, {}], [set(), {"glow_k_other"}], "m")


# -- the command line -------------------------------------------------------------------------------

def glow_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, env=env)


def test_cli_compile_profile(tmp_path):
    path = tmp_path / "layers.onnx"
    onnx.save(layers(2, tail="Tanh"), path)
    env = {**os.environ, "GLOW_CACHE_DIR": str(tmp_path / "cache")}
    r = glow_cli("compile", str(path), "--profile", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out["seconds"])[:3] == ["import", "optimise", "lower"]
    assert {"ir", "codegen", "llvm", "load"} <= set(out["seconds"]) and out["objects_compiled"] == out["objects"]
    assert out["slowest_kernels"]
    r = glow_cli("compile", str(path), "--profile", env=env)
    assert r.returncode == 0 and "llvm" in r.stdout and "0 of" in r.stdout  # everything from the cache
    r = glow_cli("compile", str(path), "--profile", "--shape", "nope=1", env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope" in r.stderr


def test_kernel_objects_compile_outside_llvmlites_process_wide_lock():
    # llvmlite serialises every LLVM call on one lock; an object compiled on a context of its
    # own skips it, so the compile pool runs several at once. Holding the lock here must not
    # stop a compile on another thread (before, the thread waited until it was released).
    import threading

    jit.target_machine()  # LLVM initialised, the stand-in lock installed
    text = 'define i64 @"glow_k_test"(i64 %x) {\n  %y = mul i64 %x, 3\n  ret i64 %y\n}\n'
    done = []
    worker = threading.Thread(target=lambda: done.append(jit.compile_object(text)[0]))
    with llvm.ffi.lib._lock:
        worker.start()
        worker.join(30)
        finished_while_held = not worker.is_alive()
    worker.join(60)
    assert finished_while_held and done and len(done[0]) > 0
    # everything else still takes the lock: a call on the global context waits for it
    other = []
    with llvm.ffi.lib._lock:
        t = threading.Thread(target=lambda: other.append(llvm.parse_assembly(text)))
        t.start()
        t.join(1.0)
        waited = t.is_alive()
    t.join(60)
    assert waited and other
