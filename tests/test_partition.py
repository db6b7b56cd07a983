"""The partitioner: devices, feasibility, cost, placement (pins, bans, strict, memory), cut, report."""

import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import glow
import numpy as np
import onnx
import pytest
from glow import Device, plugins
from glow.partition import PartitionError, partition, resolve_devices
from glow.partition.constraints import allowed_matrix
from glow.partition.cost import CostTable, node_flops
from glow.partition.search import Problem, priority, refine, viterbi
from glow.partition.support import feasibility
from glow.passes import optimize_graph
from glow.testing.models import folder_cases, light_models
from glow.verify import verify_graph
from helpers import EXAMPLE_MODEL
from multidevice import REPO_TOML, branchy_model, chain_model, scripted_targets, use_repo_devices

ACCEL_OPS = {"MatMul", "Conv", "Relu"}


@pytest.fixture(scope="module", autouse=True)
def repo_devices():
    use_repo_devices()
    yield
    plugins.reload()


def graph_of(model):
    return optimize_graph(glow.load_onnx(model))


def problem_for(graph, targets):
    feas = feasibility(graph, targets)
    allowed = allowed_matrix(graph, targets, feas, {}, {}, False)
    return Problem(CostTable.build(graph, targets, allowed), allowed)


# -- devices ---------------------------------------------------------------------------------------
def test_logical_devices_come_from_plugins_toml():
    accel, ref0 = (t.device for t in resolve_devices(["accel", "ref0"]))
    assert accel.backend == "reference" and accel.supported_ops == frozenset(ACCEL_OPS)
    assert accel.kind == "accelerator" and accel.peak_gflops == 500.0 and accel.transfer_gbs == 8.0
    assert ref0.memory_bytes == 64 * 2**20 and ref0.supported_ops is None


def test_device_specs_caps_aliases_and_repeats():
    ts = resolve_devices(["reference@40MiB", "reference@512KiB", "r9=reference", Device("reference", "mine")])
    assert [t.name for t in ts] == ["reference", "reference#1", "r9", "mine"]
    assert ts[0].memory_bytes == 40 * 2**20 and ts[1].memory_bytes == 512 * 1024
    assert ts[2].memory_bytes is None


@pytest.mark.parametrize("spec, needle", [("nosuch", "unknown device 'nosuch'"),
                                          ("reference:gpu7", "has no device 'gpu7'"),
                                          ("reference@lots", "bad memory size")])
def test_bad_device_specs_say_why(spec, needle):
    with pytest.raises(glow.GlowError, match=needle):
        resolve_devices([spec])


def test_bad_logical_device_entries_are_named():
    reg = plugins.reload({"devices": [{"name": "bad", "backend": "reference", "memory_mb": -1},
                                      {"name": "ops", "backend": "reference", "ops": "Conv"}]})
    try:
        with pytest.raises(glow.GlowError, match="'bad': memory_mb must be a positive number"):
            reg.logical_device("bad")
        with pytest.raises(glow.GlowError, match="'ops': ops must be a list"):
            reg.logical_device("ops")
    finally:
        use_repo_devices()


# -- feasibility and cost --------------------------------------------------------------------------
def test_simulated_accelerator_runs_its_ops_and_what_lowers_to_them():
    g = graph_of(branchy_model())
    feas = feasibility(g, resolve_devices(["accel", "reference"]))
    for node in g.nodes:
        assert feas[node.name]["reference"] is None
        runs_on_accel = feas[node.name]["accel"] is None
        assert runs_on_accel == (node.op.name in ACCEL_OPS), (node.name, feas[node.name]["accel"])
    assert "accel cannot run" in feas["softmax"]["accel"] and "Exp" in feas["softmax"]["accel"]
    # A bias-free Gemm lowers to MatMul alone, so the accelerator takes it.
    from helpers import make_model
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    gemm = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="g")],
                      [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT, [3, 5])], [w])
    assert feasibility(graph_of(gemm), resolve_devices(["accel"]))["g"]["accel"] is None


def test_flop_estimates_are_exact_for_conv_and_matmul():
    g = graph_of(branchy_model(channels=16, size=32))
    conv1 = next(n for n in g.nodes if n.name == "conv1")
    assert node_flops(conv1) == 2 * (16 * 32 * 32) * (3 * 3 * 3)
    c = graph_of(chain_model(n=1, width=64))
    mm = next(n for n in c.nodes if n.op.name == "MatMul")
    assert node_flops(mm) == 2 * 64 * 64


