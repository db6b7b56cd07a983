"""Large weights held once per process (backends/cpu/shared_weights.py): the programs of one model
compiled for several input signatures point at one packed copy of each large weight and at the
graph's own arrays where they can be read as they lie; saved and loaded programs carry them."""

import mmap
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
    from glow import aligned
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
    aligned._SPILL.close()  # the next spill needs a new file
    graph = load_onnx(model)
    arrays = {v.name: v.data for v in graph.constants}
    assert not shared_weights.file_backed(arrays["w"]) and arrays["w"].ctypes.data % 64 == 0
    np.testing.assert_allclose(glow.compile(graph, backend="cpu").run(feeds)["y"], want, rtol=1e-4, atol=1e-4)


def _resident_kb_over(a: np.ndarray) -> int:
    """kB resident of the mapping that holds array `a`'s first byte (from /proc/self/smaps)."""
    at, inside = a.__array_interface__["data"][0], False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                inside = lo <= at < hi
            elif inside and head[0] == "Rss:":
                return int(head[1])
    raise AssertionError("no mapping holds the array")


def _conv_bn_model(cout=64, cin=64, k=4, seed=3):
    """Conv (a [64, 64, 4, 4] weight: 256 KiB, below SHARE_BYTES, so copied into the program's
    blob) then BatchNormalization, which the optimiser folds into new weights."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(cout).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, cout).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (scale, "scale"), (bias, "bias"),
                                                         (mean, "mean"), (var, "var"))]
    nodes = [h.make_node("Conv", ["x", "w"], ["c"]),
             h.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-5)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, cin, 9, 9])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), w, s


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps (Linux)")
def test_a_folded_weight_below_share_bytes_is_spilled_and_resident_once_as_the_programs_copy():
    """Weights of 64 KiB - 1 MiB (most of a CNN's) are spilled too, and a BatchNormalization folded
    into one is computed a block of rows at a time into a new spilled array, the same bits as in
    float64 whole: once the program has copied it into its blob, its pages leave the process
    (Inception-v2's peak: 345 -> 227 MiB), and it is still there to read."""
    from glow.aligned import file_backed
    from glow.onnx_import import load_onnx
    from glow.passes import optimize_graph

    model, w, s = _conv_bn_model()
    graph = load_onnx(model)
    assert file_backed(next(v.data for v in graph.constants if v.name == "w"))
    folded = next(v.data for v in optimize_graph(graph).constants if v.data.shape == w.shape)
    want = (w.astype(np.float64) * s[:, None, None, None]).astype(np.float32)
    assert file_backed(folded)
    np.testing.assert_array_equal(folded, want)

    x = np.random.default_rng(0).standard_normal((1, 64, 9, 9)).astype(np.float32)
    ref = glow.compile(graph, backend="reference").run({"x": x})["y"]  # reads the weights: first
    exe = glow.compile(graph, backend="cpu")
    np.testing.assert_allclose(exe.run({"x": x})["y"], ref, rtol=1e-4, atol=1e-4)
    held = [v.data for v in exe.graph.constants if v.data.shape == w.shape]
    assert held and all(file_backed(a) for a in held)
    assert all(_resident_kb_over(a) <= 8 for a in held), [_resident_kb_over(a) for a in held]
    np.testing.assert_array_equal(held[0], want)  # read again from the file


def test_spilled_parts_writes_the_parts_in_order_and_refuses_a_wrong_size():
    from glow.aligned import file_backed, spilled_parts

    a = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
    out = spilled_parts((a[i:i + 4] for i in range(0, 6, 4)), np.float32, (6, 5))
    assert file_backed(out) and not out.flags.writeable
    np.testing.assert_array_equal(out, a)
    assert spilled_parts([], np.float32, (0, 5)) is None  # nothing to map: the caller holds it
    with pytest.raises(ValueError, match="spilled 80 bytes for a 120-byte array"):
        spilled_parts([a[:4]], np.float32, (6, 5))


def test_spilled_arrays_share_a_file_and_a_forked_child_never_writes_into_it():
    """Small spilled arrays go one after the other into one temporary file (opening one per array
    cost DenseNet-121's compile 0.3 s), each its own page-aligned mapping; a forked child that
    spills starts a file of its own, and the parent's arrays keep their bytes."""
    from glow import aligned

    a = aligned.spilled(np.arange(20000, dtype=np.float32), np.float32, (20000,))
    b = aligned.spilled(np.ones(3, np.float32), np.float32, (3,))
    assert a.ctypes.data % mmap.PAGESIZE == 0 and b.ctypes.data % mmap.PAGESIZE == 0
    assert aligned._SPILL.file is not None and aligned._SPILL.size >= 80000
    parents = os.fstat(aligned._SPILL.file.fileno()).st_ino
    pid = os.fork()
    if pid == 0:  # the child spills: into a file of its own, or over the parent's next range
        code = 1
        try:
            d = aligned.spilled(np.full(40000, 7, np.float32), np.float32, (40000,))
            code = 0 if os.fstat(aligned._SPILL.file.fileno()).st_ino != parents and d[5] == 7 else 3
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    c = aligned.spilled(np.full(5, 2, np.float32), np.float32, (5,))
    np.testing.assert_array_equal(a, np.arange(20000, dtype=np.float32))
    np.testing.assert_array_equal(b, np.ones(3, np.float32))
    np.testing.assert_array_equal(c, np.full(5, 2, np.float32))
