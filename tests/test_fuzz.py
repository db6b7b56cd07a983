"""The differential fuzzer (glow.testing.fuzz): generator validity and coverage, crash/hang
isolation, shrinking, and a bounded slice of real fuzzing on every backend that runs here."""

import collections
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from glow.testing.fuzz import fuzz, generate, op_names
from glow.testing.fuzz.gen import validate
from glow.testing.fuzz.runner import Runner, Worker
from glow.testing.fuzz.shrink import shrink
from helpers import backend_unavailable


def test_generator_graphs_are_valid_and_cover_80_ops():
    covered = collections.Counter()
    features = collections.Counter()
    for i in range(300):
        case = generate(7, i)
        assert not case.rejected, case.rejected  # every attempt passed onnx: no generator bugs
        onnx.checker.check_model(case.model, full_check=True)
        onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True)
        covered.update(set(case.ops))
        g = case.model.graph
        consumers = collections.Counter(i for n in g.node for i in n.input)
        features["fan-out"] += any(c > 1 for c in consumers.values())
        features["symbolic"] += any(d.dim_param for vi in g.input for d in vi.type.tensor_type.shape.dim)
        features["empty"] += any(0 in a.shape for a in case.feeds.values())
        features["float16"] += any(a.dtype == np.float16 for a in case.feeds.values())
        assert set(case.feeds) == {vi.name for vi in g.input}
    print(f"\n{len(covered)} ops over 300 graphs; {dict(features)}")
    assert len(covered) >= 80, sorted(set(op_names()) - set(covered))
    assert all(features[k] >= 10 for k in ("fan-out", "symbolic", "empty", "float16")), features


def test_generation_is_deterministic():
    a, b = generate(3, 11), generate(3, 11)
    assert a.model.SerializeToString() == b.model.SerializeToString()
    assert all(np.array_equal(a.feeds[k], b.feeds[k]) for k in a.feeds)
    assert generate(3, 12).model.SerializeToString() != a.model.SerializeToString()


def test_every_reduce_attribute_form_is_generated():
    forms = collections.Counter()
    for i in range(300):
        case = generate(5, i, ops=["ReduceL2", "ReduceSum", "ReduceMax"])
        for n in case.model.graph.node:
            if not n.op_type.startswith("Reduce"):
                continue
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            forms["axes-attr" if "axes" in attrs else "axes-input" if len(n.input) > 1 else "no-axes"] += 1
            forms[f"keepdims={attrs.get('keepdims')}"] += 1
            forms[f"noop={attrs.get('noop_with_empty_axes')}"] += 1
            forms["negative"] += any(v < 0 for v in attrs.get("axes", []))
    assert all(forms[k] for k in ("axes-attr", "axes-input", "no-axes", "keepdims=0", "keepdims=1",
                                  "keepdims=None", "noop=1", "noop=0", "negative")), forms


def test_validate_catches_a_wrong_generator_shape():
    case = generate(7, 0)
    out = case.model.graph.output[0]
    dims = [d.dim_value for d in out.type.tensor_type.shape.dim]
    bogus = {out.name: (np.float32 if out.type.tensor_type.elem_type == 1 else np.int64, tuple(dims) + (7,))}
    assert validate(case.model, bogus) is not None


