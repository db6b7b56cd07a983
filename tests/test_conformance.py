"""The conformance kit (glow.testing.conformance, `glow conformance`, the pytest entry): what it runs,
how it classifies each check, and what it reports."""

import json
import os
import subprocess
import sys
import textwrap

import glow
import pytest
from glow import plugins
from glow.testing.conformance import Kit, read_known_failures, run_conformance
from test_plugins import OLDAPI, make_dist

#: A backend claiming Relu and Identity in float32 whose Relu is wrong (it returns |x|).
WRONG_RELU = '''
import glow
import numpy as np


class WrongRelu(glow.Backend):
    name = "wrongrelu"

    def supports(self, node):
        return node.op.name in ("Relu", "Identity") and all(
            getattr(getattr(v.type, "dtype", None), "name", None) == "float32" for v in node.inputs)

    def native_ops(self):
        return ["Identity", "Relu"]

    def compile(self, graph, options):
        return Exe(graph)


class Exe(glow.Executable):
    def _run(self, feeds):
        env = dict(feeds)
        value = lambda v: v.data if v.is_constant else env[v.name]
        for n in self.graph.nodes:
            x = value(n.inputs[0])
            env[n.outputs[0].name] = np.asarray(np.abs(x) if n.op.name == "Relu" else x)
        return {v.name: value(v) for v in self.graph.outputs}


@glow.hookimpl
def glow_backends():
    return [WrongRelu()]
'''


@pytest.fixture
def wrong(tmp_path, monkeypatch):
    (tmp_path / "wrongrelu_plugin.py").write_text(textwrap.dedent(WRONG_RELU))
    monkeypatch.syspath_prepend(str(tmp_path))
    toml = tmp_path / "plugins.toml"
    toml.write_text('[plugins]\nmodules = ["wrongrelu_plugin"]\n')
    plugins.reload({"plugins": {"modules": ["wrongrelu_plugin"]}})
    env = dict(os.environ, GLOW_PLUGINS_TOML=str(toml),
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    yield env
    plugins.reload()


def cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)


# -- records ---------------------------------------------------------------------------------------
def test_reference_passes_the_records_of_what_it_claims():
    report = run_conformance("reference", sections=["records"], pattern=r"^(Relu|Conv|MatMul|Cast)-")
    assert report.ok, report.to_text()
    manifest = {row["op"]: row for row in report.manifest()}
    assert {"Relu", "Conv", "MatMul", "Cast"} <= set(manifest)
    # element types no record covers are added as variants of the op's records
    assert {"float32", "float64", "float16", "bfloat16", "int32", "int64"} <= set(manifest["MatMul"]["dtypes"])
    assert any(r.check.id.startswith("MatMul-") and "-as-" in r.check.id for r in report.results)
    text = report.to_text()
    assert "Support manifest for 'reference'" in text and "conformance of 'reference': PASS" in text


def test_wrong_kernels_fail_with_the_first_mismatch(wrong):
    report = run_conformance("wrongrelu", sections=["records"])
    by_op = {row["op"]: row for row in report.manifest()}
    assert set(by_op) == {"Relu", "Identity"}
    assert by_op["Identity"]["pass"] and not by_op["Relu"]["pass"]
    assert set(by_op["Relu"]["dtypes"]) == {"float32"}  # float64/int records exist but are not claimed
    fails = {r.check.id: r.detail for r in report.results if r.status == "fail"}
    assert "Relu-2x3" in fails and "values differ" in fails["Relu-2x3"]
    assert "Relu-0x3" not in fails  # empty: nothing to get wrong
    assert not report.ok and "conformance of 'wrongrelu': FAIL" in report.to_text()
    assert "Most common failures" in report.to_text()


