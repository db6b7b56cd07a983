"""Per-op code for elementwise kernels: one value-level emitter per op, over scalars or vectors.

`Lanes(kb, n)` is the current position of a loop, n lanes wide (1: scalar). Values are in each
element type's *compute* type: bool is i1, bfloat16 computes in float32 (rounded back to
bfloat16 after every op, as NumPy's ml_dtypes does), everything else in its storage type
(LLVM's half rounds every op like NumPy's float16). Integer division by zero gives 0 and shifts
past the width give 0: generated code never traps, whatever the data.
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
    """body(lanes, i) for i = lo, lo + n, ... < hi: n lanes a step, the last step masked, so the
    body is emitted once (no scalar tail loop)."""
    b = kb.b
    lo = kb.i64(lo) if isinstance(lo, int) else lo
    hi = kb.i64(hi) if isinstance(hi, int) else hi
    iota = ir.Constant(ir.VectorType(I64, n), list(range(n)))
    with kb.loop(lo, hi, n, name="lanes") as i:
        mask = b.icmp_signed("<", b.add(kb.splat(i, n), iota), kb.splat(hi, n))
        body(Lanes(kb, n, mask), i)


# -- the op table -------------------------------------------------------------------------------

#: (domain, op name) -> (emit(L, args, in_types, out_type, attrs), supports(in, out, attrs))
OPS: dict[tuple[str, str], tuple] = {}
#: Ops that pick one of their inputs: a bfloat16 result needs no rounding.
_SELECTS = frozenset({("", "Identity"), ("", "Where")})


def op(name, types=NUMERIC, check=None, domain=""):
    from glow.ops import get_op

    get_op(name, domain)  # an emitter for an op the table does not declare is a bug: fail at import

    def register(fn):
        def supports(ins, out, attrs):
            ok = all(t is None or t in types for t in ins) and (out in types or out == dt.bool_)
            return ok and (check is None or check(ins, out, attrs))

        if (domain, name) in OPS:
            raise ValueError(f"an elementwise emitter for '{name}' is already registered")
        OPS[(domain, name)] = (fn, supports)
        return fn

    return register


def supports(op, in_types, out_type, attrs) -> bool:
    """Whether the table computes `op` (an OpDef) for these element types and attributes."""
    entry = OPS.get((op.domain, op.name))
    return entry is not None and entry[1](in_types, out_type, attrs)


def apply(L: Lanes, op, args, in_types, out_type, attrs):
    key = (op.domain, op.name)
    v = OPS[key][0](L, args, in_types, out_type, attrs)
    if out_type == dt.bfloat16 and key not in _SELECTS:
        v = L.round_bf16(v)
    return v


def _is_float(d):
    return d in FLOATS


def _fold(fn):
    def emit(L, args, ins, out, attrs):
        acc = args[0]
        for a in args[1:]:
            acc = fn(L, acc, a, ins[0])
        return acc

    return emit


def _add(L, a, b, d):
    return L.b.fadd(a, b) if _is_float(d) else L.b.add(a, b)


def _max(L, a, b, d):
    if _is_float(d):  # NaN wins
        return L.b.select(L.b.fcmp_unordered("uno", a, a), a, L.b.select(L.b.fcmp_ordered(">", a, b), a, b))
    return L.b.select(_icmp(L, d, ">", a, b), a, b)


def _min(L, a, b, d):
    if _is_float(d):
        return L.b.select(L.b.fcmp_unordered("uno", a, a), a, L.b.select(L.b.fcmp_ordered("<", a, b), a, b))
    return L.b.select(_icmp(L, d, "<", a, b), a, b)


def _icmp(L, d, pred, a, b):
    return (L.b.icmp_signed if d in SIGNED_INTS else L.b.icmp_unsigned)(pred, a, b)


op("Add")(lambda L, a, ins, out, at: _add(L, a[0], a[1], ins[0]))
op("Sub")(lambda L, a, ins, out, at: (L.b.fsub if _is_float(out) else L.b.sub)(a[0], a[1]))
op("Mul")(lambda L, a, ins, out, at: (L.b.fmul if _is_float(out) else L.b.mul)(a[0], a[1]))
op("Max")(_fold(_max))
op("Min")(_fold(_min))
op("Sum", FLOATS)(_fold(_add))


@op("Div")
def _div(L, args, ins, out, attrs):
    a, b = args
    if _is_float(out):
        return L.b.fdiv(a, b)
    t = a.type.element if isinstance(a.type, ir.VectorType) else a.type
    zero, one = L.of(0, t), L.of(1, t)
    by_zero = L.b.icmp_unsigned("==", b, zero)
    if out in UNSIGNED_INTS:
        return L.b.select(by_zero, zero, L.b.udiv(a, L.b.select(by_zero, one, b)))
    minus_one = L.b.icmp_signed("==", b, L.of(-1, t))
    safe = L.b.select(L.b.or_(by_zero, minus_one), one, b)
    q = L.b.select(minus_one, L.b.sub(zero, a), L.b.sdiv(a, safe))  # INT_MIN / -1 wraps
    return L.b.select(by_zero, zero, q)


def _to_f64(L, v, d):
    if _is_float(d):
        return L.b.fpext(v, L.t(F64)) if v.type != L.t(F64) else v
    return (L.b.sitofp if d in SIGNED_INTS else L.b.uitofp)(v, L.t(F64))


@op("Pow", FLOATS + (dt.int32, dt.int64) + INTS)
def _pow(L, args, ins, out, attrs):
    x, y = args
    p = L.intrinsic("pow", [_to_f64(L, x, ins[0]), _to_f64(L, y, ins[1])])
    if _is_float(out):
        return cast.cast(L, p, dt.float64, out)  # not fptrunc: double -> half is a libcall
    t = compute_type(out)
    trunc = L.b.fptosi(L.intrinsic("trunc", [p]), L.t(t))
    if ins[1] not in INTS:
        return trunc
    exact = _ipow(L, x, L.b.sext(y, L.t(t)) if y.type != x.type and ins[1] in SIGNED_INTS
                  else _int_resize(L, y, ins[1], t))
    neg = L.b.icmp_signed("<", y, L.of(0, y.type.element if isinstance(y.type, ir.VectorType) else y.type)) \
        if ins[1] in SIGNED_INTS else L.of(0, I1)
    return L.b.select(neg, trunc, exact)


def _int_resize(L, v, d, t):
    w = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    if w == t.width:
        return v
    if w > t.width:
        return L.b.trunc(v, L.t(t))
    return (L.b.sext if d in SIGNED_INTS else L.b.zext)(v, L.t(t))


def _ipow(L, x, y):
    """x ** y for y >= 0 by squaring, unrolled over the exponent's bits (wraps like NumPy)."""
    t = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    acc, base, e = L.of(1, t), x, y
    for _ in range(t.width):
        bit = L.b.icmp_unsigned("!=", L.b.and_(e, L.of(1, t)), L.of(0, t))
        acc = L.b.select(bit, L.b.mul(acc, base), acc)
        base = L.b.mul(base, base)
        e = L.b.lshr(e, L.of(1, t))
    return acc


