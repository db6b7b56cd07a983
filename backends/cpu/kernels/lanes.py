"""Values at a loop position, for elementwise code: element types, their compute types, `Lanes`.

`Lanes(kb, n)` is the current position of a loop, n lanes wide (1: scalar). Values are in each
element type's *compute* type: bool is i1, bfloat16 computes in float32 (rounded back to
bfloat16 after every op, as NumPy's ml_dtypes does), everything else in its storage type
(LLVM's half rounds every op like NumPy's float16). The per-op emitters built on these are in
the table of ewops.py.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt

from ..codegen import has_ltype, ltype
from ..irutil import F32, F64, I1, I8, I32, I64, PTR, KernelBuilder

HALF = ir.HalfType()
I16 = ir.IntType(16)
FLOATS = (dt.float32, dt.float64, dt.float16, dt.bfloat16)
SIGNED_INTS = (dt.int8, dt.int16, dt.int32, dt.int64)
UNSIGNED_INTS = (dt.uint8, dt.uint16, dt.uint32, dt.uint64)
INTS = SIGNED_INTS + UNSIGNED_INTS
NUMERIC = FLOATS + INTS
_BY_SIZE = {1: dt.uint8, 2: dt.uint16, 4: dt.uint32, 8: dt.uint64}


def storage_dtype(d):
    """A plain type with d's size, for ops that only move bytes (None if there is none)."""
    if has_ltype(d):
        return d
    if d == dt.string or isinstance(d, dt.QuantizedDType):
        return None
    return _BY_SIZE.get(d.itemsize)


def dtype_of_value(v):
    """The element type an LLVM value most likely holds (for untyped epilogue leaves)."""
    t = v.type.element if isinstance(v.type, ir.VectorType) else v.type
    if t == I1:
        return dt.bool_
    if isinstance(t, ir.IntType):
        return {8: dt.int8, 16: dt.int16, 32: dt.int32, 64: dt.int64}[t.width]
    return {F32: dt.float32, F64: dt.float64, HALF: dt.float16}[t]


def compute_type(d) -> ir.Type:
    """The type values of d are computed in (narrow formats: their raw byte code)."""
    if d == dt.bool_:
        return I1
    if d == dt.bfloat16:
        return F32
    return ltype(d)


class Lanes:
    """Emits code for n lanes at the current loop position; with a `mask` (an <n x i1> value)
    only the lanes it sets are read from and written to memory."""

    def __init__(self, kb: KernelBuilder, n: int, mask=None):
        self.kb, self.b, self.n, self.mask = kb, kb.b, n, mask

    def t(self, scalar: ir.Type) -> ir.Type:
        return scalar if self.n == 1 else ir.VectorType(scalar, self.n)

    def splat(self, v):
        return v if self.n == 1 else self.kb.splat(v, self.n)

    def const(self, d, value):
        ct = compute_type(d)
        if ct == I1:
            c = ir.Constant(I1, int(bool(value)))
        elif isinstance(ct, ir.IntType):
            c = ir.Constant(ct, int(np.asarray(value).astype(d.np)) & ((1 << ct.width) - 1))
        else:
            c = ir.Constant(ct, float(value))
        return c if self.n == 1 else ir.Constant(self.t(ct), [c.constant] * self.n)

    def of(self, value, scalar: ir.Type):
        """A constant `value` of the scalar type, at this width."""
        c = ir.Constant(scalar, value)
        return c if self.n == 1 else ir.Constant(self.t(scalar), [value] * self.n)

    # -- memory ----------------------------------------------------------------------------------
    def load(self, ptr, offset, d, broadcast: bool):
        st = ltype(d)
        p = self.kb.ptr(ptr, offset, st)
        if broadcast or self.n == 1:
            v = self.splat(self.b.load(p, typ=st, align=d.itemsize))
        elif self.mask is not None:
            vt = self.t(st)
            fn = self.kb.intrinsic(f"llvm.masked.load.{_vname(vt)}.p0", vt, [PTR, I32, self.mask.type, vt])
            v = self.b.call(fn, [p, ir.Constant(I32, d.itemsize), self.mask, ir.Constant(vt, None)])
        else:
            v = self.b.load(p, typ=self.t(st), align=d.itemsize)
        return self.from_storage(v, d)

    def store(self, value, ptr, offset, d):
        st = ltype(d)
        p = self.kb.ptr(ptr, offset, st)
        v = self.to_storage(value, d)
        if self.mask is not None and self.n > 1:
            fn = self.kb.intrinsic(f"llvm.masked.store.{_vname(v.type)}.p0", ir.VoidType(),
                                   [v.type, PTR, I32, self.mask.type])
            self.b.call(fn, [v, p, ir.Constant(I32, d.itemsize), self.mask])
        else:
            self.b.store(v, p, align=d.itemsize)

    def from_storage(self, v, d):
        b = self.b
        if d == dt.bool_:
            return b.icmp_unsigned("!=", v, self.of(0, I8))
        if d == dt.bfloat16:
            return b.bitcast(b.shl(b.zext(v, self.t(I32)), self.of(16, I32)), self.t(F32))
        return v

    def to_storage(self, v, d):
        b = self.b
        if d == dt.bool_:
            return b.zext(v, self.t(I8))
        if d == dt.bfloat16:
            return b.trunc(b.lshr(self.bf16_bits(v), self.of(16, I32)), self.t(I16))
        return v

    def bf16_bits(self, v):
        """float32 -> bfloat16 rounding to nearest even (NaN stays a quiet NaN), in the high half."""
        b = self.b
        bits = b.bitcast(v, self.t(I32))
        lsb = b.and_(b.lshr(bits, self.of(16, I32)), self.of(1, I32))
        rounded = b.and_(b.add(b.add(bits, self.of(0x7FFF, I32)), lsb), self.of(-65536, I32))
        nan = b.or_(bits, self.of(0x00400000, I32))
        return b.select(b.fcmp_unordered("uno", v, v), nan, rounded)

    def round_bf16(self, v):
        return self.b.bitcast(self.b.and_(self.bf16_bits(v), self.of(-65536, I32)), self.t(F32))

    # -- calls -----------------------------------------------------------------------------------
    def intrinsic(self, name: str, args):
        """llvm.<name>.<type suffix>(args), the type taken from the first argument."""
        t = args[0].type
        el = t.element if isinstance(t, ir.VectorType) else t
        suffix = {F32: "f32", F64: "f64", HALF: "f16"}.get(el) or f"i{el.width}"
        if isinstance(t, ir.VectorType):
            suffix = f"v{t.count}{suffix}"
        fn = self.kb.intrinsic(f"llvm.{name}.{suffix}", t, [a.type for a in args])
        return self.b.call(fn, args)

    def libm(self, name: str, x):
        """A C library function lane by lane (float32: name + 'f'; float64: name)."""
        t = x.type
        el = t.element if isinstance(t, ir.VectorType) else t
        fname = name if el == F64 else f"{name}f"
        fn = self.kb.intrinsic(fname, el, [el])
        if not isinstance(t, ir.VectorType):
            return self.b.call(fn, [x])
        out = ir.Constant(t, ir.Undefined)
        for k in range(t.count):
            lane = self.b.call(fn, [self.b.extract_element(x, ir.Constant(I32, k))])
            out = self.b.insert_element(out, lane, ir.Constant(I32, k))
        return out


