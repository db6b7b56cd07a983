"""Compiling is pure (issue 14, finding 1): compiling a model twice in one process gives the same
graph, the same IR, the same generated code and bit-identical outputs, and leaves the caller's
graph as it was.

The cheap form runs for every model the test suite has (onnx's light models and model folders,
the benchmark models, the example model, and the MobileNetV3-shaped models below): the graph each
backend is handed (text plus a digest of every constant, sub-graphs included), its instruction
IR, and for `cpu` the LLVM module text and weights blob, for `opencl` the kernel source. Equal
code and weights make equal outputs; the small models are also run twice, compared bit for bit
with each other and within tolerance with the reference backend.

The failure this guards against: a pass kept a memo keyed by `id()` of transient values, so a
later compile (whose allocations happen to reuse an address) got another value's constant.
"""

from __future__ import annotations

import difflib
import hashlib
import os

import glow
import numpy as np
import onnx
import pytest
from glow.graph import Graph
from glow.plugins import registry
from glow.printer import format_graph
from glow.testing import bench_models
from glow.testing.models import folder_cases, light_models
from onnx import TensorProto, helper, numpy_helper

TINY_CNN = os.path.join(os.path.dirname(glow.__file__), "data", "tiny_cnn.onnx")
BACKENDS = [b for b in ("reference", "cpu", "opencl") if b in glow.available_backends()]


# -- models ---------------------------------------------------------------------------------------