def _cmp(fpred, ipred):
    def emit(L, args, ins, out, attrs):
        a, b = args
        d = ins[0]
        if _is_float(d):
            return L.b.fcmp_ordered(fpred, a, b)
        if d == dt.bool_:
            return L.b.icmp_unsigned(ipred, a, b)
        return _icmp(L, d, ipred, a, b)

    return emit


for _n, _f, _i in (("Equal", "==", "=="), ("Less", "<", "<"), ("Greater", ">", ">"),
                   ("LessOrEqual", "<=", "<="), ("GreaterOrEqual", ">=", ">=")):
    op(_n, NUMERIC + (dt.bool_,))(_cmp(_f, _i))

op("And", (dt.bool_,))(lambda L, a, ins, out, at: L.b.and_(a[0], a[1]))
op("Or", (dt.bool_,))(lambda L, a, ins, out, at: L.b.or_(a[0], a[1]))
op("Xor", (dt.bool_,))(lambda L, a, ins, out, at: L.b.xor(a[0], a[1]))
op("Not", (dt.bool_,))(lambda L, a, ins, out, at: L.b.xor(a[0], L.of(1, I1)))
op("BitwiseAnd", INTS)(lambda L, a, ins, out, at: L.b.and_(a[0], a[1]))
op("BitwiseOr", INTS)(lambda L, a, ins, out, at: L.b.or_(a[0], a[1]))
op("BitwiseXor", INTS)(lambda L, a, ins, out, at: L.b.xor(a[0], a[1]))
op("BitwiseNot", INTS)(lambda L, a, ins, out, at: L.b.xor(a[0], L.of(-1, compute_type(out))))
op("Identity", tuple(d for d in dt.ALL if has_ltype(d)))(lambda L, a, ins, out, at: a[0])


@op("BitShift", INTS)
def _bitshift(L, args, ins, out, attrs):
    x, y = args
    t = compute_type(out)
    big = L.b.icmp_unsigned(">=", y, L.of(t.width, t))
    if attrs["direction"] == "LEFT":
        return L.b.select(big, L.of(0, t), L.b.shl(x, L.b.select(big, L.of(0, t), y)))
    if out in SIGNED_INTS:
        return L.b.ashr(x, L.b.select(big, L.of(t.width - 1, t), y))
    return L.b.select(big, L.of(0, t), L.b.lshr(x, L.b.select(big, L.of(0, t), y)))


@op("Where", tuple(d for d in dt.ALL if has_ltype(d)))
def _where(L, args, ins, out, attrs):
    return L.b.select(*args)


# the rest of the table: math and activations, casts (they register themselves into OPS)
from . import cast  # noqa: E402, F401, I001
from . import ewmath  # noqa: E402, F401

__all__ = ["OPS", "Lanes", "apply", "compute_type", "lanes_loop", "op", "storage_dtype", "supports"]
