"""Every valid model runs by default: what a backend cannot run goes to the host (glow.partition.host).

A detector from the TorchScript exporter (torchvision's SSDlite, tests/data/exporters) has a
NonZero per class, a TopK whose k comes from data, an If and a NonMaxSuppression: the cpu and
opencl backends run its network and the host its post-processing, equal to onnxruntime. Placement
asks the question lowering will ask, so no partition fails to compile at run time; an If whose
branches a device runs stays on that device (glow.partition.control).
"""

import os
import subprocess
import sys
import warnings

import glow
import numpy as np
import onnx
import pytest
from helpers import backend_unavailable, make_model
from onnx import TensorProto as T
from onnx import helper as h

HERE = os.path.dirname(__file__)
SSD = os.path.join(HERE, "data", "exporters", "ssdlite_small.onnx")
BACKENDS = [pytest.param(b, marks=pytest.mark.skipif(backend_unavailable(b) is not None,
                                                    reason=f"{b} unavailable: {backend_unavailable(b)}"))
            for b in ("cpu", "opencl")]


def _ssd_expected():
    d = np.load(SSD.replace(".onnx", ".npz"))
    return [({"images": d[f"input{t}:images"]}, {n: d[f"output{t}:{n}"] for n in ("boxes", "scores", "labels")})
            for t in ("", "2")]


