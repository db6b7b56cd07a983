"""GroupQueryAttention (glow.ops.genai): the KV cache updated in place, attention in one pass.

Two phases, one kernel call each (the second after the first):

1. cache, per (row b, kv head g): where present is not past's memory, the row's valid past
   [0, past_b) is copied and the rows after its new ones are zeroed (the reference's present);
   then the new keys (rotated) and values go to rows [past_b, past_b + S). Where present and past
   are one buffer (the generator passes one array as both: onnxruntime-genai's
   past_present_share_buffer; glow.ir.aliasable lets it), only the new rows are written and past
   is never read. The four cache pointers come as integers: marking them noalias, as the entry
   does for distinct operands, would let LLVM assume the two never meet.
2. attention, per (b, head h, query s): the query rotated and scaled into a stack buffer, then one
   pass over its keys [lo, hi) with an online softmax (running max and sum; the value accumulator,
   in registers, rescaled when the max grows); y = acc / sum. Query head h reads kv head
   h // (H / G): a group's heads share one cache. A prompt (TILE_MIN_S queries or more) takes
   `_emit_attend_tiles` instead: QL queries at once, one per vector lane, so that each key and
   value element loaded serves QL queries and the softmax needs no horizontal sums.

Positions as the reference's: past_b = 0 for a first prompt (S == total_sequence_length), else
seqlens_k[b] + 1 - S; query s sits at past_b + s and sees keys up to itself below the row's length
(the last local_window_size of them). A seqlens_k whose rows fall outside the cache, or a position
past the rotary caches, is recorded as a bad index (an InputError after the run) and its rows skipped.
"""

from __future__ import annotations

import llvmlite.ir as ir
from glow import dtypes as dt
from glow.ops.index import NON_NEGATIVE, site_id

from .. import jit
from ..codegen import cpu_kernel
from ..irutil import F32, I32, I64, PTR
from . import vmath
from .index import record_bad_index

MS = "com.microsoft"


def _f32(v, rank=None) -> bool:
    t = None if v is None else v.type
    return (isinstance(t, dt.TensorType) and t.is_static and t.dtype == dt.float32
            and (rank is None or len(t.shape) == rank))


def _gqa_ok(node) -> bool:
    ins = list(node.inputs) + [None] * 12
    q, k, v, pk, pv, seqlens, total, cos, sin = ins[:9]
    a = node.attrs
    if any(x is not None for x in ins[9:12]) or a["smooth_softmax"] or a["qk_output"]:
        return False
    if not (_f32(q, 3) and all(_f32(o, r) for o, r in zip(node.outputs[:3], (3, 4, 4)))):
        return False
    if (k is None) != (v is None) or (k is not None and not (_f32(k, 3) and _f32(v, 3))):
        return False
    if (pk is None) != (pv is None) or (pk is not None and not (_f32(pk, 4) and _f32(pv, 4))):
        return False
    d = node.outputs[1].type.shape[3]
    if d % 8 or any(x is None or x.type.dtype != dt.int32 for x in (seqlens, total)):
        return False
    if a["do_rotary"]:
        if not (_f32(cos, 2) and _f32(sin, 2) and cos.type.shape == sin.type.shape):
            return False
        if not 0 < 2 * cos.type.shape[1] <= d:
            return False
    return True


class _Geometry:
    """Sizes and strides of one GroupQueryAttention instruction."""

    def __init__(self, instr):
        ins = list(instr.inputs) + [None] * 12
        self.q, self.k, self.v, self.pk, self.pv, self.seqlens, self.total, self.cos, self.sin = ins[:9]
        self.y, self.ok, self.ov = instr.outputs[:3]
        a = instr.attrs
        self.H, self.G = a["num_heads"], a["kv_num_heads"]
        self.B, self.S, self.Q = self.q.type.shape
        _, _, self.T, self.D = self.ok.type.shape
        self.packed = self.k is None
        self.P = self.pk.type.shape[2] if self.pk is not None else 0
        self.rot = 2 * self.cos.type.shape[1] if a["do_rotary"] else 0
        self.R = self.cos.type.shape[0] if self.rot else 0
        self.interleaved = bool(a["rotary_interleaved"])
        self.window = a["local_window_size"]
        self.softcap = float(a["softcap"])
        self.alpha = float(a["scale"]) or self.D ** -0.5
        self.W = 16 if self.D % 16 == 0 else 8  # lanes per vector of a head row

    def kv_row(self, kb, base, b_, g, t):
        """Float offset of row t of kv head g of batch row b in a (B, G, T, D) cache."""
        return kb.b.mul(kb.b.add(kb.b.mul(kb.b.add(kb.b.mul(b_, kb.i64(self.G)), g), kb.i64(self.T)), t),
                        kb.i64(self.D))


