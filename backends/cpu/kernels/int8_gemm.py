"""Integer GEMM: MatMulInteger with a constant B, int8 products accumulated in int32.

Every operand is first brought to one form, unsigned A bytes times signed B bytes, which is what
AVX-512 VNNI's `vpdpbusd` multiplies (four byte products added into each int32 lane):
a signed A is A + 128 with its zero point moved by 128, an unsigned B is B - 128 likewise. Then

    (A - za) @ (B - zb) = A'B' - rowsum(A') zb' - za' colsum(B') + K za' zb'

The last two terms are za' times a constant row (K zb' - colsum(B'), made at compile time); za'
is read when the kernel runs, since DynamicQuantizeLinear computes it per call. The row sums of
A are a short pass per row, needed only where zb' is not zero. All arithmetic wraps
modulo 2**32, as the reference's int32 result does, so the split is exact.

B is packed at compile time into panels of 16 columns: for each group of 4 k, 16 lanes of 4 bytes
(zero past K and past N, so a partial group or panel adds nothing). The micro-kernel keeps
ROWS x 2 panels of int32 accumulators; each step broadcasts 4 bytes of a row of A and multiplies
them into both panels: `vpdpbusd` where the code may use AVX-512 VNNI; on AVX2 `vpmaddubsw` where
the weights are 7-bit (it cannot saturate then) and otherwise `vpmaddwd` on bytes widened to
int16 (exact); plain vector IR elsewhere (`_Dot`). A's last partial group of 4 is
read byte by byte, never past the row.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt

from ..codegen import constant, cpu_kernel
from ..irutil import I32, I64, PTR
from .elementwise import call_split
from .gemm_emit import split_range

LANES = 16  # int32 lanes of one accumulator (one zmm; two ymm below AVX-512)
PANELS = 2  # panels of LANES columns per micro-kernel step
ROWS = 4  # rows of A per micro-kernel step (VNNI and generic; see _Dot)
I8 = ir.IntType(8)
V16 = ir.VectorType(I32, LANES)
PARALLEL_MACS = 1 << 16  # below this many multiply-adds: one thread
SHORT_SAFE = 64  # |B'| at most this: a pair of u8 x s8 products fits an int16 (vpmaddubsw)


def vnni() -> bool:
    """Whether the code is made for a target with AVX-512 VNNI (and at the avx512 level)."""
    from ..jit import host_features, isa

    return isa() == "avx512" and "+avx512vnni" in host_features().split(",")


def faster_than_float(b_max: int) -> bool:
    """Whether the integer step beats float32 products on this target for weights |B'| <= b_max:
    `vpdpbusd`, or `vpmaddubsw` on 7-bit weights. The exact int16 pairs of AVX2 (8-bit weights)
    and the generic level are no faster than float32 kernels (a QDQ ResNet-50 at the avx2 level:
    100 ms against 86 ms in float32), so convolutions take the float32 path there."""
    return _Dot(b_max).kind in ("vnni", "maddubs")


# -- compile-time packing ------------------------------------------------------------------------
def to_u8s8(b: np.ndarray, b_zp: np.ndarray):
    """(B as signed bytes, zb' per column) of the unsigned x signed form."""
    if b.dtype == np.uint8:
        bs = (b.astype(np.int16) - 128).astype(np.int8)
        zb = b_zp.astype(np.int64) - 128
    else:
        bs, zb = b.astype(np.int8), b_zp.astype(np.int64)
    return bs, np.broadcast_to(zb, (b.shape[1],))


def pack(bs: np.ndarray, taps: int = 1) -> np.ndarray:
    """[panels, groups, LANES, 4] signed bytes of B (K x N, K = taps x width), zero padded: each
    tap's width rows start a new group of 4 k (Rows reads a tap's last partial group alone)."""
    k, n = bs.shape
    width = k // taps
    tg, panels = -(-width // 4), -(-n // LANES)
    out = np.zeros((taps, tg * 4, panels * LANES), np.int8)
    out[:, :width, :n] = bs.reshape(taps, width, n)
    return np.ascontiguousarray(out.reshape(taps * tg, 4, panels, LANES).transpose(2, 0, 3, 1))


def column_row(bs: np.ndarray, zb: np.ndarray) -> np.ndarray:
    """K zb' - colsum(B') per column (the row za' multiplies), padded to whole panels."""
    k, n = bs.shape
    return int32_row(k * zb - bs.astype(np.int64).sum(axis=0), n)


def int32_row(values, n: int) -> np.ndarray:
    """`values` (n int64) wrapped to int32 and padded with zeros to whole panels."""
    out = np.zeros(-(-n // LANES) * LANES, np.int64)
    out[:n] = values
    return (out % (1 << 32)).astype(np.uint32).view(np.int32)


# -- the kernel -------------------------------------------------------------------------------------
class _Dot:
    """How one step (4 bytes of a row of A into a panel's 16 lanes) is multiplied on this target.

    vnni: `vpdpbusd`, one instruction. Without VNNI (AVX2, or AVX-512 without it):
    maddubs when every weight is within [-64, 64] (a compile-time check of B; quantize_dynamic's
    reduce_range makes such weights): `vpmaddubsw` adds two byte products into an int16, which
    cannot saturate then (2 x 255 x 64 < 2**15), and `vpmaddwd` with ones adds the pairs into
    int32. pairs otherwise: B's bytes widened to int16 and `vpmaddwd` with A's bytes repeated, two
    exact products per int32: the accumulator holds two partial sums per lane (32 x i32), added
    at the end. generic: plain vector IR over int32 (exact on any target)."""

    def __init__(self, b_max: int):
        from ..jit import isa

        wide = isa() in ("avx512", "avx2")
        self.kind = ("vnni" if vnni() else "maddubs" if wide and b_max <= SHORT_SAFE else "pairs" if wide
                     else "generic")
        self.acc_type = ir.VectorType(I32, 2 * LANES) if self.kind == "pairs" else V16
        # register tile: AVX2 has 16 ymm; a pair accumulator takes 4 of them per panel, others 2
        self.rows, self.panels = {"pairs": (2, 1), "maddubs": (4, 1)}.get(self.kind, (ROWS, PANELS))

    def step(self, kb, acc, a4, b):
        bld = kb.b
        if self.kind == "vnni":
            f = kb.intrinsic("llvm.x86.avx512.vpdpbusd.512", V16, [V16, V16, V16])
            return bld.call(f, [acc, kb.splat(a4, LANES), b])
        bytes_b = bld.bitcast(b, ir.VectorType(I8, 4 * LANES))
        if self.kind == "maddubs":
            v32i8, v16i16, v8i32 = ir.VectorType(I8, 32), ir.VectorType(ir.IntType(16), 16), ir.VectorType(I32, 8)
            a_bytes = bld.bitcast(kb.splat(a4, 8), v32i8)
            ubsw = kb.intrinsic("llvm.x86.avx2.pmadd.ub.sw", v16i16, [v32i8, v32i8])
            wd = kb.intrinsic("llvm.x86.avx2.pmadd.wd", v8i32, [v16i16, v16i16])
            ones = ir.Constant(v16i16, [1] * 16)
            halves = []
            for q in range(2):  # 8 lanes x 4 bytes each
                bq = bld.shuffle_vector(bytes_b, ir.Constant(bytes_b.type, ir.Undefined),
                                        ir.Constant(ir.VectorType(I32, 32), list(range(32 * q, 32 * q + 32))))
                halves.append(bld.call(wd, [bld.call(ubsw, [a_bytes, bq]), ones]))
            both = bld.shuffle_vector(halves[0], halves[1], ir.Constant(ir.VectorType(I32, 16), list(range(16))))
            return bld.add(acc, both)
        if self.kind == "pairs":
            v16i16, v8i32 = ir.VectorType(ir.IntType(16), 16), ir.VectorType(I32, 8)
            a_bytes = bld.bitcast(a4, ir.VectorType(I8, 4))
            a16 = bld.zext(a_bytes, ir.VectorType(ir.IntType(16), 4))
            a_pat = bld.shuffle_vector(a16, ir.Constant(a16.type, ir.Undefined),
                                       ir.Constant(ir.VectorType(I32, 16), [t % 4 for t in range(16)]))
            b16 = bld.sext(bytes_b, ir.VectorType(ir.IntType(16), 4 * LANES))
            f = kb.intrinsic("llvm.x86.avx2.pmadd.wd", v8i32, [v16i16, v16i16])
            parts = []
            for q in range(4):  # 16 int16 = 4 lanes x 4 bytes -> 8 int32 = 4 lanes x 2 pair sums
                bq = bld.shuffle_vector(b16, ir.Constant(b16.type, ir.Undefined),
                                        ir.Constant(ir.VectorType(I32, 16), list(range(16 * q, 16 * q + 16))))
                parts.append(bld.call(f, [bq, a_pat]))
            both = [bld.shuffle_vector(parts[0], parts[1], ir.Constant(ir.VectorType(I32, 16), list(range(16)))),
                    bld.shuffle_vector(parts[2], parts[3], ir.Constant(ir.VectorType(I32, 16), list(range(16))))]
            whole = bld.shuffle_vector(both[0], both[1], ir.Constant(ir.VectorType(I32, 32), list(range(32))))
            return bld.add(acc, whole)
        for t in range(4):
            lane_t = bld.shuffle_vector(bytes_b, ir.Constant(bytes_b.type, ir.Undefined),
                                        ir.Constant(ir.VectorType(I32, LANES), [4 * j + t for j in range(LANES)]))
            at = bld.and_(bld.lshr(a4, ir.Constant(I32, 8 * t)), ir.Constant(I32, 0xFF))
            acc = bld.add(acc, bld.mul(bld.sext(lane_t, V16), kb.splat(at, LANES)))
        return acc

    def final(self, kb, acc):
        """The accumulator as 16 int32 lanes."""
        if self.kind != "pairs":
            return acc
        bld, idx = kb.b, ir.VectorType(I32, LANES)
        even = bld.shuffle_vector(acc, acc, ir.Constant(idx, [2 * j for j in range(LANES)]))
        odd = bld.shuffle_vector(acc, acc, ir.Constant(idx, [2 * j + 1 for j in range(LANES)]))
        return bld.add(even, odd)


@dataclass(frozen=True)
class Rows:
    """Where the k bytes of row r of A lie: `taps` runs of `width` bytes, at byte offsets
    `offsets` from the row's start. A matrix is one run of K bytes at r x K. A convolution over a
    padded NHWC input (N, hp, wp, c) is one run of c channels per kernel tap (i, j): its output
    pixel (n, y, x) starts at ((n hp + y sh) wp + x sw) c, and tap (i, j) lies (i dh wp + j dw) c
    further on (implicit GEMM: the window is read in place, nothing is copied)."""

    width: int
    kernel: tuple = (1, 1)  # (kh, kw)
    tap_steps: tuple = (0, 0)  # bytes from tap (i, j) to (i + 1, j) and to (i, j + 1)
    out_hw: tuple = ()  # (ho, wo) for a convolution
    in_hw: tuple = ()  # (hp, wp)
    strides: tuple = ()

    @classmethod
    def matrix(cls, k: int) -> Rows:
        return cls(k)

    @classmethod
    def conv(cls, hp, wp, c, ho, wo, kernel, strides, dilations) -> Rows:
        return cls(c, tuple(kernel), (dilations[0] * wp * c, dilations[1] * c), (ho, wo), (hp, wp), tuple(strides))

    @property
    def offsets(self) -> tuple:
        return tuple(i * self.tap_steps[0] + j * self.tap_steps[1]
                     for i in range(self.kernel[0]) for j in range(self.kernel[1]))

    def tap_offset(self, kb, t):
        """The byte offset of tap t (an i64 value, i x kw + j) from its row's start."""
        bld, kw = kb.b, kb.i64(self.kernel[1])
        return bld.add(bld.mul(bld.udiv(t, kw), kb.i64(self.tap_steps[0])),
                       bld.mul(bld.urem(t, kw), kb.i64(self.tap_steps[1])))

    def start(self, kb, r):
        """The byte offset of row r (an i64 value) in A."""
        if not self.out_hw:
            return kb.b.mul(r, kb.i64(self.width))
        bld, (ho, wo), (hp, wp), (sh, sw) = kb.b, self.out_hw, self.in_hw, self.strides
        n, pix = bld.udiv(r, kb.i64(ho * wo)), bld.urem(r, kb.i64(ho * wo))
        y, x = bld.udiv(pix, kb.i64(wo)), bld.urem(pix, kb.i64(wo))
        at = bld.add(bld.mul(bld.add(bld.mul(n, kb.i64(hp)), bld.mul(y, kb.i64(sh))), kb.i64(wp)),
                     bld.mul(x, kb.i64(sw)))
        return bld.mul(at, kb.i64(self.width))

    @property
    def groups(self) -> int:
        """Groups of 4 k per tap (the last one partial when width is not a multiple of 4)."""
        return -(-self.width // 4)


def _a_group(kb, row_ptr, g, flip: int):
    """The 4 bytes k = 4g .. 4g+3 of a whole group of a row of A as one i32, each xor `flip` (a
    signed A made unsigned)."""
    bld = kb.b
    word = bld.load(bld.gep(row_ptr, [bld.mul(g, kb.i64(4))], source_etype=I8, inbounds=True), typ=I32, align=1)
    return bld.xor(word, ir.Constant(I32, flip * 0x01010101)) if flip else word


def _a_tail(kb, row_ptr, k: int, flip: int):
    """The last, partial group of a run of k bytes of A's row (k % 4 bytes), zero above."""
    bld, word = kb.b, ir.Constant(I32, 0)
    for t in range(k % 4):
        byte = bld.load(bld.gep(row_ptr, [kb.i64(k - k % 4 + t)], source_etype=I8, inbounds=True), typ=I8, align=1)
        v = bld.zext(bld.xor(byte, ir.Constant(I8, flip)) if flip else byte, I32)
        word = bld.or_(word, bld.shl(v, ir.Constant(I32, 8 * t)))
    return word


@dataclass(frozen=True)
class IntEpilogue:
    """An elementwise expression applied to each finished panel of int32 sums in registers, before
    the store (int8_conv.py's requantisation): `expr`'s leaf -1 is the sum; `leaves` are
    (arg, element type, kind, pointer in the entry) for the tensors it reads, a kind of
    gemm_emit's FULL (y's own shape, at the same element), ROW (a value per column) or SCALAR;
    y holds `out` elements."""

    expr: object
    leaves: tuple
    out: dt.DType


def emit_int8_gemm(cg, a_ptr, a_dtype, za, y_ptr, nrows: int, rows: Rows, n: int, flip: int, packed: np.ndarray,
                   col: np.ndarray, zb: np.ndarray | None, epilogue: IntEpilogue | None = None):
    """y[nrows, n] (int32) = A'[nrows, K] @ B' + za' col - rowsum(A') zb (zb None: all zero), the
    rows of A where `rows` says, za' read from `za` (an operand of A's type, or None: 0); with an
    `epilogue`, y is its expression of those sums instead (of its `out` type). The row count is
    an argument: a new batch or sequence length uses the same function."""
    panels = packed.shape[0]
    leaves = () if epilogue is None else epilogue.leaves
    kb = cg.function("int8_gemm", [PTR, PTR, PTR, PTR, PTR, PTR] + [PTR] * len(leaves) + [I64, I64, I64])
    a_, za_, b_, col_, zb_, y_ = kb.args[:6]
    leaf_ptrs = kb.args[6:6 + len(leaves)]
    nrows_, tid, nth = kb.args[6 + len(leaves):]
    bld, dot = kb.b, _Dot(int(np.abs(packed.astype(np.int16)).max(initial=0)))
    za_v = kb.splat(_zero_point(kb, za_, a_dtype, flip, za is not None), LANES)
    R = dot.rows
    lo, hi = split_range(kb, bld.sdiv(bld.add(nrows_, kb.i64(R - 1)), kb.i64(R)), tid, nth)
    with kb.loop(lo, hi, name="blk", unroll=False) as blk:
        row0 = bld.mul(blk, kb.i64(R))
        live = [bld.icmp_signed("<", bld.add(row0, kb.i64(r)), nrows_) for r in range(R)]
        # rows past the end read the last row again (their results are not stored)
        rows_at = [bld.select(live[r], bld.add(row0, kb.i64(r)), bld.sub(nrows_, kb.i64(1))) for r in range(R)]
        a_rows = [bld.gep(a_, [rows.start(kb, ra)], source_etype=I8, inbounds=True) for ra in rows_at]
        sums = None if zb is None else [_row_sum(kb, ap, rows, flip) for ap in a_rows]

        def store(ps, cols):
            """The panels ps (i64 values) of this block of rows, `cols` lanes of each stored."""
            accs = _panel_products(kb, dot, a_rows, b_, ps, packed.shape[1], rows, flip)
            for j, (p, c) in enumerate(zip(ps, cols)):
                at = bld.mul(p, kb.i64(LANES * 4))
                bias_v = bld.mul(za_v, bld.load(bld.gep(col_, [at], source_etype=I8, inbounds=True), typ=V16, align=4))
                zb_v = None if zb is None else bld.load(bld.gep(zb_, [at], source_etype=I8, inbounds=True),
                                                        typ=V16, align=4)
                for r in range(R):
                    v = bld.add(dot.final(kb, bld.load(accs[r][j])), bias_v)
                    if zb_v is not None:
                        v = bld.sub(v, bld.mul(zb_v, kb.splat(sums[r], LANES)))
                    with kb.if_then(live[r]):  # a row past the end reads no epilogue operand either
                        at_y = bld.add(bld.mul(bld.add(row0, kb.i64(r)), kb.i64(n)), bld.mul(p, kb.i64(LANES)))
                        if epilogue is None:
                            _store_panel(kb, v, bld.gep(y_, [at_y], source_etype=I32, inbounds=True), c)
                        else:
                            _epilogue_panel(kb, epilogue, leaf_ptrs, v, y_, at_y, bld.mul(p, kb.i64(LANES)), c)

        # Whole groups of complete panels: a loop, not one copy each (2048 columns unrolled were 64
        # copies, 1.5 s of LLVM for one kernel); the rest, a partial group or panel, after it.
        whole = (n // LANES) // dot.panels
        if whole:
            with kb.loop(0, whole, name="pp", unroll=False) as q:
                store([bld.add(bld.mul(q, kb.i64(dot.panels)), kb.i64(j)) for j in range(dot.panels)],
                      [LANES] * dot.panels)
        for p0 in range(whole * dot.panels, panels, dot.panels):
            ps = list(range(p0, min(p0 + dot.panels, panels)))
            store([kb.i64(p) for p in ps], [min(LANES, n - p * LANES) for p in ps])
    kb.finish()
    zb_arr = np.zeros(panels * LANES, np.int32) if zb is None else zb
    za_ptr = cg.ptr(za) if za is not None else cg.weight(np.zeros(1, np.int8))
    args = [a_ptr, za_ptr, cg.weight(packed.reshape(-1)), cg.weight(col), cg.weight(zb_arr), y_ptr,
            *(ptr for *_, ptr in leaves), cg.entry.i64(nrows)]
    k = rows.width * len(rows.offsets)
    call_split(cg, kb.fn, args, nrows * k * n < PARALLEL_MACS)


def _zero_point(kb, za_, a_dtype, flip: int, present: bool):
    """za' as an i32: A's zero point widened as its type is, plus 128 for a signed A."""
    bld = kb.b
    if not present:
        return ir.Constant(I32, 128 if flip else 0)
    byte = bld.load(za_, typ=I8, align=1)
    v = bld.sext(byte, I32) if a_dtype == dt.int8 else bld.zext(byte, I32)
    return bld.add(v, ir.Constant(I32, 128)) if flip else v


def _row_sum(kb, row_ptr, rows: Rows, flip: int):
    """The sum of a row of A' (int32), over every tap."""
    bld = kb.b
    s = kb.var(I32, ir.Constant(I32, 0))
    for off in rows.offsets:
        run = bld.gep(row_ptr, [kb.i64(off)], source_etype=I8, inbounds=True)
        with kb.loop(0, rows.width, name="rs") as kk:
            byte = bld.load(bld.gep(run, [kk], source_etype=I8, inbounds=True), typ=I8, align=1)
            byte = bld.xor(byte, ir.Constant(I8, flip)) if flip else byte
            bld.store(bld.add(bld.load(s), bld.zext(byte, I32)), s)
    return bld.load(s)


def _panel_products(kb, dot, a_rows, b_, ps, groups: int, rows: Rows, flip: int):
    """Accumulators [row][panel] of A' times the panels `ps` (i64 values) of packed B', over every
    k (tap by tap; tap t's groups follow the groups of the taps before it in B)."""
    bld = kb.b
    group_bytes = LANES * 4
    accs = [[kb.var(dot.acc_type, ir.Constant(dot.acc_type, None)) for _ in ps] for _ in a_rows]
    b_panel = [bld.gep(b_, [bld.mul(p, kb.i64(groups * group_bytes))], source_etype=I8, inbounds=True) for p in ps]

    def step(words, g):
        bv = [bld.load(bld.gep(bp, [bld.mul(g, kb.i64(group_bytes))], source_etype=I8, inbounds=True),
                       typ=V16, align=1) for bp in b_panel]
        for r, acc_row in enumerate(accs):
            for acc, b in zip(acc_row, bv):
                bld.store(dot.step(kb, bld.load(acc), words[r], b), acc)

    k = rows.width

    def tap(runs, first):
        if k // 4:
            with kb.loop(0, k // 4, name="g") as g:
                step([_a_group(kb, ap, g, flip) for ap in runs], bld.add(g, first))
        if k % 4:
            step([_a_tail(kb, ap, k, flip) for ap in runs], bld.add(first, kb.i64(k // 4)))

    taps = len(rows.offsets)
    if taps == 1:
        tap(a_rows, kb.i64(0))
    else:
        # a loop, not one copy per tap: unrolled, a 7 x 7 stem's 49 taps of one group each were
        # scheduled as one block whose accumulators spilled (a fifth of the 3 x 3 layers' speed)
        with kb.loop(0, taps, name="tap", unroll=False) as t:
            off = rows.tap_offset(kb, t)
            tap([bld.gep(ap, [off], source_etype=I8, inbounds=True) for ap in a_rows],
                bld.mul(t, kb.i64(rows.groups)))
    return accs


def _epilogue_panel(kb, epilogue: IntEpilogue, leaf_ptrs, v, y_, at_y, at_col, cols: int):
    """The epilogue of one panel's sums v (row offset at_y, column at_col, in elements), stored
    at y; a partial panel's loads and store are masked to its `cols` lanes."""
    from .elementwise import evaluate
    from .gemm_emit import FULL, SCALAR
    from .lanes import Lanes

    bits = ir.VectorType(ir.IntType(1), LANES)
    mask = None if cols == LANES else ir.Constant(bits, [1] * cols + [0] * (LANES - cols))
    lanes = Lanes(kb, LANES, mask)
    values = {}
    for (arg, dtype, kind, _), ptr in zip(epilogue.leaves, leaf_ptrs):
        at = kb.i64(0) if kind == SCALAR else at_y if kind == FULL else at_col
        values[arg] = lanes.load(ptr, at, dtype, broadcast=kind == SCALAR)
    n = max(values, default=-1) + 1
    out = evaluate(lanes, epilogue.expr, [values.get(k) for k in range(n)], v, acc_dtype=dt.int32)
    lanes.store(out, y_, at_y, epilogue.out)


def _store_panel(kb, v, out, cols: int):
    """Store the first `cols` lanes of v at out (a whole panel at once)."""
    bld = kb.b
    if cols == LANES:
        bld.store(v, out, align=4)
        return
    for c in range(cols):  # the last, partial panel: its columns one by one
        bld.store(bld.extract_element(v, ir.Constant(I32, c)), bld.gep(out, [kb.i64(c)], source_etype=I32,
                                                                        inbounds=True), align=4)


# -- registration ---------------------------------------------------------------------------------
def _supports(node) -> bool:
    a, b = node.inputs[0], node.inputs[1]
    za = node.inputs[2] if len(node.inputs) > 2 else None
    zb = node.inputs[3] if len(node.inputs) > 3 else None
    if not (isinstance(a.type, dt.TensorType) and a.type.is_static and a.type.rank >= 2):
        return False
    if not (b.is_constant and b.type.rank == 2 and b.type.numel > 0 and a.type.numel > 0):
        return False
    n = b.type.shape[1]
    # a_zero_point: one value, a constant or computed at run time (DynamicQuantizeLinear)
    za_ok = za is None or (isinstance(za.type, dt.TensorType) and za.type.is_static and za.type.numel == 1)
    zb_ok = zb is None or (zb.is_constant and zb.type.numel in (1, n) and zb.type.rank <= 1)
    return za_ok and zb_ok and a.type.dtype in (dt.int8, dt.uint8)


@cpu_kernel("MatMulInteger", supports=_supports, priority=10)
def emit_matmul_integer(cg, instr):
    a, b, *zps = instr.inputs
    za_op = zps[0] if zps else None
    zb_op = zps[1] if len(zps) > 1 else None
    bv = constant(b)
    k, n = bv.shape
    zb = np.zeros(1, np.int64) if zb_op is None else constant(zb_op).reshape(-1).astype(np.int64)
    bs, zb2 = to_u8s8(bv, zb)
    flip = 0x80 if a.type.dtype == dt.int8 else 0
    emit_int8_gemm(cg, cg.ptr(a), a.type.dtype, za_op, cg.ptr(instr.outputs[0]), a.type.numel // k, Rows.matrix(k),
                   n, flip, pack(bs), column_row(bs, zb2), int32_row(zb2, n) if np.any(zb2 != 0) else None)
