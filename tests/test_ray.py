"""Ray devices (glow.backends.ray) on a local cluster of simulated nodes that these tests start and
stop: placement across nodes, results equal to one device, pipelined and replicated serving, an
actor killed mid-run, a node that leaves, and bad specs. Everything on loopback, bounded in time.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time

import glow
import numpy as np
import onnx
import pytest
from glow.errors import BackendError, GlowError
from glow.runtime import PartitionRunError
from glow.testing import nlp_models
from glow.testing.models import light_models
from onnx import TensorProto, helper

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

pytestmark = pytest.mark.ray
#: Short enough that a lost device is said in seconds, long enough for a 2-core CI machine.
TIMEOUT_S = 60


def _resnet():
    return next(c for c in light_models() if c.name == "light_resnet50")


def _images(n, seed=0):
    x0 = _resnet().data_sets[0][0]["gpu_0/data_0"]
    rng = np.random.default_rng(seed)
    return [{"gpu_0/data_0": rng.standard_normal(x0.shape).astype(np.float32)} for _ in range(n)]


def _while_it_holds_a_request(server, answered: int):
    """Returns once `server` has answered `answered` requests and holds one sent under 5 ms ago
    (tens of ms from done): killed now, it dies holding it. Killed as soon as it had answered,
    it was once idle between two requests, and none failed."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        sent = server.sent_at
        if server.requests >= answered and sent is not None and time.monotonic() - sent < 0.005:
            return
        time.sleep(0.0005)
    raise AssertionError(f"the device answered {server.requests} requests in {TIMEOUT_S} s")


def _slow_model(n=1024, depth=6, rows=64):
    """A chain of n x n MatMuls on rows x n (defaults: about 10 ms on one core; rows=512: tens of
    ms, a request long enough to be killed mid-run)."""
    rng = np.random.default_rng(3)
    inits, nodes, x = [], [], "x"
    for i in range(depth):
        w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        inits.append(onnx.numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]))
        x = f"h{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    g = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _close(a: dict, b: dict, tol=1e-4):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def cluster():
    """A head with no CPUs (nothing runs on it) and two 2-CPU nodes offering node_a / node_b."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 300 << 20})
    nodes = {name: c.add_node(num_cpus=2, resources={name: 1}, object_store_memory=200 << 20)
             for name in ("node_a", "node_b")}
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    c.wait_for_nodes()
    yield c, nodes
    ray.shutdown()
    c.shutdown()


# -- no cluster needed ---------------------------------------------------------------------------

def test_graphs_pickle_and_run_the_same():
    """A partition travels to its node pickled: ops by name, attributes, constants read-only."""
    from glow.passes import optimize_graph

    case = next(c for c in light_models() if c.name == "light_squeezenet")
    g = optimize_graph(glow.load_onnx(case.model_path))
    g2 = pickle.loads(pickle.dumps(g, protocol=5))
    assert [n.op for n in g2.nodes] == [n.op for n in g.nodes]  # the registry's own OpDefs
    assert all(not v.data.flags.writeable for v in g2.constants)
    feeds = case.data_sets[0][0]
    _close(glow.run_graph(g2, feeds), glow.run_graph(g, feeds), 1e-6)


def test_device_specs_and_bad_ones():
    from glow.partition import resolve_devices

    t = resolve_devices(["a=ray:cpu/node_a@64MiB"])[0]
    assert (t.name, t.device.backend, t.memory_bytes) == ("a", "ray", 64 << 20)
    assert t.device.extra["resources"] == {"node_a": 0.001} and t.device.extra["remote_backend"] == "cpu"
    assert t.device.peak_gflops > 0 and t.backend.handle_kind == "ray"
    for spec, words in [("ray:cpu//x", "expected ray:BACKEND"), ("ray:nosuch", "unknown backend 'nosuch'"),
                        ("ray:ray", "remote_backend must name")]:
        with pytest.raises(BackendError, match=words):
            resolve_devices([spec])
    with pytest.raises(BackendError, match="name them in devices="):
        glow.compile(_slow_model(8, 1), "ray")


def test_plugins_toml_ray_device(tmp_path):
    from glow.partition import resolve_devices
    from glow.plugins import add_device_config

    cfg = tmp_path / "devices.toml"
    cfg.write_text('[[devices]]\nname = "far"\nbackend = "ray"\nremote_backend = "reference"\n'
                   'resources = {node_b = 0.5}\nmemory_mb = 32\ntransfer_gbs = 0.5\nlatency_us = 800\n'
                   '[[devices]]\nname = "bad"\nbackend = "ray"\nresources = {node_b = -1}\n')
    add_device_config(str(cfg))
    t = resolve_devices(["far"])[0]
    assert t.backend.inner.name == "reference" and t.device.extra["resources"] == {"node_b": 0.5}
    assert t.device.transfer_gbs == 0.5 and t.device.extra["latency_us"] == 800
    with pytest.raises(BackendError, match="resources must be a table"):
        resolve_devices(["bad"])


def test_link_latency_is_priced():
    """A transfer between ray devices is priced with the link's latency on each leg."""
    from glow.partition import partition

    m = _slow_model(256, 4)
    fast = partition(m, ["a=ray:cpu/node_a@1MiB", "b=ray:cpu/node_b@1MiB"])
    assert {p.target.name for p in fast.partitions} == {"a", "b"}
    cross = [t for t in fast.transfers if t.src is not None and t.dst is not None]
    assert cross and all(t.est_time_s >= 2 * 300e-6 for t in cross)  # two legs of the default latency


