"""The CPU backend on several threads: which kernel calls wait for which (sync.py), the
thread pools (pool.py), and whole models that must give the same numbers on one and two threads,
also when the second thread never gets to run."""

import os
import threading
import time

import glow
import numpy as np
import onnx
import pytest

pytest.importorskip("llvmlite")

from glow.backends.cpu.pool import Placement, ThreadChoice, ThreadPool, get_pool  # noqa: E402
from glow.backends.cpu.runtime import _address  # noqa: E402
from glow.backends.cpu.sync import Phases  # noqa: E402


def arena(start, end, writes=False):
    return ("arena", start, end, writes)


# -- which phases wait for which ------------------------------------------------------------------

def test_a_phase_waits_for_the_phase_that_wrote_what_it_reads():
    p = Phases()
    assert p.add([arena(0, 64, True)], single=False) == []
    assert p.add([arena(0, 64), arena(64, 128, True)], single=False) == [0]


def test_independent_phases_do_not_wait():
    p = Phases()
    p.add([arena(0, 64, True)], single=True)
    assert p.add([arena(64, 128, True)], single=True) == []
    assert p.add([arena(0, 64), arena(64, 128), arena(128, 192, True)], single=True) == [1, 0]


def test_reads_do_not_conflict_with_reads():
    p = Phases()
    p.add([("in", 0, 100, False), arena(0, 64, True)], single=True)
    assert p.add([("in", 0, 100, False), arena(64, 128, True)], single=True) == []


def test_reusing_arena_bytes_waits_for_their_last_reader():
    p = Phases()
    p.add([arena(0, 64, True)], single=True)  # 0 writes a
    p.add([arena(0, 64), ("out", 0, 4, True)], single=True)  # 1 reads a
    assert p.add([arena(0, 64, True)], single=True) == [1]  # 2 reuses a's bytes: after 1 (and so 0)


def test_a_wait_implied_by_another_is_dropped():
    p = Phases()
    p.add([arena(0, 64, True)], single=True)
    p.add([arena(0, 64), arena(64, 128, True)], single=True)  # after 0
    assert p.add([arena(0, 64), arena(64, 128)], single=True) == [1]  # 1 done implies 0 done


def test_calls_of_one_instruction_run_in_order_and_the_end_waits_for_all():
    p = Phases()
    p.add([arena(0, 64, True)], single=True)
    p.add([arena(128, 192, True)], single=True)
    assert p.add([arena(256, 320, True)], single=True, after=1) == [1]
    assert sorted(p.final()) == [0, 2]


# -- the thread pools ------------------------------------------------------------------------------

def test_run_calls_every_thread_once():
    pool = ThreadPool(3)
    seen = []
    pool.run(lambda ctx, tid, n: seen.append((ctx, tid, n)), "c")
    assert sorted(seen) == [("c", 0, 3), ("c", 1, 3), ("c", 2, 3)]


def test_share_does_not_wait_for_workers_but_the_next_call_does():
    pool = ThreadPool(2)
    joined, gate, order = threading.Event(), threading.Event(), []

    def fn(ctx, tid, n):
        if tid == 0:
            assert joined.wait(5)  # the worker is in
        else:
            joined.set()
            gate.wait(5)  # ... and stays there after the caller is done

    pool.share(fn, None)
    order.append("returned")
    nxt = threading.Thread(target=pool.share, args=(lambda ctx, tid, n: None, None),
                           kwargs={"before": lambda: order.append("before")})
    nxt.start()
    nxt.join(0.2)
    assert order == ["returned"]  # the next call waits until no worker is inside
    gate.set()
    nxt.join(5)
    assert order == ["returned", "before"]


