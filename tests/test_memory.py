"""The static memory planner: offsets from live intervals, its lower bound, and the light models."""

import json
import subprocess
import sys

import glow
import numpy as np
import pytest
from glow.flow import optimize_for_backend
from glow.ir import lower_to_ir
from glow.ir.memory import Interval, MemoryPlan, check_plan, live_profile, plan_arena
from glow.plugins import registry
from glow.testing.models import light_models
from helpers import EXAMPLE_MODEL


def iv(k, size, start, end):
    return Interval(k, f"b{k}", size, start, end)


def test_lower_bound_is_the_most_bytes_live_at_once():
    ivs = [iv(0, 128, 0, 2), iv(1, 64, 1, 3), iv(2, 256, 3, 4)]
    assert list(live_profile(ivs, 5)) == [128, 192, 192, 320, 256, 0]


def test_planner_reuses_dead_space_and_reaches_the_bound():
    # A chain: each buffer lives while the next is computed (what a CNN looks like).
    ivs = [iv(k, 64 * (k % 3 + 1), k, k + 1) for k in range(8)]
    offsets, arena, _ = plan_arena(ivs, 9)
    assert arena == int(live_profile(ivs, 9).max())
    assert all(o % 64 == 0 for o in offsets.values())
    check_plan(MemoryPlan(offsets, arena, arena, sum(i.size for i in ivs), ivs))


def test_planner_tries_strategies_until_one_reaches_the_bound():
    # Placing in program order leaves a hole the large buffer cannot use; max-live placement
    # (largest buffer at the busiest moment first) does not.
    ivs = [iv(0, 64, 0, 1), iv(1, 64, 0, 3), iv(2, 128, 2, 3), iv(3, 64, 4, 5), iv(4, 192, 5, 6)]
    offsets, arena, strategy = plan_arena(ivs, 7)
    assert arena == int(live_profile(ivs, 7).max()) == 256
    check_plan(MemoryPlan(offsets, arena, arena, 0, ivs))


def test_overlapping_plan_is_rejected():
    ivs = [iv(0, 64, 0, 2), iv(1, 64, 1, 3)]
    with pytest.raises(AssertionError, match="overlap"):
        check_plan(MemoryPlan({0: 0, 1: 0}, 64, 128, 128, ivs))


def plan_of(path):
    graph = optimize_for_backend(glow.load_onnx(path), registry().get("reference-ir"))
    return lower_to_ir(graph)


def test_example_model_plan():
    p = plan_of(EXAMPLE_MODEL)
    plan = p.plan
    assert plan.arena_bytes <= 1.05 * plan.lower_bound_bytes
    assert plan.lower_bound_bytes <= plan.arena_bytes < plan.no_reuse_bytes
    assert all(off % 64 == 0 for off in plan.offsets.values())


@pytest.mark.slow
@pytest.mark.parametrize("case", light_models(), ids=lambda c: c.name)
def test_light_model_arena_sits_at_the_lower_bound(case):
    plan = plan_of(case.model_path).plan
    assert plan.arena_bytes <= 1.05 * plan.lower_bound_bytes, (plan.arena_bytes, plan.lower_bound_bytes)
    assert plan.no_reuse_bytes > 1.3 * plan.arena_bytes


def glow_cli(*args):
    return subprocess.run([sys.executable, "-m", "glow.cli", *args], capture_output=True, text=True)


def test_cli_dumps_ir_and_memory_plan():
    r = glow_cli("compile", EXAMPLE_MODEL, "--dump", "memory", "--json", "-b", "reference-ir")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["lower_bound_bytes"] <= d["arena_bytes"] <= d["no_reuse_bytes"]
    assert {"name", "offset", "bytes", "live"} <= set(d["buffers"][0])
    r = glow_cli("compile", EXAMPLE_MODEL, "--dump", "ir", "-b", "reference-ir")
    assert r.returncode == 0, r.stderr
    assert "program {" in r.stdout and "then Relu(acc)" in r.stdout and "@out %probs" in r.stdout
    r = glow_cli("compile", EXAMPLE_MODEL, "--dump", "memory")
    assert r.returncode == 0 and "arena:" in r.stdout and "lower bound:" in r.stdout
    r = glow_cli("compile", EXAMPLE_MODEL, "--dump", "ir", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["instructions"]


def test_arena_is_what_the_interpreter_uses():
    p = plan_of(EXAMPLE_MODEL)
    assert p.arena.nbytes == p.plan.arena_bytes
    feeds = {"image": np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)}
    want = glow.compile(EXAMPLE_MODEL, backend="reference").run(feeds)["probs"]
    np.testing.assert_allclose(p.run(feeds)["probs"], want, rtol=1e-6, atol=1e-7)