# -- the search ------------------------------------------------------------------------------------
def brute_force(p):
    options = [np.flatnonzero(p.allowed[i]) for i in range(p.n)]
    best = min((p.total(np.array(a)), a) for a in itertools.product(*options))
    return best[0]


@pytest.mark.parametrize("model, priority_is_optimal", [
    (chain_model(n=3, width=512), False), (branchy_model(channels=32, size=32), True),
    (branchy_model(channels=4, size=8), False)], ids=["chain", "branchy", "branchy-small"])
def test_search_finds_the_optimum_and_beats_priority(model, priority_is_optimal):
    g = graph_of(model)
    p = problem_for(g, resolve_devices(["accel", "reference"]))
    assert sum(p.allowed.sum(axis=1) > 1) >= 3  # a real choice to make
    ours = p.total(refine(p, viterbi(p)))
    assert ours == pytest.approx(brute_force(p), rel=1e-9)
    assert (ours == p.total(priority(p))) if priority_is_optimal else (ours < p.total(priority(p)))


def test_dp_prices_transfers_a_lone_cheap_op_stays_with_its_neighbours():
    pl = partition(chain_model(n=3, width=512), ["accel", "reference"])
    # MatMuls are far cheaper on the accelerator; the Adds cannot go there. A Relu between an Add
    # and the next MatMul rides along to the accelerator (the tensor crosses once either way); the
    # last Relu stays on the host: on the accelerator it would cost one more transfer.
    for i in range(3):
        assert pl.device_of[f"mm{i}"] == "accel"
        assert pl.device_of[f"add{i}"] == "reference" and pl.reasons[f"add{i}"]["kind"] == "only"
    assert [pl.device_of[f"relu{i}"] for i in range(3)] == ["accel", "accel", "reference"]
    assert all(pl.reasons[f"relu{i}"]["kind"] == "cost" for i in range(3))
    assert "cheaper by" in pl.reasons["mm0"]["detail"]
    assert len([t for t in pl.transfers if t.src is not None and t.dst is not None]) == 5


def test_throughput_objective_balances_two_stages():
    g = graph_of(chain_model(n=8, width=256))
    targets, _ = scripted_targets(2)
    from glow.partition import place
    pl = place(g, targets, objective="throughput")
    assert len(pl.partitions) == 2 and [p.stage for p in pl.partitions] == [0, 1]
    times = [p.est_time_s for p in pl.partitions]
    assert max(times) < 0.6 * sum(times)
    assert {r["kind"] for r in pl.reasons.values()} <= {"balance", "cost"}
    assert pl.est_bottleneck_s < 0.6 * place(g, targets).est_bottleneck_s


# -- pins, bans, strict ----------------------------------------------------------------------------
def test_pins_by_name_op_and_glob_are_honoured():
    pl = partition(branchy_model(), ["accel", "reference"],
                   pins={"conv1": "reference", "Relu": "reference", "conv*": "accel"})
    assert pl.device_of["conv1"] == "reference"  # the node's name beats the glob
    assert all(pl.device_of[n] == "reference" for n in ("relu1", "relu2", "relu3"))
    assert pl.device_of["conv2"] == "accel" and pl.device_of["conv3"] == "accel"
    assert pl.reasons["conv1"] == {"kind": "pinned", "detail": "pinned by 'conv1'", "fallback": False}
    assert pl.reasons["relu2"]["detail"] == "pinned by 'Relu'"


@pytest.mark.parametrize("pins, needle", [
    ({"softmax": "accel"}, "'softmax' (Softmax) is pinned to accel by 'softmax', but accel cannot run"),
    ({"nosuchnode": "accel"}, "pin 'nosuchnode' matches no node"),
    ({"conv1": "gpu"}, "unknown device 'gpu'"),
])
def test_bad_pins_are_errors_that_say_why(pins, needle):
    with pytest.raises(PartitionError) as e:
        partition(branchy_model(), ["accel", "reference"], pins=pins)
    assert needle in str(e.value)


def test_bans_are_honoured_and_a_node_left_without_device_is_named():
    pl = partition(branchy_model(channels=32), ["accel", "reference"], bans={"conv2": "accel"})
    assert pl.device_of["conv2"] == "reference" and pl.device_of["conv3"] == "accel"
    with pytest.raises(PartitionError, match=r"'pool_a' \(MaxPool\) can run on no allowed device"):
        partition(branchy_model(), ["accel", "reference"], bans={"pool_a": "reference"})


