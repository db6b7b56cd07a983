"""The reference backends: NumPy execution of every op, the oracle for all other backends.

* `reference`     runs the graph node by node with the ops' NumPy references (the oracle);
* `reference-ir`  runs the instruction IR instead: memory-aware schedule, IR passes, one static
  arena for every activation, and the fusions a code generator would ask for. It computes with
  the same references, so it must agree with `reference`; every IR pass is tested end to end
  through it, without a code generator.
"""

from __future__ import annotations

from glow.backend import BACKEND_API, Backend, CompileOptions, Device, Executable


class ReferenceExecutable(Executable):
    def _run(self, feeds, timings=None):
        from glow.interpreter import run_detached  # here: discovery (glow backends) loads no op table

        return run_detached(self.graph, feeds, timings)

    def _profile(self, feeds):  # the interpreter times every node
        from glow import ProfileRecord

        timings = []
        outs = self._run(feeds, timings)
        return [ProfileRecord(n.name, n.op.name, s) for n, s in timings], "node", outs


class ReferenceBackend(Backend):
    name = "reference"
    api_version = BACKEND_API
    priority = 0  # last of the built-ins: the NumPy oracle, always there, slow
    description = "NumPy interpreter; the oracle every other backend is compared against"

    def devices(self):
        return [Device(self.name, "host", kind="cpu", peak_gflops=5.0, mem_bandwidth_gbs=5.0,
                       transfer_gbs=1000.0)]

    def compile(self, graph, options: CompileOptions) -> Executable:
        return ReferenceExecutable(graph)


class ReferenceIRExecutable(Executable):
    def __init__(self, graph, program):
        super().__init__(graph)
        self.program = program  # glow.ir.IRProgram: .fn (IR), .plan (memory plan)

    def _run(self, feeds):
        return self.program.run(feeds)


class ReferenceIRBackend(ReferenceBackend):
    name = "reference-ir"
    priority = -1
    description = "NumPy interpreter of the instruction IR (static memory plan, fused kernels)"

    def fusions(self):
        from glow.passes.fusion import FuseActivation, FuseElementwise

        return [FuseElementwise(), FuseActivation()]

    def compile(self, graph, options: CompileOptions) -> Executable:
        from glow.ir import lower_to_ir

        return ReferenceIRExecutable(graph, lower_to_ir(graph))
