"""Dynamic inputs: models from the PyTorch exporters with symbolic batch and sequence, and token
ids that are data (never specialised on, never a reason to compile again).

The models in tests/data/exporters come from torch.onnx.export (TorchScript and dynamo) of small
`transformers` configs (scripts/make_exporter_models.py); their expected outputs are
onnxruntime's, stored beside them. The onnx.helper models (glow.testing.nlp_models) are written
the way those exporters write position ids and causal masks (Shape -> Gather -> Range).
"""

from __future__ import annotations

import os

import glow
import numpy as np
import pytest
from glow.specialize import deciding_inputs
from glow.testing.nlp_models import decoder, encoder, token_feeds
from helpers import backend_unavailable

HERE = os.path.join(os.path.dirname(__file__), "data", "exporters")
MODELS = ["bert_dynamic", "gpt2_dynamic", "llama_dynamo", "cnn_dynamic_batch"]
BACKENDS = ["reference", "cpu", "opencl"]


def _sets(name):
    data = np.load(os.path.join(HERE, f"{name}.npz"))
    sets = []
    for tag in ("", "2"):
        feeds = {k.split(":", 1)[1]: data[k] for k in data if k.startswith(f"input{tag}:")}
        want = {k.split(":", 1)[1]: data[k] for k in data if k.startswith(f"output{tag}:")}
        sets.append((feeds, want))
    return sets


def _skip_unavailable(backend):
    why = backend_unavailable(backend)
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_exported_model_with_symbolic_dims_runs_every_shape(name, backend):
    _skip_unavailable(backend)
    exe = glow.compile(os.path.join(HERE, f"{name}.onnx"), backend=backend)
    sets = _sets(name)
    for feeds, want in sets + sets[:1]:  # a new shape, then the first shape again
        got = exe.run(feeds)
        for k, v in want.items():
            np.testing.assert_allclose(got[k], v, rtol=1e-3, atol=1e-4, err_msg=f"{name} {backend} {k}")
    if backend != "reference":
        stats = exe.stats
        assert stats["compiles"] == 2, stats  # one per shape; the repeat came from the cache
        assert stats["specialized_on_values"] == [], stats  # ids and masks are data


@pytest.mark.parametrize("name", ["bert_dynamic", "gpt2_dynamic", "llama_dynamo"])
def test_token_ids_are_never_specialised_on(name):
    from glow.onnx_import import load_onnx

    graph = load_onnx(os.path.join(HERE, f"{name}.onnx"))
    assert deciding_inputs(graph) == frozenset()


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
@pytest.mark.parametrize("make", [encoder, decoder], ids=["encoder", "decoder"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "symbolic"])
def test_new_token_ids_never_compile_again(make, dynamic, backend):
    _skip_unavailable(backend)
    model = make(layers=1, hidden=32, heads=2, ffn=64, vocab=100, batch=2, seq=8, dynamic=dynamic)
    exe, ref = glow.compile(model, backend=backend), glow.compile(model, backend="reference")
    rng = np.random.default_rng(3)
    for _ in range(3):  # 2x8 = 16 ids: small enough that the old rule specialised on them
        feeds = token_feeds(model, 2, 8, rng, vocab=100)
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    stats = getattr(exe, "stats", {})  # a static executable compiled once, up front
    assert stats.get("compiles", 0) == (1 if dynamic else 0), stats


def test_values_that_decide_a_shape_are_specialised_on():
    from helpers import make_model
    from onnx import TensorProto as T
    from onnx import helper as h

    # y = Reshape(x, shape): `shape` decides the output's shape, `x` is data
    model = make_model([h.make_node("Reshape", ["x", "shape"], ["y"])],
                       [("x", T.FLOAT, [2, 6]), ("shape", T.INT64, [2])], [("y", T.FLOAT, None)])
    graph = glow.load_onnx(model)
    assert deciding_inputs(graph) == {"shape"}
    exe = glow.compile(model, backend="cpu")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [4, 3], [3, 4]):
        np.testing.assert_array_equal(exe.run({"x": x, "shape": np.array(shape)})["y"], x.reshape(shape))
    assert exe.stats["compiles"] == 2 and exe.stats["specialized_on_values"] == ["shape"]