def _positions(kb, geo: _Geometry, seqlens, total, b_):
    """(length, past) of row b_: seqlens_k[b] + 1, and 0 for a first prompt else length - S."""
    b = kb.b
    length = b.add(b.sext(b.load(kb.ptr(seqlens, b_, I32), typ=I32), I64), kb.i64(1))
    tot = b.sext(b.load(total, typ=I32), I64)
    first = b.icmp_signed("==", tot, kb.i64(geo.S))
    past = b.select(first, kb.i64(0), b.sub(length, kb.i64(geo.S)))
    return length, past


def _rows_fit(kb, geo: _Geometry, length, past):
    """Whether the row's new rows lie inside the cache (and the rotary caches)."""
    b = kb.b
    ok = b.and_(b.icmp_signed(">=", past, kb.i64(0)), b.icmp_signed("<=", b.add(past, kb.i64(geo.S)), kb.i64(geo.T)))
    ok = b.and_(ok, b.icmp_signed("<=", length, kb.i64(geo.T)))
    if geo.rot:
        ok = b.and_(ok, b.icmp_signed("<=", b.add(past, kb.i64(geo.S)), kb.i64(geo.R)))
    return ok


def _rotate_row(kb, geo: _Geometry, src, dst, pos, cos, sin, scale=None):
    """dst[0:D] = src[0:D] rotated by position `pos` (first `rot` features), times `scale`."""
    b = kb.b
    half = geo.rot // 2

    def put(i, val):
        kb.store(val if scale is None else b.fmul(val, kb.f32(scale)), dst, i)

    if geo.rot:
        with kb.loop(0, half, name="r") as i:
            c = kb.load(cos, b.add(b.mul(pos, kb.i64(half)), i))
            s = kb.load(sin, b.add(b.mul(pos, kb.i64(half)), i))
            i1 = b.mul(i, kb.i64(2)) if geo.interleaved else i
            i2 = b.add(i1, kb.i64(1)) if geo.interleaved else b.add(i, kb.i64(half))
            x1, x2 = kb.load(src, i1), kb.load(src, i2)
            put(i1, b.fsub(b.fmul(c, x1), b.fmul(s, x2)))
            put(i2, b.fadd(b.fmul(s, x1), b.fmul(c, x2)))
    with kb.loop(geo.rot, geo.D, name="c") as i:
        put(i, kb.load(src, i))


def _copy(kb, dst, dst_off, src, src_off, n):
    b = kb.b
    with kb.loop(0, n, name="cp") as i:
        kb.store(kb.load(src, b.add(src_off, i)), dst, b.add(dst_off, i))


def _zero(kb, dst, lo, hi):
    with kb.loop(lo, hi, name="z") as i:
        kb.store(kb.f32(0.0), dst, i)


