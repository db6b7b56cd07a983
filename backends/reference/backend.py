"""The reference backend: runs the graph with the ops' NumPy references, node by node."""

from __future__ import annotations

from glow import Backend, CompileOptions, Device, Executable, Graph, run_graph


class ReferenceExecutable(Executable):
    def _run(self, feeds):
        return run_graph(self.graph, feeds, check=False)


class ReferenceBackend(Backend):
    name = "reference"
    priority = 0
    description = "NumPy interpreter; the oracle every other backend is compared against"

    def devices(self):
        return [Device(self.name, "host", kind="cpu", peak_gflops=5.0, mem_bandwidth_gbs=5.0,
                       transfer_gbs=1000.0)]

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        return ReferenceExecutable(graph)