def test_the_specialisation_cache_is_bounded(monkeypatch):
    monkeypatch.setenv("GLOW_SPECIALIZATIONS", "2")
    model = encoder(layers=1, hidden=16, heads=2, ffn=32, vocab=50, dynamic=True)
    exe = glow.compile(model, backend="cpu")
    rng = np.random.default_rng(0)
    for seq in (4, 5, 6, 4):
        exe.run(token_feeds(model, 1, seq, rng, vocab=50))
    s = exe.stats
    assert s["specializations"] == 2 and s["specialization_limit"] == 2
    assert s["compiles"] == 4  # seq 4 was dropped (least recently used) before it came back
    assert s["cache_bytes"] > 0


def test_a_bad_specialisation_limit_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("GLOW_SPECIALIZATIONS", "many")
    with pytest.raises(glow.GlowError, match="GLOW_SPECIALIZATIONS"):
        glow.compile(encoder(layers=1, hidden=16, heads=2, ffn=32, vocab=50), backend="cpu")


def test_cpu_and_the_renderer_defer_by_one_rule():
    """glow.specialize.deferrable is the one deferral rule: cpu (backends/cpu/backend.py) and the
    C-style backends (core/render/support.py) differ only in which ops they have code for."""
    from glow.backends.cpu.backend import _deferred as cpu_defers
    from glow.render.support import deferred as render_defers
    from helpers import make_model
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    table = numpy_helper.from_array(np.ones((10, 4), np.float32), "table")
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    nodes = [h.make_node("Shape", ["x"], ["shape"], name="shape"),
             h.make_node("Reshape", ["x", "shape"], ["same"], name="reshape_from_shape"),  # symbolic: deferred
             h.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
             h.make_node("ReduceMean", ["emb", "axes"], ["mean"], name="mean_const_axes", keepdims=1),
             h.make_node("NonZero", ["x"], ["nz"], name="nonzero")]  # its shape depends on data: refused
    model = make_model(nodes, [("x", T.FLOAT, ["n", 4]), ("ids", T.INT64, [2, 4])],
                       [("same", T.FLOAT, None), ("mean", T.FLOAT, None), ("nz", T.INT64, None)], [table, axes],
                       opset=18)
    graph = glow.load_onnx(model)
    got = {n.name: (cpu_defers(n), render_defers(n)) for n in graph.nodes}
    assert all(a == b for a, b in got.values()), got
    assert got["reshape_from_shape"] == (True, True), got
    # float data after small int inputs, with constant axes: lowered now, not folded per input
    assert got["mean_const_axes"] == (False, False), got
    assert got["nonzero"] == (False, False), got


def _tiered_encoder(monkeypatch, seed):
    """A symbolic-shape encoder on cpu with tiers on, run once (its first signature, [1, 4],
    compiles in the foreground); the reference executable; the random generator."""
    monkeypatch.setenv("GLOW_TIERED", "1")
    model = encoder(layers=1, hidden=16, heads=2, ffn=32, vocab=50, dynamic=True)
    exe, rng = glow.compile(model, backend="cpu"), np.random.default_rng(seed)
    exe.run(token_feeds(model, 1, 4, rng, vocab=50))
    return model, exe, glow.compile(model, backend="reference"), rng


def _agrees(exe, ref, feeds):
    out = exe.output_names[0]
    np.testing.assert_allclose(exe.run(feeds)[out], ref.run(feeds)[out], rtol=1e-4, atol=1e-5)


def test_a_new_shape_is_interpreted_while_it_compiles_in_the_background(monkeypatch):
    model, exe, ref, rng = _tiered_encoder(monkeypatch, 1)
    assert exe.stats["compiles"] == 1 and exe.stats["interpreted_runs"] == 0
    for seq in (6, 6):  # a new one: answered by the interpreter, compiled behind it
        _agrees(exe, ref, token_feeds(model, 2, seq, rng, vocab=50))
        assert exe.wait_compiles(timeout=120)
    s = exe.stats
    assert s["compiles"] == 2 and s["compiles_pending"] == 0 and s["specializations"] == 2
    assert s["interpreted_runs"] == 1  # the second call at seq 6 ran the compiled code


