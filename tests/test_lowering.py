"""Lowering: the floor, the driver, and every rule checked against the un-lowered op."""

import glow
import numpy as np
import pytest
from glow import dtypes as dt
from glow.graph import GraphBuilder
from glow.interpreter import run_graph
from glow.lowering import FLOOR, LOWERINGS, lower_to_supported, rule_for, supports_floor
from glow.ops import all_ops, get_op
from glow.testing.op_records import all_records

RECORDS = [r for r in all_records() if rule_for(r.op, r.domain) is not None]


def test_floor_is_small_closed_and_declared():
    assert 30 <= len(FLOOR) <= 40
    for name in FLOOR:
        assert get_op(name) is not None


def test_every_rule_has_a_record():
    rule_for("Relu")  # loads the rules
    covered = {(r.domain, r.op) for r in all_records()}
    # Backend-private ops (domain "glow.<backend>") are tested with their backend (tests/test_cpu_*).
    missing = sorted(k for k in set(LOWERINGS) - covered if not k[0].startswith("glow."))
    assert not missing, f"lowering rules without a test record: {missing}"


@pytest.mark.parametrize("rec", RECORDS, ids=[r.id for r in RECORDS])
def test_rule_matches_unlowered_op(rec):
    graph, feeds = rec.build()
    expected = run_graph(graph, feeds)
    lowered = lower_to_supported(graph, supports_floor, "floor", verify=True)
    assert all(supports_floor(n) for n in lowered.nodes)
    assert "node" not in {n.name for n in lowered.nodes}, "the record's node was not lowered"
    got = run_graph(lowered, feeds)
    for name, e in expected.items():
        g = got[name]
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rec.rtol, atol=rec.atol,
                                   equal_nan=True)


def test_driver_names_every_stuck_op_and_the_backend():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), "float32"))
    y = b.add1("Relu", [x])
    z = b.add1("Sqrt", [y])
    g = b.build([z])
    with pytest.raises(glow.LoweringError, match=r"backend 'toy' cannot run 1 op type\(s\).*Sqrt \(x1\)"):
        lower_to_supported(g, lambda n: n.op.name in {"Max"}, "toy")


def test_driver_reaches_fixed_point_and_keeps_interface():
    b = GraphBuilder()
    x = b.input("x", dt.tensor((2, 3), "float32"))
    y = b.add1("Tanh", [b.add1("Relu", [x])], output_names=["out"])
    g = lower_to_supported(b.build([y]), supports_floor, "floor")
    assert g.output_names == ["out"] and g.input_names == ["x"]
    assert {n.op.name for n in g.nodes} <= FLOOR


def test_rules_only_for_known_ops():
    rule_for("Relu")
    known = {(o.domain, o.name) for o in all_ops()}
    assert set(LOWERINGS) <= known
