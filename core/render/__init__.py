"""The shared C-style kernel renderer: instruction IR -> kernels in C-like dialects.

    from glow.render import render_program, OpenCLish, DeviceParams
    program = render_program(ir_fn, renderer, params)   # .source, .launches (in order)

One kernel per instruction (fused elementwise chains are one kernel; MatMul, Conv, pooling and
reductions are native), written once against `CStyleRenderer` and spelled per dialect by a
subclass that overrides only qualifiers, built-ins and type names (backends/opencl/dialect.py,
backends/cuda/dialect.py). See docs/backends-gpu.md for the design and how to add a dialect.
"""

from .cstyle import CStyleRenderer
from .kernel import Kernel, KernelWriter
from .params import CPU, GPU, DeviceParams
from .program import Program, program_source, render_instr, render_program
from .registry import KERNEL_RULES, kernel_rule, rule_for
from .support import native_ops, renders

__all__ = ["CPU", "GPU", "KERNEL_RULES", "CStyleRenderer", "DeviceParams", "Kernel", "KernelWriter",
           "Program", "kernel_rule", "native_ops", "program_source", "render_instr",
           "render_program", "renders", "rule_for"]