def test_a_background_compile_reads_the_feeds_as_they_were(monkeypatch):
    from helpers import make_model
    from onnx import TensorProto as T
    from onnx import helper as h

    monkeypatch.setenv("GLOW_TIERED", "1")
    model = make_model([h.make_node("Reshape", ["x", "shape"], ["y"])],
                       [("x", T.FLOAT, [2, 6]), ("shape", T.INT64, [2])], [("y", T.FLOAT, None)])
    exe = glow.compile(model, backend="cpu")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    exe.run({"x": x, "shape": np.array([2, 6])})
    shape = np.array([3, 4])
    assert exe.run({"x": x, "shape": shape})["y"].shape == (3, 4)
    shape[:] = [4, 3]  # the caller reuses its array while the compile for [3, 4] may still run
    assert exe.wait_compiles(timeout=120)
    y = exe.run({"x": x, "shape": np.array([3, 4])})["y"]
    np.testing.assert_array_equal(y, x.reshape(3, 4))
    assert exe.stats["interpreted_runs"] == 1 and exe.stats["compiles"] == 2


def test_a_failed_background_compile_raises_on_the_next_call(monkeypatch):
    model, exe, ref, rng = _tiered_encoder(monkeypatch, 2)

    def broken(graph):
        raise glow.BackendError("backend 'cpu': no kernel for this (a test's)")

    exe.compile_static = broken
    feeds = token_feeds(model, 1, 5, rng, vocab=50)
    _agrees(exe, ref, feeds)
    assert exe.wait_compiles(timeout=120)
    with pytest.raises(glow.BackendError, match="no kernel for this"):
        exe.run(feeds)  # compiled in the foreground now, as without tiers: the error shows
    assert exe.stats["compiles_pending"] == 0


def test_what_the_interpreter_cannot_run_waits_for_the_compile(monkeypatch):
    model, exe, ref, rng = _tiered_encoder(monkeypatch, 5)

    def cannot(feeds):
        raise glow.GraphError("node 'x' (Gelu) failed in the reference interpreter (a test's)")

    monkeypatch.setattr(exe, "_interpret", cannot)
    _agrees(exe, ref, token_feeds(model, 1, 7, rng, vocab=50))
    s = exe.stats
    assert s["compiles"] == 2 and s["compiles_pending"] == 0


def test_tiers_off_compile_every_new_shape_in_the_foreground(monkeypatch):
    monkeypatch.setenv("GLOW_TIERED", "0")
    model = encoder(layers=1, hidden=16, heads=2, ffn=32, vocab=50, dynamic=True)
    exe = glow.compile(model, backend="cpu")
    rng = np.random.default_rng(4)
    for seq in (4, 5):
        exe.run(token_feeds(model, 1, seq, rng, vocab=50))
    s = exe.stats
    assert s["compiles"] == 2 and s["interpreted_runs"] == 0 and not s["tiered"]


def test_a_bad_tiered_setting_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("GLOW_TIERED", "yes")
    with pytest.raises(glow.GlowError, match="GLOW_TIERED"):
        glow.compile(encoder(layers=1, hidden=16, heads=2, ffn=32, vocab=50, dynamic=True), backend="cpu")


def test_a_new_batch_size_compiles_no_code(monkeypatch, tmp_path):
    """Softmax, LayerNorm, Gather, MatMul and the elementwise kernels read their row counts at
    run time, and the entry reads the memory plan's offsets, the kernels' sizes and the
    threading plan from a table with the weights: a transformer's new batch size finds every
    object compiled before, the entry's included, and compiles nothing."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))  # an empty object cache
    model = encoder(layers=1, hidden=32, heads=2, ffn=64, vocab=100, dynamic=True)
    exe, ref = glow.compile(model, backend="cpu"), glow.compile(model, backend="reference")
    rng = np.random.default_rng(5)
    for batch in (2, 5):
        feeds = token_feeds(model, batch, 16, rng, vocab=100)
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if batch == 2:
            assert exe.stats["objects_compiled"] > 1, exe.stats
    assert exe.stats["objects_compiled"] == 0, exe.stats


def test_an_exported_cnn_compiles_nothing_for_a_new_batch_size(monkeypatch, tmp_path):
    """A CNN from the TorchScript exporter with a symbolic batch: convolutions, GEMMs and the
    elementwise nests read their sizes, and the pools take their work-item count (the batch is
    in it) as an argument, so batch 5 and 8 after batch 2 compile no object."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))  # an empty object cache
    exe = glow.compile(os.path.join(HERE, "cnn_dynamic_batch.onnx"), backend="cpu")
    ref = glow.compile(os.path.join(HERE, "cnn_dynamic_batch.onnx"), backend="reference")
    name = exe.inputs[0].name
    for batch in (2, 5, 8):
        feeds = {name: np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32)}
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if batch > 2:
            assert exe.stats["objects_compiled"] == 0, (batch, exe.stats)


