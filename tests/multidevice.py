"""Models and devices shared by the partitioner and runtime tests."""

import os
import threading
import time

import numpy as np
from glow import Backend, CompileOptions, Device, Executable, plugins, run_graph
from glow.partition.devices import Target
from helpers import make_model
from onnx import TensorProto, helper, numpy_helper

REPO_TOML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins.toml")


def use_repo_devices():
    """The registry as the repository's plugins.toml declares it (logical devices accel, ref0, ...)."""
    return plugins.reload(plugins.load_config(REPO_TOML))


def _w(rng, name, *shape, scale=0.1):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def branchy_model(channels=16, size=32, seed=0):
    """Conv -> Relu, then two branches (MaxPool | Conv -> Relu -> MaxPool) joined by Concat, then
    Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax. Convs and Relus can run on
    the simulated accelerator; pools, Concat, Gemm (with bias) and Softmax cannot."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = [_w(rng, "w1", c, 3, 3, 3), _w(rng, "w2", c, c, 3, 3), _w(rng, "w3", 2 * c, 2 * c, 3, 3),
             _w(rng, "fc_w", 10, 2 * c), _w(rng, "fc_b", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool_a", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool_b", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Concat", ["p1", "p2"], ["cat"], name="concat", axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax"),
    ]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, 3, size, size])],
                      [("probs", TensorProto.FLOAT, [1, 10])], inits, name="branchy")


def chain_model(n=8, width=64, seed=0):
    """`n` blocks of MatMul -> Add(bias) -> Relu on a [1, width] vector: a long chain to cut."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        inits += [_w(rng, f"w{i}", width, width), _w(rng, f"b{i}", width)]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, width])], [(x, TensorProto.FLOAT, [1, width])],
                      inits, name="chain")


def mixed_chain_model(n=8, width=32, seed=0):
    """Like chain_model, but the first half of the blocks ends in Tanh, the second half in Relu."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        act = "Tanh" if i < n // 2 else "Relu"
        inits += [_w(rng, f"w{i}", width, width), _w(rng, f"b{i}", width)]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node(act, [f"a{i}"], [f"y{i}"], name=f"act{i}")]
        x = f"y{i}"
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, width])], [(x, TensorProto.FLOAT, [1, width])],
                      inits, name="mixed_chain")


def inputs_for(model, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in {t.name for t in model.graph.initializer}:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


class DeviceArray(np.ndarray):
    """Stands for a device buffer: only the backend's to_device makes one, only to_host undoes it."""

    def __new__(cls, a):
        return np.array(a).view(cls)


# -- a scriptable backend: sleeps (to make concurrency measurable) and fails on request -----------
class ScriptedExecutable(Executable):
    def __init__(self, graph, backend):
        super().__init__(graph)
        self.backend = backend

    def run_device(self, handles):
        """Device-resident inputs and outputs ("handles" are tagged arrays here)."""
        assert all(isinstance(h, DeviceArray) for h in handles.values())
        outs = self.run({k: np.asarray(h) for k, h in handles.items()})
        return {k: DeviceArray(v) for k, v in outs.items()}

    def _run(self, feeds):
        be = self.backend
        with be.lock:
            be.concurrent[self.graph.name] = be.concurrent.get(self.graph.name, 0) + 1
            be.peak = max(be.peak, sum(be.concurrent.values()))
        try:
            if any(np.isnan(v).any() for v in feeds.values() if isinstance(v, np.ndarray)):
                raise FloatingPointError("NaN input (scripted failure)")
            time.sleep(be.delay_s + sum(be.op_delay_s.get(n.op.name, 0.0) for n in self.graph.nodes))
            return run_graph(self.graph, feeds, check=False)
        finally:
            with be.lock:
                be.concurrent[self.graph.name] -= 1


class ScriptedBackend(Backend):
    """Runs graphs with the reference interpreter after `delay_s` (plus `op_delay_s[op]` per node
    of that op) of sleep, which releases the GIL like a device kernel; raises when an input holds
    a NaN."""

    name = "scripted"

    def __init__(self, delay_s=0.0, op_delay_s=None):
        self.delay_s = delay_s
        self.op_delay_s = dict(op_delay_s or {})
        self.lock = threading.Lock()
        self.concurrent = {}
        self.peak = 0
        self.to_device_calls = 0
        self.to_host_calls = 0

    def compile(self, graph, options: CompileOptions):
        return ScriptedExecutable(graph, self)

    def to_device(self, array, device):
        with self.lock:
            self.to_device_calls += 1
        return DeviceArray(array)

    def to_host(self, handle, device):
        with self.lock:
            self.to_host_calls += 1
        assert isinstance(handle, DeviceArray)
        return np.array(handle)


def scripted_targets(k=2, delay_s=0.0, op_delay_s=None, **figures):
    be = ScriptedBackend(delay_s, op_delay_s)
    return [Target(f"s{i}", Device("scripted", f"s{i}", **figures), be) for i in range(k)], be
