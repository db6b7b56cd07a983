"""The shared C-style kernel renderer: instruction IR -> kernels in C-like dialects.

    from glow.render import render_program, OpenCLish, DeviceParams
    program = render_program(ir_fn, renderer, params)   # .source, .launches (in order)

One kernel per instruction (fused elementwise chains are one kernel; MatMul, Conv, pooling and
reductions are native), written once against `CStyleRenderer` and spelled per dialect by a
subclass that overrides only qualifiers, built-ins and type names (backends/opencl/dialect.py,
backends/cuda/dialect.py). See docs/backends-gpu.md for the design and how to add a dialect.
"""

import importlib

#: public name -> its module; loaded on first use (PEP 562): the kernel modules and their imports
#: (ml_dtypes) cost about a second, which discovery of the OpenCL and CUDA backends must not pay.
_WHERE = {"CStyleRenderer": "cstyle", "Kernel": "kernel", "KernelWriter": "kernel", "CPU": "params",
          "GPU": "params", "DeviceParams": "params", "Program": "program", "program_source": "program",
          "render_instr": "program", "render_program": "program", "KERNEL_RULES": "registry",
          "kernel_rule": "registry", "rule_for": "registry", "native_ops": "support", "renders": "support"}


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'glow.render' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["CPU", "GPU", "KERNEL_RULES", "CStyleRenderer", "DeviceParams", "Kernel", "KernelWriter",
           "Program", "kernel_rule", "native_ops", "program_source", "render_instr",
           "render_program", "renders", "rule_for"]
