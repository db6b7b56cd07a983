"""The 2-D convolution emitter on NHWC tensors (the kernels are registered in conv.py).

* General (and grouped) convolution is an implicit GEMM: rows are output pixels, columns output
  channels, and k runs over (dy, dx, input channel). A row's A data is read straight from the
  padded input at offsets computed per kernel position, so no im2col buffer exists. Weights are
  packed at compile time into the GEMM's NR-column panels.
  The kernel reads its geometry (sizes, strides, the kernel taps' offsets) from a header and a
  table packed with the weights, so one function serves every convolution of the same code class
  (`code_key`: the register tile and a few layout flags). ResNet-50's 53 convolutions share a
  handful of functions, which is what makes its cold compile short; a new batch size or image
  size needs no new kernel code. The run-time cost is a few integer divisions per tile of
  thousands of FMAs, and none per row: a tile's row offsets step from its first row's.
* Depthwise convolution (one input channel per group) vectorises over channels instead.

Inputs are already padded (the backend emits an explicit Pad), so the implicit-GEMM kernels never
test bounds; a depthwise kernel pads implicitly (`ConvGeometry.pads`): rows and columns whose taps
all fall inside the input run as before, the border's taps outside it read zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir
import numpy as np

from ..irutil import I32, I64, PTR, VEC, vec
from .gemm_emit import (
    MR,
    NV,
    Epilogue,
    emit_tile,
    masked_store,
    pack_b,
    pack_b_bf16,
    round_run,
    split_range,
)


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
    bf16: bool = False  # bfloat16 weights and input (`emit_bf16_input`), float32 sums (not depthwise)
    pads: tuple = (0, 0, 0, 0)  # (top, left, bottom, right) the kernel reads as zeros (depthwise only)

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
    def cin_gp(self) -> int:
        """bfloat16: a group's input channels in pairs (an odd count padded with a zero channel)."""
        return -(-self.cin_g // 2)

    @property
    def k_steps(self) -> int:
        """Rows of a packed panel: kh * kw * Cin_g, or kh * kw * cin_gp channel pairs for bfloat16."""
        return self.kh * self.kw * (self.cin_gp if self.bf16 else self.cin_g)

    @property
    def units(self) -> tuple[int, int]:
        """(per pixel, per group) units of the input the kernel reads: float32 channels, or for
        bfloat16 the 32-bit channel pairs of the rounded copy (`emit_bf16_input`)."""
        return (self.groups * self.cin_gp, self.cin_gp) if self.bf16 else (self.cin, self.cin_g)

    @property
    def depthwise(self) -> bool:
        return self.groups == self.cin and self.cout == self.cin and self.groups > 1

    @property
    def flops(self) -> int:
        return 2 * self.n * self.ho * self.wo * self.cout * self.cin_g * self.kh * self.kw


#: int64 fields of the header that starts a packed (non-depthwise) weight array, in this order;
#: the panels follow at HEADER_FLOATS, the tap table at `taps_at` (floats from the array's start).
HEADER = ("P", "ho", "wo", "howo", "img", "row", "col", "row_wrap", "img_wrap", "cin", "cin_g", "cout",
          "cout_g", "npanels", "tiles", "per_group", "items", "kn", "taps_at")
HEADER_FLOATS = 48  # 192 bytes: the panels stay 64-byte aligned
_F = {name: i for i, name in enumerate(HEADER)}


def _rows(g: ConvGeometry) -> int:
    return min(g.mr, g.n * g.ho * g.wo)


def _contiguous(g: ConvGeometry) -> bool:
    """A 1x1, stride-1 convolution of an unpadded input: its output pixels are its input's rows."""
    return (g.kh, g.kw, g.sh, g.sw, g.hp, g.wp) == (1, 1, 1, 1, g.ho, g.wo)


def _tile_major(g: ConvGeometry) -> bool:
    npanels = -(-g.cout_g // g.nr)
    return npanels > 1 and npanels * g.kh * g.kw * g.cin_g * g.nr * 4 <= L1_WEIGHTS


def code_key(g: ConvGeometry) -> tuple:
    """What an implicit-GEMM convolution's code depends on; convolutions with equal keys share one
    function (everything else comes from the header at run time). Depthwise: the geometry."""
    if g.depthwise:
        return ("depthwise", g)
    return ("gemm", _rows(g), g.nv, _contiguous(g), _tile_major(g), g.groups > 1, g.cout_g % g.nr == 0, g.bf16)


def header(g: ConvGeometry) -> np.ndarray:
    """The header's values for geometry g (HEADER's order), padded to HEADER_FLOATS floats."""
    npanels = -(-g.cout_g // g.nr)
    tiles = -(-(g.n * g.ho * g.wo) // _rows(g))
    cin, cin_g = g.units
    img, row, col = g.hp * g.wp * cin, g.sh * g.wp * cin, g.sw * cin
    v = dict(P=g.n * g.ho * g.wo, ho=g.ho, wo=g.wo, howo=g.ho * g.wo, img=img, row=row, col=col,
             row_wrap=row - g.wo * col, img_wrap=img - g.ho * row, cin=cin, cin_g=cin_g, cout=g.cout,
             cout_g=g.cout_g, npanels=npanels, tiles=tiles, per_group=npanels * tiles,
             items=g.groups * npanels * tiles, kn=g.k_steps * g.nr,
             taps_at=HEADER_FLOATS + g.groups * npanels * g.k_steps * g.nr)
    out = np.zeros(HEADER_FLOATS // 2, np.int64)
    out[:len(HEADER)] = [v[name] for name in HEADER]
    return out


def tap_offsets(g: ConvGeometry) -> np.ndarray:
    """int32 [count, offset per (dy, dx)]: a kernel tap's input element offset from its pixel.

    The kernel reads the count from memory, so LLVM cannot unroll the tap loop (kh * kw copies
    of the micro-kernel would cost seconds of compile time and nothing at run time)."""
    dy, dx = np.meshgrid(np.arange(g.kh), np.arange(g.kw), indexing="ij")
    off = ((dy * g.dh * g.wp + dx * g.dw) * g.units[0]).reshape(-1)
    if off.size and off.max() >= 2 ** 31:
        raise ValueError("convolution too large for 32-bit tap offsets")
    return np.concatenate([[off.size], off]).astype(np.int32)


def packed_conv_size(g: ConvGeometry) -> int:
    """float32 elements of `pack_conv_weights`' result (not depthwise)."""
    return HEADER_FLOATS + g.groups * -(-g.cout_g // g.nr) * g.k_steps * g.nr + tap_offsets(g).size


def pack_conv_weights(w: np.ndarray, g: ConvGeometry, out: np.ndarray | None = None) -> np.ndarray:
    """W[Cout, Cin/groups, kh, kw] -> the geometry `header`, then per group packed GEMM panels
    of [kh*kw*Cin_g, Cout_g], then the tap offset table (int32 bits, see `tap_offsets`); into
    `out` (zeros, `packed_conv_size(g)` floats: a window onto the weights blob) when given.
    Depthwise: [kh*kw, C]."""
    w = np.asarray(w, np.float32)
    if g.depthwise:  # [C, 1, kh, kw] -> [kh*kw, C]
        return np.ascontiguousarray(w.reshape(g.cout, g.kh * g.kw).T)
    head, taps = header(g).view(np.float32), tap_offsets(g).view(np.float32)
    npanels = -(-g.cout_g // g.nr)
    out = np.zeros(packed_conv_size(g), np.float32) if out is None else out
    out[:head.size] = head
    at = head.size
    for grp in range(g.groups):
        wg = w[grp * g.cout_g:(grp + 1) * g.cout_g]  # [Cout_g, Cin_g, kh, kw]
        kmat = wg.transpose(2, 3, 1, 0)  # [kh, kw, Cin_g, Cout_g]: k runs over (dy, dx, channel)
        if g.bf16 and g.cin_g % 2:  # pairs never straddle taps: a zero channel per tap
            kmat = np.concatenate([kmat, np.zeros((*kmat.shape[:2], 1, g.cout_g), np.float32)], axis=2)
        kmat = kmat.reshape(-1, g.cout_g)
        size = npanels * g.k_steps * g.nr
        (pack_b_bf16 if g.bf16 else pack_b)(kmat, g.nr, out=out[at:at + size].reshape(npanels, g.k_steps, g.nr))
        at += size
    out[at:] = taps
    return out


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
    _emit_implicit_gemm(kb, g, inp, wp, out, tid, nth, epi)
    return kb.finish()


def _emit_implicit_gemm(kb, g: ConvGeometry, inp, wp, out, tid, nth, epi: Epilogue):
    """The body of a shared implicit-GEMM kernel: only `code_key(g)` is compiled in."""
    b = kb.b
    mr = _rows(g)
    h = {name: b.load(kb.ptr(wp, _F[name], I64), typ=I64, align=8) for name in HEADER}
    panels = kb.ptr(wp, HEADER_FLOATS)
    taps = kb.ptr(wp, h["taps_at"])
    # Items (group, panel, row tile), split evenly: every thread streams the same weights, which
    # stay in L2 while its row tiles pass.
    lo, hi = split_range(kb, h["items"], tid, nth)
    ntaps = b.sext(b.load(taps, typ=I32, align=4), I64)
    # A group whose packed weights fit in L1 with room to spare (ShuffleNet's grouped 1x1
    # convolutions: 5 panels of 68 x 16) takes its items row tile by row tile, every panel of a
    # tile in turn, so the tile's input rows are read from memory once, not once per panel.
    tile_major, grouped, divisible = code_key(g)[4:7]

    def row_offsets(i0):
        """Input offsets of the tile's rows i0 .. i0 + mr - 1: the first from (image, y, x), each
        next one a step from the last (no division per row). Rows past the output are pointed
        at the first (computed, never stored)."""
        if _contiguous(g):
            offs = [b.mul(b.add(i0, kb.i64(r)), h["cin"]) for r in range(mr)]
        else:
            n_ = b.udiv(i0, h["howo"])
            rem = b.sub(i0, b.mul(n_, h["howo"]))
            oy = b.udiv(rem, h["wo"])
            ox = b.sub(rem, b.mul(oy, h["wo"]))
            off = b.add(b.add(b.mul(n_, h["img"]), b.mul(oy, h["row"])), b.mul(ox, h["col"]))
            offs = [off]
            zero = kb.i64(0)
            for _ in range(1, mr):
                ox = b.add(ox, kb.i64(1))
                wrap = b.icmp_signed("==", ox, h["wo"])
                ox = b.select(wrap, zero, ox)
                oy = b.select(wrap, b.add(oy, kb.i64(1)), oy)
                off = b.add(off, b.add(h["col"], b.select(wrap, h["row_wrap"], zero)))
                wrap = b.icmp_signed("==", oy, h["ho"])
                oy = b.select(wrap, zero, oy)
                off = b.add(off, b.select(wrap, h["img_wrap"], zero))
                offs.append(off)
        return [offs[0]] + [b.select(b.icmp_signed("<", b.add(i0, kb.i64(r)), h["P"]), offs[r], offs[0])
                            for r in range(1, mr)]

    def tile(item):
        if grouped:
            grp = b.sdiv(item, h["per_group"])
            rem = b.sub(item, b.mul(grp, h["per_group"]))
        else:
            grp, rem = kb.i64(0), item
        if tile_major:
            t = b.sdiv(rem, h["npanels"])
            panel = b.sub(rem, b.mul(t, h["npanels"]))
        else:
            panel = b.sdiv(rem, h["tiles"])
            t = b.sub(rem, b.mul(panel, h["tiles"]))
        i0 = b.mul(t, kb.i64(mr))
        a_grp = b.mul(grp, h["cin_g"])
        rows = [b.add(o, a_grp) for o in row_offsets(i0)]
        crow = [b.mul(b.add(i0, kb.i64(r)), h["cout"]) for r in range(mr)]
        col_in_grp = b.mul(panel, kb.i64(g.nr))
        col0 = b.add(col_in_grp, b.mul(grp, h["cout_g"]))
        b_base = b.mul(b.add(b.mul(grp, h["npanels"]), panel), h["kn"])
        n_valid = None if divisible else b.sub(h["cout_g"], col_in_grp)

        def segs(emit):
            with kb.loop(0, ntaps, name="tap") as tap:
                a_tap = b.sext(b.load(kb.ptr(taps, b.add(tap, kb.i64(1)), I32), typ=I32, align=4), I64)
                k_tap = b.mul(tap, h["cin_g"])
                with kb.loop(0, h["cin_g"], name="c") as c:
                    emit(b.add(a_tap, c), b.add(k_tap, c))

        emit_tile(kb, mr, inp, rows, panels, b_base, segs, out, crow, col0, epi, n_valid=n_valid,
                  rows_valid=b.sub(h["P"], i0), k_stride=g.nr, nv=g.nv, pairs=g.bf16)

    with kb.loop(lo, hi, name="item") as item:
        tile(item)


#: Bytes of packed weights per group small enough to stay in a 32 KB L1 data cache beside a
#: tile's input rows (conv items then go row tile by row tile).
L1_WEIGHTS = 24 * 1024

#: Output pixels along a row that a depthwise kernel computes together (independent FMA chains).
DW_BLOCK = 4


def _emit_depthwise(kb, g: ConvGeometry, inp, wp, out, tid, nth, epi: Epilogue):
    """out[p, c] = sum over taps of in[p + tap, c] * w[tap, c], 16 channels per vector.

    Work items are (image, output row, channel vector). An item loads its kh*kw weight vectors
    once, then walks the row DW_BLOCK pixels at a time: DW_BLOCK independent accumulators, so the
    FMAs overlap instead of waiting on one chain (4x the single-pixel loop's throughput).

    With implicit padding (`g.pads`) the input is the unpadded [N, H, W, C]: a row whose taps all
    fall inside it runs its inner columns as above; its border columns, and every column of a
    row near the top or bottom, take each tap's pixel only where it lies inside (a clamped address,
    the value replaced by zero outside)."""
    b = kb.b
    C = g.cin
    nvec = -(-C // VEC)
    pt, pl, pb, pr = g.pads
    H, W = g.hp - pt - pb, g.wp - pl - pr
    lo, hi = split_range(kb, g.n * g.ho * nvec, tid, nth)
    chunks = [(c0, min(VEC, C - c0)) for c0 in range(0, C, VEC)]
    taps = [(dy, dx) for dy in range(g.kh) for dx in range(g.kw)]
    zero = ir.Constant(vec(), [0.0] * VEC)
    with kb.loop(lo, hi, name="item") as item:
        row = b.sdiv(item, kb.i64(nvec))  # n * ho + oy
        cv = b.srem(item, kb.i64(nvec))
        c0 = b.mul(cv, kb.i64(VEC))
        n_ = b.sdiv(row, kb.i64(g.ho))
        oy = b.srem(row, kb.i64(g.ho))
        iy0 = b.sub(b.mul(oy, kb.i64(g.sh)), kb.i64(pt))  # the input row of tap row 0
        w = [_load_lanes(kb, wp, b.add(kb.i64(t * C), c0), C, c0, chunks) for t in range(len(taps))]

        def store(accs, ox):
            for j, acc in enumerate(accs):
                p = b.add(b.mul(row, kb.i64(g.wo)), b.add(ox, kb.i64(j)))
                _store_lanes(kb, epi, acc, out, b.add(b.mul(p, kb.i64(C)), c0), c0, C)

        def inside(ox, count):
            """`count` adjacent output pixels from column ox whose taps all lie inside the input."""
            accs = [None] * count
            for t, (dy, dx) in enumerate(taps):
                iy = b.add(iy0, kb.i64(dy * g.dh))
                for j in range(count):
                    ix = b.add(b.mul(b.add(ox, kb.i64(j)), kb.i64(g.sw)), kb.i64(dx * g.dw - pl))
                    pix = b.add(b.mul(b.add(b.mul(n_, kb.i64(H)), iy), kb.i64(W)), ix)
                    x = _load_lanes(kb, inp, b.add(b.mul(pix, kb.i64(C)), c0), C, c0, chunks)
                    accs[j] = b.fmul(x, w[t]) if accs[j] is None else kb.fma(x, w[t], accs[j])
            store(accs, ox)

        def at_border(ox):
            """One output pixel some of whose taps may fall outside the input (read as zeros)."""
            acc = None
            for t, (dy, dx) in enumerate(taps):
                iy = b.add(iy0, kb.i64(dy * g.dh))
                ix = b.add(b.mul(ox, kb.i64(g.sw)), kb.i64(dx * g.dw - pl))
                ok = b.and_(b.and_(b.icmp_signed(">=", iy, kb.i64(0)), b.icmp_signed("<", iy, kb.i64(H))),
                            b.and_(b.icmp_signed(">=", ix, kb.i64(0)), b.icmp_signed("<", ix, kb.i64(W))))
                iyc, ixc = _clamp(b, iy, H), _clamp(b, ix, W)
                pix = b.add(b.mul(b.add(b.mul(n_, kb.i64(H)), iyc), kb.i64(W)), ixc)
                x = _load_lanes(kb, inp, b.add(b.mul(pix, kb.i64(C)), c0), C, c0, chunks)
                x = b.select(ok, x, zero)
                acc = b.fmul(x, w[t]) if acc is None else kb.fma(x, w[t], acc)
            store([acc], ox)

        # columns [x_lo, x_hi) have every tap column inside the input; the rest are the border
        x_lo = min(g.wo, -(-pl // g.sw))
        x_hi = max(x_lo, min(g.wo, (W - 1 - (g.kw - 1) * g.dw + pl) // g.sw + 1))

        def inner_columns():
            full = x_lo + (x_hi - x_lo) // DW_BLOCK * DW_BLOCK
            if full > x_lo:
                with kb.loop(x_lo, full, step=DW_BLOCK, name="ox") as ox:
                    inside(ox, DW_BLOCK)
            if x_hi > full:
                with kb.loop(full, x_hi, name="oxt") as ox:
                    inside(ox, 1)

        if not any(g.pads):
            inner_columns()
        else:
            rows_inside = b.and_(b.icmp_signed(">=", iy0, kb.i64(0)),
                                 b.icmp_signed("<", b.add(iy0, kb.i64((g.kh - 1) * g.dh)), kb.i64(H)))
            with b.if_else(rows_inside) as (then, otherwise):
                with then:
                    inner_columns()
                with otherwise:
                    if x_hi > x_lo:
                        with kb.loop(x_lo, x_hi, name="oxb") as ox:
                            at_border(ox)
            for a, z in ((0, x_lo), (x_hi, g.wo)):
                if z > a:
                    with kb.loop(a, z, name="oxe") as ox:
                        at_border(ox)


def _clamp(b, v, n: int):
    """v clamped into [0, n - 1] (an address that is read, its value then discarded)."""
    v = b.select(b.icmp_signed("<", v, ir.Constant(v.type, 0)), ir.Constant(v.type, 0), v)
    return b.select(b.icmp_signed(">", v, ir.Constant(v.type, n - 1)), ir.Constant(v.type, n - 1), v)


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


def emit_bf16_input(make_kb, g: ConvGeometry) -> ir.Function:
    """`void (float* in_padded, i16* out, i64 pixels, i64 tid, i64 nth)`: a bf16 convolution's
    input rounded once (rounding each tile's rows again for every column panel cost 5-10 % of
    the kernel's time) into [pixels, groups, 2 * cin_gp] bfloat16, a group's odd channel count
    padded with a zero. The kernel then reads each row's channel pairs straight from it."""
    kb = make_kb([PTR, PTR, I64, I64, I64])
    kb.fn.attributes.add("noinline")
    x, out, pixels, tid, nth = kb.args
    b = kb.b
    width = 2 * g.cin_gp
    lo, hi = split_range(kb, pixels, tid, nth)
    with kb.loop(lo, hi, name="pixel") as p:
        with kb.loop(0, g.groups, name="group") as grp:
            round_run(kb, x, b.add(b.mul(p, kb.i64(g.cin)), b.mul(grp, kb.i64(g.cin_g))), out,
                      b.add(b.mul(p, kb.i64(g.groups * width)), b.mul(grp, kb.i64(width))), kb.i64(g.cin_g),
                      kb.i64(width))
    return kb.finish()