@pytest.mark.parametrize("name", ["gpt2_dynamic", "llama_dynamo"])
def test_an_exported_decoder_compiles_only_its_entry_for_a_new_sequence_length(name, monkeypatch, tmp_path):
    """GPT-2 from the TorchScript exporter gathers over batch x sequence rows (a size no symbolic
    dim has), so Gather reads its axis's size as an argument too; the Llama-style model (dynamo
    exporter) normalises those rows (RMSNorm's ReduceSum over the last axis), so that reduction
    takes its row count as an argument. A new sequence length after the first two compiles at
    most the entry (which kernels run where can differ with the length), never a kernel."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))  # an empty object cache
    exe = glow.compile(os.path.join(HERE, f"{name}.onnx"), backend="cpu")
    ref = glow.compile(os.path.join(HERE, f"{name}.onnx"), backend="reference")
    rng = np.random.default_rng(7)
    for seq in (16, 19, 33, 40):
        feeds = {"input_ids": rng.integers(0, 50, (2, seq)).astype(np.int64),
                 "attention_mask": np.ones((2, seq), np.int64)}
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if seq > 19:
            assert exe.stats["objects_compiled"] <= 1, (seq, exe.stats)


@pytest.mark.parametrize("make", [encoder, decoder], ids=["encoder", "decoder"])
def test_a_new_sequence_length_compiles_no_code(make, monkeypatch, tmp_path):
    """Sizes that a symbolic dim takes are compiled as varying (glow.specialize.varying): the
    attention MatMuls take a register tile chosen for any width and mask their last panel,
    and short loops over the sequence read their length. A new sequence length, longer or
    shorter than a register tile, then finds every object compiled before."""
    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))  # an empty object cache
    model = make(layers=1, hidden=32, heads=2, ffn=64, vocab=100, dynamic=True)
    exe, ref = glow.compile(model, backend="cpu"), glow.compile(model, backend="reference")
    rng = np.random.default_rng(6)
    for batch, seq in ((2, 20), (2, 36), (3, 9), (4, 47)):
        feeds = token_feeds(model, batch, seq, rng, vocab=100)
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if seq == 20:
            assert exe.stats["objects_compiled"] > 1, exe.stats
        else:
            assert exe.stats["objects_compiled"] == 0, (seq, exe.stats)


@pytest.mark.parametrize("make", [encoder, decoder], ids=["encoder", "decoder"])
def test_opencl_builds_one_program_for_every_sequence_length(make):
    """The renderer writes the sizes a symbolic dim takes as kernel arguments (glow.render.sizes),
    divisors among them as magic multipliers: a new sequence length or batch renders the program
    text of the one before, and the device compiler builds nothing. The lengths share no value
    with the model's static dims (heads 2, head size 16, hidden 32, ffn 64) and fill a MatMul
    register tile (16 rows): a length below that takes another kernel variant."""
    _skip_unavailable("opencl")
    model = make(layers=1, hidden=32, heads=2, ffn=64, vocab=100, dynamic=True)
    exe, ref = glow.compile(model, backend="opencl"), glow.compile(model, backend="reference")
    rng = np.random.default_rng(8)
    for batch, seq in ((3, 20), (3, 36), (5, 47), (3, 17), (7, 127)):
        feeds = token_feeds(model, batch, seq, rng, vocab=100)
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{batch}x{seq}")
        if seq != 20:  # (the first may find its program built by an earlier test)
            assert exe.stats["programs_built"] == 0, (batch, seq, exe.stats)


def test_opencl_builds_no_program_for_an_exported_decoders_new_length():
    """GPT-2 from the TorchScript exporter flattens batch x sequence rows through Shape
    arithmetic: the renderer marks that product too (in a leading dim), and orders a program's
    kernels by name, so a new length builds nothing even where the graph's kernels come in
    another order."""
    _skip_unavailable("opencl")
    exe = glow.compile(os.path.join(HERE, "gpt2_dynamic.onnx"), backend="opencl")
    ref = glow.compile(os.path.join(HERE, "gpt2_dynamic.onnx"), backend="reference")
    rng = np.random.default_rng(9)
    for seq in (19, 33, 47):
        feeds = {"input_ids": rng.integers(0, 50, (2, seq)).astype(np.int64),
                 "attention_mask": np.ones((2, seq), np.int64)}
        (got,), (want,) = exe.run(feeds).values(), ref.run(feeds).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if seq != 19:
            assert exe.stats["programs_built"] == 0, (seq, exe.stats)