def _assert_detections(got, want):
    """onnxruntime's detections (from scripts/make_exporter_models.py): boxes in pixels."""
    assert got["labels"].shape == want["labels"].shape and got["labels"].shape[0] > 0
    np.testing.assert_array_equal(got["labels"], want["labels"])
    np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["boxes"], want["boxes"], rtol=0, atol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_detector_runs_by_default_with_its_post_processing_on_the_host(backend):
    with pytest.warns(glow.GlowWarning, match=rf"backend '{backend}' cannot run .*NonZero \(x4\).* on the host"):
        exe = glow.compile(SSD, backend=backend)
    on_host = {n.op.name for n in exe.placement.graph.nodes if exe.placement.device_of[n.name] == "reference"}
    assert {"NonZero", "NonMaxSuppression" if "NonMaxSuppression" in on_host else "If"} <= on_host
    assert "Conv" not in on_host  # the network itself runs on the backend
    for feeds, want in _ssd_expected():
        _assert_detections(exe.run(feeds), want)
    with warnings.catch_warnings():  # compiled twice in one process: the same answers
        warnings.simplefilter("ignore", glow.GlowWarning)
        again = glow.compile(SSD, backend=backend)
    feeds, want = _ssd_expected()[1]
    _assert_detections(again.run(feeds), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_detector_on_named_devices(backend):
    exe = glow.compile(SSD, devices=[backend, "reference"])
    for feeds, want in _ssd_expected():
        _assert_detections(exe.run(feeds), want)


def test_strict_refuses_naming_every_op():
    with pytest.raises(glow.LoweringError, match=r"If \(x1\), NonZero \(x4\)") as e:
        glow.compile(SSD, backend="cpu", strict=True)
    assert e.value.ops == {"If": 1, "NonZero": 4}


# -- the same structure, built with onnx.helper --------------------------------------------------

def detector(kmax=5, threshold=0.3):
    """scores [N, 4] -> best class score per box -> NonZero(score > threshold) -> candidates ->
    TopK with k = min(kmax, candidates) -> their boxes; an If on a data condition (the top scores'
    sum) scales or negates them. Every stage after NonZero has a shape data decides."""
    then = h.make_graph([h.make_node("Mul", ["bsel", "two"], ["t_out"])], "then", [],
                        [h.make_tensor_value_info("t_out", T.FLOAT, [None, 4])],
                        [h.make_tensor("two", T.FLOAT, [], [2.0])])
    other = h.make_graph([h.make_node("Neg", ["bsel"], ["e_out"])], "else", [],
                         [h.make_tensor_value_info("e_out", T.FLOAT, [None, 4])])
    nodes = [h.make_node("ReduceMax", ["scores"], ["s"], axes=[1], keepdims=0),
             h.make_node("Greater", ["s", "thr"], ["mask"]),
             h.make_node("NonZero", ["mask"], ["nz"]),
             h.make_node("Squeeze", ["nz", "zero"], ["idx"]),
             h.make_node("Gather", ["s", "idx"], ["cand"]),
             h.make_node("Shape", ["cand"], ["n"]),
             h.make_node("Concat", ["n", "kmax"], ["nk"], axis=0),
             h.make_node("ReduceMin", ["nk"], ["k"], keepdims=1),
             h.make_node("TopK", ["cand", "k"], ["top", "ti"]),
             h.make_node("Gather", ["idx", "ti"], ["sel"]),
             h.make_node("Gather", ["boxes", "sel"], ["bsel"]),
             h.make_node("ReduceSum", ["top"], ["tot"], keepdims=0),
             h.make_node("Greater", ["tot", "half"], ["cond"]),
             h.make_node("If", ["cond"], ["dets"], then_branch=then, else_branch=other)]
    m = make_model(nodes, [("scores", T.FLOAT, ["N", 4]), ("boxes", T.FLOAT, ["N", 4])],
                   [("dets", T.FLOAT, [None, 4]), ("top", T.FLOAT, [None])],
                   [h.make_tensor("thr", T.FLOAT, [], [threshold]), h.make_tensor("zero", T.INT64, [1], [0]),
                    h.make_tensor("kmax", T.INT64, [1], [kmax]), h.make_tensor("half", T.FLOAT, [], [0.5])],
                   name="detector")
    onnx.checker.check_model(m, full_check=True)
    return m


def _detector_feeds(n, seed, quiet=False):
    rng = np.random.default_rng(seed)
    scores = rng.random((n, 4), dtype=np.float32) * (0.2 if quiet else 1.0)  # quiet: nothing passes
    return {"scores": scores, "boxes": rng.random((n, 4), dtype=np.float32)}


@pytest.mark.parametrize("kw", [{"backend": "cpu"}, {"backend": "cpu", "native": "floor"},
                                {"backend": "opencl"}, {"devices": ["cpu", "reference"]},
                                {"devices": ["opencl", "reference"]}], ids=str)
def test_a_detector_style_graph_equals_the_reference(kw):
    names = [kw.get("backend")] + list(kw.get("devices", []))
    if any(b and backend_unavailable(b) for b in names):
        pytest.skip("backend unavailable")
    m = detector()
    ref = glow.compile(m, backend="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glow.GlowWarning)
        exe = glow.compile(m, **kw)
    taken = set()
    for n, seed, quiet in ((7, 0, False), (40, 1, False), (3, 2, True), (64, 3, False), (1, 4, False)):
        f = _detector_feeds(n, seed, quiet)
        got, want = exe.run(f), ref.run(f)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        taken.add((want["top"].size > 0, bool(want["top"].sum() > 0.5)))
    assert {(False, False), (True, True)} <= taken  # no candidate at all, and the then branch


def _scatter_after_nonzero():
    """x[N] -> the entries over 0 (NonZero, Gather) -> ScatterElements of 1000 updates at indices
    fed as data."""
    return make_model([h.make_node("Greater", ["x", "zero"], ["mask"]), h.make_node("NonZero", ["mask"], ["nz"]),
                       h.make_node("Squeeze", ["nz", "axis0"], ["idx"]), h.make_node("Gather", ["x", "idx"], ["cand"]),
                       h.make_node("ScatterElements", ["cand", "at", "one"], ["y"], axis=0)],
                      [("x", T.FLOAT, ["N"]), ("at", T.INT64, [1000])], [("y", T.FLOAT, [None])],
                      [h.make_tensor("zero", T.FLOAT, [], [0.0]), h.make_tensor("axis0", T.INT64, [1], [0]),
                       h.make_tensor("one", T.FLOAT, [1000], [1.0] * 1000)], name="scatter_after_nonzero")


def test_no_partition_fails_to_compile_at_run_time():
    """A ScatterElements after the host's NonZero, pinned to cpu: cpu has no kernel, and its
    lowering (a compare per target, in chunks) gives up for a thousand run-time indices. The
    partition used to fail on every run (PartitionRunError: backend 'cpu' cannot run
    ScatterElements); now the signature cpu cannot lower runs that node on the host, said once."""
    m = _scatter_after_nonzero()
    exe = glow.compile(m, devices=["cpu", "reference"], pins={"ScatterElements": "cpu"})
    ref = glow.compile(m, backend="reference")
    for n in (3000, 300_000):
        f = {"x": np.random.default_rng(n).standard_normal(n).astype(np.float32), "at": np.arange(1000)}
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", glow.GlowWarning)
            np.testing.assert_array_equal(exe.run(f)["y"], ref.run(f)["y"])
        assert [str(w.message) for w in said if "cannot run ScatterElements" in str(w.message)]


def test_nodes_whose_shapes_data_decides_stay_off_a_backend_that_compiles_per_shape():
    """Placed over cpu and the host, the detector's TopKs (k and length decided by data, after
    the host's NonZeros) go to the host: on cpu each run would compile them again. They used to
    be placed on cpu, whose TopK rule then failed at run time."""
    pl = glow.compile(SSD, devices=["cpu", "reference"]).placement
    ops = {}
    for n in pl.graph.nodes:
        ops.setdefault(n.op.name, set()).add(pl.device_of[n.name])
    assert ops["TopK"] == {"reference"} and ops["GatherND"] == {"reference"}
    assert ops["Conv"] == {"cpu"}


def test_a_run_whose_shapes_the_backend_cannot_lower_runs_those_nodes_on_the_host():
    """A TopK over a run-time length: on the floor, small rows lower and large ones do not. The
    signature that cannot is placed over cpu and the host when it is first seen, said in one
    warning and in exe.placement; strict=True makes that run an error instead."""
    m = make_model([h.make_node("Relu", ["x"], ["r"]), h.make_node("TopK", ["r", "k"], ["v", "i"])],
                   [("x", T.FLOAT, ["N"]), ("k", T.INT64, [1])], [("v", T.FLOAT, [None]), ("i", T.INT64, [None])])
    k = np.array([3], np.int64)
    for strict in (False, True):
        exe = glow.compile(m, backend="cpu", native="floor", strict=strict)
        x = np.random.default_rng(0).standard_normal(10).astype(np.float32)
        np.testing.assert_array_equal(exe.run({"x": x, "k": k})["v"], np.sort(np.maximum(x, 0))[::-1][:3])
        assert exe.placement is None
        x = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
        if strict:
            with pytest.raises(glow.LoweringError, match="TopK"):
                exe.run({"x": x, "k": k})
                exe.wait_compiles()
                exe.run({"x": x, "k": k})
            continue
        with pytest.warns(glow.GlowWarning, match=r"for inputs x\[5000\].*cannot run TopK \(x1\)"):
            exe.run({"x": x, "k": k})
            exe.wait_compiles()
        np.testing.assert_array_equal(exe.run({"x": x, "k": k})["v"], np.sort(np.maximum(x, 0))[::-1][:3])
        assert exe.placement.device_of["topk"] == "reference"


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_ops_over_data_run_on_the_host_where_the_backend_has_no_kernel_for_them(backend):
    """From the fuzzer (seed 40, graph 12 of --ops ArgMin,ArgMax,TopK,Expand): an ArgMin over
    int64 indices that an ArgMax and an Expand computed from data. opencl's compile refused it
    (NeedsInputValues: "no kernel for ArgMin while its index operands are computed from data");
    now the node runs on the host and the placement says so."""
    m = make_model([h.make_node("ArgMin", ["x"], ["a"], axis=-1, keepdims=0, select_last_index=1),
                    h.make_node("ArgMax", ["x"], ["b"]),
                    h.make_node("Expand", ["b", "shape"], ["e"]),
                    h.make_node("ArgMin", ["e"], ["y"], axis=-2, keepdims=0)],
                   [("x", T.FLOAT, [3])], [("a", T.INT64, []), ("y", T.INT64, [4])],
                   [h.make_tensor("shape", T.INT64, [2], [5, 4])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", glow.GlowWarning)
        exe = glow.compile(m, backend=backend)
    ref = glow.compile(m, backend="reference")
    for x in ([3.0, 1.0, 1.0], [0.5, 2.0, -1.0], [1.0, 1.0, 1.0]):
        f = {"x": np.array(x, np.float32)}
        got, want = exe.run(f), ref.run(f)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


# -- an If on the device ---------------------------------------------------------------------------

def gated(seed=0):
    """x -> MatMul -> an If on whether its largest entry passes 1: an embedding row picked by the
    ArgMax (a Gather of data indices: not computed speculatively) or another MatMul -> Relu."""
    rng = np.random.default_rng(seed)
    w, e, w2 = (rng.standard_normal(s).astype(np.float32) / d for s, d in (((64, 64), 8), ((64, 32), 1),
                                                                          ((64, 32), 8)))
    then = h.make_graph([h.make_node("Gather", ["E", "ids"], ["t_out"], axis=0)], "then", [],
                        [h.make_tensor_value_info("t_out", T.FLOAT, [1, 32])])
    other = h.make_graph([h.make_node("MatMul", ["hid", "W2"], ["e_out"])], "else", [],
                         [h.make_tensor_value_info("e_out", T.FLOAT, [1, 32])])
    nodes = [h.make_node("MatMul", ["x", "W"], ["hid"]),
             h.make_node("ArgMax", ["hid"], ["ids"], axis=1, keepdims=0),
             h.make_node("ReduceMax", ["hid"], ["m"], keepdims=0),
             h.make_node("Greater", ["m", "thr"], ["cond"]),
             h.make_node("If", ["cond"], ["g"], then_branch=then, else_branch=other),
             h.make_node("Relu", ["g"], ["y"])]
    init = [onnx.numpy_helper.from_array(a, n) for a, n in ((w, "W"), (e, "E"), (w2, "W2"))]
    init.append(h.make_tensor("thr", T.FLOAT, [], [1.0]))
    m = make_model(nodes, [("x", T.FLOAT, [1, 64])], [("y", T.FLOAT, [1, 32])], init, name="gated")
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_whose_branches_the_backend_runs_stays_on_the_backend(backend):
    m = gated()
    with warnings.catch_warnings():
        warnings.simplefilter("error", glow.GlowWarning)  # nothing goes to the host: nothing said
        exe = glow.compile(m, backend=backend)
    pl = exe.placement
    assert set(pl.device_of.values()) == {backend}
    (alone,) = [p for p in pl.partitions if [n.op.name for n in p.nodes] == ["If"]]
    assert type(exe.executables[alone.index]).__name__ == "IfExecutable"
    ref = glow.compile(m, backend="reference")
    rng = np.random.default_rng(1)
    taken = set()
    for scale in (0.0, 0.05, 1.0, 2.0, 0.01, 3.0):
        f = {"x": rng.standard_normal((1, 64), dtype=np.float32) * scale}
        want = ref.run(f)["y"]
        np.testing.assert_allclose(exe.run(f)["y"], want, rtol=1e-5, atol=1e-6)
        taken.add(bool((f["x"] @ onnx.numpy_helper.to_array(m.graph.initializer[0])).max() > 1.0))
    assert taken == {True, False}  # both branches ran


# -- the command line ------------------------------------------------------------------------------

def _glow(*args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True, timeout=600)


def test_glow_run_says_what_went_to_the_host_once_and_strict_refuses():
    r = _glow("run", SSD, "--backend", "cpu")
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("glow: warning:")]
    assert len(said) == 1 and "cannot run If (x1), NonZero (x4)" in said[0] and "on the host (reference)" in said[0]
    assert "boxes:" in r.stdout
    r = _glow("run", SSD, "--backend", "cpu", "--strict")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "cannot run 2 op type(s)" in r.stderr and "NonZero (x4)" in r.stderr
