"""The C-style dialect: everything that differs between OpenCL C, CUDA C++ (and HIP, Metal, SYCL).

Kernel templates (render/kernels/) write plain C and ask the renderer for the few things a
dialect spells differently. A new target subclasses `CStyleRenderer` and overrides attributes and,
rarely, a method; the kernels themselves stay shared. The extension points, all listed here:

    name                   the dialect's name (used in kernel caches and messages)
    kernel_qualifier       what marks a kernel entry point ("kernel", 'extern "C" __global__')
    helper_qualifier       what precedes a device helper function ("inline", "__device__ inline")
    global_qualifier       address space of kernel pointer arguments ("global", "" in CUDA)
    local_qualifier        work-group shared memory ("local", "__shared__")
    restrict               the no-alias qualifier ("restrict", "__restrict__")
    barrier                a work-group barrier with local-memory fence
    global_barrier         a work-group barrier with global-memory fence (empty: none)
    type_names             element type -> C storage type name
    table_qualifier        what declares a program-scope constant table ("constant", "__device__ const")
    offset_type            the C type of a byte offset argument (64-bit unsigned)
    has_vectors            whether `floatN` vector types with vloadN/vstoreN exist (OpenCL)
    global_id/local_id/group_id(axis)   work-item built-ins
    launch_bounds(local)   the attribute fixing the work-group size
    math(fn, ctype)        a math function's name for a compute type (CUDA: expf for float)
    bits_as_float(...)     bit casts (as_float / __int_as_float)
    umul_hi(a, b)          the high 32 bits of an unsigned 32 x 32 product (mul_hi / __umulhi)
    preamble(features)     lines opening a program (pragmas for float64 and so on)

Compute types: float16 and bfloat16 are stored as 16-bit integers and computed in float
(converted by the prelude helpers in helpers.py, identical in every dialect); bool is stored as a
byte holding 0 or 1. The narrow formats (float8, float4, int4, int2) are stored one element per
byte in ml_dtypes' layouts and computed in float (the float formats, decoded through a table) or
int (the integer formats, sign-extended); only Cast makes new values of them (helpers.py).
"""

from __future__ import annotations

from .. import dtypes as dt

HALF_TYPES = (dt.float16, dt.bfloat16)
NARROW_FLOATS = (dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz, dt.float8e8m0,
                 dt.float4e2m1)
NARROW_INTS = (dt.int4, dt.uint4, dt.int2, dt.uint2)
#: One byte per element, in ml_dtypes' layouts; stored as the dialect's unsigned char.
NARROW_TYPES = NARROW_FLOATS + NARROW_INTS


class CStyleRenderer:
    """The dialect-neutral base: plain C spellings. A target subclass sets the attributes below
    and the work-item built-ins (see OpenCLRenderer and CUDARenderer for the two shipped ones)."""

    name = "c"
    kernel_qualifier = ""
    helper_qualifier = "static inline"
    global_qualifier = ""
    local_qualifier = ""
    restrict = "restrict"
    barrier = ""
    global_barrier = ""
    offset_type = "unsigned long long"
    has_vectors = False
    table_qualifier = "static const"
    #: Element types this dialect can store (anything else is declined by the support predicate).
    type_names = {
        dt.float32: "float", dt.float64: "double", dt.float16: "unsigned short",
        dt.bfloat16: "unsigned short", dt.int8: "signed char", dt.int16: "short", dt.int32: "int",
        dt.int64: "long long", dt.uint8: "unsigned char", dt.uint16: "unsigned short",
        dt.uint32: "unsigned int", dt.uint64: "unsigned long long", dt.bool_: "unsigned char",
    }

    # -- work-item built-ins (every dialect defines these) -------------------------------------
    def global_id(self, axis: int) -> str:
        raise NotImplementedError(f"dialect {self.name} has no global_id")

    def local_id(self, axis: int) -> str:
        raise NotImplementedError(f"dialect {self.name} has no local_id")

    def group_id(self, axis: int) -> str:
        raise NotImplementedError(f"dialect {self.name} has no group_id")

    def launch_bounds(self, local_size) -> str:
        """The attribute promising the work-group size (empty: none)."""
        return ""

    def kernel_header(self, name: str, params: list[str], local_size) -> str:
        bounds = self.launch_bounds(local_size)
        quals = " ".join(q for q in (self.kernel_qualifier, bounds) if q)
        return f"{quals} void {name}({', '.join(params)})".lstrip()

    # -- types ---------------------------------------------------------------------------------
    def storage(self, dtype) -> str:
        """The C type holding one element in memory."""
        return self.type_names[dt.uint8 if dtype in NARROW_TYPES else dtype]

    def compute(self, dtype) -> str:
        """The C type a value is computed in (16-bit and narrow floats widen to float, the
        narrow integers to int)."""
        if dtype in HALF_TYPES or dtype in NARROW_FLOATS:
            return "float"
        return "int" if dtype in NARROW_INTS else self.type_names[dtype]

    def supports_dtype(self, dtype) -> bool:
        return dtype in self.type_names or dtype in NARROW_TYPES

    def math(self, fn: str, ctype: str) -> str:
        """The name of math function `fn` for arguments of C type `ctype`."""
        return fn

    def umul_hi(self, a: str, b: str) -> str:
        """The high 32 bits of the 64-bit product of two unsigned ints."""
        return f"(unsigned int)(((unsigned long long)({a}) * ({b})) >> 32)"

    def bits_as_float(self, bits: str) -> str:
        raise NotImplementedError(f"dialect {self.name} has no bit cast to float")

    def float_as_bits(self, x: str) -> str:
        raise NotImplementedError(f"dialect {self.name} has no bit cast from float")

    def bits_as_double(self, bits: str) -> str:
        raise NotImplementedError(f"dialect {self.name} has no bit cast to double")

    def preamble(self, features: set) -> list[str]:
        """Lines opening a program that uses `features` (e.g. {"fp64"})."""
        return []

    # -- literals ------------------------------------------------------------------------------
    def literal(self, value, dtype) -> str:
        """A C literal of `value` in `dtype`'s compute type."""
        import numpy as np

        ct = self.compute(dtype)
        if dtype == dt.bool_:
            return "1" if bool(value) else "0"
        if dtype.is_float:
            v = float(value)
            if dtype == dt.float64:
                if v != v or v in (float("inf"), float("-inf")):
                    bits = int(np.array(v, np.float64).view(np.uint64))
                    return self.bits_as_double(f"0x{bits:016x}UL")
                return repr(v) if ("e" in repr(v) or "." in repr(v)) else repr(v) + ".0"
            v32 = np.float32(v)
            if not np.isfinite(v32):
                return self.bits_as_float(f"0x{int(v32.view(np.uint32)):08x}u")
            return np.format_float_scientific(v32, unique=True, trim="0") + "f"
        v = int(value)
        if dtype in (dt.int64,):
            if v == -(1 << 63):
                return f"({self.storage(dt.int64)})(-9223372036854775807L - 1)"
            return f"({ct}){v}L"
        if dtype in (dt.uint64,):
            return f"({ct}){v}UL"
        if dtype == dt.uint32:
            return f"{v}u"
        if dtype == dt.int32 and v == -(1 << 31):
            return "(-2147483647 - 1)"
        return f"({ct}){v}" if ct not in ("int",) else str(v)