def _placement(cpus, workers=(11, 12), refuse=False):
    """A Placement over `cpus` whose caller's CPU is set by the test and whose affinity calls are recorded."""
    pl = Placement(list(workers))
    pl.cpus, pl.active = frozenset(cpus), len(cpus) > len(workers)
    pl.where, pl.calls = 0, []
    pl._getcpu = lambda: pl.where

    def setaffinity(tid, mask):
        if refuse:
            raise OSError(22, "Invalid argument")
        pl.calls.append((tid, set(mask)))
    return pl, setaffinity


def test_workers_are_kept_off_the_callers_cpu_and_follow_it(monkeypatch):
    pl, setaffinity = _placement({0, 1, 2, 3})
    monkeypatch.setattr("glow.backends.cpu.pool.os.sched_setaffinity", setaffinity)
    pl.follow()
    assert pl.calls == [(11, {1, 2, 3}), (12, {1, 2, 3})]
    pl.follow()  # the caller has not moved: no system call
    assert len(pl.calls) == 2
    pl.where = 2
    pl.follow()
    assert pl.calls[2:] == [(11, {0, 1, 3}), (12, {0, 1, 3})]


def test_placement_stands_aside_where_it_cannot_help(monkeypatch):
    pl, setaffinity = _placement({0, 1})  # two workers, two CPUs: each needs one of its own
    monkeypatch.setattr("glow.backends.cpu.pool.os.sched_setaffinity", setaffinity)
    pl.follow()
    assert not pl.active and pl.calls == []
    pl, setaffinity = _placement({0, 1, 2}, refuse=True)  # the system refuses (a cpuset changed): stop asking
    monkeypatch.setattr("glow.backends.cpu.pool.os.sched_setaffinity", setaffinity)
    pl.follow()
    pl.where = 1
    pl.follow()
    assert not pl.active


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_shared_call_leaves_the_worker_off_the_callers_cpu():
    pool = ThreadPool(2)
    pool.share(lambda ctx, tid, n: None, None)
    (worker,) = pool._placement.workers
    assert pool._placement.caller_cpu in os.sched_getaffinity(0)
    assert os.sched_getaffinity(worker) == os.sched_getaffinity(0) - {pool._placement.caller_cpu}


def test_pools_are_per_device():
    assert get_pool(2, "cpu:a") is get_pool(2, "cpu:a")
    assert get_pool(2, "cpu:a") is not get_pool(2, "cpu:b")
    assert get_pool(2) is not get_pool(2, "cpu:a")


def test_each_call_takes_the_way_that_has_been_faster_and_tries_the_other_now_and_then():
    c = ThreadChoice(clock=lambda: 0.0)  # calls of microseconds: tries counted in calls
    picks = []
    for _ in range(4 * ThreadChoice.EXPLORE):
        picks.append(c.pick())
        c.record(picks[-1], 1e-6 if picks[-1] else 2e-6)  # the caller alone is faster
    tried = [k for k, solo in enumerate(picks) if not solo]
    assert tried == [0, 2, 4, 8, 16, 32, 48]  # all threads first, then again now and then
    c.record(False, 0.5e-6)  # the machine got idle: one try on all threads is enough to switch
    assert all(c.pick() is False for _ in range(3))


def test_calls_of_some_milliseconds_try_the_slower_way_for_a_small_share_of_the_time():
    now = [0.0]
    c = ThreadChoice(clock=lambda: now[0])
    picks, spent = [], {True: 0.0, False: 0.0}
    for _ in range(400):
        picks.append(c.pick())
        took = 0.013 if picks[-1] else 0.026  # the caller alone is faster
        now[0] += took
        spent[picks[-1]] += took
        c.record(picks[-1], took)
    tried = [k for k, solo in enumerate(picks) if not solo]
    assert tried[0] == 0  # all threads first; alone twice as fast: no early second looks
    # then once per 32 times the slower way's time (0.83 s: 64 calls here), never more often
    later = tried[1:]
    assert later and all(b - a >= 60 for a, b in zip(tried, later))
    assert spent[False] <= 0.06 * (spent[False] + spent[True])  # a few percent of the time
    # a call that is fast everywhere (a machine idle again) is still found: within a second
    c.record(False, 0.005)
    assert c.pick() is False