def test_without_ray_the_rest_works():
    """A process where `import ray` fails: ray is unavailable with the reason, naming it fails in
    one line, and every other backend works unchanged."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "import glow, numpy as np\n"
            "from glow.plugins import registry\n"
            "rec = registry().records['ray']; assert not rec.available; print('REASON', rec.reason)\n"
            "from glow.testing.nlp_models import encoder, token_feeds\n"
            "m = encoder(layers=1)\n"
            "out = glow.compile(m, 'cpu').run(token_feeds(m, 1, 8, np.random.default_rng(0)))\n"
            "print('CPU OK', sorted(out))\n"
            "try:\n    glow.compile(m, devices=['ray:cpu'])\n"
            "except glow.errors.GlowError as e:\n    print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "REASON needs the 'ray' package (pip install 'glow-compiler[ray]')" in r.stdout
    assert "CPU OK ['last_hidden_state']" in r.stdout
    assert "ERR backend 'ray' is unavailable: needs the 'ray' package" in r.stdout


def test_unreachable_cluster_address_is_said_at_once(tmp_path):
    """A named cluster where nothing answers: exit 2 with one line within seconds (Ray itself
    would retry for minutes)."""
    env = dict(os.environ, GLOW_RAY_ADDRESS="127.0.0.1:1")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "glow.cli", "run", "core/data/tiny_cnn.onnx", "--devices", "ray:cpu"],
                       capture_output=True, text=True, timeout=120, env=env,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "glow: error: cannot reach the Ray cluster at 127.0.0.1:1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 60


# -- on the cluster --------------------------------------------------------------------------------

def test_resnet50_split_across_two_nodes(cluster):
    case = _resnet()
    feeds = _images(3)
    want = [glow.compile(case.model_path, "cpu").run(f) for f in feeds]
    exe = glow.compile(case.model_path, devices=["a=ray:cpu/node_a@70MiB", "b=ray:cpu/node_b@70MiB"])
    try:
        assert {p.target.name for p in exe.placement.partitions} == {"a", "b"}  # the caps force a split
        for f, w in zip(feeds, want):
            _close(exe.run(f), w)
        nodes = {e.node["pid"] for e in exe.executables}
        assert len(nodes) == 2, "each device compiles and runs in its own actor"
        text = exe.placement.to_text()
        crossing = [t for t in exe.placement.transfers if t.src is not None and t.dst is not None]
        assert crossing and "transfers between partitions" in text
        for t in crossing:  # each cross-node transfer is listed with its estimated cost
            assert t.value in text and t.est_time_s > 0
    finally:
        exe.close()


def test_transformer_split_across_two_nodes(cluster):
    m = nlp_models.encoder(layers=4, hidden=256, heads=4, ffn=1024)
    rng = np.random.default_rng(1)
    feeds = [nlp_models.token_feeds(m, b, s, rng) for b, s in ((1, 16), (2, 32), (1, 48))]
    ref = glow.compile(m, "cpu")
    exe = glow.compile(m, devices=["a=ray:cpu/node_a@8MiB", "b=ray:cpu/node_b@8MiB"])
    try:
        assert {p.target.name for p in exe.placement.partitions} == {"a", "b"}
        for f in feeds:  # new batch and sequence sizes: each node specialises its own partitions
            _close(exe.run(f), ref.run(f))
    finally:
        exe.close()


def _clients(exe, feeds, want, clients=8, per_client=10):
    """`clients` threads, each sending `per_client` requests through `submit`; every output checked."""
    errors, done = [], []

    def client(k):
        try:
            for i in range(per_client):
                j = (k * per_client + i) % len(feeds)
                out = exe.submit(feeds[j]).result(timeout=TIMEOUT_S)
                _close(out, want[j])
                done.append(j)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5 * TIMEOUT_S)
    assert not errors, errors[:3]
    assert len(done) == clients * per_client


def test_many_clients_pipelined_and_replicated(cluster):
    m = nlp_models.encoder(layers=2, hidden=128)
    rng = np.random.default_rng(2)
    feeds = [nlp_models.token_feeds(m, 1, 32, rng) for _ in range(16)]
    ref = glow.compile(m, "cpu")
    want = [ref.run(f) for f in feeds]
    piped = glow.compile(m, devices=["a=ray:cpu/node_a@1.5MiB", "b=ray:cpu/node_b@1.5MiB"],
                         objective="throughput")
    try:
        assert {p.target.name for p in piped.placement.partitions} == {"a", "b"}
        _clients(piped, feeds, want)
    finally:
        piped.close()
    twice = glow.compile(m, devices=["ray:cpu"], replicas=2)
    try:
        _clients(twice, feeds, want)
        stats = twice.stats
        assert stats["replicas"] == 2 and sum(stats["served"]) == 80 and min(stats["served"]) > 0, stats
        assert stats["failed"] == [0, 0]
    finally:
        twice.close()


def test_actor_killed_mid_run(cluster):
    """The request the actor held fails naming the device; later ones wait for Ray's restart."""
    m = _slow_model(rows=512)
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((512, 1024)).astype(np.float32)} for _ in range(4)]
    ref = glow.compile(m, "cpu")
    want = [ref.run(f) for f in feeds]
    exe = glow.compile(m, devices=["a=ray:cpu/node_a"])
    try:
        server = exe.executables[0].server
        _close(exe.run(feeds[0]), want[0])
        futures = [exe.submit(f) for f in feeds * 3]
        _while_it_holds_a_request(server, answered=3)
        server.kill()  # Ray restarts it; its constructor runs again and it compiles on the next call
        outcomes = []
        for i, f in enumerate(futures):
            try:
                _close(f.result(timeout=5 * TIMEOUT_S), want[i % 4])
                outcomes.append("ok")
            except PartitionRunError as e:
                outcomes.append(str(e))
        failed = [o for o in outcomes if o != "ok"]
        assert 1 <= len(failed) <= 2, outcomes  # the one it ran (and one sent as it died, at most)
        assert all("ray device 'a': its actor died or restarted while it held this request" in o for o in failed)
        assert outcomes[-1] == "ok"
        first_bad = outcomes.index(failed[0])
        assert all(o == "ok" for o in outcomes[first_bad + len(failed):]), outcomes  # later ones succeed
        _close(exe.run(feeds[1]), want[1])
    finally:
        exe.close()


