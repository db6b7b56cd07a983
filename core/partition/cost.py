"""The cost model: roofline time per node per device, transfer time per value, memory per node.

    node time   = launch + max(FLOPs / peak, bytes touched / memory bandwidth)
    transfer    = bytes / the producer's link to the host + bytes / the consumer's link
                  (host staging: every tensor crossing devices goes through host memory) + a fixed
                  hand-off latency (a queue and a thread wake-up in the runtime) + each link's own
                  latency per leg (`latency_us`: a network's, for remote devices). Two remote
                  devices pass a tensor node to node, one hop, but are priced as two legs as well:
                  the ranking of cut points, which is what the estimate is for, is the same.

FLOPs are estimated by op group: contractions and convolutions exactly (2 * MACs), pools by
window, normalisations and recurrent cells by a per-element factor, everything else by its output
size. The estimates only have to rank devices and cut points correctly, not predict wall time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..graph import Graph, Node, Value
from ..ops.registry import ACTIVATION, MATMUL, MOVEMENT, NORM, POOL, REDUCE
from .devices import Target

#: Fixed cost of running one node (dispatch, kernel launch), in seconds; `launch_us` in a
#: device's extra figures overrides it.
DEFAULT_LAUNCH_S = 2e-6
#: Fixed cost of handing a tensor from one device's worker to another's (queue, wake-up).
HANDOFF_S = 20e-6
#: Bytes assumed for values of unknown size (sequences, optionals, dynamic shapes' unknown dims=1).
UNKNOWN_BYTES = 1024
#: What a node whose shapes tensor data decides (glow.specialize.data_shaped) costs on a backend
#: that compiles per input signature (`Backend.specialises_shapes`), on top of its run: its share of
#: the compile that nearly every run then needs (other data, other shapes). Measured on cpu: the 810
#: nodes after an SSD detector's NonZeros compiled in about 1 s.
RESPECIALISE_S = 1e-3
#: FLOPs per output element of ops without a better estimate, by group.
_PER_ELEMENT = {ACTIVATION: 4.0, NORM: 8.0, MOVEMENT: 0.0}


def value_bytes(v: Value) -> int:
    t = v.type
    if not isinstance(t, dt.TensorType) or t.shape is None:
        return UNKNOWN_BYTES
    n = 1
    for d in t.shape:
        n *= d if isinstance(d, int) else 1
    try:
        size = t.dtype.itemsize
    except (AttributeError, TypeError):
        size = 8
    return int(n * max(size, 1))


def _numel(v: Value | None) -> int:
    if v is None or not isinstance(v.type, dt.TensorType) or v.type.shape is None:
        return 1
    return int(np.prod([d if isinstance(d, int) else 1 for d in v.type.shape], dtype=np.int64))


def _dims(v: Value | None) -> tuple:
    if v is None or not isinstance(v.type, dt.TensorType) or v.type.shape is None:
        return ()
    return tuple(d if isinstance(d, int) else 1 for d in v.type.shape)


def node_flops(node: Node) -> float:
    """Estimated floating-point (or integer) operations of one node."""
    op, groups = node.op.name, node.op.groups
    out = node.outputs[0] if node.outputs else None
    out_n = sum(_numel(o) for o in node.outputs)
    ins = node.inputs
    if "Conv" in op and len(ins) > 1 and ins[1] is not None:
        w = _dims(ins[1])
        per_out = _numel(ins[1]) / max(w[0], 1) if w else 1
        if op == "ConvTranspose":  # every input element scatters into a kernel-sized window
            return 2.0 * _numel(ins[0]) * per_out
        return 2.0 * _numel(out) * per_out
    if MATMUL in groups and len(ins) > 1 and ins[0] is not None:
        a = _dims(ins[0])
        k = a[-1] if a else 1
        if op == "Gemm" and node.attrs.get("transA") and len(a) >= 2:
            k = a[-2]
        return 2.0 * _numel(out) * k
    if op in ("LSTM", "GRU", "RNN") and len(ins) > 2:  # every step multiplies by W and R
        x = _dims(ins[0])
        steps_batch = x[0] * x[1] if len(x) >= 2 else 1
        return 2.0 * steps_batch * (_numel(ins[1]) + _numel(ins[2]))
    if POOL in groups:
        kernel = node.attrs.get("kernel_shape")
        window = float(np.prod(kernel)) if kernel else _numel(ins[0]) / max(out_n, 1)
        return out_n * window
    if REDUCE in groups:
        return float(_numel(ins[0]))
    for group, factor in _PER_ELEMENT.items():
        if group in groups:
            return out_n * factor
    return float(out_n)


def node_bytes(node: Node) -> int:
    """Bytes a node reads and writes (weights included): the memory-bound half of the roofline."""
    return sum(value_bytes(v) for v in node.all_inputs) + sum(value_bytes(o) for o in node.outputs)


def node_time(node: Node, target: Target) -> float:
    d = target.device
    launch = float(d.extra.get("launch_us", DEFAULT_LAUNCH_S * 1e6)) * 1e-6
    return launch + max(node_flops(node) / (d.peak_gflops * 1e9),
                        node_bytes(node) / (d.mem_bandwidth_gbs * 1e9))


def link_latency(target: Target) -> float:
    return float(target.device.extra.get("latency_us", 0.0)) * 1e-6


def link_time(nbytes: int, target: Target) -> float:
    """One leg of host staging: `nbytes` between `target` and host memory."""
    return link_latency(target) + nbytes / (target.device.transfer_gbs * 1e9)


def transfer_time(nbytes: int, src: Target | None, dst: Target | None) -> float:
    """Moving a value from `src` to `dst` (None: the host, for graph inputs and outputs)."""
    t = HANDOFF_S if src is not None and dst is not None else 0.0
    if src is not None:
        t += link_time(nbytes, src)
    if dst is not None:
        t += link_time(nbytes, dst)
    return t


def node_weights(node: Node) -> list[Value]:
    """The constants a node reads (they live on its device)."""
    return [v for v in node.all_inputs if v.is_constant]


def working_set(node: Node) -> int:
    """Activation bytes live while the node runs: its non-constant inputs and its outputs."""
    return (sum(value_bytes(v) for v in node.all_inputs if not v.is_constant)
            + sum(value_bytes(o) for o in node.outputs))


@dataclass
class CostTable:
    """Everything the placement search needs, as plain arrays indexed by node position."""

    graph: Graph
    targets: list[Target]
    time: np.ndarray  # [node, target] seconds (inf where the target cannot run the node)
    weight_bytes: np.ndarray  # [node] constant bytes first read by this node
    work_bytes: np.ndarray  # [node] working set
    producer: dict  # id(value) -> node index (absent: graph input or constant)

    @staticmethod
    def build(graph: Graph, targets: list[Target], allowed: np.ndarray) -> CostTable:
        from ..specialize import data_shaped

        shaped = data_shaped(graph)
        n = len(graph.nodes)
        time = np.full((n, len(targets)), np.inf)
        weights = np.zeros(n)
        work = np.zeros(n)
        seen: set[int] = set()
        producer = {}
        for i, node in enumerate(graph.nodes):
            respecialised = any(id(v) in shaped for v in (*node.all_inputs, *node.outputs))
            for j, t in enumerate(targets):
                if allowed[i, j]:
                    time[i, j] = node_time(node, t)
                    if respecialised and t.backend.specialises_shapes:
                        time[i, j] += RESPECIALISE_S
            for v in node_weights(node):
                if id(v) not in seen:
                    seen.add(id(v))
                    weights[i] += value_bytes(v)
            work[i] = working_set(node)
            for o in node.outputs:
                producer[id(o)] = i
        return CostTable(graph, targets, time, weights, work, producer)