def test_a_long_call_is_not_tried_alone_until_its_budget_allows():
    """A prefill of seconds on the pool: run alone on the second call it would cost a generation its
    first token; it is tried alone once it has run SHARE times as long on the pool."""
    c = ThreadChoice(clock=lambda: 0.0)
    picks = []
    for _ in range(40):
        picks.append(c.pick())
        c.record(picks[-1], 0.2 if not picks[-1] else 0.35)
    assert picks[:ThreadChoice.SHARE] == [False] * ThreadChoice.SHARE and True in picks
    assert picks.count(True) == 1  # and, slower alone by far, not again soon


def test_calls_whose_workers_join_at_once_are_not_tried_alone_early():
    """A 2-thread prefill of 30 ms tried alone on its second call cost that generation 18 ms of its
    first token: where the workers joined at once (they have cores), the caller alone waits for the
    budget; where one came late or not at all, it is tried on the second call as before."""
    for helped, second in ((True, False), (False, True), (None, True)):
        c = ThreadChoice(clock=lambda: 0.0)
        assert c.pick() is False
        c.record(False, 0.030, helped)
        assert c.pick() is second, helped
    c = ThreadChoice(clock=lambda: 0.0)
    picks = []
    for _ in range(40):
        picks.append(c.pick())
        c.record(picks[-1], 0.030 if not picks[-1] else 0.048, helped=True)
    assert picks[:ThreadChoice.SHARE] == [False] * ThreadChoice.SHARE and True in picks  # found when due
    c = ThreadChoice(clock=lambda: 0.0)  # calls of microseconds: tried alone early, helped or not
    c.record(False, 1e-5, helped=True)
    assert c.pick() is True


def test_the_pool_says_whether_its_workers_joined_a_shared_call_at_once():
    pool = ThreadPool(2, name="glow-test-helped")
    joined = threading.Event()

    def fn(ctx, tid, n):
        if tid == 0:  # the caller runs on long after the worker has joined (however late that was)
            t0 = time.perf_counter()
            assert joined.wait(10)
            time.sleep(30 * (time.perf_counter() - t0) + 0.01)
        else:
            joined.set()

    pool.share(fn, None)
    assert pool.helped is True
    pool.share(fn, None, solo=True)
    assert pool.helped is None


@pytest.mark.parametrize("threads", [1, 2])
def test_two_devices_run_at_the_same_time(threads):
    both = threading.Barrier(2, timeout=5)  # broken unless the two calls overlap

    def fn(ctx, tid, n):
        if tid == 0:
            both.wait()

    clients = [threading.Thread(target=get_pool(threads, f"cpu:overlap{k}").share, args=(fn, None))
               for k in range(2)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(10)
    assert not both.broken


# -- whole models ----------------------------------------------------------------------------------

def with_random_weights(path: str) -> onnx.ModelProto:
    """The light model with seeded random weights (every weight 0.02 would hide a chunk computed
    twice or not at all behind equal numbers)."""
    from glow.testing.models import with_random_weights as randomised

    return randomised(onnx.load(path))


def model_cases():
    from glow.testing.models import light_models

    for case in light_models():
        yield pytest.param(case.name, lambda c=case: (with_random_weights(c.model_path), c.data_sets[0][0]),
                           marks=pytest.mark.slow, id=case.name)
    for name in ("mlp", "small_cnn", "transformer"):
        yield pytest.param(name, lambda n=name: _bench_model(n), id=name)


def _bench_model(name):
    from glow.inputs import make_inputs
    from glow.onnx_import import load_onnx
    from glow.testing import bench_models

    model = getattr(bench_models, name)()
    return model, make_inputs(load_onnx(model), seed=0)


@pytest.fixture
def always_shared(monkeypatch):
    """Every call on all threads (the point of these tests), whatever has been faster."""
    monkeypatch.setattr(ThreadChoice, "pick", lambda self: False)


@pytest.mark.parametrize("name,load", model_cases())
def test_models_agree_on_one_and_two_threads(name, load, always_shared):
    model, feeds = load()
    want = glow.compile(model, "cpu", threads=1).run(feeds)
    assert all(np.isfinite(v).all() for v in want.values())
    exe = glow.compile(model, "cpu", threads=2)
    for _ in range(4):  # races show up as runs that differ
        got = exe.run(feeds)
        for k, w in want.items():
            np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6 * float(np.abs(w).max()), err_msg=k)


