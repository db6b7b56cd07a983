"""glow's own float16 conversion helpers: the compiler-rt functions LLVM calls for `half`.

On x86-64 LLVM converts float16 inline only with F16C (float <-> half) and AVX512-FP16 (double ->
half); otherwise `fpext`/`fptrunc` on half become calls to `__extendhfsf2`, `__truncsfhf2` and
`__truncdfhf2`, which a Python process does not have unless some other library brought them.
These are those functions, written with integer operations only (so compiling them needs no
helper in turn) and bound by address like libm (linking.py), so float16 kernels are
self-contained on every x86-64 CPU. Kernels still avoid them where they can (cast.py converts
double -> half through float32 rounded to odd); these are what LLVM falls back to.

Conversions round to nearest even, as IEEE 754 and NumPy do; NaN stays NaN (made quiet, sign and
top payload bits kept); overflow gives infinity, underflow subnormals or zero.
"""

from __future__ import annotations

import llvmlite.ir as ir

from .irutil import F32, F64, I32, KernelBuilder

HALF = ir.HalfType()
I16 = ir.IntType(16)


def _to_half_bits(kb: KernelBuilder, bits, m_bits: int, bias: int):
    """Half bits (an i16) of the IEEE value with these bits (an iW), correctly rounded."""
    b, t = kb.b, bits.type
    w = t.width

    def c(v):
        return ir.Constant(t, v)

    sign = b.trunc(b.lshr(bits, c(w - 16)), I16)
    sign = b.and_(sign, ir.Constant(I16, 0x8000))
    a = b.and_(bits, c((1 << (w - 1)) - 1))
    mant = b.and_(a, c((1 << m_bits) - 1))
    e = b.sub(b.lshr(a, c(m_bits)), c(bias))  # unbiased exponent (sources' subnormals: -bias)
    sig = b.or_(mant, c(1 << m_bits))
    # value = sig * 2^(e - m_bits); half keeps 10 bits below the leading one, fewer below 2^-14
    lo = b.select(b.icmp_signed("<", e, c(-14)), c(-14), e)
    shift = b.add(c(m_bits - 10), b.sub(lo, e))
    shift = b.select(b.icmp_signed(">", shift, c(m_bits + 2)), c(m_bits + 2), shift)  # rounds to 0
    q = b.lshr(sig, shift)
    rem = b.and_(sig, b.sub(b.shl(c(1), shift), c(1)))
    halfway = b.shl(c(1), b.sub(shift, c(1)))
    up = b.or_(b.icmp_unsigned(">", rem, halfway),
               b.and_(b.icmp_unsigned("==", rem, halfway), b.icmp_unsigned("!=", b.and_(q, c(1)), c(0))))
    # exponent field (lo + 14) << 10 plus q, whose leading one adds the implicit bit: a mantissa
    # that rounds up carries into the exponent, up to 0x7c00 (infinity) by itself
    h = b.add(b.add(b.shl(b.add(lo, c(14)), c(10)), q), b.zext(up, t))
    h = b.select(b.icmp_signed(">", e, c(15)), c(0x7C00), h)
    inf = (1 << (w - 1)) - (1 << m_bits)  # the bits of infinity: above is NaN
    nan = b.or_(c(0x7E00), b.lshr(mant, c(m_bits - 10)))
    h = b.select(b.icmp_unsigned(">", a, c(inf)), nan, h)
    return b.or_(b.trunc(h, I16), sign)


def _trunc(module: ir.Module, name: str, src, m_bits: int, bias: int):
    kb = KernelBuilder(module, name, [src], ret=HALF)
    bits = kb.b.bitcast(kb.args[0], ir.IntType(src.width if isinstance(src, ir.IntType) else
                                               (32 if src == F32 else 64)))
    kb.finish(kb.b.bitcast(_to_half_bits(kb, bits, m_bits, bias), HALF))


def _extend(module: ir.Module):
    """__extendhfsf2: half -> float (exact)."""
    kb = KernelBuilder(module, "__extendhfsf2", [HALF], ret=F32)
    b = kb.b
    h = b.zext(b.bitcast(kb.args[0], I16), I32)
    sign = b.shl(b.and_(h, ir.Constant(I32, 0x8000)), ir.Constant(I32, 16))
    e = b.and_(b.lshr(h, ir.Constant(I32, 10)), ir.Constant(I32, 0x1F))
    m = b.and_(h, ir.Constant(I32, 0x3FF))
    normal = b.or_(b.shl(b.add(e, ir.Constant(I32, 112)), ir.Constant(I32, 23)),
                   b.shl(m, ir.Constant(I32, 13)))
    special = b.or_(ir.Constant(I32, 0x7F800000), b.shl(m, ir.Constant(I32, 13)))
    quiet = b.select(b.icmp_unsigned("!=", m, ir.Constant(I32, 0)), ir.Constant(I32, 0x400000),
                     ir.Constant(I32, 0))
    special = b.or_(special, quiet)
    # zero and subnormals: m * 2^-24, exact in float32
    tiny = b.bitcast(b.fmul(b.uitofp(m, F32), ir.Constant(F32, 2.0 ** -24)), I32)
    mag = b.select(b.icmp_unsigned("==", e, ir.Constant(I32, 0)), tiny,
                   b.select(b.icmp_unsigned("==", e, ir.Constant(I32, 31)), special, normal))
    kb.finish(b.bitcast(b.or_(mag, sign), F32))


#: The helpers this module defines (what linking.py allows besides libm and libc).
NAMES = ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2")


def module_text(triple: str) -> str:
    m = ir.Module(name="glow.halfrt")
    m.triple = triple
    _extend(m)
    _trunc(m, "__truncsfhf2", F32, 23, 127)
    _trunc(m, "__truncdfhf2", F64, 52, 1023)
    return str(m)


__all__ = ["NAMES", "module_text"]
