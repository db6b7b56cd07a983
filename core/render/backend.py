"""`CStyleBackend`: the Backend half every C-style code generator shares (OpenCL, CUDA, yours).

It answers the support predicate from the renderer, asks for elementwise and activation fusion,
turns a static graph into IR -> kernels -> one device layout, and specialises graphs with dynamic
shapes per input signature. A subclass supplies the dialect (`renderer`), its devices, the
`DeviceParams` of a device, and `make_executable(graph, compiled, device)` over its runtime.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..backend import Backend, CompileOptions, Executable
from ..graph import Graph
from .layout import DeviceLayout, layout_memory
from .params import GPU, DeviceParams
from .program import Program, render_program
from .support import is_dynamic, native_ops, renders


@dataclass
class Compiled:
    """A static graph, compiled as far as the runtime: IR, kernels, memory layout."""

    ir: object  # glow.ir.IRProgram
    program: Program
    layout: DeviceLayout
    params: DeviceParams
    render_seconds: float = 0.0


class CStyleBackend(Backend):
    renderer = None  # a CStyleRenderer instance (the dialect)

    def supports(self, node) -> bool:
        from ..passes.fusion import FUSED_OPS

        if node.op in FUSED_OPS:  # a graph fused earlier, specialised again at run time
            return True
        # Values of unknown shape are decided at run time (shape specialisation), so they are
        # accepted here and lowered again once their shapes are known.
        return is_dynamic(node) or renders(node, self.renderer)

    def native_ops(self) -> list[str]:
        return native_ops()

    def fusions(self):
        from ..passes.fusion import FuseActivation, FuseElementwise

        return [FuseElementwise(), FuseActivation()]

    def device_params(self, device) -> DeviceParams:
        return GPU

    def compile_graph(self, graph: Graph, params: DeviceParams) -> Compiled:
        """IR, kernels and layout of a static graph (no device needed)."""
        from ..ir import lower_to_ir

        t = time.perf_counter()
        ir = lower_to_ir(graph)
        program = render_program(ir.fn, self.renderer, params)
        return Compiled(ir, program, layout_memory(ir.fn, ir.plan), params, time.perf_counter() - t)

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        self.check_available()
        device = options.device or self.devices()[0]
        if not graph.is_static():
            return SpecializingExecutable(self, graph, options, device)
        return self.make_executable(graph, self.compile_graph(graph, self.device_params(device)), device)

    def make_executable(self, graph: Graph, compiled: Compiled, device) -> Executable:  # pragma: no cover
        raise NotImplementedError


class SpecializingExecutable(Executable):
    """A graph with dynamic shapes: one static executable per input signature, made on first
    sight of that signature (core/specialize.py), through the same optimise-lower-fuse flow."""

    def __init__(self, backend: CStyleBackend, graph: Graph, options: CompileOptions, device):
        super().__init__(graph)
        self.backend, self.options, self.device = backend, options, device
        self._cache: dict = {}
        self._values: bool | None = None  # whether shapes depend on small integer input values
        self._lock = threading.Lock()

    def _run(self, feeds):
        from ..api import optimize_for_backend
        from ..specialize import signature, specialize_static

        with self._lock:
            key = signature(self.graph, feeds, bool(self._values))
            hit = self._cache.get(key)
            if hit is None:
                g, _, values = specialize_static(unfuse(self.graph), feeds)
                self._values = self._values or values
                key = signature(self.graph, feeds, values)
                g = optimize_for_backend(g, self.backend, self.options.native)
                if not g.is_static():
                    from ..errors import BackendError
                    from ..lowering import lower_to_supported

                    # Name the ops that keep shapes unknown (raises a LoweringError listing them).
                    lower_to_supported(g, lambda n: renders(n, self.backend.renderer), self.backend.name)
                    raise BackendError(f"backend '{self.backend.name}': shapes in graph "
                                       f"'{self.graph.name}' stay unknown after specialisation "
                                       "(they depend on data)")
                params = self.backend.device_params(self.device)
                hit = self.backend.make_executable(g, self.backend.compile_graph(g, params), self.device)
                self._cache[key] = hit
        names = {v.name for v in hit.graph.inputs}
        return hit.run({k: v for k, v in feeds.items() if k in names})


def unfuse(graph: Graph) -> Graph:
    """The graph with every fused node replaced by its members again, so that specialised
    shapes and constants flow through them (constant folding does not look inside a fused body)."""
    from ..passes.fusion import FUSED_OPS
    from ..rewrite import rebuild

    def visit(rb, node, ins):
        if node.op not in FUSED_OPS:
            return None
        body = node.attrs["body"]
        env = {id(ph): v for ph, v in zip(body.inputs, ins)}
        for n in body.nodes:
            args = [None if v is None else env.get(id(v), v) for v in n.inputs]
            outs = rb.add(n.op, args, dict(n.attrs), num_outputs=len(n.outputs))
            env.update(zip(map(id, n.outputs), outs))
        return [env[id(body.outputs[0])]]

    return rebuild(graph, visit)[0]
