"""The 2-D convolution emitter on NHWC tensors (the kernels are registered in conv.py).

* General (and grouped) convolution is an implicit GEMM: rows are output pixels, columns output
  channels, and k runs over (dy, dx, input channel). A row's A data is read straight from the
  padded input at offsets computed per kernel position, so no im2col buffer exists. Weights are
  packed at compile time into the GEMM's NR-column panels.
* Depthwise convolution (one input channel per group) vectorises over channels instead.

Inputs are already padded (the backend emits an explicit Pad), so kernels never test bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir
import numpy as np

from ..irutil import I32, I64, VEC, vec
from .gemm_emit import MR, NV, Epilogue, emit_tile, masked_store, pack_b, split_range


@dataclass(frozen=True)
class ConvGeometry:
    n: int
    hp: int  # padded input height
    wp: int  # padded input width
    cin: int
    ho: int
    wo: int
    cout: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    dh: int = 1
    dw: int = 1
    groups: int = 1
    mr: int = MR  # register tile: mr output pixels x 16 * nv output channels
    nv: int = NV

    @property
    def nr(self) -> int:
        return self.nv * VEC

    @property
    def cin_g(self) -> int:
        return self.cin // self.groups

    @property
    def cout_g(self) -> int:
        return self.cout // self.groups

    @property
    def depthwise(self) -> bool:
        return self.groups == self.cin and self.cout == self.cin and self.groups > 1

    @property
    def flops(self) -> int:
        return 2 * self.n * self.ho * self.wo * self.cout * self.cin_g * self.kh * self.kw


def tap_offsets(g: ConvGeometry) -> np.ndarray:
    """int32 [count, offset per (dy, dx)]: a kernel tap's input element offset from its pixel.

    The kernel reads the count from memory, so LLVM cannot unroll the tap loop (kh * kw copies
    of the micro-kernel would cost seconds of compile time and nothing at run time)."""
    dy, dx = np.meshgrid(np.arange(g.kh), np.arange(g.kw), indexing="ij")
    off = ((dy * g.dh * g.wp + dx * g.dw) * g.cin).reshape(-1)
    if off.size and off.max() >= 2 ** 31:
        raise ValueError("convolution too large for 32-bit tap offsets")
    return np.concatenate([[off.size], off]).astype(np.int32)


def pack_conv_weights(w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """W[Cout, Cin/groups, kh, kw] -> per group, packed GEMM panels of [kh*kw*Cin_g, Cout_g],
    followed by the tap offset table (int32 bits, see `tap_offsets`). Depthwise: [kh*kw, C]."""
    w = np.asarray(w, np.float32)
    if g.depthwise:  # [C, 1, kh, kw] -> [kh*kw, C]
        return np.ascontiguousarray(w.reshape(g.cout, g.kh * g.kw).T)
    parts = []
    for grp in range(g.groups):
        wg = w[grp * g.cout_g:(grp + 1) * g.cout_g]  # [Cout_g, Cin_g, kh, kw]
        kmat = wg.transpose(2, 3, 1, 0).reshape(g.kh * g.kw * g.cin_g, g.cout_g)
        parts.append(pack_b(kmat, g.nr).reshape(-1))
    parts.append(tap_offsets(g).view(np.float32))
    return np.concatenate(parts)


def conv_epilogue(has_bias=False, activation=None, clip=(0.0, 6.0)):
    """An epilogue builder for `emit_conv` from the old flags (bias pointer, relu/clip)."""
    return lambda kb, bias, extras: Epilogue(bias if has_bias else None, activation=activation, clip=clip)


def emit_conv(make_kb, g: ConvGeometry, epilogue=None, extra_args: int = 0, *, has_bias: bool = False,
              activation: str | None = None, clip=(0.0, 6.0)) -> ir.Function:
    """`void (float* in_padded, float* packed_w, float* out, float* bias, ptr extra..., i64 tid,
    i64 nth)`, made by make_kb(arg_types) (`cg.function` or gemm_emit.kernel_factory);
    `epilogue(kb, bias, extras) -> Epilogue` (default: from the flags)."""
    epilogue = epilogue or conv_epilogue(has_bias, activation, clip)
    kb = make_kb([ir.PointerType()] * (4 + extra_args) + [I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    inp, wp, out, bias = kb.args[:4]
    extras = kb.args[4:4 + extra_args]
    tid, nth = kb.args[4 + extra_args:]
    epi = epilogue(kb, bias, extras)
    if g.depthwise:
        _emit_depthwise(kb, g, inp, wp, out, tid, nth, epi)
        return kb.finish()
    b = kb.b
    P = g.n * g.ho * g.wo
    K = g.kh * g.kw * g.cin_g
    npanels = -(-g.cout_g // g.nr)
    mr = min(g.mr, P)
    tiles = -(-P // mr)
    # Items (group, panel, row tile), split evenly: every thread streams the same weights, which
    # stay in L2 while its row tiles pass.
    per_group = npanels * tiles
    lo, hi = split_range(kb, g.groups * per_group, tid, nth)
    taps = kb.ptr(wp, g.groups * npanels * K * g.nr)  # the tap offset table follows the panels

    def row_offset(p):
        if (g.kh, g.kw, g.sh, g.sw, g.hp, g.wp) == (1, 1, 1, 1, g.ho, g.wo):
            return b.mul(p, kb.i64(g.cin))  # a 1x1 convolution's pixels are its input's rows
        n_ = b.udiv(p, kb.i64(g.ho * g.wo))
        rem = b.urem(p, kb.i64(g.ho * g.wo))
        oy = b.udiv(rem, kb.i64(g.wo))
        ox = b.urem(rem, kb.i64(g.wo))
        y = b.mul(oy, kb.i64(g.sh))
        x = b.mul(ox, kb.i64(g.sw))
        pix = b.add(b.mul(b.add(b.mul(n_, kb.i64(g.hp)), y), kb.i64(g.wp)), x)
        return b.mul(pix, kb.i64(g.cin))

    ntaps = b.sext(b.load(taps, typ=I32, align=4), I64)

    # A group whose packed weights fit in L1 with room to spare (ShuffleNet's grouped 1x1
    # convolutions: 5 panels of 68 x 16) takes its items row tile by row tile, every panel of a
    # tile in turn, so the tile's input rows are read from memory once, not once per panel.
    tile_major = npanels > 1 and npanels * K * g.nr * 4 <= L1_WEIGHTS

    def tile(item):
        grp = b.sdiv(item, kb.i64(per_group))
        rem = b.srem(item, kb.i64(per_group))
        if tile_major:
            t = b.sdiv(rem, kb.i64(npanels))
            panel = b.srem(rem, kb.i64(npanels))
        else:
            panel = b.sdiv(rem, kb.i64(tiles))
            t = b.srem(rem, kb.i64(tiles))
        i0 = b.mul(t, kb.i64(mr))
        ps = [b.add(i0, kb.i64(r)) for r in range(mr)]
        rows_valid = None
        if P % mr:
            rows_valid = b.sub(kb.i64(P), i0)
            last = kb.i64(P - 1)
            ps = [b.select(b.icmp_signed("<", p, last), p, last) for p in ps]
        a_grp = b.mul(grp, kb.i64(g.cin_g))
        rows = [b.add(row_offset(p), a_grp) for p in ps]
        crow = [b.mul(p, kb.i64(g.cout)) for p in ps]
        col_in_grp = b.mul(panel, kb.i64(g.nr))
        col0 = b.add(col_in_grp, b.mul(grp, kb.i64(g.cout_g)))
        b_base = b.add(b.mul(grp, kb.i64(npanels * K * g.nr)), b.mul(panel, kb.i64(K * g.nr)))
        if g.cout_g % g.nr == 0:
            n_valid = None
        elif npanels == 1:
            n_valid = g.cout_g
        else:
            n_valid = b.sub(kb.i64(g.cout_g), col_in_grp)

        def segs(emit):
            with kb.loop(0, ntaps, name="tap") as tap:
                a_tap = b.sext(b.load(kb.ptr(taps, b.add(tap, kb.i64(1)), I32), typ=I32, align=4), I64)
                k_tap = b.mul(tap, kb.i64(g.cin_g))
                with kb.loop(0, g.cin_g, name="c") as c:
                    emit(b.add(a_tap, c), b.add(k_tap, c))

        emit_tile(kb, mr, inp, rows, wp, b_base, segs, out, crow, col0, epi, n_valid=n_valid,
                  rows_valid=rows_valid, k_stride=g.nr, nv=g.nv)

    with kb.loop(lo, hi, name="item") as item:
        tile(item)
    return kb.finish()


#: Bytes of packed weights per group small enough to stay in a 32 KB L1 data cache beside a
#: tile's input rows (conv items then go row tile by row tile).
L1_WEIGHTS = 24 * 1024

#: Output pixels along a row that a depthwise kernel computes together (independent FMA chains).
DW_BLOCK = 4


def _emit_depthwise(kb, g: ConvGeometry, inp, wp, out, tid, nth, epi: Epilogue):
    """out[p, c] = sum over taps of in[p + tap, c] * w[tap, c], 16 channels per vector.

    Work items are (image, output row, channel vector). An item loads its kh*kw weight vectors
    once, then walks the row DW_BLOCK pixels at a time: DW_BLOCK independent accumulators, so the
    FMAs overlap instead of waiting on one chain (4x the single-pixel loop's throughput)."""
    b = kb.b
    C = g.cin
    nvec = -(-C // VEC)
    lo, hi = split_range(kb, g.n * g.ho * nvec, tid, nth)
    chunks = [(c0, min(VEC, C - c0)) for c0 in range(0, C, VEC)]
    taps = [(dy, dx) for dy in range(g.kh) for dx in range(g.kw)]
    with kb.loop(lo, hi, name="item") as item:
        row = b.sdiv(item, kb.i64(nvec))  # n * ho + oy
        cv = b.srem(item, kb.i64(nvec))
        c0 = b.mul(cv, kb.i64(VEC))
        n_ = b.sdiv(row, kb.i64(g.ho))
        oy = b.srem(row, kb.i64(g.ho))
        in_row = b.mul(b.add(b.mul(n_, kb.i64(g.hp)), b.mul(oy, kb.i64(g.sh))), kb.i64(g.wp))
        w = [_load_lanes(kb, wp, b.add(kb.i64(t * C), c0), C, c0, chunks) for t in range(len(taps))]

        def pixels(ox, count):
            """`count` adjacent output pixels starting at column ox."""
            accs = [None] * count
            for t, (dy, dx) in enumerate(taps):
                for j in range(count):
                    pix = b.add(in_row, b.add(b.mul(b.add(ox, kb.i64(j)), kb.i64(g.sw)),
                                              kb.i64(dy * g.dh * g.wp + dx * g.dw)))
                    x = _load_lanes(kb, inp, b.add(b.mul(pix, kb.i64(C)), c0), C, c0, chunks)
                    accs[j] = b.fmul(x, w[t]) if accs[j] is None else kb.fma(x, w[t], accs[j])
            for j in range(count):
                p = b.add(b.mul(row, kb.i64(g.wo)), b.add(ox, kb.i64(j)))
                _store_lanes(kb, epi, accs[j], out, b.add(b.mul(p, kb.i64(C)), c0), c0, C)

        full = g.wo // DW_BLOCK * DW_BLOCK
        if full:
            with kb.loop(0, full, step=DW_BLOCK, name="ox") as ox:
                pixels(ox, DW_BLOCK)
        if g.wo % DW_BLOCK:
            with kb.loop(full, g.wo, name="oxt") as ox:
                pixels(ox, 1)


def _lane_mask(kb, c0, total):
    """Lanes c0 + i < total (runtime mask for the last channel chunk)."""
    b = kb.b
    idx = ir.Constant(ir.VectorType(I64, VEC), list(range(VEC)))
    lanes = b.add(kb.splat(c0), idx)
    return b.icmp_signed("<", lanes, ir.Constant(ir.VectorType(I64, VEC), [total] * VEC))


def _load_lanes(kb, base, offset, total, c0, chunks):
    if total % VEC == 0:
        return kb.b.load(kb.ptr(base, offset), typ=vec(), align=4)
    f = kb.intrinsic("llvm.masked.load.v16f32.p0", vec(), [ir.PointerType(), ir.IntType(32),
                                                            ir.VectorType(ir.IntType(1), VEC), vec()])
    return kb.b.call(f, [kb.ptr(base, offset), ir.Constant(ir.IntType(32), 4), _lane_mask(kb, c0, total),
                         ir.Constant(vec(), [0.0] * VEC)])


def _store_lanes(kb, epi: Epilogue, val, out, offset, c0, total):
    mask = None if total % VEC == 0 else _lane_mask(kb, c0, total)
    val = epi.apply(kb, val, c0, offset, mask)
    if mask is None:
        kb.b.store(val, kb.ptr(out, offset), align=4)
    else:
        masked_store(kb, val, kb.ptr(out, offset), mask)
