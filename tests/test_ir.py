"""The instruction IR: golden text, IR passes, the verifier, the scheduler, and the IR interpreter
agreeing with the graph interpreter (the same pass set) on ONNX's node suite and model suites."""

import glow
import numpy as np
import pytest
from glow import GraphError
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.ir import Instr, build_ir, format_ir, generate_ir, lower_to_ir, plan_memory, schedule, verify_ir
from glow.ir.memory import live_intervals, live_profile
from glow.passes.fusion import FuseActivation, FuseElementwise, fuse
from glow.testing.compare import mismatch, to_array
from glow.testing.models import folder_cases, light_models
from glow.testing.node_suite import collect_cases

F32 = "float32"


def ir_text(g, fusions=()):
    p = lower_to_ir(fuse(g, fusions))
    return format_ir(p.fn, p.plan)


def chain():
    b = GraphBuilder("chain")
    x = b.input("x", dt.tensor((2, 8), F32))
    y = b.add1("Tanh", [b.add1("Sigmoid", [b.add1("Relu", [x])])], output_names=["y"])
    return b.build([y])


def concat():
    b = GraphBuilder("concat")
    x = b.input("x", dt.tensor((1, 4, 2, 2), F32))
    c = b.add1("Concat", [b.add1("Relu", [x], name="relu"), b.add1("Sigmoid", [x], name="sig")],
               {"axis": 1}, name="cat")
    f = b.add1("Reshape", [c, b.constant(np.array([1, -1], np.int64), "shape")], name="flat")
    return b.build([b.add1("Exp", [f], output_names=["y"], name="exp")])


def in_place():
    b = GraphBuilder("inplace")
    x = b.input("x", dt.tensor((4, 16), F32))
    n = b.add1("Neg", [b.add1("Log", [b.add1("Exp", [x], name="exp")], name="log")], name="neg")
    return b.build([b.add1("Add", [n, x], output_names=["y"], name="add")])


def conv_relu():
    b = GraphBuilder("conv")
    x = b.input("x", dt.tensor((1, 2, 6, 6), F32))
    w = b.constant(np.ones((4, 2, 3, 3), np.float32), "w")
    c = b.add1("Conv", [x, w, b.constant(np.zeros(4, np.float32), "b")], {"pads": (1, 1, 1, 1)},
               name="conv")
    r = b.add1("Relu", [c], name="relu")
    return b.build([b.add1("MaxPool", [r], {"kernel_shape": (2, 2), "strides": (2, 2)},
                           output_names=["y"], name="pool")])


# -- golden text -----------------------------------------------------------------------------------
def test_golden_fused_elementwise_chain():
    assert ir_text(chain(), [FuseElementwise()]) == """\
function chain {
  declare {
    input      %x: float32[2x8]
    output     %y: float32[2x8]
  }
  program {
    0  fused @out %y, @in %x = Tanh(Sigmoid(Relu(in0)))
  }
}"""


def test_golden_in_place_elementwise_chain():
    assert ir_text(in_place()) == """\
function inplace {
  declare {
    input      %x: float32[4x16]
    output     %y: float32[4x16]
    activation %exp: float32[4x16]  @0
  }
  program {
    0  alloc %exp
    1  Exp @out %exp, @in %x
    2  Log @inout %exp, @in %exp
    3  Neg @inout %exp, @in %exp
    4  Add @out %y, @in %exp, @in %x
    5  dealloc %exp
  }
}"""


def test_golden_concat_written_in_place_and_reshape_as_view():
    assert ir_text(concat()) == """\
function concat {
  declare {
    input      %x: float32[1x4x2x2]
    output     %y: float32[1x32]
    activation %cat: float32[1x8x2x2]  @0
  }
  views {
    %relu = view %cat +0: float32[1x4x2x2]
    %sig = view %cat +64: float32[1x4x2x2]
    %flat = view %cat +0: float32[1x32]
  }
  program {
    0  alloc %cat
    1  Relu @out %relu, @in %x
    2  Sigmoid @out %sig, @in %x
    3  Exp @out %y, @in %flat
    4  dealloc %cat
  }
}"""


