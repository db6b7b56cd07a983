"""Transposes that move the innermost axis, in 8 x 8 register tiles.

The general strided nest (elementwise.emit_strided) writes the output in order and reads the input
one element at a time at a large stride: a 32 x 50,176 float transpose (NCDHW -> NDHWC of a video
activation) ran at under 2 GB/s, each element loaded from a different cache line. Here, where the
output's innermost axis I is contiguous and the input is contiguous along another axis P, 8 rows
of 8 input elements along P (8 consecutive values of I) are loaded as 8 vectors, transposed in
registers (three rounds of shuffles) and stored as 8 vectors along I. Partial tiles at the edges
copy element by element. Elements move as 32-bit integers (any 4-byte type).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ..irutil import I32, I64, PTR

T = 8  # tile side: one 8-lane vector of 32-bit elements (an AVX2 register)
_LO, _HI = [0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15]
_PAIR_LO, _PAIR_HI = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
_HALF_LO, _HALF_HI = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]


def tile_axis(sizes, out_strides, in_strides) -> int | None:
    """The axis P of a collapsed nest that the tiles run along (the input's contiguous one), or
    None when the nest is not such a transpose (or too small for a tile)."""
    if len(sizes) < 2 or out_strides[-1] != 1 or in_strides[-1] in (0, 1) or sizes[-1] < T:
        return None
    axes = [d for d in range(len(sizes) - 1) if in_strides[d] == 1 and sizes[d] >= T]
    return axes[-1] if axes else None


def _transpose8(b, rows):
    """The 8 columns of 8 row vectors (an 8 x 8 tile), as vectors."""
    def sh(x, y, mask):
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, T), mask))

    t = [sh(rows[k], rows[k + 1], m) for k in range(0, T, 2) for m in (_LO, _HI)]
    u = [sh(t[a], t[a + 2], m) for a in (0, 1, 4, 5) for m in (_PAIR_LO, _PAIR_HI)]
    cols = [None] * T
    for c in range(4):
        cols[c], cols[c + 4] = sh(u[c], u[c + 4], _HALF_LO), sh(u[c], u[c + 4], _HALF_HI)
    return cols


def emit_transpose(cg, name: str, sizes, out_strides, in_strides, axis: int, out_arg, in_arg, single: bool):
    """out[idx] = in[idx] over the nest (sizes, strides in elements), tiled along `axis` and the
    innermost one. Split across threads by the outermost loop (the tiles along `axis` when it is
    the outermost), unless `single`."""
    depth = len(sizes)
    inner = depth - 1
    kb = cg.function(name, [PTR, PTR, I64, I64])
    dst, src, tid, nth = kb.args
    b = kb.b
    vt = ir.VectorType(I32, T)
    outer = [d for d in range(depth) if d not in (axis, inner)]
    loops = [(d, sizes[d]) for d in outer] + [(axis, -(-sizes[axis] // T))]  # (axis, trip count)

    def nest(k, o_off, i_off):
        d, trips = loops[k]
        n = kb.i64(trips)
        lo, hi = (b.sdiv(b.mul(n, tid), nth), b.sdiv(b.mul(n, b.add(tid, kb.i64(1))), nth)) if k == 0 else (0, n)
        with kb.loop(lo, hi, name=f"t{k}", unroll=False) as i:
            if d != axis:
                nest(k + 1, b.add(o_off, b.mul(i, kb.i64(out_strides[d]))),
                     b.add(i_off, b.mul(i, kb.i64(in_strides[d]))))
                return
            p0 = b.mul(i, kb.i64(T))
            tiles(p0, o_off, i_off)

    def tiles(p0, o_off, i_off):
        np_ = b.sub(kb.i64(sizes[axis]), p0)
        full_p = b.icmp_signed(">=", np_, kb.i64(T))
        o_base = b.add(o_off, b.mul(p0, kb.i64(out_strides[axis])))
        i_base = b.add(i_off, p0)  # the input's stride along `axis` is 1
        with kb.loop(0, -(-sizes[inner] // T), name="ti", unroll=False) as j:
            q0 = b.mul(j, kb.i64(T))
            full = b.and_(full_p, b.icmp_signed(">=", b.sub(kb.i64(sizes[inner]), q0), kb.i64(T)))
            with b.if_else(full, likely=True) as (whole, edge):
                with whole:
                    rows = [b.load(kb.ptr(src, b.add(i_base, b.mul(b.add(q0, kb.i64(r)), kb.i64(in_strides[inner]))),
                                          I32), typ=vt, align=4) for r in range(T)]
                    for c, col in enumerate(_transpose8(b, rows)):
                        at = b.add(b.add(o_base, b.mul(kb.i64(c), kb.i64(out_strides[axis]))), q0)
                        b.store(col, b.bitcast(kb.ptr(dst, at, I32), vt.as_pointer()), align=4)
                with edge:
                    np_t = b.select(full_p, kb.i64(T), np_)
                    nq = b.sub(kb.i64(sizes[inner]), q0)
                    nq = b.select(b.icmp_signed("<", nq, kb.i64(T)), nq, kb.i64(T))
                    with kb.loop(0, np_t, name="ep") as c:
                        with kb.loop(0, nq, name="eq") as r:
                            q = b.add(q0, r)
                            v = kb.load(src, b.add(b.add(i_base, c), b.mul(q, kb.i64(in_strides[inner]))), I32)
                            kb.store(v, dst, b.add(b.add(o_base, b.mul(c, kb.i64(out_strides[axis]))), q), I32)

    nest(0, kb.i64(0), kb.i64(0))
    fn = kb.finish()
    args = [out_arg, in_arg] + ([cg.entry.i64(0), cg.entry.i64(1)] if single else [cg.tid, cg.nth])
    cg.call(fn, args, single=single)