def test_the_caller_finishes_an_inference_alone_and_a_late_worker_changes_nothing():
    model, feeds = _bench_model("transformer")
    want = glow.compile(model, "cpu", threads=1).run(feeds)
    prog = glow.compile(model, "cpu", threads=2).program
    for order in ([0, 1], [1, 0]):  # worker never came / came too late; worker did it all first
        outs = [np.empty(shape, dtype) for _, dtype, shape in prog.outputs]
        prog._prepare([_address(a) for a in prog.check(feeds) + outs], solo=False)
        for tid in order:
            prog.entry(prog._ctx_address, tid, 2)
        for (name, _, _), out in zip(prog.outputs, outs):
            np.testing.assert_allclose(out, want[name], rtol=1e-5, atol=1e-6, err_msg=f"{order} {name}")


def test_a_thread_waiting_for_a_descheduled_one_sleeps_instead_of_spinning():
    import time

    from glow.backends.cpu.sync import SLOT_BYTES

    model, feeds = _bench_model("mlp")
    prog = glow.compile(model, "cpu", threads=2).program
    outs = [np.empty(shape, dtype) for _, dtype, shape in prog.outputs]
    prog._prepare([_address(a) for a in prog.check(feeds) + outs], solo=False)
    slots = prog.sync.view(np.int64).reshape(-1, SLOT_BYTES // 8)
    slots[0, 0] = 1 << 20  # every chunk of the first kernel claimed, none done: a thread holds them
    caller = threading.Thread(target=prog.entry, args=(prog._ctx_address, 0, 2))
    cpu0 = time.process_time()
    caller.start()
    caller.join(0.3)
    assert caller.is_alive()  # waiting for the first kernel (which every later one needs) ...
    assert time.process_time() - cpu0 < 0.1  # ... asleep, not burning a core
    slots[0, 1] = 1 << 20  # the chunks are done: the sleeper notices (it re-checks at least every 2 ms)
    caller.join(5)
    assert not caller.is_alive()
    want = glow.compile(model, "cpu", threads=1).run(feeds)
    np.testing.assert_allclose(prog.run(feeds)[prog.outputs[0][0]], want[prog.outputs[0][0]], rtol=1e-5, atol=1e-6)


def test_an_idle_pool_costs_nothing():
    """Workers wait for the next call in native code, spinning for about half a millisecond after
    each call and then asleep: a pool that has run calls uses no CPU a moment later."""
    pool = ThreadPool(2, name="glow-test-idle")
    for _ in range(20):
        pool.share(lambda ctx, tid, n: None, None)
    time.sleep(0.05)
    t0, c0 = time.perf_counter(), time.thread_time()
    p0 = time.process_time()
    time.sleep(0.3)
    spent = time.process_time() - p0 - (time.thread_time() - c0)
    assert spent < 0.03, f"the idle pool's workers used {spent:.3f} s of CPU in {time.perf_counter() - t0:.2f} s"


def test_a_worker_joins_every_call_it_is_waiting_for():
    """The worker is waiting (spinning) when a call comes: it joins each of many calls in a row."""
    pool = ThreadPool(2, name="glow-test-join")
    for _ in range(50):
        joined = threading.Event()

        def fn(ctx, tid, n, joined=joined):
            if tid:
                joined.set()
            else:
                assert joined.wait(5)  # the call lasts until the worker is in
        pool.share(fn, None)
