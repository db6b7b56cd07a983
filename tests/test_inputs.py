"""Generated inputs (glow.inputs.make_inputs) and how `glow bench` feeds them: a fresh draw for every
timed run, so a benchmark never times a repeated input (which may hit a cached specialisation)."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.inputs import make_inputs


def _graph():
    b = GraphBuilder()
    x = b.input("x", dt.tensor(("batch", 3), "float32"))
    ids = b.input("ids", dt.tensor((2, 4), "int64"))
    y = b.add1("Relu", [x], output_names=["y"])
    z = b.add1("Identity", [ids], output_names=["z"])
    return b.build([y, z])


def test_make_inputs_is_deterministic_per_seed_and_takes_shapes():
    g = _graph()
    a, b, c = make_inputs(g, seed=0), make_inputs(g, seed=0), make_inputs(g, seed=1)
    assert a["x"].shape == (1, 3) and a["x"].dtype == np.float32  # a symbolic dim becomes 1
    assert a["ids"].dtype == np.int64 and a["ids"].min() >= 0 and a["ids"].max() < 10
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], c["x"])
    assert make_inputs(g, seed=0, shapes={"x": (5, 3)})["x"].shape == (5, 3)


def test_bench_times_fresh_inputs_every_call(monkeypatch):
    from glow import api
    from glow.bench import bench

    seen = []
    compile_ = api.compile

    class Recording:
        def __init__(self, exe):
            self.exe = exe

        def run(self, feeds):
            seen.append({k: np.array(v) for k, v in feeds.items()})
            return self.exe.run(feeds)

    monkeypatch.setattr(api, "compile", lambda *a, **kw: Recording(compile_(*a, **kw)))
    rounds, warmup = 4, 2
    r = bench("mlp", backend="reference", rounds=rounds, warmup=warmup, vs=None)
    assert r.rounds == rounds and len(seen) == 1 + warmup + rounds
    untimed, timed = seen[:1 + warmup], seen[1 + warmup:]

    def key(feeds):
        return tuple(v.tobytes() for _, v in sorted(feeds.items()))

    assert len({key(f) for f in untimed}) == 1  # the first and warm-up runs share the seed-0 draw
    assert len({key(f) for f in timed} | {key(untimed[0])}) == rounds + 1  # every timed run is new


def test_generated_ids_stay_inside_the_table_they_index():
    """`glow run bert.onnx` with generated inputs: token-type ids index a table of 2 rows (through
    a Cast, as exporters write it); ids of another input index a table of 1000."""
    import os

    from glow.inputs import make_inputs
    from glow.onnx_import import load_onnx

    graph = load_onnx(os.path.join(os.path.dirname(__file__), "data", "exporters", "bert_dynamic.onnx"))
    feeds = make_inputs(graph, seed=0, shapes={n: (4, 64) for n in graph.input_names})
    assert feeds["token_type_ids"].max() <= 1 and feeds["token_type_ids"].min() >= 0
    assert feeds["input_ids"].max() <= 9  # never past the default range, whatever the table
    glow.compile(graph, backend="reference").run(feeds)  # no out-of-range index


def test_bench_against_both_peers_reports_each_and_busy_threads():
    """`glow bench --vs onnxruntime,openvino`: every peer timed on the same fresh inputs, ratios
    per peer and to the fastest, busy threads per runtime; glow's outputs match onnxruntime's."""
    pytest.importorskip("openvino")  # in the dev extra; absent only in a hand-made venv
    from glow.bench import bench, format_result

    r = bench("mlp", backend="cpu", rounds=3, warmup=1, vs="onnxruntime,openvino")
    assert list(r.peers) == ["onnxruntime", "openvino"] and r.max_abs_diff < 1e-4
    assert r.fastest_peer in r.peers and r.ratio_fastest >= min(r.ratio_to(n) for n in r.peers) - 1e-12
    assert all(t.busy_threads > 0 for t in [r.glow, *r.peers.values()])
    d = r.to_dict()
    assert set(d["ratios"]) == {"onnxruntime", "openvino"} and d["ratio"] == r.ratio_to("onnxruntime")
    assert "openvino" in format_result(r) and "busy threads" in format_result(r)


def test_bench_names_an_unknown_peer():
    from glow.bench import peer_names
    from glow.errors import InputError

    assert peer_names("none") == [] and peer_names(None) == []
    assert peer_names("onnxruntime, openvino") == ["onnxruntime", "openvino"]
    with pytest.raises(InputError, match="unknown peer 'tvm'"):
        peer_names("onnxruntime,tvm")