def test_measured_link_prices_the_transfers(cluster, tmp_path):
    from glow.partition import partition
    from glow.plugins import add_device_config

    cfg = tmp_path / "devices.toml"
    cfg.write_text('[[devices]]\nname = "mb"\nbackend = "ray"\nresources = {node_b = 0.001}\n'
                   'memory_mb = 1\nmeasure_link = true\n'
                   '[[devices]]\nname = "gone"\nbackend = "ray"\nresources = {node_z = 0.001}\nmeasure_link = true\n')
    add_device_config(str(cfg))
    pl = partition(_slow_model(256, 4), ["a=ray:cpu/node_a@1MiB", "mb"])
    dev = pl.targets[1].device
    fig = dev.extra["measured_link"]
    assert dev.transfer_gbs == fig["transfer_gbs"] > 0 and dev.extra["latency_us"] == fig["latency_us"] >= 0
    assert fig["round_trip_large_ms"] > fig["round_trip_small_ms"] > 0
    with pytest.raises(GlowError, match="ray device 'gone': cannot measure its link: no live node"):
        partition(_slow_model(8, 1), ["gone"])


def test_replica_that_fails_is_passed_over(cluster):
    """Two copies; one's actor is killed mid-run: the request it held fails, naming the device,
    the other copy takes the traffic meanwhile, and every later request succeeds."""
    m = _slow_model(rows=512)
    rng = np.random.default_rng(6)
    feeds = [{"x": rng.standard_normal((512, 1024)).astype(np.float32)} for _ in range(4)]
    ref = glow.compile(m, "cpu")
    want = [ref.run(f) for f in feeds]
    exe = glow.compile(m, devices=["ray:cpu"], replicas=2)
    try:
        victim = exe.replicas[0].executables[0].server
        futures = [exe.submit(f) for f in feeds * 3]
        _while_it_holds_a_request(victim, answered=1)
        victim.kill()
        failed = []
        for i, f in enumerate(futures):
            try:
                _close(f.result(timeout=5 * TIMEOUT_S), want[i % 4])
            except PartitionRunError as e:
                failed.append(str(e))
        assert 1 <= len(failed) <= 2 and all("its actor died or restarted while it held this request" in e
                                             for e in failed), failed
        later = [exe.submit(f) for f in feeds * 2]
        for i, f in enumerate(later):
            _close(f.result(timeout=5 * TIMEOUT_S), want[i % 4])
        stats = exe.stats
        assert stats["failed"][0] == len(failed) and stats["failed"][1] == 0, stats
    finally:
        exe.close()


