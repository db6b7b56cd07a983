"""The backend: what the device runs natively (the support predicate), its figures, compile, transfers.

A pure-Python "accelerator": fast on paper (the partitioner's cost model reads these figures), a
small device memory, and kernels for MatMul, Conv, Relu and Add only. glow does the rest: Gemm
lowers to MatMul + Add for it, and everything that cannot reach these four ops (pooling, softmax,
reshapes, ...) is placed on another device by the partitioner.
"""

import glow
import numpy as np

from .kernels import KERNELS

#: Element types each kernel handles; Identity (an alias) takes any tensor.
DTYPES = {"MatMul": {"float32", "float64"}, "Add": {"float32", "float64"}, "Relu": {"float32", "float64"},
          "Conv": {"float32"}}
MEMORY_BYTES = 8 * 2**20


class ExampleBackend(glow.Backend):
    name = "example"
    api_version = 2  # the glow backend API this backend was built for (glow.BACKEND_API)
    description = "pure-Python example accelerator: MatMul, Conv, Relu, Add (NumPy), 8 MiB of memory"

    def devices(self):
        return [glow.Device(self.name, "0", kind="accelerator", memory_bytes=MEMORY_BYTES,
                            peak_gflops=500.0, mem_bandwidth_gbs=200.0, transfer_gbs=8.0)]

    def native_ops(self):
        return sorted(KERNELS)

    def supports(self, node):
        op = node.op.name
        if op == "Identity":  # an alias: any tensor
            return _dtype(node.inputs[0]) is not None
        if op not in DTYPES or not all(_dtype(v) in DTYPES[op] for v in (*node.inputs, *node.outputs)):
            return False
        if op == "Conv":  # 2-D, explicit pads
            return len(node.inputs[0].type.shape or ()) == 4 and node.attrs["auto_pad"] == "NOTSET"
        return True

    def compile(self, graph, options):
        device = options.device or self.devices()[0]
        need = memory_needed(graph)
        if device.memory_bytes is not None and need > device.memory_bytes:
            raise glow.BackendError(f"'{graph.name}' needs {need} bytes of device memory; "
                                    f"{device.id} has {device.memory_bytes}")
        return ExampleExecutable(graph)

    # Transfers (used by the partitioner's runtime around `run_device`): device memory is simulated
    # by private copies of the arrays; a real device would allocate and copy here.
    def to_device(self, array, device):
        return np.array(array, copy=True)

    def to_host(self, handle, device):
        return np.array(handle, copy=True)


class ExampleExecutable(glow.Executable):
    """Runs the nodes in order, each with its kernel; values live in a dict keyed by name."""

    def __init__(self, graph):
        super().__init__(graph)
        self.steps = [(KERNELS[n.op.name], n.inputs, n.outputs[0].name, dict(n.attrs)) for n in graph.nodes]

    def run_device(self, handles):
        """Inputs already in device memory (see `to_device`); outputs stay there (see `to_host`)."""
        return self._run(handles)

    def _run(self, feeds):
        env = dict(feeds)

        def value(v):
            return None if v is None else v.data if v.is_constant else env[v.name]

        for kernel, inputs, out, attrs in self.steps:
            env[out] = np.asarray(kernel(*map(value, inputs), **attrs))  # NumPy gives scalars for 0-d results
        return {v.name: value(v) for v in self.graph.outputs}


def _dtype(v):
    return None if v is None else getattr(getattr(v.type, "dtype", None), "name", None)


def _nbytes(v):
    shape = [d if isinstance(d, int) else 1 for d in v.type.shape or ()]
    return int(np.prod(shape)) * v.type.dtype.itemsize


def memory_needed(graph):
    """Weights plus the largest set of activations alive at once, in node order."""
    last_use = {v.name: i for i, n in enumerate(graph.nodes) for v in n.inputs if v is not None}
    keep = {v.name for v in graph.outputs}
    live = {v.name: _nbytes(v) for v in graph.inputs}
    peak = sum(live.values())
    for i, n in enumerate(graph.nodes):
        live.update({o.name: _nbytes(o) for o in n.outputs})
        peak = max(peak, sum(live.values()))
        for v in n.inputs:
            if v is not None and last_use.get(v.name) == i and v.name not in keep:
                live.pop(v.name, None)
    return sum(v.data.nbytes for v in graph.constants) + peak
