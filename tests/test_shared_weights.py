"""Large weights held once per process (backends/cpu/shared_weights.py): the programs of one model
compiled for several input signatures point at one packed copy of each large weight and at the
graph's own arrays where they can be read as they lie; saved and loaded programs carry them."""

import os
import subprocess
import sys

import glow
import numpy as np
import pytest
from glow.backends.cpu import shared_weights
from helpers import backend_unavailable
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

pytestmark = pytest.mark.skipif(backend_unavailable("cpu"), reason="cpu unavailable")

K, N, VOCAB = 512, 1024, 1024  # a 2 MiB MatMul weight and a 2 MiB embedding table


def _model(ids_shape=("b", "s")):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((K, N)).astype(np.float32) * 0.05
    table = rng.standard_normal((VOCAB, K)).astype(np.float32)
    nodes = [h.make_node("Gather", ["table", "ids"], ["e"]),
             h.make_node("MatMul", ["e", "w"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, list(ids_shape))],
                         [h.make_tensor_value_info("y", T.FLOAT, None)],
                         [numpy_helper.from_array(w, "w"), numpy_helper.from_array(table, "table")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), w, table


def test_signatures_share_one_packed_copy_and_read_the_table_where_it_lies():
    model, w, table = _model()
    exe = glow.compile(model, backend="cpu")
    feeds = [{"ids": np.array([[1, 5, 7]])}, {"ids": np.arange(40).reshape(2, 20) % VOCAB}]
    for f in feeds:
        np.testing.assert_allclose(exe.run(f)["y"], table[f["ids"]] @ w, rtol=1e-4, atol=1e-4)
    programs = [e.program for e in exe._cache.values()]
    assert len(programs) == 2
    shared = [{id(a): a for _, a, _ in p.shared} for p in programs]
    assert len(shared[0]) == 2 and shared[0].keys() == shared[1].keys()  # the same arrays
    for p in programs:  # neither blob holds a copy of them
        assert p.weights.nbytes < (1 << 20) and p.stats["shared_weights_bytes"] >= 2 * (K * N * 4)
    graph_table = next(v.data for v in exe.graph.constants if v.data.shape == (VOCAB, K))
    addresses = {a.__array_interface__["data"][0] for a in shared[0].values()}
    # imported 64-byte aligned (glow.aligned), so read where it lies: no copy at all
    assert graph_table.__array_interface__["data"][0] % 64 == 0
    assert graph_table.__array_interface__["data"][0] in addresses
    before = shared_weights.held_bytes()
    exe2 = glow.compile(model, backend="cpu")  # another compile of another import: its own arrays
    np.testing.assert_allclose(exe2.run(feeds[0])["y"], exe.run(feeds[0])["y"], rtol=0, atol=0)
    assert shared_weights.held_bytes() >= before


def test_a_saved_program_carries_its_shared_weights(tmp_path):
    """Saved, then loaded in a fresh process that imports only glow (and after the compiling
    process let go of its copies): the loaded program's table points at its own sections."""
    model, w, table = _model((1, 4))  # a saved executable holds fixed shapes
    ids = np.array([[3, 9, 1000, 0]])
    exe = glow.compile(model, backend="cpu")
    want = exe.run({"ids": ids})["y"]
    path = str(tmp_path / "net.glow")
    exe.save(path)
    del exe
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "want.npy", want)
    code = ("import sys, numpy as np, glow\n"
            "d = sys.argv[1]\n"
            "exe = glow.load(d + '/net.glow')\n"
            "got = exe.run({'ids': np.load(d + '/ids.npy')})['y']\n"
            "assert np.array_equal(got, np.load(d + '/want.npy')), np.abs(got - np.load(d + '/want.npy')).max()\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    loaded = glow.load(path)  # and in this process, twice
    for _ in range(2):
        np.testing.assert_array_equal(loaded.run({"ids": ids})["y"], want)


def test_a_callers_writable_array_is_copied_not_shared():
    """A constant over an array its caller may still write: each compile copies it, as before,
    so a later write changes no compiled program and the next compile sees the new values."""
    from glow import dtypes as dt
    from glow.graph import GraphBuilder

    w = np.random.default_rng(1).standard_normal((K, N)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((3, K)).astype(np.float32)

    def build():
        b = GraphBuilder("g")
        xi = b.input("x", dt.TensorType((3, K), dt.float32))
        return b.build([b.add1("MatMul", [xi, b.constant(w, name="w")])])

    first = glow.compile(build(), backend="cpu")
    # the program never reads the caller's memory (the graph took an aligned copy of its own)
    assert not any(np.shares_memory(a, w) for _, a, _ in first.program.shared)
    before = first.run({"x": x})
    out = next(iter(before))
    w *= 2
    np.testing.assert_array_equal(first.run({"x": x})[out], before[out])
    second = glow.compile(build(), backend="cpu")
    np.testing.assert_allclose(second.run({"x": x})[out], 2 * before[out], rtol=1e-5)


def test_external_data_is_read_into_aligned_read_only_arrays(tmp_path):
    import onnx

    model, w, table = _model((1, 4))
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    from glow.onnx_import import load_onnx

    arrays = {v.name: v.data for v in load_onnx(str(tmp_path / "m.onnx")).constants}
    np.testing.assert_array_equal(arrays["w"], w)
    np.testing.assert_array_equal(arrays["table"], table)
    for a in arrays.values():
        assert a.__array_interface__["data"][0] % 64 == 0 and shared_weights.immutable(a)
    exe = glow.compile(str(tmp_path / "m.onnx"), backend="cpu")
    ids = np.array([[0, 1, 2, 3]])
    np.testing.assert_allclose(exe.run({"ids": ids})["y"], table[ids] @ w, rtol=1e-4, atol=1e-4)
    table_now = next(v.data for v in exe.graph.constants if v.data.shape == (VOCAB, K))
    assert table_now.__array_interface__["data"][0] in \
        {a.__array_interface__["data"][0] for _, a, _ in exe.program.shared}  # read where the import put it


def _resident_kb_of(path: str) -> int:
    """kB of this process's memory that are pages of the file `path` (from /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = len(head) >= 6 and os.path.realpath(head[-1]) == os.path.realpath(path)
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps (Linux)")
def test_a_packed_weight_of_mapped_external_data_is_resident_once(tmp_path):
    """External data is mapped, not read: once the MatMul weight is packed into its shared copy,
    the file's pages of it leave the process (the copy is the one resident form), and the
    embedding table the Gather reads where it lies stays the file's, mapped."""
    import onnx
    from glow.onnx_import import load_onnx

    model, w, table = _model((1, 4))
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    data = str(tmp_path / "m.data")
    graph = load_onnx(str(tmp_path / "m.onnx"))
    arrays = {v.name: v.data for v in graph.constants}
    assert all(shared_weights.file_backed(a) for a in arrays.values())
    np.testing.assert_array_equal(arrays["w"], w)  # touches every page of the file
    np.testing.assert_array_equal(arrays["table"], table)
    assert _resident_kb_of(data) >= (w.nbytes + table.nbytes) // 1024
    exe = glow.compile(graph, backend="cpu")
    ids = np.array([[3, 1, 4, 1]])
    np.testing.assert_allclose(exe.run({"ids": ids})["y"], table[ids] @ w, rtol=1e-4, atol=1e-4)
    resident = _resident_kb_of(data)
    assert resident <= table.nbytes // 1024 + 8, resident  # w's 2 MiB dropped (edge pages aside)
    np.testing.assert_array_equal(arrays["w"], w)  # and still there to read, from the file


def test_a_tied_embedding_table_is_read_from_the_lm_heads_packed_copy():
    """Gather(Transpose(W)) then MatMul(., W), as onnxruntime-genai's builder ties Qwen's
    embeddings to its LM head: the rows are read from W's packed copy, the one the MatMul uses,
    rather than from a row-major copy of the transposed table (a second W resident)."""
    H, V = 64, 8192  # W: 2 MiB
    w = np.random.default_rng(1).standard_normal((H, V)).astype(np.float32)
    nodes = [h.make_node("Transpose", ["w"], ["table"], perm=[1, 0]), h.make_node("Gather", ["table", "ids"], ["e"]),
             h.make_node("MatMul", ["e", "w"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, ["b", "s"])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    exe = glow.compile(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), backend="cpu")
    for ids in (np.array([[1, 5, V - 1, -1]]), np.arange(40).reshape(2, 20) * 211 % V, np.array([[15, 16, 17]])):
        np.testing.assert_allclose(exe.run({"ids": ids})["y"], w.T[ids] @ w, rtol=1e-5, atol=1e-4)
    for p in (e.program for e in exe._cache.values()):
        assert len({id(a) for _, a, _ in p.shared}) == 1 and p.stats["shared_weights_bytes"] == w.nbytes
    with pytest.raises(glow.InputError, match="index 8192 is out of range"):
        exe.run({"ids": np.array([[1, V]])})


def test_a_folded_weight_is_aligned_and_read_where_it_lies():
    """A large constant the optimiser folds (ConstantOfShape, as the onnx wheel's light models
    make their weights) is glow's own, aligned and read-only down to its memory: the program
    reads it in place rather than holding a copy beside the graph's."""
    shape = np.array([VOCAB, K], np.int64)
    half = numpy_helper.from_array(np.array([0.5], np.float32))
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["table"], value=half),
             h.make_node("Gather", ["table", "ids"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, [1, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], [numpy_helper.from_array(shape, "shape")])
    exe = glow.compile(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), backend="cpu")
    np.testing.assert_array_equal(exe.run({"ids": np.array([[0, 7, 9]])})["y"], np.full((1, 3, K), 0.5, np.float32))
    table = next(v.data for v in exe.graph.constants if v.data.shape == (VOCAB, K))
    assert table.__array_interface__["data"][0] % 64 == 0 and shared_weights.immutable(table)
    assert table.__array_interface__["data"][0] in {a.__array_interface__["data"][0] for _, a, _ in exe.program.shared}


def test_large_weights_live_in_a_temporary_files_pages(monkeypatch):
    """An imported weight of 1 MiB or more, and a folded one, are read-only arrays over an unlinked
    temporary file (glow.aligned.spilled): once packed, their pages leave the process, as an
    external-data weight's do. Where no such file can be made they are plain aligned memory, and
    the results are the same."""
    from glow.onnx_import import load_onnx

    model, w, table = _model((1, 3))
    feeds = {"ids": np.array([[4, 0, 9]])}
    want = table[feeds["ids"]] @ w
    graph = load_onnx(model)
    arrays = {v.name: v.data for v in graph.constants}
    assert all(shared_weights.file_backed(arrays[n]) for n in ("w", "table"))
    np.testing.assert_array_equal(arrays["w"], w)
    np.testing.assert_allclose(glow.compile(graph, backend="cpu").run(feeds)["y"], want, rtol=1e-4, atol=1e-4)

    import tempfile

    def no_file(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_file)
    graph = load_onnx(model)
    arrays = {v.name: v.data for v in graph.constants}
    assert not shared_weights.file_backed(arrays["w"]) and arrays["w"].ctypes.data % 64 == 0
    np.testing.assert_allclose(glow.compile(graph, backend="cpu").run(feeds)["y"], want, rtol=1e-4, atol=1e-4)