def test_strict_mode_names_every_node_that_would_fall_back():
    with pytest.raises(PartitionError) as e:
        partition(branchy_model(), ["accel", "reference"], strict=True)
    msg = str(e.value)
    assert "strict placement: 7 node(s) cannot run on the primary device accel" in msg
    for name in ("pool_a", "pool_b", "concat", "gap", "flatten/Reshape", "fc", "softmax"):
        assert f"'{name}'" in msg
    for name in ("conv1", "relu1", "conv2"):
        assert f"'{name}'" not in msg


def test_strict_mode_passes_when_the_fallbacks_are_pinned():
    pins = {n: "reference" for n in ("MaxPool", "Concat", "GlobalAveragePool", "flatten*", "Gemm", "Softmax")}
    pl = partition(branchy_model(), ["accel", "reference"], strict=True, pins=pins)
    assert pl.fallbacks() == []


def test_report_flags_fallbacks_without_strict():
    pl = partition(branchy_model(channels=32), ["accel", "reference"])
    assert sorted(pl.fallbacks()) == sorted(["pool_a", "pool_b", "concat", "gap", "flatten/Reshape", "fc",
                                             "softmax"])
    assert "7 node(s) fell back from accel" in pl.to_text()


# -- memory ----------------------------------------------------------------------------------------
RESNET = next(c for c in light_models() if c.name == "light_resnet50")
CAPS = ["r0=reference@40MiB", "r1=reference@40MiB", "r2=reference@40MiB"]


def assert_within_caps(pl):
    for p in pl.partitions:
        cap = p.target.memory_bytes
        assert cap is None or p.memory_bytes <= cap, (p.name, p.memory_bytes, cap)
    for u in pl.usage:
        assert u["cap"] is None or u["total"] <= u["cap"], u


def test_memory_caps_force_three_partitions_on_resnet50():
    pl = partition(RESNET.model_path, CAPS)
    assert len(pl.partitions) >= 3
    assert len({p.target.name for p in pl.partitions}) == 3
    assert_within_caps(pl)
    assert sum(len(p.nodes) for p in pl.partitions) == len(pl.graph.nodes)


def test_a_model_too_big_for_all_devices_is_an_error():
    with pytest.raises(PartitionError, match=r"weights \(97.4 MiB\) exceed the memory of all devices"):
        partition(RESNET.model_path, ["reference@30MiB", "reference@30MiB"])


def test_memory_reasons_appear_when_a_cheaper_device_is_full():
    g = graph_of(chain_model(n=6, width=512))  # 6 x 1 MiB of weights
    pl = partition(g, ["small=accel@2.5MiB", "reference"], optimize=False)
    on_accel = [n for n, d in pl.device_of.items() if d == "small" and n.startswith("mm")]
    assert len(on_accel) == 2
    kinds = {pl.reasons[f"mm{i}"]["kind"] for i in range(6) if f"mm{i}" not in on_accel}
    assert kinds == {"memory"}
    assert_within_caps(pl)


# -- the cut ---------------------------------------------------------------------------------------
def test_partitions_form_a_dag_of_valid_subgraphs():
    pl = partition(branchy_model(channels=32), ["accel", "reference"])
    seen = set()
    for p in pl.partitions:
        verify_graph(p.graph)
        assert all(q < p.index and pl.partitions[q].stage < p.stage for q in p.parents)
        assert all(pl.device_of[n.name] == p.target.name for n in p.nodes)
        seen |= {n.name for n in p.nodes}
    assert seen == {n.name for n in pl.graph.nodes}
    crossing = [t for t in pl.transfers if t.src is not None and t.dst is not None]
    assert crossing and all(pl.partitions[t.src].target is not pl.partitions[t.dst].target for t in crossing)


# -- the report ------------------------------------------------------------------------------------
def test_report_json_text_and_dot():
    pl = partition(branchy_model(channels=32), ["accel", "reference"])
    js = json.loads(json.dumps(pl.to_json()))
    assert {n["name"] for n in js["nodes"]} == set(pl.device_of)
    assert all(n["kind"] in ("only", "cost", "memory", "pinned", "tie") for n in js["nodes"])
    assert js["partitions"][0]["device"] in ("accel", "reference")
    assert all(t["bytes"] > 0 for t in js["transfers"])
    text = pl.to_text()
    assert "conv1" in text and "why (" in text and "transfers between partitions" in text
    dot = pl.to_dot()
    assert dot.count("subgraph cluster_") == len(pl.partitions) + 1  # + the legend


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
@pytest.mark.parametrize("ext", ["svg", "png", "json", "dot", "txt"])
def test_report_files(tmp_path, ext):
    pl = partition(EXAMPLE_MODEL, ["accel", "reference"])
    path = tmp_path / f"placement.{ext}"
    pl.write(str(path))
    data = path.read_bytes()
    assert len(data) > 100
    if ext == "svg":
        assert b"<svg" in data and b"p0 on accel" in data


