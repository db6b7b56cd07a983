"""The instruction IR: schedule, generate, optimise, plan memory, print and interpret.

    from glow.ir import lower_to_ir
    program = lower_to_ir(graph)        # IRProgram: .fn (IRFunction), .plan (MemoryPlan), .run(feeds)
    print(format_ir(program.fn, program.plan))
    print(format_memory_plan(program.fn, program.plan))

Steps (compile-flow step 7): memory-aware schedule (schedule.py) -> instructions over buffers
(irgen.py) -> IR passes (passes.py) -> static arena plan (memory.py).
"""

from __future__ import annotations

from ..graph import Graph
from .alias import aliasable
from .instr import ACTIVATION, INPUT, OUTPUT, WEIGHT, Buffer, Expr, Instr, IRFunction, View
from .interpreter import IRProgram
from .irgen import generate_ir
from .memory import MemoryPlan, plan_memory
from .passes import ir_pipeline, run_ir_passes
from .printer import format_expr, format_instr, format_ir, format_memory_plan
from .schedule import schedule
from .verify import verify_ir


def build_ir(graph: Graph, *, optimize: bool = True, log: list | None = None) -> IRFunction:
    """The graph as an optimised IR function, lifetimes tight, ready for `plan_memory`."""
    fn = generate_ir(graph, schedule(graph))
    from ..interpreter import verify_level

    if verify_level() >= 2:
        verify_ir(fn)
    passes = ir_pipeline()
    if not optimize:  # only the lifetime passes: show what the planner does without the others
        passes = [p for p in passes if p.name in ("sink-allocs", "hoist-deallocs")]
    return run_ir_passes(fn, passes, log)


def lower_to_ir(graph: Graph, *, optimize: bool = True, log: list | None = None) -> IRProgram:
    fn = build_ir(graph, optimize=optimize, log=log)
    return IRProgram(fn, plan_memory(fn))


__all__ = ["ACTIVATION", "aliasable", "INPUT", "OUTPUT", "WEIGHT", "Buffer", "Expr", "IRFunction", "IRProgram",
           "Instr", "MemoryPlan", "View", "build_ir", "format_expr", "format_instr", "format_ir",
           "format_memory_plan", "generate_ir", "ir_pipeline", "lower_to_ir", "plan_memory",
           "run_ir_passes", "schedule", "verify_ir"]