def test_kernels_not_written_are_grouped_in_the_order_that_passes_the_most_checks():
    from glow.testing.conformance import Check, Result
    from glow.testing.conformance_report import Report

    def held(i, missing, needs):
        return Result(Check("records", f"c{i}", "X"), "fail", f"x: the kernel for '{missing}' is not written yet",
                      missing=missing, needs=needs)

    results = [held(1, "A", ("A", "Identity")), held(2, "B", ("A", "B")), held(3, "B", ("B",)), held(4, "B", ("B",)),
               held(5, "C", ("A", "C")), Result(Check("records", "c6", "Y"), "pass")]
    report = Report("x", results)
    # B alone passes c3, c4; then A passes c1 and c2; C last passes c5
    assert report.not_written() == [{"op": "B", "unlocks": 2, "needed_by": 3},
                                    {"op": "A", "unlocks": 2, "needed_by": 3},
                                    {"op": "C", "unlocks": 1, "needed_by": 1}]
    text = report.to_text()
    assert "3 kernel(s) not written yet (5 check(s) fail for want of them): B, A, C" in text
    assert "Most common failures" not in text and "Failures (" not in text
    assert report.to_json()["not_written"][0]["op"] == "B"


def test_failures_of_one_kind_are_counted_together_whatever_the_graph_is_called():
    from glow.testing.conformance import Check, Result
    from glow.testing.conformance_report import Report

    results = [Result(Check("nodes", f"test_{i}", "Abs"), "fail", f"run: InternalError: glow bug: running graph "
                      f"'test_{i}' on X failed in node 'n{i}' (op Abs): ValueError: boom") for i in range(3)]
    text = Report("x", results).to_text()
    assert "    3 x run: InternalError: glow bug: running graph '…' on X failed in node '…'" in text


def test_known_failures_are_expected_and_must_keep_failing(wrong, tmp_path):
    path = tmp_path / "known.txt"
    path.write_text("Relu-2x3  # abs instead of max\nRelu-0x3  # listed but passes\n")
    known = read_known_failures(str(path))
    report = run_conformance("wrongrelu", sections=["records"], pattern=r"^Relu-(2x3|0x3)$", known_failures=known)
    status = {r.check.id: (r.status, r.detail) for r in report.results}
    assert status["Relu-2x3"][0] == "known" and "abs instead of max" in status["Relu-2x3"][1]
    assert status["Relu-0x3"] == ("fail", "listed as a known failure (listed but passes) but passes: "
                                          "remove it from the list")
    (tmp_path / "bad.txt").write_text("Relu-2x3\n")
    with pytest.raises(glow.GlowError, match="has no reason"):
        read_known_failures(str(tmp_path / "bad.txt"))


# -- node cases and models -------------------------------------------------------------------------
def test_node_cases_it_cannot_run_alone_are_skipped(wrong):
    report = run_conformance("wrongrelu", sections=["nodes"], pattern=r"^test_(relu|identity|softmax_example)$")
    status = {r.check.id: (r.status, r.detail) for r in report.results}
    assert status["test_identity"][0] == "pass"
    assert status["test_relu"][0] == "fail" and "values differ" in status["test_relu"][1]
    assert status["test_softmax_example"][0] == "skip"
    assert status["test_softmax_example"][1].startswith("needs another device: cannot run")
    assert report.table()["nodes"]["skipped"] == {"needs another device": 1}


def test_models_need_a_fallback_device_when_the_backend_cannot_run_them(wrong):
    report = run_conformance("wrongrelu", sections=["models"], pattern="squeezenet", fallback=None)
    (r,) = report.results
    assert r.status == "skip" and "no fallback device" in r.detail


def test_strict_allows_no_fallback_device(wrong):
    report = run_conformance("wrongrelu", sections=["models"], pattern="squeezenet", strict=True)
    (r,) = report.results
    assert r.status == "fail" and r.detail.startswith("needs host fallback (cannot run") and "strict" in r.detail