def test_unknown_resource_fails_at_once(cluster):
    t0 = time.monotonic()
    with pytest.raises(GlowError, match=r"ray device 'ray:cpu/node_z': no live node of the Ray cluster "
                                        r"offers what it asks for \(CPU=1, node_z=0.001"):
        glow.compile(_slow_model(8, 1), devices=["ray:cpu/node_z"])
    assert time.monotonic() - t0 < 10


def test_busy_node_is_said_and_close_frees_it(cluster, tmp_path, monkeypatch):
    """An actor Ray cannot place now (its node's CPUs are held) is an error after the start
    timeout, not a wait without end; closing the executable that holds them frees them."""
    from glow.backends.ray import server
    from glow.plugins import add_device_config

    monkeypatch.setattr(server, "START_TIMEOUT_S", 3.0)
    cfg = tmp_path / "devices.toml"
    cfg.write_text('[[devices]]\nname = "greedy"\nbackend = "ray"\nresources = {node_a = 0.001}\nnum_cpus = 2\n')
    add_device_config(str(cfg))
    m = _slow_model(8, 1)
    x = {"x": np.ones((64, 8), np.float32)}
    holder = glow.compile(m, devices=["greedy"])  # both of node_a's CPUs
    holder.run(x)
    with pytest.raises(GlowError, match=r"ray device 'ray:cpu/node_a': its actor did not start within 3 s: the "
                                        r"nodes that offer CPU=1, node_a=0.001 have none of it free"):
        glow.compile(m, devices=["ray:cpu/node_a"])
    holder.close()
    exe = glow.compile(m, devices=["ray:cpu/node_a"])
    try:
        _close(exe.run(x), glow.compile(m, "cpu").run(x))
    finally:
        exe.close()


def test_compile_error_on_the_node_is_said(cluster, tmp_path):
    """A partition the node cannot compile (here: its environment asks for an instruction-set
    level that does not exist) is an error naming the device, from glow.compile: no hang, no
    actor restarted to fail again."""
    from glow.plugins import add_device_config

    cfg = tmp_path / "devices.toml"
    cfg.write_text('[[devices]]\nname = "odd"\nbackend = "ray"\nresources = {node_a = 0.001}\n'
                   'runtime_env = {env_vars = {GLOW_CPU_ISA = "no-such-level"}}\n')
    add_device_config(str(cfg))
    with pytest.raises(GlowError, match=r"ray device 'odd' \(node .*\): .*no-such-level"):
        glow.compile(_slow_model(8, 1), devices=["odd"])


def test_node_that_leaves_is_an_error_not_a_hang(cluster):
    c, _ = cluster
    node = c.add_node(num_cpus=1, resources={"node_c": 1}, object_store_memory=100 << 20)
    c.wait_for_nodes()
    m = _slow_model(256, 2)
    x = {"x": np.ones((64, 256), np.float32)}
    exe = glow.compile(m, devices=["c=ray:cpu/node_c"])
    try:
        exe.run(x)
        c.remove_node(node)
        t0 = time.monotonic()
        for _ in range(2):  # the first finds the actor gone, the second is refused at once
            with pytest.raises(GlowError, match=r"ray device 'c'.*no live node of the Ray cluster offers what "
                                                r"it asks for .*the placement no longer fits"):
                exe.run(x)
        assert time.monotonic() - t0 < TIMEOUT_S
    finally:
        exe.close()


def test_cli_run_on_ray_devices(cluster, tmp_path):
    """`glow run --devices` with ray devices, joining the cluster named by GLOW_RAY_ADDRESS."""
    m = nlp_models.encoder(layers=1)
    path = tmp_path / "enc.onnx"
    onnx.save(m, str(path))
    feeds = nlp_models.token_feeds(m, 1, 16, np.random.default_rng(5))
    np.savez(tmp_path / "in.npz", **feeds)
    env = dict(os.environ, GLOW_RAY_ADDRESS=cluster[0].address)
    r = subprocess.run([sys.executable, "-m", "glow.cli", "run", str(path), "--devices", "ray:cpu/node_b",
                        "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = dict(np.load(tmp_path / "out.npz"))
    _close(out, glow.compile(m, "cpu").run(feeds))