# -- all models on accel + reference: placement only (the runtime tests run them) -----------------
@pytest.mark.parametrize("case", folder_cases("pytorch-converted") + folder_cases("pytorch-operator"),
                         ids=lambda c: c.name)
def test_pytorch_suites_place_on_accel_and_reference(case):
    pl = partition(case.model_path, ["accel", "reference"], objective="priority")
    for name, r in pl.reasons.items():
        if pl.device_of[name] == "reference":
            assert r["fallback"] and r["kind"] == "only", (name, r)


# -- CLI -------------------------------------------------------------------------------------------
def cli(*args):
    env = {**os.environ, "GLOW_PLUGINS_TOML": REPO_TOML}
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (the SVG is dot's)")
def test_cli_partition_prints_the_report_and_writes_svg(tmp_path):
    out = tmp_path / "p.svg"
    r = cli("partition", EXAMPLE_MODEL, "--devices", "accel,reference", "--pin", "relu2=reference",
            "--report", str(out))
    assert r.returncode == 0, r.stderr
    assert "relu2" in r.stdout and "pinned by 'relu2'" in r.stdout and "[fallback]" in r.stdout
    assert out.read_bytes().startswith(b"<?xml") or b"<svg" in out.read_bytes()


def test_cli_partition_json(tmp_path):
    r = cli("partition", EXAMPLE_MODEL, "--devices", "accel,reference", "--json", "--ban", "Conv=accel")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert all(n["device"] == "reference" for n in js["nodes"] if n["op"] == "Conv")


def test_cli_strict_fails_with_one_line_naming_the_nodes():
    r = cli("partition", EXAMPLE_MODEL, "--devices", "accel,reference", "--strict")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line and "strict placement: 5 node(s)" in line
    for name in ("pool1", "gap", "fc", "softmax"):
        assert f"'{name}'" in line


@pytest.mark.parametrize("args, needle", [
    (["--devices", "accel,nosuch"], "unknown device 'nosuch'"),
    (["--devices", "accel", "--pin", "conv1"], "expected NODE_OR_OP=DEVICE"),
    (["--devices", "accel,reference", "--objective", "fastest"], "invalid choice"),
])
def test_cli_partition_bad_input(args, needle):
    r = cli("partition", EXAMPLE_MODEL, *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_cli_run_with_devices_equals_single_device(tmp_path):
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    assert cli("run", EXAMPLE_MODEL, "--backend", "reference", "--outputs", str(one)).returncode == 0
    r = cli("run", EXAMPLE_MODEL, "--devices", "accel,reference", "--outputs", str(two))
    assert r.returncode == 0, r.stderr
    assert "partitioned over accel, reference" in r.stdout
    with np.load(one) as a, np.load(two) as b:
        np.testing.assert_allclose(b["probs"], a["probs"], rtol=1e-5)


def test_onnx_model_proto_and_graph_are_accepted():
    m = onnx.load(EXAMPLE_MODEL)
    assert partition(m, ["reference"]).device_of == partition(glow.load_onnx(m), ["reference"]).device_of


# -- devices beyond the repository (issue 18) --------------------------------------------------
def _glow_outside(tmp_path, *args):
    """`glow ...` as a user runs it from their own folder: no ./plugins.toml, no GLOW_PLUGINS_TOML."""
    env = {k: v for k, v in os.environ.items() if k != "GLOW_PLUGINS_TOML"}
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_shipped_devices_are_the_repository_ones():
    """The package's default_plugins.toml declares the example devices the README uses (the same
    [[devices]] as the repository's plugins.toml), so README commands work from any folder."""
    import tomllib

    shipped = os.path.join(os.path.dirname(plugins.__file__), "default_plugins.toml")
    with open(shipped, "rb") as f, open(REPO_TOML, "rb") as g:
        assert tomllib.load(f)["devices"] == tomllib.load(g)["devices"]


def test_readme_device_commands_work_outside_the_repo(tmp_path):
    from helpers import backend_unavailable

    model = os.path.abspath(EXAMPLE_MODEL)
    first = "cpu" if backend_unavailable("cpu") is None else "reference"
    r = _glow_outside(tmp_path, "partition", model, "--devices", f"{first},accel", "--pin", "Conv=accel",
                      "--report", "out.html")
    assert r.returncode == 0, r.stderr
    assert "accel" in r.stdout and (tmp_path / "out.html").exists()
    if backend_unavailable("opencl") is None:
        r = _glow_outside(tmp_path, "run", model, "--devices", "opencl,reference")
        assert r.returncode == 0, r.stderr


def test_device_config_adds_devices(tmp_path):
    model = os.path.abspath(EXAMPLE_MODEL)
    (tmp_path / "mine.toml").write_text('[[devices]]\nname = "mybox"\nbackend = "reference"\n'
                                        'ops = ["Conv"]\nmemory_mb = 32\n')
    r = _glow_outside(tmp_path, "partition", model, "--devices", "reference,mybox")
    assert r.returncode != 0 and "mybox" in r.stderr
    r = _glow_outside(tmp_path, "partition", model, "--devices", "reference,mybox",
                      "--device-config", "mine.toml", "--pin", "Conv=mybox")
    assert r.returncode == 0, r.stderr
    assert "mybox" in r.stdout
    r = _glow_outside(tmp_path, "run", model, "--devices", "reference,mybox", "--device-config", "mine.toml")
    assert r.returncode == 0, r.stderr


# -- a placement report that scales (issue 18) ---------------------------------------------------
def _dot_boxes(dot_text):
    """Graphviz's own layout of `dot_text` (`dot -Tplain`): {node id: (x, y, w, h)}."""
    out = subprocess.run([shutil.which("dot"), "-Tplain"], input=dot_text, capture_output=True,
                         text=True, check=True).stdout
    boxes = {}
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "node":
            boxes[f[1]] = tuple(float(v) for v in f[2:6])
    return boxes


def _big_placement():
    """A chain of 40 MatMul/Add/Relu blocks over reference + accel (accel cannot Add): past
    NODE_VIEW_LIMIT nodes, in many partitions."""
    return partition(chain_model(n=40, width=8), ["reference", "accel"], pins={"MatMul": "accel"})


def test_big_placement_is_drawn_as_partitions_and_small_as_nodes():
    from glow.partition.report import NODE_VIEW_LIMIT

    pl = _big_placement()
    assert len(pl.graph.nodes) > NODE_VIEW_LIMIT and len(pl.partitions) > 10
    dot = pl.to_dot()
    # one box per partition (plus inputs/outputs and the legend), none per graph node
    for p in pl.partitions:
        assert f"  p{p.index} [" in dot
    assert "n0 [" not in dot
    # transfers are the edges, labelled with their bytes
    crossing = [t for t in pl.transfers if t.src is not None and t.dst is not None]
    assert crossing and all(f"p{t.src} -> p{t.dst} [label=" in dot for t in crossing)
    small = partition(chain_model(n=3, width=8), ["reference", "accel"], pins={"MatMul": "accel"})
    assert "n0 [" in small.to_dot() and "n0 [" in pl.to_dot(view="nodes")
    with pytest.raises(glow.GlowError, match="view"):
        pl.to_dot(view="sideways")


def test_the_picture_counts_in_words():
    one = partition(chain_model(n=1, width=8), ["reference"])
    assert len(one.partitions) == 1
    title = one.to_dot(view="partitions").replace("\\n", " ")
    assert "in 1 partition;" in title and "1 partitions" not in title and "0 transfers" in title


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz dot")
@pytest.mark.parametrize("view", ["nodes", "partitions"])
def test_report_boxes_do_not_overlap_and_labels_are_wrapped(view):
    pl = _big_placement()
    dot = pl.to_dot(view=view)
    # box and edge labels are wrapped (the picture's title, one line across the top, may be wider)
    boxed = re.sub(r'\n  label="(?:[^"\\]|\\.)*";\n}\n$', "", dot)
    assert boxed != dot
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', boxed)
    assert labels and max(len(line) for lab in labels for line in lab.split("\n")) <= 45
    boxes = list(_dot_boxes(dot).values())
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert abs(x - x2) >= (w + w2) / 2 - 1e-3 or abs(y - y2) >= (h + h2) / 2 - 1e-3


def test_html_report_says_where_and_why_for_every_node(tmp_path):
    pl = partition(EXAMPLE_MODEL, ["accel", "reference"], pins={"relu2": "reference"})
    out = tmp_path / "p.html"
    pl.write(str(out))
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    for n in pl.graph.nodes:
        import html

        r = pl.reasons[n.name]
        assert (f"<tr><td>{html.escape(n.name)}</td><td>{n.op.name}</td>" in page), n.name
        assert html.escape(r["detail"]) in page
    assert "pinned by &#x27;relu2&#x27;" in page
    assert ("<svg" in page) == (shutil.which("dot") is not None)
