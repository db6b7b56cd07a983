"""`CStyleBackend`: the Backend half every C-style code generator shares (OpenCL, CUDA, yours).

It answers the support predicate from the renderer, asks for elementwise and activation fusion,
turns a static graph into IR -> kernels -> one device layout; graphs with dynamic shapes are
specialised per input signature by the core's glow.flow.SpecializingExecutable. A subclass
supplies the dialect (`renderer`), its devices, the `DeviceParams` of a device, and
`make_executable(graph, compiled, device)` over its runtime.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backend import Backend, CompileOptions, Executable
from ..errors import BackendError

if TYPE_CHECKING:
    from ..graph import Graph
    from .layout import DeviceLayout
    from .params import DeviceParams
    from .program import Program

# The renderer's modules are imported where used: discovery (`glow backends`) imports the OpenCL and
# CUDA backends, and the kernel renderer's imports (ml_dtypes among them) cost about a second.


def renders(node, renderer) -> bool:
    from .support import renders

    return renders(node, renderer)


class LazyRenderer:
    """A backend class's `renderer`, made on first use by `make()` (which imports the dialect)."""

    def __init__(self, make):
        self.make = make

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner):
        value = self.make()
        setattr(owner, self.name, value)  # made once per class; later lookups find it directly
        return value


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
    specialises_shapes = True  # one program per input signature for dynamic graphs

    def supports(self, node) -> bool:
        from ..passes.fusion import FUSED_OPS

        if node.op in FUSED_OPS:  # a graph fused earlier, specialised again at run time
            return True
        # Values of unknown shape, and index operands computed at run time, are decided once
        # inputs are seen (specialisation): accepted here, lowered again once they are known.
        return renders(node, self.renderer) or self.defers(node)

    #: Whether graph inputs may still be specialised on (off for specialised graphs, whose
    #: inputs are data: only operands the clean-up will fold are waited for then).
    inputs_may_specialise = True

    def defers(self, node) -> bool:
        from .support import deferred

        return deferred(node, self.inputs_may_specialise)

    def specialised(self) -> CStyleBackend:
        """This backend for graphs already specialised."""
        b = copy.copy(self)
        b.inputs_may_specialise = False
        return b

    def fully_renderable(self, graph: Graph) -> bool:
        from ..passes.fusion import FUSED_OPS

        return graph.is_static() and all(n.op in FUSED_OPS or renders(n, self.renderer) for n in graph.nodes)

    def native_ops(self) -> list[str]:
        from .support import native_ops

        return native_ops()

    def fusions(self):
        from ..passes.fusion import FuseActivation, FuseElementwise

        # Only what the renderer has code for goes into a fused body: `supports` also accepts
        # nodes deferred to run time (a CastLike of a value an input decides), which have none.
        def accepts(node):
            return renders(node, self.renderer)

        return [FuseElementwise(accepts=accepts), FuseActivation(accepts=accepts)]

    def device_params(self, device) -> DeviceParams:
        from .params import GPU

        return GPU

    def compile_graph(self, graph: Graph, params: DeviceParams) -> Compiled:
        """IR, kernels and layout of a static graph (no device needed)."""
        from ..ir import lower_to_ir
        from .layout import layout_memory
        from .program import render_program
        from .sizes import varying_marked

        t = time.perf_counter()
        ir = lower_to_ir(graph)  # refuses what is past the memory budget (InputError)
        check_index_range(ir.fn, self.name)
        with varying_marked(ir.fn):  # sizes a symbolic dim takes become kernel arguments (.sizes)
            program = render_program(ir.fn, self.renderer, params)
        layout = layout_memory(ir.fn, ir.plan, program.launches)
        return Compiled(ir, program, layout, params, time.perf_counter() - t)

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        """An executable of the rendered kernels for a static graph; a glow.flow
        SpecializingExecutable (one per input signature) for a graph with dynamic shapes or
        run-time index operands."""
        from ..flow import SpecializingExecutable
        from ..passes.fusion import FUSED_OPS

        self.check_available()
        device = options.device or self.devices()[0]
        params = self.device_params(device)

        def compile_static(g: Graph) -> Executable:
            if not self.fully_renderable(g):  # index operands still computed at run time
                from collections import Counter

                from ..flow import NeedsInputValues

                ops = Counter(n.op.name for n in g.nodes if n.op not in FUSED_OPS and not renders(n, self.renderer))
                raise NeedsInputValues(f"backend '{self.name}': graph '{g.name}': no kernel for "
                                       f"{', '.join(sorted(ops))} while its index operands are computed from data",
                                       dict(ops))
            return self.make_executable(g, self.compile_graph(g, params), device)

        if not self.fully_renderable(graph):
            return SpecializingExecutable(graph, self.specialised(), compile_static, options)
        return compile_static(graph)

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