def test_golden_conv_with_fused_activation():
    assert ir_text(conv_relu(), [FuseActivation()]) == """\
function conv {
  declare {
    weight     %w: float32[4x2x3x3]
    weight     %b: float32[4]
    input      %x: float32[1x2x6x6]
    output     %y: float32[1x4x3x3]
    activation %relu/fused: float32[1x4x6x6]  @0
  }
  program {
    0  alloc %relu/fused
    1  Conv @out %relu/fused, @in %x, @in %w, @in %b {auto_pad='NOTSET', group=1, pads=[1, 1, 1, 1]} \
then Relu(acc)
    2  MaxPool @out %y, @in %relu/fused {auto_pad='NOTSET', ceil_mode=0, kernel_shape=[2, 2], \
storage_order=0, strides=[2, 2]}
    3  dealloc %relu/fused
  }
}"""


# -- IR passes -------------------------------------------------------------------------------------
def kinds(fn):
    return [i.kind if i.kind != "kernel" else i.op.name for i in fn.instrs]


def test_irgen_marks_lifetimes_crudely_and_the_passes_tighten_them():
    g = in_place()
    raw = generate_ir(g, schedule(g))
    assert kinds(raw) == ["alloc", "alloc", "alloc", "Exp", "Log", "Neg", "Add", "dealloc", "dealloc",
                          "dealloc"]
    plain = build_ir(g, optimize=False)  # lifetimes tightened, nothing shared
    assert kinds(plain) == ["alloc", "Exp", "alloc", "Log", "dealloc", "alloc", "Neg", "dealloc", "Add",
                            "dealloc"]
    assert plan_memory(plain).arena_bytes == 2 * 256  # two buffers live at once, reused
    assert len(build_ir(g).activations()) == 1  # shared: one buffer written in place


def test_copy_elimination_writes_concat_inputs_in_place():
    g = concat()
    plain = build_ir(g, optimize=False)
    assert kinds(plain).count("copy") == 2
    fn = build_ir(g)
    assert "copy" not in kinds(fn) and [b.name for b in fn.activations()] == ["cat"]


def test_dead_stores_are_deleted():
    b = GraphBuilder("dead")
    x = b.input("x", dt.tensor((4,), F32))
    b.add1("Exp", [x])  # nobody reads it (no graph DCE here)
    g = b.build([b.add1("Relu", [x])])
    assert kinds(generate_ir(g)).count("Exp") == 1
    assert "Exp" not in kinds(build_ir(g)) and build_ir(g).activations() == []


def test_graph_output_written_directly_through_a_reshape():
    b = GraphBuilder("out")
    x = b.input("x", dt.tensor((2, 3), F32))
    r = b.add1("Reshape", [b.add1("Relu", [x]), b.constant(np.array([6], np.int64))], output_names=["y"])
    fn = build_ir(b.build([r]))
    assert kinds(fn) == ["Relu"] and fn.instrs[0].outputs[0].root.name == "y"


def test_verifier_rejects_bad_ir():
    fn = build_ir(in_place())
    exp = fn.instrs[1]
    w = next(b for b in fn.buffers if b.kind == "input")
    bad = fn.replace(instrs=(fn.instrs[0], exp.replace(outputs=(w,))) + fn.instrs[2:])
    with pytest.raises(GraphError, match="writes to input buffer"):
        verify_ir(bad)
    late = fn.replace(instrs=fn.instrs[:-1][:-2] + (fn.instrs[-1], fn.instrs[-2]))
    with pytest.raises(GraphError, match="outside the lifetime"):
        verify_ir(late)
    act = fn.activations()[0]
    with pytest.raises(GraphError, match="reads %exp before anything writes"):
        verify_ir(fn.replace(instrs=(Instr("alloc", "exp", (act,)),) + fn.instrs[2:]))