def _emit_cache(cg, geo: _Geometry, site: int):
    kb = cg.function("GQA.cache", [PTR, PTR, PTR, I64, I64, I64, I64, PTR, PTR, PTR, PTR, I64, I64])
    q, k, v, pk_i, pv_i, ok_i, ov_i, seqlens, total, cos, sin, tid, nth = kb.args
    b = kb.b
    pk, pv, ok, ov = (b.inttoptr(x, PTR) for x in (pk_i, pv_i, ok_i, ov_i))
    items = geo.B * geo.G
    lo = b.sdiv(b.mul(kb.i64(items), tid), nth)
    hi = b.sdiv(b.mul(kb.i64(items), b.add(tid, kb.i64(1))), nth)
    D, S, T = geo.D, geo.S, geo.T
    with kb.loop(lo, hi, name="item") as item:
        b_, g = b.sdiv(item, kb.i64(geo.G)), b.srem(item, kb.i64(geo.G))
        length, past = _positions(kb, geo, seqlens, total, b_)
        with b.if_else(_rows_fit(kb, geo, length, past), likely=True) as (fits, bad):
            with fits:
                row0 = geo.kv_row(kb, None, b_, g, kb.i64(0))
                end = b.mul(b.add(past, kb.i64(S)), kb.i64(D))
                for src_i, dst_i, dst in ((pk_i, ok_i, ok), (pv_i, ov_i, ov)):
                    with kb.if_then(b.icmp_unsigned("!=", src_i, dst_i)):  # not one buffer: the reference's present
                        if geo.P:
                            src_row0 = b.mul(b.add(b.mul(b_, kb.i64(geo.G)), g), kb.i64(geo.P * D))
                            n = b.mul(b.select(b.icmp_signed("<", past, kb.i64(geo.P)), past, kb.i64(geo.P)),
                                      kb.i64(D))
                            _copy(kb, dst, row0, b.inttoptr(src_i, PTR), src_row0, n)
                        _zero(kb, dst, b.add(row0, end), b.add(row0, kb.i64(T * D)))
                with kb.loop(0, S, name="s") as s:
                    tok = b.add(b.mul(b_, kb.i64(S)), s)
                    if geo.packed:
                        k_src = kb.ptr(q, b.add(b.mul(tok, kb.i64(geo.Q)), kb.i64(geo.H * D)))
                        k_src = kb.ptr(k_src, b.mul(g, kb.i64(D)))
                        v_src = kb.ptr(q, b.add(b.mul(tok, kb.i64(geo.Q)), kb.i64((geo.H + geo.G) * D)))
                        v_src = kb.ptr(v_src, b.mul(g, kb.i64(D)))
                    else:
                        k_src = kb.ptr(k, b.add(b.mul(tok, kb.i64(geo.G * D)), b.mul(g, kb.i64(D))))
                        v_src = kb.ptr(v, b.add(b.mul(tok, kb.i64(geo.G * D)), b.mul(g, kb.i64(D))))
                    t = b.add(past, s)
                    _rotate_row(kb, geo, k_src, kb.ptr(ok, geo.kv_row(kb, None, b_, g, t)), t, cos, sin)
                    _copy(kb, kb.ptr(ov, geo.kv_row(kb, None, b_, g, t)), kb.i64(0), v_src, kb.i64(0), kb.i64(D))
            with bad:
                record_bad_index(kb, site, NON_NEGATIVE, b.sub(length, kb.i64(1)), geo.T)
    kb.finish()
    return kb