def test_worker_does_not_import_onnxruntime():
    code = ("import sys, runpy; sys.argv = ['w', 'glow']; import glow.testing.fuzz.worker as w; "
            "import glow; print('onnxruntime' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


def _case_with(op, seed=2):
    for i in range(200):
        case = generate(seed, i, ops=["Relu", "Add", op], max_nodes=4)
        if op in case.ops and len(case.ops) >= 3:
            return case
    raise AssertionError(f"no graph with {op}")


@pytest.mark.parametrize("what", ["abort", "hang"])
def test_crash_and_hang_are_caught_and_the_worker_restarts(monkeypatch, what):
    monkeypatch.setenv("GLOW_FUZZ_INJECT", f"{what}:Relu")
    case = _case_with("Relu")
    r = Runner("reference-ir", timeout=5 if what == "hang" else 60, use_ort=False)
    try:
        v = r.run(case.model.SerializeToString(), case.feeds)
        assert v["category"] == ("crash" if what == "abort" else "hang"), v
        assert "signal" in v["detail"] or what == "hang"
        plain = generate(2, 0, ops=["Tanh"], max_nodes=1)
        assert r.run(plain.model.SerializeToString(), plain.feeds)["category"] == "pass"  # restarted
    finally:
        r.close()


def test_twice_catches_a_second_compile_that_differs(monkeypatch):
    monkeypatch.setenv("GLOW_FUZZ_INJECT", "flaky:Relu")
    case = _case_with("Relu")
    r = Runner("reference-ir", use_ort=False, twice=True)
    try:
        v = r.run(case.model.SerializeToString(), case.feeds)
        assert v["category"] == "unstable", v
        monkeypatch.delenv("GLOW_FUZZ_INJECT")
        r.close()  # a fresh worker without the hook
        assert r.run(case.model.SerializeToString(), case.feeds)["category"] == "pass"
    finally:
        r.close()


def test_worker_reports_glow_errors_without_dying():
    w = Worker("glow", timeout=60)
    try:
        bad = w.call(dict(model=b"not a model", feeds={}, backend="reference"))
        assert bad["status"] == "error" and bad["kind"] == "ModelLoadError", bad
        case = generate(2, 0, ops=["Tanh"], max_nodes=1)
        ok = w.call(dict(model=case.model.SerializeToString(), feeds=case.feeds, backend="reference"))
        assert ok["status"] == "ok"
    finally:
        w.close()


def test_shrinker_reduces_an_injected_mismatch_to_one_node(monkeypatch, tmp_path):
    monkeypatch.setenv("GLOW_FUZZ_INJECT", "corrupt:Sigmoid")
    for i in range(300):
        case = generate(4, i, ops=["Sigmoid", "Add", "Mul", "Concat", "Transpose"], max_nodes=7)
        if "Sigmoid" in case.ops and len(case.ops) >= 5:
            break
    r = Runner("reference-ir", use_ort=False)
    try:
        v = r.run(case.model.SerializeToString(), case.feeds)
        assert v["category"] == "mismatch", v

        def fails(m, f):
            return r.run(m, f)["category"] == "mismatch"
        model, feeds = shrink(case.model, case.feeds, fails, r)
    finally:
        r.close()
    assert [n.op_type for n in model.graph.node] == ["Sigmoid"], (case.ops, model.graph.node)
    onnx.checker.check_model(model)


def test_cli_saves_the_minimal_case_and_exits_1(monkeypatch, tmp_path):
    env = dict(os.environ, GLOW_FUZZ_INJECT="corrupt:Tanh")
    r = subprocess.run([sys.executable, "-m", "glow.testing.fuzz", "--backend", "reference-ir", "--count", "6",
                        "--seed", "0", "--ops", "Tanh,Add,Relu", "--max-nodes", "4", "--no-ort", "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    saved = sorted(p for p in os.listdir(tmp_path) if p.endswith(".onnx"))
    assert saved and all(p.startswith("reference-ir-seed0-") for p in saved), r.stdout
    m = onnx.load(tmp_path / saved[0])
    assert [n.op_type for n in m.graph.node] == ["Tanh"]
    assert (tmp_path / saved[0].replace(".onnx", ".npz")).exists()
    assert "mismatch" in (tmp_path / saved[0].replace(".onnx", ".txt")).read_text()
    bad = subprocess.run([sys.executable, "-m", "glow.testing.fuzz", "--backend", "cpu", "--ops", "NoSuchOp"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "NoSuchOp" in bad.stderr


CI_SLICE = [("reference", None, 30), ("cpu", None, 30), ("cpu", "floor", 15), ("opencl", None, 30)]


@pytest.mark.parametrize("backend,native,count", CI_SLICE)
def test_fuzz_slice(backend, native, count, tmp_path):
    """The CI slice: a bounded number of small random graphs, no crash, hang or mismatch."""
    why = backend_unavailable(backend)
    if why:
        pytest.skip(why)
    s = fuzz(backend, count, seed=2026, native=native, max_nodes=5, out=str(tmp_path), timeout=120)
    from glow.testing.fuzz import report
    report(s)
    assert s["graphs"] == count
    assert not s["failures"], [(f["index"], f["category"], f["detail"], f.get("saved")) for f in s["failures"]]
