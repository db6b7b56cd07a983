"""Cast for the op table in ewops.py: between every IEEE float, integer and bool type as NumPy
converts on x86 (C-style float -> int), plus the narrow one-byte formats (narrow.py)."""

from __future__ import annotations

import llvmlite.ir as ir
from glow import dtypes as dt

from ..irutil import F32, F64, I8, I32, I64
from . import narrow
from .ewops import op
from .lanes import FLOATS, HALF, NUMERIC, SIGNED_INTS, compute_type, int_resize, is_float

CASTABLE = NUMERIC + (dt.bool_,)


def _narrow_ok(ins, out, attrs):
    return ((ins[0] in CASTABLE or ins[0] in narrow.DECODABLE)
            and (out in CASTABLE or out in narrow.ENCODABLE))


@op("Cast", tuple(dt.ALL), check=_narrow_ok)
def _cast(L, args, ins, out, attrs):
    x, src = args[0], ins[0]
    if src in narrow.DECODABLE:
        x, src = narrow.decode(L, x, src), dt.float32
    if out in narrow.INT_BITS and src not in FLOATS:
        v = L.b.zext(x, L.t(I8)) if src == dt.bool_ else x
        return narrow.truncate_int(L, v, out)
    if out in narrow.ENCODABLE:  # one rounding from the source's value (to_f32: odd if needed)
        return narrow.encode(L, to_f32(L, x, src), out, bool(attrs.get("saturate", 1)))
    return cast(L, x, src, out)


#: Sources whose values float32 does not hold exactly (more than 24 significant bits).
WIDE = (dt.float64, dt.int32, dt.uint32, dt.int64, dt.uint64)


def f32_odd(L, x, src):
    """x (of a WIDE type) as float32 rounded to odd: exact, else the neighbour with an odd last
    bit. Rounding that once more to a format of at most 22 significant bits (float16's 11,
    bfloat16's 8, float8's 4) is then exact: going through a nearest-even float32 rounds twice,
    and 1 + 2^-8 + 2^-30 would become bfloat16 1 instead of 1 + 2^-7. It also keeps LLVM off
    double -> half, which is a compiler-rt call on CPUs without AVX512-FP16."""
    b = L.b
    if src == dt.float64:
        t = b.fptrunc(x, L.t(F32))
        back = b.fpext(t, L.t(F64))
        bits = b.bitcast(t, L.t(I32))
        away = b.fcmp_ordered(">", L.intrinsic("fabs", [back]), L.intrinsic("fabs", [x]))
        toward_zero = b.select(away, b.sub(bits, L.of(1, I32)), bits)
        odd = b.bitcast(b.or_(toward_zero, L.of(1, I32)), L.t(F32))
        return b.select(b.fcmp_unordered("==", back, x), t, odd)
    # an integer: keep its top 24 bits, OR-ing a sticky 1 into the last when any dropped bit is
    # set, then scale by 2^dropped (both conversions exact)
    it = compute_type(src)
    w = it.width
    neg = b.icmp_signed("<", x, L.of(0, it)) if src in SIGNED_INTS else L.of(0, ir.IntType(1))
    v = b.select(neg, b.sub(L.of(0, it), x), x)  # |x| as unsigned (INT_MIN: 2^(w-1))
    used = b.sub(L.of(w, it), L.intrinsic("ctlz", [v, ir.Constant(ir.IntType(1), 0)]))
    drop = b.select(b.icmp_unsigned(">", used, L.of(24, it)), b.sub(used, L.of(24, it)), L.of(0, it))
    kept = b.lshr(v, drop)
    sticky = b.icmp_unsigned("!=", b.and_(v, b.sub(b.shl(L.of(1, it), drop), L.of(1, it))), L.of(0, it))
    kept = b.or_(kept, b.zext(sticky, L.t(it)))
    scale = b.shl(b.add(_to_i32(L, drop), L.of(127, I32)), L.of(23, I32))
    f = b.fmul(b.sitofp(kept, L.t(F32)), b.bitcast(scale, L.t(F32)))
    return b.select(neg, b.fneg(f), f)


def _to_i32(L, v):
    w = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
    return v if w == 32 else L.b.trunc(v, L.t(I32))


def to_f32(L, x, src):
    """x as float32 for a second rounding to a narrower format (bfloat16, float8)."""
    return f32_odd(L, x, src) if src in WIDE else cast(L, x, src, dt.float32)


def cast(L, x, src, dst):
    b = L.b
    ts, td = compute_type(src), compute_type(dst)
    if src == dst:
        return x
    if dst == dt.bfloat16 and src in WIDE:  # computed in float32: rounded to bfloat16 after
        return f32_odd(L, x, src)
    if dst == dt.bool_:
        if is_float(src):
            return b.fcmp_unordered("!=", x, L.of(0.0, ts))
        return b.icmp_unsigned("!=", x, L.of(0, ts))
    if src == dt.bool_:
        return b.uitofp(x, L.t(td)) if is_float(dst) else b.zext(x, L.t(td))
    if is_float(src) and is_float(dst):
        if ts == td:
            return x
        wider = {HALF: 1, F32: 2, F64: 3}
        if ts == F64 and td == HALF:
            return b.fptrunc(f32_odd(L, x, src), L.t(HALF))
        return (b.fpext if wider[td] > wider[ts] else b.fptrunc)(x, L.t(td))
    if is_float(src):  # float -> int: through a C-style conversion, as NumPy does on x86
        if dst == dt.uint64 and ts == HALF:
            return b.fptosi(x, L.t(I64))
        if dst == dt.uint64:  # below 2^63 through int64, as x86 code for a C cast does
            big = b.fcmp_ordered(">=", x, L.of(2.0 ** 63, ts))
            return b.select(big, b.fptoui(x, L.t(I64)), b.fptosi(x, L.t(I64)))
        via = I64 if dst == dt.uint32 or td.width == 64 else I32
        v = b.fptosi(x, L.t(via))
        return v if via == td else b.trunc(v, L.t(td))
    if is_float(dst):
        return (b.sitofp if src in SIGNED_INTS else b.uitofp)(x, L.t(td))
    return int_resize(L, x, src, td)


__all__ = ["cast"]