def _sums(kb, vecs):
    """[sum(v) for v in vecs] as one vector (len(vecs) == lanes), by halving: two vectors holding
    S sources of P partial sums each make one holding 2S sources of P/2 (two shuffles and an add),
    until each lane is one source's sum, in the order of `vecs`."""
    b = kb.b
    w = len(vecs)
    parts = w  # partial sums per source in each vector
    while len(vecs) > 1:
        half = parts // 2
        lo = [(x // half) * parts + x % half if x < w // 2 else w + ((x - w // 2) // half) * parts + x % half
              for x in range(w)]
        hi = [i + half for i in lo]
        lo_m, hi_m = (ir.Constant(ir.VectorType(I32, w), m) for m in (lo, hi))
        vecs = [b.fadd(b.shuffle_vector(x, y, lo_m), b.shuffle_vector(x, y, hi_m))
                for x, y in zip(vecs[0::2], vecs[1::2])]
        parts = half
    return vecs[0]


def _hreduce(kb, v, w, combine):
    """The `w` lanes of v combined pairwise (a fixed order); a scalar."""
    b = kb.b
    while w > 1:
        w //= 2
        idx = ir.VectorType(I32, w)
        v = combine(b.shuffle_vector(v, v, ir.Constant(idx, list(range(w)))),
                    b.shuffle_vector(v, v, ir.Constant(idx, list(range(w, 2 * w)))))
    return b.extract_element(v, ir.Constant(I32, 0))


def _emit_attend(cg, geo: _Geometry):
    """Per query: keys in blocks of W (the lanes of a vector): W dot products at once (their sums
    transposed into one vector), one vector exp for the block's probabilities, the running max and
    sum updated once per block, and the block's values added into the accumulator (in registers)."""
    kb = cg.function("GQA.attend", [PTR, PTR, PTR, PTR, PTR, PTR, PTR, PTR, I64, I64])
    q, ok, ov, y, seqlens, total, cos, sin, tid, nth = kb.args
    b = kb.b
    D, S, W = geo.D, geo.S, geo.W
    vt = ir.VectorType(F32, W)
    nc = D // W
    group = geo.H // geo.G
    items = geo.B * geo.H * S
    lo = b.sdiv(b.mul(kb.i64(items), tid), nth)
    hi = b.sdiv(b.mul(kb.i64(items), b.add(tid, kb.i64(1))), nth)
    qb = kb.array(F32, D)
    zero_v = ir.Constant(vt, [0.0] * W)
    neg_v = ir.Constant(vt, [-float("inf")] * W)
    lanes = ir.Constant(ir.VectorType(I64, W), list(range(W)))
    acc = [kb.var(vt) for _ in range(nc)]
    m_var, l_var = kb.var(F32), kb.var(F32)

    def vload(ptr, off):
        return b.load(kb.ptr(ptr, off), typ=vt, align=4)

    with kb.loop(lo, hi, name="item") as item:
        b_ = b.sdiv(item, kb.i64(geo.H * S))
        rem = b.srem(item, kb.i64(geo.H * S))
        h, s = b.sdiv(rem, kb.i64(S)), b.srem(rem, kb.i64(S))
        g = b.sdiv(h, kb.i64(group))
        length, past = _positions(kb, geo, seqlens, total, b_)
        tok = b.add(b.mul(b_, kb.i64(S)), s)
        dst = kb.ptr(y, b.add(b.mul(tok, kb.i64(geo.H * D)), b.mul(h, kb.i64(D))))
        with b.if_else(_rows_fit(kb, geo, length, past), likely=True) as (fits, bad):
            with fits:
                qpos = b.add(past, s)
                src = kb.ptr(q, b.add(b.mul(tok, kb.i64(geo.Q)), b.mul(h, kb.i64(D))))
                _rotate_row(kb, geo, src, qb, qpos, cos, sin, scale=geo.alpha)
                top = b.add(qpos, kb.i64(1))
                t_hi = b.select(b.icmp_signed("<", top, length), top, length)
                t_lo = kb.i64(0)
                if geo.window > 0:
                    first = b.sub(qpos, kb.i64(geo.window - 1))
                    t_lo = b.select(b.icmp_signed(">", first, kb.i64(0)), first, kb.i64(0))
                for a_ in acc:
                    b.store(zero_v, a_)
                b.store(kb.f32(-float("inf")), m_var)
                b.store(kb.f32(0.0), l_var)
                qv = [vload(qb, kb.i64(c * W)) for c in range(nc)]
                base = geo.kv_row(kb, None, b_, g, kb.i64(0))
                blocks = b.udiv(b.add(b.sub(t_hi, t_lo), kb.i64(W - 1)), kb.i64(W))
                with kb.loop(0, blocks, name="blk") as blk:
                    t0 = b.add(t_lo, b.mul(blk, kb.i64(W)))
                    left = b.sub(t_hi, t0)
                    n = b.select(b.icmp_signed("<", left, kb.i64(W)), left, kb.i64(W))
                    last = b.sub(t_hi, kb.i64(1))
                    dots = []
                    for j in range(W):  # key t0 + j (a row past the last valid one reads the last)
                        t = b.add(t0, kb.i64(j))
                        row = b.add(base, b.mul(b.select(b.icmp_signed("<", t, t_hi), t, last), kb.i64(D)))
                        d = b.fmul(qv[0], vload(ok, row))
                        for c in range(1, nc):
                            d = kb.fma(qv[c], vload(ok, b.add(row, kb.i64(c * W))), d)
                        dots.append(d)
                    logits = _sums(kb, dots)
                    if geo.softcap > 0:
                        cap = kb.splat(kb.f32(geo.softcap), W)
                        logits = b.fmul(vmath.emit_unary(kb, "Tanh", b.fdiv(logits, cap)), cap)
                    valid = b.icmp_signed("<", lanes, kb.splat(n, W))
                    logits = b.select(valid, logits, neg_v)
                    m_old = b.load(m_var)
                    m_blk = _hreduce(kb, logits, W, lambda a, c: b.select(b.fcmp_ordered(">", a, c), a, c))
                    m_new = b.select(b.fcmp_ordered(">", m_blk, m_old), m_blk, m_old)
                    corr = vmath.emit_unary(kb, "Exp", b.fsub(m_old, m_new))
                    p = vmath.emit_unary(kb, "Exp", b.fsub(logits, kb.splat(m_new, W)))
                    b.store(b.fadd(b.fmul(b.load(l_var), corr), _hreduce(kb, p, W, b.fadd)), l_var)
                    b.store(m_new, m_var)
                    cv = kb.splat(corr, W)
                    new = [b.fmul(b.load(a_), cv) for a_ in acc]
                    for a_, v_ in zip(acc, new):
                        b.store(v_, a_)
                    with kb.loop(0, n, name="j") as j:
                        pj = kb.splat(b.extract_element(p, b.trunc(j, I32)), W)
                        row = b.add(base, b.mul(b.add(t0, j), kb.i64(D)))
                        for c, a_ in enumerate(acc):
                            b.store(kb.fma(pj, vload(ov, b.add(row, kb.i64(c * W))), b.load(a_)), a_)
                total_w = b.load(l_var)
                inv = b.select(b.fcmp_ordered(">", total_w, kb.f32(0.0)), b.fdiv(kb.f32(1.0), total_w), kb.f32(0.0))
                iv = kb.splat(inv, W)
                for c in range(nc):
                    b.store(b.fmul(b.load(acc[c]), iv), kb.ptr(dst, kb.i64(c * W)), align=4)
            with bad:
                _zero(kb, dst, kb.i64(0), kb.i64(D))
    kb.finish()
    return kb


#: from this many queries on (a prompt) attention runs in tiles of QL queries, one per vector lane:
#: every key and value element loaded serves QL queries (the one-query pass loads each once per
#: query, and on AVX2, whose 16 registers cannot hold its block of 16 dot products, it ran at a
#: fifth of the core's peak), and the online softmax is lane-wise, with no horizontal sums.
TILE_MIN_S = 8
QL = 16  # queries per tile (vector lanes)
KB = 16  # keys per block of the online softmax


def register_tile(d: int) -> int:
    """Keys (logits) or head features (values) per register tile: each key or value element
    loaded is broadcast against the QL queries' vector and feeds one FMA, so a tile of n
    accumulators pays one load of the queries' vector per n FMAs. AVX-512's 32 registers hold 16
    (a whole block; a Qwen-shaped 512-token prompt's attention on one Zen 5 core: 4.28 ms a layer
    with 4, 3.50 with 8, 3.33 with 16); on AVX2 a 16-lane vector takes two of its 16 registers, and
    4 was fastest (5.7 ms against 9.2 with 8). A divisor of the head size (a multiple of 8)."""
    if jit.isa() != "avx512":
        return 4
    return 16 if d % 16 == 0 else 8


def _emit_attend_tiles(cg, geo: _Geometry):
    """Per (row b, head h, tile of QL queries): the queries rotated, scaled and transposed into
    lanes (qt: [D, QL]); per block of KB keys, the logits pb[j] = k_j . q (`register_tile` keys
    per register tile: a key's feature broadcast against a vector of queries), masked (causal,
    window, length),
    the running max and sum per lane, and ot[d] = ot[d] * correction + sum_j v_j[d] p_j (as many
    features per register tile); y = ot / sum, transposed back into rows."""
    kb = cg.function("GQA.attend_tiles", [PTR, PTR, PTR, PTR, PTR, PTR, PTR, PTR, I64, I64])
    q, ok, ov, y, seqlens, total, cos, sin, tid, nth = kb.args
    b = kb.b
    D, S, L = geo.D, geo.S, QL
    vt = ir.VectorType(F32, L)
    tiles = -(-S // L)
    group = geo.H // geo.G
    per_row = geo.H * tiles
    lo = b.sdiv(b.mul(kb.i64(geo.B * per_row), tid), nth)
    hi = b.sdiv(b.mul(kb.i64(geo.B * per_row), b.add(tid, kb.i64(1))), nth)
    qt, ot, pb, row = (kb.array(F32, n) for n in (D * L, D * L, KB * L, D))
    m_var, l_var, mb_var, sum_var = (kb.var(vt) for _ in range(4))
    rk = register_tile(D)
    acc = [kb.var(vt) for _ in range(rk)]
    lanes = ir.Constant(ir.VectorType(I64, L), list(range(L)))
    zero_v, one_v = ir.Constant(vt, [0.0] * L), ir.Constant(vt, [1.0] * L)
    neg_v = ir.Constant(vt, [-float("inf")] * L)

    def vload(ptr, off):
        return b.load(kb.ptr(ptr, off), typ=vt, align=4)

    def vstore(v, ptr, off):
        b.store(v, b.bitcast(kb.ptr(ptr, off), vt.as_pointer()), align=4)

    def imin(x, z):
        return b.select(b.icmp_signed("<", x, z), x, z)

    def imax(x, z):
        return b.select(b.icmp_signed(">", x, z), x, z)

    def lane(i):  # offset of feature/key row i in a [*, L] buffer
        return b.mul(i, kb.i64(L))

    with kb.loop(lo, hi, name="item", unroll=False) as item:
        b_ = b.sdiv(item, kb.i64(per_row))
        rem = b.srem(item, kb.i64(per_row))
        h, tile = b.sdiv(rem, kb.i64(tiles)), b.srem(rem, kb.i64(tiles))
        g = b.sdiv(h, kb.i64(group))
        s0 = b.mul(tile, kb.i64(L))
        rows = imin(kb.i64(L), b.sub(kb.i64(S), s0))
        length, past = _positions(kb, geo, seqlens, total, b_)
        tok0 = b.add(b.mul(b_, kb.i64(S)), s0)

        def y_row(i):
            return kb.ptr(y, b.add(b.mul(b.add(tok0, i), kb.i64(geo.H * D)), b.mul(h, kb.i64(D))))

        with b.if_else(_rows_fit(kb, geo, length, past), likely=True) as (fits, bad):
            with fits:
                qpos0 = b.add(past, s0)
                with kb.loop(0, L, name="qr", unroll=False) as i:
                    with b.if_else(b.icmp_signed("<", i, rows)) as (real, pad):
                        with real:
                            src = kb.ptr(q, b.add(b.mul(b.add(tok0, i), kb.i64(geo.Q)), b.mul(h, kb.i64(D))))
                            _rotate_row(kb, geo, src, row, b.add(qpos0, i), cos, sin, scale=geo.alpha)
                        with pad:  # past the prompt: zeros (its position may lie past the rotary caches)
                            _zero(kb, row, kb.i64(0), kb.i64(D))
                    with kb.loop(0, D, name="qd") as d:
                        kb.store(kb.load(row, d), qt, b.add(lane(d), i))
                _zero(kb, ot, kb.i64(0), kb.i64(D * L))
                b.store(neg_v, m_var)
                b.store(zero_v, l_var)
                qpos = b.add(kb.splat(qpos0, L), lanes)
                t_hi = imin(b.add(qpos0, rows), length)  # keys [t_lo, t_hi) reach some query of the tile
                t_lo = kb.i64(0)
                if geo.window > 0:
                    t_lo = imax(b.sub(qpos0, kb.i64(geo.window - 1)), kb.i64(0))
                    first = b.sub(qpos, kb.splat(kb.i64(geo.window - 1), L))
                base = geo.kv_row(kb, None, b_, g, kb.i64(0))
                last = b.sub(t_hi, kb.i64(1))
                blocks = b.sdiv(b.add(imax(b.sub(t_hi, t_lo), kb.i64(0)), kb.i64(KB - 1)), kb.i64(KB))
                with kb.loop(0, blocks, name="blk", unroll=False) as blk:
                    t0 = b.add(t_lo, b.mul(blk, kb.i64(KB)))
                    n = imin(b.sub(t_hi, t0), kb.i64(KB))
                    with kb.loop(0, KB, step=rk, name="kj", unroll=False) as j:
                        # a key past the last valid one reads the last (its logits are masked)
                        keys = [b.mul(imin(b.add(t0, b.add(j, kb.i64(r))), last), kb.i64(D)) for r in range(rk)]
                        keys = [b.add(base, k) for k in keys]
                        for a in acc:
                            b.store(zero_v, a)
                        with kb.loop(0, D, name="kd") as d:
                            qv = vload(qt, lane(d))
                            for k, a in zip(keys, acc):
                                b.store(kb.fma(kb.splat(kb.load(ok, b.add(k, d)), L), qv, b.load(a)), a)
                        for r, a in enumerate(acc):
                            vstore(b.load(a), pb, lane(b.add(j, kb.i64(r))))
                    b.store(neg_v, mb_var)
                    with kb.loop(0, KB, name="mj") as j:
                        t = b.add(t0, j)
                        tv = kb.splat(t, L)
                        valid = b.and_(b.icmp_signed("<=", tv, qpos), kb.splat(b.icmp_signed("<", t, t_hi), L))
                        if geo.window > 0:
                            valid = b.and_(valid, b.icmp_signed(">=", tv, first))
                        x = vload(pb, lane(j))
                        if geo.softcap > 0:
                            cap = kb.splat(kb.f32(geo.softcap), L)
                            x = b.fmul(vmath.emit_unary(kb, "Tanh", b.fdiv(x, cap)), cap)
                        x = b.select(valid, x, neg_v)
                        vstore(x, pb, lane(j))
                        m = b.load(mb_var)
                        b.store(b.select(b.fcmp_ordered(">", x, m), x, m), mb_var)
                    m_old, m_blk = b.load(m_var), b.load(mb_var)
                    m_new = b.select(b.fcmp_ordered(">", m_blk, m_old), m_blk, m_old)
                    # a lane with no key yet keeps max -inf: subtract 0 there (exp(-inf) = 0, not NaN)
                    m_use = b.select(b.fcmp_ordered("==", m_new, neg_v), zero_v, m_new)
                    corr = vmath.emit_unary(kb, "Exp", b.fsub(m_old, m_use))
                    b.store(zero_v, sum_var)
                    with kb.loop(0, KB, name="pj") as j:
                        p = vmath.emit_unary(kb, "Exp", b.fsub(vload(pb, lane(j)), m_use))
                        vstore(p, pb, lane(j))
                        b.store(b.fadd(b.load(sum_var), p), sum_var)
                    b.store(b.fadd(b.fmul(b.load(l_var), corr), b.load(sum_var)), l_var)
                    b.store(m_new, m_var)
                    with kb.loop(0, D, step=rk, name="vd", unroll=False) as d:
                        for r, a in enumerate(acc):
                            b.store(b.fmul(vload(ot, lane(b.add(d, kb.i64(r)))), corr), a)
                        with kb.loop(0, n, name="vj") as j:
                            pv = vload(pb, lane(j))
                            vrow = b.add(b.add(base, b.mul(b.add(t0, j), kb.i64(D))), d)
                            for r, a in enumerate(acc):
                                b.store(kb.fma(kb.splat(kb.load(ov, b.add(vrow, kb.i64(r))), L), pv, b.load(a)), a)
                        for r, a in enumerate(acc):
                            vstore(b.load(a), ot, lane(b.add(d, kb.i64(r))))
                total_w = b.load(l_var)
                inv = b.select(b.fcmp_ordered(">", total_w, zero_v), b.fdiv(one_v, total_w), zero_v)
                with kb.loop(0, D, name="od") as d:
                    vstore(b.fmul(vload(ot, lane(d)), inv), ot, lane(d))
                with kb.loop(0, rows, name="or", unroll=False) as i:
                    dst = y_row(i)
                    with kb.loop(0, D, name="oc") as d:
                        kb.store(kb.load(ot, b.add(lane(d), i)), dst, d)
            with bad:
                with kb.loop(0, rows, name="zr") as i:
                    _zero(kb, y_row(i), kb.i64(0), kb.i64(D))
    kb.finish()
    return kb


@cpu_kernel("GroupQueryAttention", domain=MS, supports=_gqa_ok)
def emit_group_query_attention(cg, instr):
    geo = _Geometry(instr)
    entry = cg.entry
    null = ir.Constant(PTR, None)

    def p(o):
        return null if o is None else cg.ptr(o)

    def as_int(o):
        return cg.b.ptrtoint(p(o), I64) if o is not None else entry.i64(0)

    site = site_id(instr.name)
    cache = _emit_cache(cg, geo, site)
    cg.call(cache.fn, [p(geo.q), p(geo.k), p(geo.v), as_int(geo.pk), as_int(geo.pv), as_int(geo.ok),
                       as_int(geo.ov), p(geo.seqlens), p(geo.total), p(geo.cos), p(geo.sin), cg.tid, cg.nth])
    attend = (_emit_attend_tiles if geo.S >= TILE_MIN_S else _emit_attend)(cg, geo)
    cg.call(attend.fn, [p(geo.q), p(geo.ok), p(geo.ov), p(geo.y), p(geo.seqlens), p(geo.total), p(geo.cos),
                        p(geo.sin), cg.tid, cg.nth])


__all__ = ["emit_group_query_attention"]