# -- scheduling ------------------------------------------------------------------------------------
def test_scheduler_runs_the_memory_hungry_branch_first():
    """Two branches meet in an Add: the one whose intermediates are large but whose result is
    small should run first, while nothing else is held."""
    b = GraphBuilder("branches")
    x = b.input("x", dt.tensor((1, 4), F32))
    small = b.add1("Relu", [x], name="small")  # 16 bytes, cheap
    big = b.add1("Expand", [x, b.constant(np.array([256, 4], np.int64))], name="big")  # 4 KiB
    big = b.add1("ReduceSum", [b.add1("Exp", [big], name="big_exp"),
                               b.constant(np.array([0], np.int64))], name="reduce")
    g = b.build([b.add1("Add", [small, big], name="add")])
    order = [n.name for n in schedule(g)]
    assert order.index("reduce") < order.index("small")

    def peak(nodes):
        fn = build_ir(g.__class__(g.name, g.inputs, tuple(nodes), g.outputs), optimize=False)
        return int(live_profile(live_intervals(fn), len(fn.instrs)).max())

    naive = [n for n in g.nodes]  # as built: small first, held across the big branch
    assert peak(schedule(g)) <= peak(naive)


# -- the IR interpreter agrees with the graph interpreter ------------------------------------------
def agree(a: dict, b: dict, impure: bool = False) -> str | None:
    """None when IR results equal graph results: exactly, or within 1e-5 for floats (a BLAS call
    on a contiguous copy may round differently from one on a strided view)."""
    if list(a) != list(b):
        return f"outputs {list(b)} != {list(a)}"
    for k in a:
        m = mismatch(to_array(a[k]), b[k], 0, 0, k)
        if m and isinstance(b[k], np.ndarray) and b[k].dtype.kind in "fc":
            m = mismatch(to_array(a[k]), b[k], 1e-5, 1e-6, k)
        if m and not impure:
            return m
    return None


def compare_backends(model, feed_sets) -> str | None:
    try:
        ref = glow.compile(model, backend="reference")
    except Exception as e:  # noqa: BLE001 - the graph path cannot take it: nothing to compare
        pytest.skip(f"graph path fails to compile: {type(e).__name__}")
    ir = glow.compile(model, backend="reference-ir")
    impure = any(not n.op.pure for n in ref.graph.nodes)
    for feeds in feed_sets:
        with np.errstate(all="ignore"):
            try:
                want = ref.run(feeds)
            except Exception:  # noqa: BLE001
                pytest.skip("graph path fails to run this case")
            got = ir.run(feeds)
        m = agree(want, got, impure)
        if m:
            return m
    return None


CASES = collect_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ir_matches_graph_on_node_case(case):
    model = case.model
    init = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    feed_sets = [{n: to_array(x) for n, x in zip(names, inputs)} for inputs, _ in case.data_sets]
    err = compare_backends(model, feed_sets)
    assert err is None, err


FOLDERS = folder_cases("pytorch-converted") + folder_cases("pytorch-operator") + folder_cases("simple")


@pytest.mark.parametrize("case", FOLDERS, ids=[c.name for c in FOLDERS])
def test_ir_matches_graph_on_model_folder(case):
    err = compare_backends(case.model_path, [feeds for feeds, _ in case.data_sets])
    assert err is None, err


LIGHT = light_models()


@pytest.mark.slow
@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_ir_matches_graph_on_light_model(case):
    err = compare_backends(case.model_path, [feeds for feeds, _ in case.data_sets])
    assert err is None, err
    (feeds, (expected,)), = case.data_sets
    got = glow.compile(case.model_path, backend="reference-ir").run(feeds)
    assert mismatch(expected, next(iter(got.values())), case.rtol, case.atol) is None


def test_ir_interpreter_runs_with_the_planned_arena():
    """Activations really live in the arena: buffers that share bytes must not clobber results."""
    b = GraphBuilder("reuse")
    x = b.input("x", dt.tensor((8, 8), F32))
    y = x
    for k in range(6):  # Transpose is not elementwise: each one needs a fresh buffer
        y = b.add1("Transpose", [b.add1("Tanh" if k % 2 else "Sin", [b.add1("Mul", [y, x])])])
    g = b.build([y])
    p = lower_to_ir(g)
    assert p.plan.arena_bytes * 2 < p.plan.no_reuse_bytes
    xv = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_array_equal(p.run({"x": xv})[g.output_names[0]],
                                  run_graph(g, {"x": xv})[g.output_names[0]])