def mobilenet_like(batch=1, size=32) -> onnx.ModelProto:
    """mobilenet_v3_small's building blocks as torch.onnx.export writes them: Conv + HardSwish,
    depthwise Conv + Relu, squeeze-excite (GlobalAveragePool -> Conv -> Relu -> Conv ->
    HardSigmoid -> Mul), a residual Add, then pool, Flatten, Gemm + HardSwish, Gemm."""
    rng = np.random.default_rng(0)
    inits, nodes, count = [], [], [0]

    def weight(shape, scale):
        count[0] += 1
        name = f"w{count[0]}"
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(x, cin, cout, k=1, s=1, g=1, act=None):
        count[0] += 1
        y = f"conv{count[0]}"
        nodes.append(helper.make_node("Conv", [x, weight([cout, cin // g, k, k], (cin // g * k * k) ** -0.5),
                                               weight([cout], 0.1)], [y], pads=[k // 2] * 4, strides=[s, s],
                                      group=g))
        if act:
            nodes.append(helper.make_node(act, [y], [y + "_act"]))
            y += "_act"
        return y

    def squeeze_excite(x, c, r):
        nodes.append(helper.make_node("GlobalAveragePool", [x], [x + "_pool"]))
        s = conv(conv(x + "_pool", c, r, act="Relu"), r, c)
        nodes.append(helper.make_node("HardSigmoid", [s], [s + "_hs"], alpha=1 / 6, beta=0.5))
        nodes.append(helper.make_node("Mul", [x, s + "_hs"], [x + "_se"]))
        return x + "_se"

    x = conv("x", 3, 16, 3, 2, act="HardSwish")
    y = squeeze_excite(conv(x, 16, 16, 3, 2, g=16, act="Relu"), 16, 8)
    y = conv(conv(conv(conv(y, 16, 16), 16, 72, act="Relu"), 72, 72, 3, 2, g=72, act="Relu"), 72, 24)
    z = conv(conv(y, 24, 96, act="HardSwish"), 96, 96, 5, 1, g=96, act="HardSwish")
    z = conv(squeeze_excite(z, 96, 24), 96, 24)
    nodes.append(helper.make_node("Add", [y, z], ["res"]))
    nodes += [helper.make_node("GlobalAveragePool", [conv("res", 24, 64, act="HardSwish")], ["pool"]),
              helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
              helper.make_node("Gemm", ["flat", weight([32, 64], 0.2), weight([32], 0.1)], ["fc"], transB=1),
              helper.make_node("HardSwish", ["fc"], ["fc_act"]),
              helper.make_node("Gemm", ["fc_act", weight([10, 32], 0.2), weight([10], 0.1)], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "mobilenet_like",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def gelu_encoder(opset=20) -> onnx.ModelProto:
    """Token ids -> embedding Gather -> MatMul -> Add(bias) -> Gelu (a BERT feed-forward input),
    with few enough ids that the cpu backend treats every value as input-determined."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, n)
             for n, s in (("E", (50, 16)), ("W", (16, 32)), ("B", (32,)))]
    nodes = [helper.make_node("Gather", ["E", "ids"], ["x"]), helper.make_node("MatMul", ["x", "W"], ["mm"]),
             helper.make_node("Add", ["mm", "B"], ["a"]), helper.make_node("Gelu", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "gelu_encoder", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _feeds_for(model: onnx.ModelProto, batch=2) -> dict:
    rng = np.random.default_rng(7)
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, 50, shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


SMALL = {  # name -> model: run twice on every backend, outputs bit for bit
    "mobilenet_like": lambda: mobilenet_like(),
    "mobilenet_like_symbolic_batch": lambda: mobilenet_like(batch="N"),
    "gelu_encoder": lambda: gelu_encoder(),
    "tiny_cnn": lambda: onnx.load(TINY_CNN),
    "bench_small_cnn": bench_models.small_cnn,
}
#: (name, model source, backends): the light models' weights make a compile take seconds, so
#: they compile on cpu alone (the backend with the layout transform and the most passes), to its
#: IR ("cpu-ir": generating their code doubles the time; the other models cover the generator).
SUITE = ([(c.name, c.model_path, ["cpu-ir"]) for c in light_models()]
         + [(c.name, c.model_path, BACKENDS) for s in ("pytorch-converted", "pytorch-operator", "simple")
            for c in folder_cases(s)]
         + [(f"bench_{k}", f, BACKENDS) for k, f in bench_models.GENERATED.items()]
         + [(k, f, BACKENDS) for k, f in SMALL.items() if not k.startswith("bench_")])


def _load(source) -> Graph | str:
    """The imported graph, or the import error's message (refused the same way twice)."""
    try:
        return glow.load_onnx(source() if callable(source) else source)
    except glow.GlowError as e:
        return f"{type(e).__name__}: {e}"


# -- what a compile produces ---------------------------------------------------------------------

#: Arrays up to this many bytes are digested whole; larger ones (the light models' weights run to
#: hundreds of MB) through an even sample of 64K elements plus their last 4K: enough to tell one
#: constant from another, at a cost that keeps this file quick.
WHOLE_DIGEST_BYTES = 1 << 20


def digest(data: np.ndarray) -> str:
    if data.dtype == object:
        return hashlib.sha1(repr(data.tolist()).encode()).hexdigest()
    flat = data.reshape(-1)
    if flat.nbytes > WHOLE_DIGEST_BYTES:
        flat = np.concatenate([flat[::max(1, flat.size // 65536)], flat[-4096:]])
    return hashlib.sha1(np.ascontiguousarray(flat).tobytes()).hexdigest()


def fingerprint(g: Graph) -> str:
    """The graph's text plus a digest of every constant's bytes (the text names constants but does
    not show their data), sub-graphs included."""
    lines = [format_graph(g)]

    def walk(graph):
        for c in graph.constants:
            lines.append(f"{graph.name}/%{c.name} {c.data.dtype}{list(c.data.shape)} {digest(c.data)}")
        for n in graph.nodes:
            for v in n.attrs.values():
                for sub in (v if isinstance(v, tuple) else (v,)):
                    if isinstance(sub, Graph):
                        walk(sub)

    walk(g)
    return "\n".join(lines)


def artefacts(graph: Graph, backend: str) -> dict:
    """Everything one compile of `graph` for `backend` decides, as comparable text (an error's
    message counts: a model a backend refuses must be refused the same way twice)."""
    from glow.flow import optimize_for_backend
    from glow.ir import format_ir, lower_to_ir

    backend, _, stop = backend.partition("-")
    be = registry().get(backend)
    try:
        g = optimize_for_backend(graph, be)
    except glow.GlowError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    out = {"graph": fingerprint(g)}
    if not g.is_static():
        return out  # compiled per input signature at run time: the run below covers it
    if backend == "cpu" and stop == "ir":
        program = lower_to_ir(g)
        out["ir"] = format_ir(program.fn, program.plan)
    elif backend == "cpu":
        if all(be.runs_now(n) for n in g.nodes):
            from glow.backends.cpu import codegen
            from glow.ir import build_ir, plan_memory

            fn = build_ir(g)
            plan = plan_memory(fn)
            text, weights, sync, held = codegen.generate(fn, plan)
            # a shared weight's table entry is its address (not a decision): its bytes count instead
            weights = weights.copy()
            table = int(weights[:8].view(np.int64)[0])
            for k, _, _ in held:
                weights[table + 8 * k:table + 8 * k + 8] = 0
            out.update(ir=format_ir(fn, plan), module=text, sync=sync, weights=digest(weights),
                       shared=[(k, d, digest(h.array)) for k, h, d in held])
    elif backend == "opencl":
        if be.fully_renderable(g):
            compiled = be.compile_graph(g, be.device_params(be.devices()[0]))
            out.update(ir=format_ir(compiled.ir.fn, compiled.ir.plan), source=compiled.program.source)
    else:
        program = lower_to_ir(g)
        out["ir"] = format_ir(program.fn, program.plan)
    return out


def _assert_same(first: dict, second: dict, what: str):
    assert first.keys() == second.keys(), what
    for key in first:
        if first[key] != second[key]:
            a, b = str(first[key]).splitlines(), str(second[key]).splitlines()
            diff = "\n".join(list(difflib.unified_diff(a, b, "first", "second", lineterm="", n=1))[:40])
            pytest.fail(f"{what}: the second compile's {key} differs from the first's:\n{diff}")


# -- the tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("source,backends", [(s, b) for _, s, b in SUITE], ids=[n for n, _, _ in SUITE])
def test_compile_twice_gives_the_same_graph_ir_and_code(source, backends):
    graph = _load(source)
    if isinstance(graph, str):
        assert _load(source) == graph
        return
    before = fingerprint(graph)
    for backend in backends:
        first = artefacts(graph, backend)
        second = artefacts(graph, backend)
        _assert_same(first, second, backend)
    assert fingerprint(graph) == before, "compiling changed the caller's graph"
    assert fingerprint(_load(source)) == before, "importing the same model twice differs"


@pytest.mark.parametrize("name", sorted(SMALL))
def test_compile_twice_gives_bit_identical_outputs(name):
    model = SMALL[name]()
    feeds = _feeds_for(model)
    expected = glow.compile(model, backend="reference").run(feeds)
    for backend in BACKENDS:
        runs = [glow.compile(model, backend=backend).run(feeds) for _ in range(2)]
        for out, want in expected.items():
            first, second = runs[0][out], runs[1][out]
            assert first.dtype == second.dtype and first.shape == second.shape
            assert first.tobytes() == second.tobytes(), f"{backend}: output {out} differs between compiles"
            np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4, err_msg=f"{backend} vs reference")


def test_symbolic_batch_model_right_in_a_fresh_executable():
    """A symbolic batch re-runs the pipeline at the first run (shape specialisation): that run's
    graph must be the one a static compile makes, so its answer is the static one's."""
    model = mobilenet_like(batch="N")
    feeds = _feeds_for(model, batch=3)
    want = glow.compile(model, backend="reference").run(feeds)["y"]
    static = mobilenet_like(batch=3)
    for backend in [b for b in BACKENDS if b != "reference"]:
        got = glow.compile(model, backend=backend).run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=backend)
        assert got.tobytes() == glow.compile(static, backend=backend).run(feeds)["y"].tobytes(), backend


def test_constants_are_read_only_so_a_mutation_raises():
    """Graphs share constants (rebuild keeps them): a pass or kernel writing into one would change
    every other compile holding it, so the arrays are read-only views; the caller's array is not
    touched."""
    from glow import dtypes as dt
    from glow.graph import GraphBuilder

    mine = np.arange(4, dtype=np.float32)
    b = GraphBuilder("t")
    c = b.constant(mine, "c")
    with pytest.raises(ValueError, match="read-only"):
        c.data[0] = 5
    mine[0] = 7  # still the caller's own, writable array
    x = b.input("x", dt.tensor((4,), "float32"))
    g = b.build([b.add1("Add", [x, c])])
    for backend in BACKENDS:
        glow.compile(g, backend).run({"x": np.zeros(4, np.float32)})


@pytest.mark.parametrize("backend", BACKENDS + ["reference-ir"])
def test_writing_into_a_result_changes_neither_the_next_run_nor_the_input(backend):
    from glow import dtypes as dt
    from glow.graph import GraphBuilder

    b = GraphBuilder("t")
    x = b.input("x", dt.tensor((3,), "float32"))
    c = b.constant(np.arange(3, dtype=np.float32), "c")
    g = b.build([b.add1("Add", [c, b.constant(np.float32(1), "one")]), b.add1("Identity", [x])])
    exe = glow.compile(g, backend)
    feed = np.zeros(3, np.float32)
    first = exe.run({"x": feed})
    for out in first.values():
        out[0] = 100  # the caller's to keep
    again = exe.run({"x": feed})
    np.testing.assert_array_equal(again[g.output_names[0]], [1, 2, 3])
    np.testing.assert_array_equal(feed, [0, 0, 0])


def test_a_compile_pauses_the_collector_and_gives_it_back():
    import gc
    import threading

    from glow import flow

    was = gc.isenabled()
    try:
        for start in (True, False):
            (gc.enable if start else gc.disable)()
            entered, release, inside = threading.Event(), threading.Event(), []

            def other(entered=entered, release=release):  # a compile on another thread
                with flow.collector_paused():
                    entered.set()
                    release.wait(10)

            t = threading.Thread(target=other)
            with flow.collector_paused():
                t.start()
                entered.wait(10)
                with flow.collector_paused():  # nested
                    inside.append(gc.isenabled())
                inside.append(gc.isenabled())
            inside.append(gc.isenabled())  # the other thread's compile still runs
            release.set()
            t.join()
            assert inside == [False, False, False]
            assert gc.isenabled() == start
            glow.compile(mobilenet_like(size=16), "cpu")
            assert gc.isenabled() == start  # as the caller had it
    finally:
        (gc.enable if was else gc.disable)()


def test_a_compile_turns_numpys_huge_page_advice_off_and_back():
    from glow import flow

    switch = flow._numpy_hugepage_switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")

    def state():
        was = switch(False)
        switch(was)
        return was

    before = state()
    try:
        for start in (True, False):
            switch(start)
            with flow.compiling():
                with flow.compiling():  # nested
                    assert state() is False
                assert state() is False
            assert state() is start
            glow.compile(mobilenet_like(size=16), "cpu")
            assert state() is start
    finally:
        switch(before)
