"""Lowering of If, Scan and Loop beyond the op records: both values of a run-time condition, the
instances the rules must decline (and leave no nodes behind), nested captures, the unrolling caps,
and the ONNX node cases with control flow that the floor must run."""

import numpy as np
import pytest
from glow import dtypes as dt
from glow.errors import GraphError
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.lowering import lower_to_supported, rule_for, supports_floor
from glow.lowering.rules_control import MAX_TRIPS
from glow.rewrite import rebuild
from glow.testing.records.control import IF_RECORDS, LOOP_RECORDS, body, tensor

FLOAT = tensor((2, 3))


def _lower(graph, keep=()):
    """Lower to the floor, leaving the ops in `keep` in place (so a declined rule is not an error)."""
    return lower_to_supported(graph, lambda n: supports_floor(n) or n.op.name in keep, "floor", verify=True)


def _one_round(graph):
    """One rebuild applying only the control-flow rules: a declined node stays as it is."""
    def visit(rb, node, ins):
        return rule_for(node.op.name)(rb, node, ins) if node.op.name in ("If", "Loop", "Scan") else None
    return rebuild(graph, visit)[0]


def _same(graph, lowered, feeds):
    want, got = run_graph(graph, feeds), run_graph(lowered, feeds)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape
        np.testing.assert_allclose(got[name], w, rtol=1e-6, atol=1e-6)


def _if_graph(then, other, captures=(("x", FLOAT),)):
    b = GraphBuilder("g")
    c = b.input("c", tensor((), "bool"))
    caps = [b.input(n, t) for n, t in captures]
    return b.build([b.add1("If", [c], {"then_branch": then, "else_branch": other}, captures=caps)])


RUNTIME_IF = [r for r in IF_RECORDS if r.inputs[0].__class__.__name__ == "In"]


@pytest.mark.parametrize("rec", RUNTIME_IF, ids=[r.id for r in RUNTIME_IF])
@pytest.mark.parametrize("cond", [True, False])
def test_runtime_condition_selects_either_branch(rec, cond):
    graph, feeds = rec.build()
    feeds["x0"] = np.full(feeds["x0"].shape, cond)
    for k in ("c2",):  # the nested condition: both values too
        if k in feeds:
            for inner in (True, False):
                _same(graph, _lower(graph), {**feeds, k: np.asarray(inner)})
            return
    lowered = _lower(graph)
    assert {n.op.name for n in lowered.nodes} >= {"Where"}
    _same(graph, lowered, feeds)


def test_known_condition_inlines_only_the_taken_branch():
    rec = next(r for r in IF_RECORDS if r.name == "const-true")
    graph, feeds = rec.build()
    lowered = _lower(graph)
    assert "Mul" not in lowered.op_counts() and "Where" not in lowered.op_counts()
    _same(graph, lowered, feeds)


def _gather_branch(index=None):
    """x[idx] with idx a captured run-time index, or a constant index."""
    caps = [("x", tensor((5,)))] + ([("idx", tensor((), "int64"))] if index is None else [])

    def fn(b, x, *idx):
        i = idx[0] if index is None else b.constant(np.asarray(index, np.int64))
        return [b.add1("Gather", [x, i])]
    return body("then", captures=caps, fn=fn)


def _zero_branch():
    return body("else", captures=[("x", tensor((5,)))],
                fn=lambda b, x: [b.add1("ReduceMin", [x], {"keepdims": 0})])


def test_if_declines_to_speculate_a_branch_that_may_fail():
    # `x[idx] if idx_ok else min(x)`: indexing with run-time data must not run when not taken
    g = _if_graph(_gather_branch(), _zero_branch(),
                  captures=[("x", tensor((5,))), ("idx", tensor((), "int64"))])
    lowered = _one_round(g)
    assert [n.op.name for n in lowered.nodes] == ["If"]  # declined, and nothing left behind
    feeds = {"c": np.asarray(False), "x": np.arange(5, dtype=np.float32), "idx": np.asarray(99)}
    _same(g, lowered, feeds)


def test_a_constant_out_of_range_index_is_refused_even_in_a_branch():
    # a constant index past the end is a malformed model (a compile-time GraphError naming the
    # node), whichever branch it sits in: nothing is left for speculation to decide
    with pytest.raises(GraphError, match="gather.*index 7 is out of range"):
        _gather_branch(7)


@pytest.mark.parametrize("index, speculated", [(3, True), (-5, True)])
def test_if_speculates_indexing_with_known_in_range_indices(index, speculated):
    g = _if_graph(_gather_branch(index), _zero_branch(), captures=[("x", tensor((5,)))])
    lowered = _one_round(g)
    assert ("If" not in lowered.op_counts()) == speculated
    for c in (True, False):
        if speculated or not c:
            _same(g, lowered, {"c": np.asarray(c), "x": np.arange(5, dtype=np.float32)})


def test_if_declines_branches_of_different_shapes_or_with_effects():
    wide = body("then", captures=[("x", FLOAT)], fn=lambda b, x: [x])
    narrow = body("else", captures=[("x", FLOAT)],
                  fn=lambda b, x: [b.add1("ReduceSum", [x, b.constant(np.array([0]))], {"keepdims": 1})])
    assert [n.op.name for n in _one_round(_if_graph(wide, narrow)).nodes] == ["If"]
    noisy = body("then", captures=[("x", FLOAT)], fn=lambda b, x: [b.add1("RandomUniformLike", [x])])
    assert [n.op.name for n in _one_round(_if_graph(noisy, wide)).nodes] == ["If"]


