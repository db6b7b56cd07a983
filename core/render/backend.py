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
from ..errors import BackendError
from ..graph import Graph
from .layout import DeviceLayout, layout_memory
from .params import GPU, DeviceParams
from .program import Program, render_program
from .support import deferred, native_ops, renders


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
        # Values of unknown shape, and index operands computed at run time, are decided once
        # inputs are seen (specialisation): accepted here, lowered again once they are known.
        return renders(node, self.renderer) or self.defers(node)

    def defers(self, node) -> bool:
        return deferred(node)

    def fully_renderable(self, graph: Graph) -> bool:
        from ..passes.fusion import FUSED_OPS

        return graph.is_static() and all(n.op in FUSED_OPS or renders(n, self.renderer) for n in graph.nodes)

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
        ir = lower_to_ir(graph)  # refuses what is past the memory budget (InputError)
        check_index_range(ir.fn, self.name)
        program = render_program(ir.fn, self.renderer, params)
        layout = layout_memory(ir.fn, ir.plan, program.launches)
        return Compiled(ir, program, layout, params, time.perf_counter() - t)

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        self.check_available()
        device = options.device or self.devices()[0]
        if not self.fully_renderable(graph):
            return SpecializingExecutable(self, graph, options, device)
        return self.make_executable(graph, self.compile_graph(graph, self.device_params(device)), device)

    def make_executable(self, graph: Graph, compiled: Compiled, device) -> Executable:  # pragma: no cover
        raise NotImplementedError


def check_index_range(fn, backend: str) -> None:
    """BackendError naming the node (or input) of a tensor the kernels cannot index: they use
    32-bit ints for element indices (kernel.INT32_LIMIT), so bigger tensors are refused up front."""
    from ..ir.memory import writer_of
    from .kernel import INT32_LIMIT

    for b in fn.buffers:
        n = getattr(b.type, "numel", None)
        if not b.boxed and n is not None and n > INT32_LIMIT:
            where = f"input '{b.name}'" if b.kind == "input" else writer_of(fn, b)
            raise BackendError(f"backend '{backend}': {where}: tensor '{b.name}' has {n} elements; its "
                               f"kernels index with 32-bit ints (at most {INT32_LIMIT})")


def signature(graph, feeds, values):
    from ..specialize import signature as sig

    return sig(graph, feeds, values)


class SpecializingExecutable(Executable):
    """A graph with dynamic shapes (or index operands computed at run time): one static
    executable per input signature, made on first
    sight of that signature (core/specialize.py), through the same optimise-lower-fuse flow."""

    def __init__(self, backend: CStyleBackend, graph: Graph, options: CompileOptions, device):
        super().__init__(graph)
        self.backend, self.options, self.device = backend, options, device
        self._cache: dict = {}
        self._values: bool | None = None  # whether shapes depend on small integer input values
        self._lock = threading.Lock()

    def _run(self, feeds):
        hit, rest = self._static(feeds)
        return hit.run(rest)

    def _profile(self, feeds):  # the static executable for these inputs times its kernels
        hit, rest = self._static(feeds)
        return hit._profile(rest)

    def _static(self, feeds):
        """The static executable for these inputs (compiled on first sight) and its feeds."""
        with self._lock:
            key = signature(self.graph, feeds, bool(self._values))
            hit = self._cache.get(key)
            if hit is None:
                g, values = self.specialise(feeds)
                self._values = self._values or values
                params = self.backend.device_params(self.device)
                hit = self.backend.make_executable(g, self.backend.compile_graph(g, params), self.device)
                self._cache[signature(self.graph, feeds, values)] = hit
        names = {v.name for v in hit.graph.inputs}
        return hit, {k: v for k, v in feeds.items() if k in names}

    def specialise(self, feeds) -> tuple[Graph, bool]:
        """The static, fully renderable graph for these inputs, and whether input values (not
        only shapes) went into it: shapes first, values of small integer inputs when needed."""
        from ..api import optimize_for_backend
        from ..lowering import lower_to_supported
        from ..passes.fusion import FUSED_OPS
        from ..specialize import specialize, specialize_static

        be, base = self.backend, unfuse(self.graph)
        g, _, values = specialize_static(base, feeds)
        g = optimize_for_backend(g, be, self.options.native)
        if not be.fully_renderable(g) and not values:
            g, _ = specialize(base, feeds, values=True)
            g, values = optimize_for_backend(g, be, self.options.native), True
        if not be.fully_renderable(g):
            # Name the ops left over (raises a LoweringError listing them).
            lower_to_supported(g, lambda n: n.op in FUSED_OPS or renders(n, be.renderer), be.name)
            ops = sorted({n.op.name for n in g.nodes if not all(
                getattr(v.type, "is_static", False) for v in n.outputs)})
            raise BackendError(f"backend '{be.name}': shapes in graph '{self.graph.name}' stay unknown "
                               f"after specialisation: they depend on data ({', '.join(ops)})")
        return g, values


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
