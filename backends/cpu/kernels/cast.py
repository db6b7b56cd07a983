"""Cast for the op table in ewops.py: between every IEEE float, integer and bool type as NumPy
converts on x86 (C-style float -> int), plus the narrow one-byte formats (narrow.py)."""

from __future__ import annotations

from glow import dtypes as dt

from ..irutil import F32, F64, I8, I32, I64
from . import narrow
from .ewops import FLOATS, HALF, NUMERIC, SIGNED_INTS, _int_resize, _is_float, compute_type, op

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
    if out in narrow.ENCODABLE:
        return narrow.encode(L, cast(L, x, src, dt.float32), out, bool(attrs.get("saturate", 1)))
    return cast(L, x, src, out)


def _to_f32_odd(L, x):
    """float64 -> float32 rounding to odd, so a second rounding (to float16) is exact; LLVM's
    direct float64 -> half conversion is a compiler-rt call that a JIT cannot resolve."""
    b = L.b
    t = b.fptrunc(x, L.t(F32))
    back = b.fpext(t, L.t(F64))
    bits = b.bitcast(t, L.t(I32))
    away = b.fcmp_ordered(">", L.intrinsic("fabs", [back]), L.intrinsic("fabs", [x]))
    toward_zero = b.select(away, b.sub(bits, L.of(1, I32)), bits)
    odd = b.bitcast(b.or_(toward_zero, L.of(1, I32)), L.t(F32))
    return b.select(b.fcmp_unordered("==", back, x), t, odd)


def cast(L, x, src, dst):
    b = L.b
    ts, td = compute_type(src), compute_type(dst)
    if src == dst:
        return x
    if dst == dt.bool_:
        if _is_float(src):
            return b.fcmp_unordered("!=", x, L.of(0.0, ts))
        return b.icmp_unsigned("!=", x, L.of(0, ts))
    if src == dt.bool_:
        return b.uitofp(x, L.t(td)) if _is_float(dst) else b.zext(x, L.t(td))
    if _is_float(src) and _is_float(dst):
        if ts == td:
            return x
        wider = {HALF: 1, F32: 2, F64: 3}
        if ts == F64 and td == HALF:
            return b.fptrunc(_to_f32_odd(L, x), L.t(HALF))
        return (b.fpext if wider[td] > wider[ts] else b.fptrunc)(x, L.t(td))
    if _is_float(src):  # float -> int: through a C-style conversion, as NumPy does on x86
        if dst == dt.uint64 and ts == HALF:
            return b.fptosi(x, L.t(I64))
        if dst == dt.uint64:  # below 2^63 through int64, as x86 code for a C cast does
            big = b.fcmp_ordered(">=", x, L.of(2.0 ** 63, ts))
            return b.select(big, b.fptoui(x, L.t(I64)), b.fptosi(x, L.t(I64)))
        via = I64 if dst == dt.uint32 or td.width == 64 else I32
        v = b.fptosi(x, L.t(via))
        return v if via == td else b.trunc(v, L.t(td))
    if _is_float(dst):
        return (b.sitofp if src in SIGNED_INTS else b.uitofp)(x, L.t(td))
    return _int_resize(L, x, src, td)


__all__ = ["cast"]