def _vname(t: ir.VectorType) -> str:
    el = t.element
    name = {F32: "f32", F64: "f64", HALF: "f16"}.get(el) or f"i{el.width}"
    return f"v{t.count}{name}"


def lanes_loop(kb: KernelBuilder, lo, hi, body, n: int = 16):
    """body(lanes, i) for i = lo, lo + n, ... < hi: n lanes a step; whole steps unmasked, the last,
    partial one under a mask of its lanes. (Masking every step, as was done on AVX-512 to emit
    the body once, made a 51 MB Relu 2.2x and an Exp 3.9x slower on a Zen 5: its masked stores
    and the per-step mask cost more than the plain ones.)"""
    b = kb.b
    lo = kb.i64(lo) if isinstance(lo, int) else lo
    hi = kb.i64(hi) if isinstance(hi, int) else hi
    iota = ir.Constant(ir.VectorType(I64, n), list(range(n)))
    full = b.add(lo, b.mul(b.sdiv(b.sub(hi, lo), kb.i64(n)), kb.i64(n)))  # lo + whole steps
    with kb.loop(lo, full, n, name="lanes") as i:
        body(Lanes(kb, n), i)
    with kb.if_then(b.icmp_signed("<", full, hi)):
        body(Lanes(kb, n, b.icmp_signed("<", b.add(kb.splat(full, n), iota), kb.splat(hi, n))), full)


def is_float(d) -> bool:
    return d in FLOATS


def icmp(L: Lanes, d, pred, a, b):
    """An integer comparison, signed or unsigned as d is."""
    return (L.b.icmp_signed if d in SIGNED_INTS else L.b.icmp_unsigned)(pred, a, b)


def int_resize(L: Lanes, v, d, t):
    """An integer value of element type d as the integer LLVM type t (truncated or extended)."""
    w = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    if w == t.width:
        return v
    if w > t.width:
        return L.b.trunc(v, L.t(t))
    return (L.b.sext if d in SIGNED_INTS else L.b.zext)(v, L.t(t))


__all__ = ["FLOATS", "HALF", "INTS", "NUMERIC", "SIGNED_INTS", "UNSIGNED_INTS", "Lanes", "compute_type",
           "dtype_of_value", "icmp", "int_resize", "is_float", "lanes_loop", "storage_dtype"]