def test_if_inlines_an_effectful_branch_when_the_condition_is_known():
    noisy = body("then", captures=[("x", FLOAT)], fn=lambda b, x: [b.add1("RandomUniformLike", [x])])
    wide = body("else", captures=[("x", FLOAT)], fn=lambda b, x: [x])
    b = GraphBuilder("g")
    x = b.input("x", FLOAT)
    y = b.add1("If", [b.constant(np.asarray(True))], {"then_branch": noisy, "else_branch": wide}, captures=[x])
    lowered = _lower(b.build([y]), keep={"RandomUniformLike"})
    assert lowered.op_counts().get("RandomUniformLike") == 1 and "If" not in lowered.op_counts()


def _loop_graph(m, cond, graph, outputs, m_input=False, cond_input=False):
    b = GraphBuilder("g")
    y = b.input("y", graph.inputs[2].type)
    mv = b.input("m", tensor((), "int64")) if m_input else None if m is None else b.constant(np.asarray(m, np.int64))
    cv = b.input("cond", tensor((), "bool")) if cond_input else None if cond is None else b.constant(np.asarray(cond))
    return b.build(b.add("Loop", [mv, cv, y], {"body": graph}, num_outputs=outputs))


def _record_body(name):
    return next(r for r in LOOP_RECORDS if r.name == name).attrs["body"]


def test_loop_declines_a_run_time_trip_count():
    g = _loop_graph(None, True, _record_body("count-3"), 1, m_input=True)
    assert [n.op.name for n in _one_round(g).nodes] == ["Loop"]


def test_loop_declines_without_any_bound_and_beyond_the_cap():
    for g in (_loop_graph(None, None, _record_body("count-3"), 1, cond_input=True),
              _loop_graph(MAX_TRIPS + 1, True, _record_body("count-3"), 1)):
        assert [n.op.name for n in _one_round(g).nodes] == ["Loop"]


def test_loop_declines_a_data_dependent_exit_with_scan_outputs():
    def fn(b, i, c, y):
        y2 = b.add1("Mul", [y, b.constant(np.asarray(2, np.float32))])
        more = b.add1("Less", [b.add1("ReduceSum", [y2], {"keepdims": 0}), b.constant(np.asarray(20, np.float32))])
        return [more, y2, b.add1("Identity", [y2])]
    g = _loop_graph(6, True, body("grow", [("i", tensor((), "int64")), ("c", tensor((), "bool")),
                                           ("y", tensor((3,)))], fn=fn), 2)
    assert [n.op.name for n in _one_round(g).nodes] == ["Loop"]


@pytest.mark.parametrize("cond", [True, False])
def test_masked_loop_follows_a_run_time_condition(cond):
    rec = next(r for r in LOOP_RECORDS if r.name == "runtime-cond-masked")
    graph, feeds = rec.build()
    feeds["x1"] = np.asarray(cond)
    _same(graph, _lower(graph), feeds)


def test_data_dependent_exit_at_every_iteration():
    rec = next(r for r in LOOP_RECORDS if r.name == "data-dependent-exit")
    graph, _ = rec.build()
    lowered = _lower(graph)
    for start in (25.0, 6.0, 3.0, 1.0, 0.01):  # exits after 1, 2, 3, 5 and all 6 iterations
        _same(graph, lowered, {"x2": np.full(3, start / 3, np.float32)})


def test_nested_sub_graphs_find_their_captures_after_unrolling():
    # the body's If reads the body's carried value; unrolled, each copy must read its own iteration's
    rec = next(r for r in LOOP_RECORDS if r.name == "if-in-body")
    graph, feeds = rec.build()
    lowered = _lower(graph, keep={"If"})
    ifs = [n for n in lowered.nodes if n.op.name == "If"]
    assert len(ifs) == 4 and all(n.captures[0].name == n.attrs["then_branch"].captures[0].name for n in ifs)
    _same(graph, lowered, feeds)


def test_scan_declines_beyond_the_cap():
    cumsum = body("c", [("s", tensor((1,))), ("x", tensor((1,)))],
                  fn=lambda b, s, x: [b.add1("Add", [s, x])])
    b = GraphBuilder("g")
    s, x = b.input("s", tensor((1,))), b.input("x", tensor((MAX_TRIPS + 1, 1)))
    g = b.build(b.add("Scan", [s, x], {"body": cumsum, "num_scan_inputs": 1}, num_outputs=1))
    assert [n.op.name for n in _one_round(g).nodes] == ["Scan"]


# ONNX node cases with control flow that run on the floor (the others need what a floor cannot
# have: sequences selected at run time, trip counts computed from input data).
FLOOR_CASES = ["test_if", "test_loop11", "test_scan9_multi_state", "test_scan9_scalar", "test_scan9_sum",
               "test_scan_sum", "test_range_int32_type_negative_delta_expanded",
               "test_linear_attention_gated_delta_gqa_expanded", "test_linear_attention_decode_step_expanded",
               "test_linear_attention_prefill_with_past_expanded"]


@pytest.mark.parametrize("name", FLOOR_CASES)
def test_node_case_runs_on_the_floor(name):
    from glow.testing.node_suite import case_by_name, run_case

    assert run_case(case_by_name()[name], native="floor") is None


def test_records_build_with_captures():
    rec = IF_RECORDS[0]
    graph, feeds = rec.build()
    (node,) = graph.nodes
    assert [c.name for c in node.captures] == ["x"] and set(feeds) == {"x"}
    assert graph.inputs[0].type == dt.TensorType((2, 3), dt.float32)
