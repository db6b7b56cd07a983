"""The CUDA C++ dialect of the shared C-style renderer (glow.render): attributes only.

Kernels are `extern "C"` so CuPy's RawModule finds them by their plain names; float math uses
the `f`-suffixed functions (expf, ...) so nothing silently widens to double.
"""

from __future__ import annotations

from glow.render import CStyleRenderer

_AXES = "xyz"


class CUDARenderer(CStyleRenderer):
    name = "cuda"
    kernel_qualifier = 'extern "C" __global__'
    helper_qualifier = "__device__ __forceinline__"
    global_qualifier = ""
    local_qualifier = "__shared__"
    restrict = "__restrict__"
    barrier = "__syncthreads();"
    global_barrier = "__syncthreads();"  # also orders the block's global-memory accesses
    offset_type = "unsigned long long"
    has_vectors = False
    table_qualifier = "__device__ const"  # read through the L1 cache: lanes index it divergently

    def global_id(self, axis: int) -> str:
        a = _AXES[axis]
        return f"(int)(blockIdx.{a} * blockDim.{a} + threadIdx.{a})"

    def local_id(self, axis: int) -> str:
        return f"(int)threadIdx.{_AXES[axis]}"

    def group_id(self, axis: int) -> str:
        return f"(int)blockIdx.{_AXES[axis]}"

    def launch_bounds(self, local_size) -> str:
        if not local_size:
            return ""
        n = 1
        for d in local_size:
            n *= d
        return f"__launch_bounds__({n})"

    def kernel_header(self, name: str, params: list[str], local_size) -> str:
        # CUDA puts launch bounds between the return type and the name.
        bounds = self.launch_bounds(local_size)
        return f"{self.kernel_qualifier} void {bounds + ' ' if bounds else ''}{name}({', '.join(params)})"

    def math(self, fn: str, ctype: str) -> str:
        return fn + "f" if ctype == "float" else fn

    def umul_hi(self, a: str, b: str) -> str:
        return f"__umulhi({a}, {b})"

    def bits_as_float(self, bits: str) -> str:
        return f"__uint_as_float((unsigned int)({bits}))"

    def float_as_bits(self, x: str) -> str:
        return f"__float_as_uint({x})"

    def bits_as_double(self, bits: str) -> str:
        return f"__longlong_as_double((long long)({bits}))"
