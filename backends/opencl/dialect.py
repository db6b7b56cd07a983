"""The OpenCL C dialect of the shared C-style renderer (glow.render): attributes only."""

from __future__ import annotations

from glow import dtypes as dt
from glow.render import CStyleRenderer


class OpenCLRenderer(CStyleRenderer):
    name = "opencl"
    kernel_qualifier = "kernel"
    helper_qualifier = "inline"
    global_qualifier = "global"
    local_qualifier = "local"
    restrict = "restrict"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    global_barrier = "barrier(CLK_GLOBAL_MEM_FENCE);"
    offset_type = "ulong"
    has_vectors = True  # floatN, vloadN / vstoreN: used by the CPU-shaped kernels
    table_qualifier = "constant"  # program-scope tables (the narrow formats' decoding)
    type_names = {
        dt.float32: "float", dt.float64: "double", dt.float16: "ushort", dt.bfloat16: "ushort",
        dt.int8: "char", dt.int16: "short", dt.int32: "int", dt.int64: "long",
        dt.uint8: "uchar", dt.uint16: "ushort", dt.uint32: "uint", dt.uint64: "ulong",
        dt.bool_: "uchar",
    }

    def global_id(self, axis: int) -> str:
        return f"(int)get_global_id({axis})"

    def local_id(self, axis: int) -> str:
        return f"(int)get_local_id({axis})"

    def group_id(self, axis: int) -> str:
        return f"(int)get_group_id({axis})"

    def launch_bounds(self, local_size) -> str:
        if not local_size:
            return ""
        d = list(local_size) + [1] * (3 - len(local_size))
        return f"__attribute__((reqd_work_group_size({d[0]}, {d[1]}, {d[2]})))"

    def umul_hi(self, a: str, b: str) -> str:
        return f"mul_hi({a}, {b})"

    def bits_as_float(self, bits: str) -> str:
        return f"as_float((uint)({bits}))"

    def float_as_bits(self, x: str) -> str:
        return f"as_uint({x})"

    def bits_as_double(self, bits: str) -> str:
        return f"as_double((ulong)({bits}))"

    def preamble(self, features: set) -> list[str]:
        return ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"] if "fp64" in features else []