def test_all_checks_every_available_backend_in_one_table(wrong, tmp_path):
    r = cli("conformance", "--all", "--sections", "records", "--filter", "^Relu-2x3$", env=wrong, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # wrongrelu fails
    table = r.stdout[r.stdout.index("Conformance of every available backend"):].splitlines()
    rows = {line.split()[0]: line.split() for line in table[2:]}
    assert rows["reference"] == ["reference", "1/1", "1/1", "-", "-", "0", "PASS"]
    assert rows["wrongrelu"][-1] == "FAIL" and rows["wrongrelu"][1:3] == ["0/1", "0/1"]
    assert "ray            not checked: remote devices" in r.stdout
    r = cli("conformance", "--all", "--sections", "records", "--filter", "^Identity-2d$", "--json", env=wrong,
            cwd=tmp_path)
    assert r.returncode == 0 and {x["backend"] for x in json.loads(r.stdout)} >= {"reference", "wrongrelu"}
    r = cli("conformance", "--all", "--backend", "reference", env=wrong, cwd=tmp_path)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
    r = cli("conformance", "--backend", "reference", "--strict", "--fallback", "cpu", env=wrong, cwd=tmp_path)
    assert r.returncode == 2 and "no --fallback with it" in r.stderr


def test_unknown_sections_and_backends_are_bad_input(wrong):
    with pytest.raises(glow.GlowError, match="unknown conformance section"):
        Kit("wrongrelu").collect(["records", "kernels"])
    with pytest.raises(glow.BackendError, match="unknown backend 'nosuch'"):
        Kit("nosuch")


# -- the command line and the pytest entry ---------------------------------------------------------
def test_cli_exit_codes_and_json(wrong, tmp_path):
    r = cli("conformance", "--backend", "wrongrelu", "--sections", "records", "--json", env=wrong, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert not report["ok"] and report["table"]["records"]["fail"] > 0
    assert {row["op"] for row in report["manifest"]} == {"Identity", "Relu"}
    r = cli("conformance", "--backend", "wrongrelu", "--sections", "records", "--filter", "^Identity-",
            env=wrong, cwd=tmp_path)
    assert r.returncode == 0 and "conformance of 'wrongrelu': PASS" in r.stdout, r.stdout + r.stderr
    r = cli("conformance", "--backend", "wrongrelu", "--sections", "kernels", env=wrong, cwd=tmp_path)
    assert r.returncode == 2 and "unknown conformance section" in r.stderr
    r = cli("conformance", "--backend", "wrongrelu", "--known-failures", "nope.txt", env=wrong, cwd=tmp_path)
    assert r.returncode == 2 and "nope.txt" in r.stderr


def test_pytest_entry_runs_the_kit_as_tests(wrong, tmp_path):
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "glow.testing",
            "--glow-sections", "records"]
    r = subprocess.run(base + ["--glow-backend", "reference", "-k", "Relu-2x3 or Conv-basic"], cwd=tmp_path,
                       env=wrong, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "glow conformance: reference" in r.stdout and "conformance of 'reference': PASS" in r.stdout
    r = subprocess.run(base + ["--glow-backend", "wrongrelu", "-k", "Relu-2x3 or Identity"], cwd=tmp_path,
                       env=wrong, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "records/Relu-2x3" in r.stdout and "values differ" in r.stdout
    # several backends (or "all"), strict: one test id per backend and check, and one table at the end
    r = subprocess.run(base[:-1] + ["models", "--glow-backend", "reference,wrongrelu", "--glow-strict",
                                    "-k", "squeezenet"], cwd=tmp_path, env=wrong, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "wrongrelu/models/" in r.stdout and "needs host fallback" in r.stdout
    assert "glow conformance: every backend" in r.stdout


def test_incompatible_plugin_is_listed_unavailable_and_refused_by_name(tmp_path):
    make_dist(tmp_path, "glow_backend_oldapi", "oldapi_plugin", OLDAPI)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GLOW_PLUGINS_TOML", None)
    r = cli("backends", env=env, cwd=tmp_path)
    assert r.returncode == 0
    assert "oldapi       unavailable: built for backend API 0, glow has 2: this glow runs plugins" in r.stdout
    r = cli("conformance", "--backend", "oldapi", env=env, cwd=tmp_path)
    assert r.returncode == 2
    assert "backend 'oldapi' is unavailable: built for backend API 0, glow has 2" in r.stderr


def test_jobs_run_the_same_checks_in_processes():
    kw = dict(sections=["records", "nodes"], pattern=r"^(Relu-|Conv-(basic|1d)|test_relu$|test_conv_with)")
    serial = run_conformance("reference", **kw)
    parallel = run_conformance("reference", jobs=2, **kw)
    assert [(r.check.id, r.status) for r in serial.results] == [(r.check.id, r.status) for r in parallel.results]
    assert parallel.ok and len(parallel.results) > 10
