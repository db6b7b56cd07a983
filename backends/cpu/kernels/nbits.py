"""MatMulNBits (glow.ops.nbits) with 4-bit codes kept packed: the weight stays at half a byte per
value in memory and is unpacked in registers, so decoding reads an eighth of float32's bytes.

B is repacked at compile time into panels of 16 columns (one vector of int32 lanes, one lane per
column). Each 64-byte group holds 8 k of a panel: lane c, byte j holds code (k + j) in its low
nibble and code (k + 4 + j) in its high one, so `v & 0x0F0F0F0F` and `(v >> 4) & 0x0F0F0F0F` are
two vectors of 16 columns x 4 consecutive k, the operand of `vpdpbusd`. Blocks of K (16 or more,
a power of 2) are whole groups; codes past K meet zero activations, so they add nothing.

Two ways to multiply, chosen by the node's accuracy_level and the target:

* int8 activations (accuracy_level 4, as onnxruntime defines it, on an AVX2 or AVX-512 target):
  each row of A is quantized per block of K, symmetric, scale = max|a| / 127, codes a * (127 /
  max|a|) rounded half to even; then per block and column the integer dot
  sum qa (qw - zp) = dpbusd(qw, qa) - zp * sum(qa) (exact in int32), times scale_a * scale_w.
  `vpdpbusd` (VNNI) or `vpmaddubsw` + `vpmaddwd` (AVX2: codes <= 15, so the int16 pairs cannot
  saturate). onnxruntime's MLAS quantizes A the same way, so the two agree to rounding.
* float activations (any other accuracy_level, float zero points, or a target without AVX2):
  per block, sum a (q - zp) in float32, then times the scale. The exact product up to rounding.

Rows of A are taken 4 at a time (each unpacked group serves all four), then one by one; threads
split the panels, so each streams its share of the weight once per 4 rows.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.ops.nbits import unpack_codes

from ..codegen import cpu_kernel, weight_data
from ..irutil import F32, I8, I32, I64, PTR
from .attention import _hreduce
from .gemm_emit import prefetch, prefetch_distance, split_range

MS = "com.microsoft"
LANES = 16  # columns per panel: one vector of 16 int32 / float32 lanes
GROUP = 8  # k per 64-byte group of a panel
ROWS = 4  # rows of A per step
NACC = 4  # partial sums per row when one row is taken at a time
V16I = ir.VectorType(I32, LANES)
V16F = ir.VectorType(F32, LANES)
SMALL = 1 << 16  # multiply-adds below which one thread does it all
MAX_K = 1 << 16  # the rows of A a step takes live on the stack (ROWS x K floats and bytes): 1.3 MB at most


def _is_f32(v) -> bool:
    return v is None or (isinstance(v.type, dt.TensorType) and v.type.is_static and v.type.dtype == dt.float32)


def _supported(node) -> bool:
    a, b, scales, zp, g_idx, bias = (list(node.inputs) + [None] * 6)[:6]
    at = node.attrs
    if at["bits"] != 4 or g_idx is not None or at["block_size"] % GROUP or at["K"] > MAX_K:
        return False
    if not (a is not None and _is_f32(a) and _is_f32(node.outputs[0]) and _is_f32(bias) and _is_f32(scales)):
        return False
    if not all(x is None or x.is_constant for x in (b, scales, zp)):
        return False
    if b.type.dtype != dt.uint8 or (zp is not None and zp.type.dtype not in (dt.uint8, dt.float32)):
        return False
    return a.type.numel > 0


def int8_path(accuracy_level: int, zp_dtype) -> bool:
    """Whether this node multiplies int8 activations: accuracy_level 4 with integer zero points,
    on a target with AVX2 or AVX-512 (elsewhere the float path, which is at least as exact)."""
    from ..jit import isa

    return accuracy_level == 4 and zp_dtype in (None, dt.uint8) and isa() in ("avx512", "avx2")


def _vnni() -> bool:
    from .int8_gemm import vnni

    return vnni()


# -- compile-time packing ------------------------------------------------------------------------
def pack_codes(b, K: int, N: int, block: int, out: np.ndarray | None = None) -> np.ndarray:
    """[panels, groups, 16 lanes, 4 bytes] uint8: the layout of the module docstring, made from the
    packed bytes directly (a group's 8 codes are 4 source bytes; no array of codes, which was
    8 s of Qwen2.5-0.5B's compile)."""
    kp = -(-K // block) * block
    panels, groups = -(-N // LANES), kp // GROUP
    src = np.asarray(b, np.uint8).reshape(N, groups, 4)  # a row's blocks are contiguous: bytes along K
    if N % LANES:
        src = np.concatenate([src, np.zeros((panels * LANES - N, groups, 4), np.uint8)])
    s0, s1, s2, s3 = (src[:, :, i].reshape(panels, LANES, groups) for i in range(4))
    if out is None:
        out = np.empty((panels, groups, LANES, 4), np.uint8)
    o = out.transpose(0, 2, 1, 3)  # [panel, lane, group, byte]: written in place
    # byte j: code 8g + j (bytes s0, s1: low then high nibble) below code 8g + 4 + j (s2, s3)
    o[..., 0] = (s0 & 15) | (s2 << 4)
    o[..., 1] = (s0 >> 4) | (s2 & 0xF0)
    o[..., 2] = (s1 & 15) | (s3 << 4)
    o[..., 3] = (s1 >> 4) | (s3 & 0xF0)
    return out


def _by_panel(x: np.ndarray, N: int, dtype) -> np.ndarray:
    """[N, blocks] -> [panels, blocks, 16], zero past N."""
    panels = -(-N // LANES)
    full = np.zeros((panels * LANES, x.shape[1]), dtype)
    full[:N] = x
    return full.reshape(panels, LANES, x.shape[1]).transpose(0, 2, 1)


def pack_scales(scales, K: int, N: int, block: int, out: np.ndarray | None = None) -> np.ndarray:
    """[panels, blocks, 16] float32: per panel and block, the 16 columns' scales (0 past N)."""
    packed = _by_panel(np.asarray(scales, np.float32).reshape(N, -(-K // block)), N, np.float32)
    if out is None:
        return np.ascontiguousarray(packed)
    out[...] = packed
    return out


def pack_zero_points(zp, K: int, N: int, block: int, ints: bool, out: np.ndarray | None = None) -> np.ndarray:
    """[panels, blocks, 16]: the zero points as bytes for the int8 path (codes 0..15), else float32
    (float zero points stay exact). Absent zero points are the constant 8 in the kernel's text:
    nothing to read, a fifth fewer bytes per token than scales and zero points side by side."""
    kb = -(-K // block)
    zp = np.asarray(zp)
    z = unpack_codes(zp.reshape(N, -1), 4, kb) if zp.dtype == np.uint8 else zp.reshape(N, kb)
    packed = _by_panel(z.astype(np.uint8 if ints else np.float32), N, np.uint8 if ints else np.float32)
    if out is None:
        return np.ascontiguousarray(packed)
    out[...] = packed
    return out


# -- the kernel -------------------------------------------------------------------------------------

class _Emitter:
    """One MatMulNBits kernel: (A, codes, scales, bias, Y, rows, tid, nth); K, N and the block size
    are in its text, the number of rows is an argument (one kernel for every prompt length)."""

    def __init__(self, cg, K: int, N: int, block: int, ints: bool, has_zp: bool, has_bias: bool):
        self.K, self.N, self.block, self.ints, self.has_zp, self.has_bias = K, N, block, ints, has_zp, has_bias
        self.nb = -(-K // block)
        self.kp = self.nb * block
        self.panels = -(-N // LANES)
        self.vnni = ints and _vnni()
        self.kb = kb = cg.function("MatMulNBits", [PTR, PTR, PTR, PTR, PTR, PTR, I64, I64, I64])
        kb.fn.attributes.add("noinline")
        self.A, self.codes, self.sc, self.zp, self.bias, self.Y, self.M, tid, nth = kb.args
        b = kb.b
        # A prompt's chunks are bands of row steps, each over every panel: a row of A is then
        # quantized once (the int8 path). Split by panels as well (so that a chunk's codes stayed
        # in L2), every chunk quantized all the rows of its band again: Qwen's down projection
        # (K 4864, N 896, 512 rows) took 8.8 ms at 2 threads, as at one; by rows alone 4.5 ms
        # (Zen 5), and no product was slower. A matrix-vector product (fewer row steps than
        # chunks) splits its panels.
        few = b.icmp_signed("<", self.M, b.mul(nth, kb.i64(ROWS)))
        parts = b.select(few, nth, kb.i64(1))
        bands = b.sdiv(nth, parts)
        band, col = b.sdiv(tid, parts), b.srem(tid, parts)
        self.p_lo, self.p_hi = split_range(kb, self.panels, col, parts)
        # per row of a step: the activations (int8 codes or float32, zero past K), per block the
        # row's scale and code sum (int8 path)
        self.xa = kb.array(F32, ROWS * self.kp)
        if ints:
            self.qa = kb.array(I8, ROWS * self.kp)
            self.sa = kb.array(F32, ROWS * self.nb)
            self.qsum = kb.array(I32, ROWS * self.nb)
        self.acc = [kb.var(V16F) for _ in range(ROWS)]
        # independent partial sums per row (summed per block): one accumulator would make each
        # step wait for the last (vpdpbusd's latency: 26 against 90 GMAC/s at one row)
        self.dot = [[kb.var(V16I if ints else V16F) for _ in range(NACC)] for _ in range(ROWS)]
        full = b.sdiv(self.M, kb.i64(ROWS))
        s_lo, s_hi = split_range(kb, full, band, bands)
        with kb.loop(s_lo, s_hi, name="step", unroll=False) as step:
            self._rows(b.mul(step, kb.i64(ROWS)), ROWS)
        last_band = b.icmp_signed("==", band, b.sub(bands, kb.i64(1)))
        tail = b.select(last_band, b.mul(full, kb.i64(ROWS)), self.M)  # the rows past the steps: the last band's
        with kb.loop(tail, self.M, name="row", unroll=False) as r0:
            self._rows(r0, 1)
        kb.finish()

    # activations -------------------------------------------------------------------------------
    def _load_rows(self, r0, rows: int):
        kb, b = self.kb, self.kb.b
        for r in range(rows):
            src = kb.ptr(self.A, b.mul(b.add(r0, kb.i64(r)), kb.i64(self.K)))
            dst = kb.ptr(self.xa, r * self.kp)
            with kb.loop(0, self.K, name="copy") as k:
                kb.store(kb.load(src, k), dst, k)
            if self.kp > self.K:
                with kb.loop(self.K, self.kp, name="pad") as k:
                    kb.store(kb.f32(0.0), dst, k)
            if self.ints:
                self._quantize_row(r)

    def _quantize_row(self, r: int):
        """Per block: amax, scale amax / 127, codes round_half_even(a * (127 / amax)), their sum."""
        kb, b = self.kb, self.kb.b
        fabs = kb.intrinsic("llvm.fabs.v16f32", V16F, [V16F])
        rnd = kb.intrinsic("llvm.roundeven.v16f32", V16F, [V16F])
        vecs = self.block // LANES
        with kb.loop(0, self.nb, name="qblk") as blk:
            base = b.add(kb.i64(r * self.kp), b.mul(blk, kb.i64(self.block)))
            xs = [b.load(kb.ptr(self.xa, b.add(base, kb.i64(LANES * i))), typ=V16F, align=4) for i in range(vecs)]
            m = b.call(fabs, [xs[0]])
            nan = b.fcmp_unordered("uno", xs[0], xs[0])
            for x in xs[1:]:
                ax = b.call(fabs, [x])
                m = b.select(b.fcmp_ordered(">", ax, m), ax, m)
                nan = b.or_(nan, b.fcmp_unordered("uno", x, x))
            amax = _hreduce(kb, m, LANES, lambda p, q: b.select(b.fcmp_ordered(">", p, q), p, q))
            # a NaN makes the block's scale NaN, so the row's results are NaN as in the reference
            # (its code would be 0: the NaN would vanish)
            has_nan = b.icmp_unsigned("!=", b.bitcast(nan, ir.IntType(LANES)), ir.Constant(ir.IntType(LANES), 0))
            amax = b.select(has_nan, kb.f32(float("nan")), amax)
            nonzero = b.fcmp_ordered("!=", amax, kb.f32(0.0))
            inv = b.select(nonzero, b.fdiv(kb.f32(127.0), amax), kb.f32(0.0))
            kb.store(b.fdiv(amax, kb.f32(127.0)), self.sa, b.add(kb.i64(r * self.nb), blk))
            iv = kb.splat(inv, LANES)
            total = ir.Constant(V16I, [0] * LANES)
            for i, x in enumerate(xs):
                q = b.fptosi(b.call(rnd, [b.fmul(x, iv)]), V16I)
                total = b.add(total, q)
                _store_any(b, b.trunc(q, ir.VectorType(I8, LANES)), kb.ptr(self.qa, b.add(base, kb.i64(LANES * i)), I8))
            kb.store(_hreduce(kb, total, LANES, b.add), self.qsum, b.add(kb.i64(r * self.nb), blk), I32)

    # the product ---------------------------------------------------------------------------------
    def _rows(self, r0, rows: int):
        kb, b = self.kb, self.kb.b
        self._load_rows(r0, rows)
        zero_f = ir.Constant(V16F, [0.0] * LANES)
        zero_d = ir.Constant(V16I, [0] * LANES) if self.ints else zero_f
        groups = self.block // GROUP
        with kb.loop(self.p_lo, self.p_hi, name="panel", unroll=False) as p:
            for r in range(rows):
                b.store(zero_f, self.acc[r])
            with kb.loop(0, self.nb, name="blk", unroll=False) as blk:
                nacc = NACC if rows == 1 else 2
                for r in range(rows):
                    for d in self.dot[r][:nacc]:
                        b.store(zero_d, d)
                at = b.mul(b.add(b.mul(p, kb.i64(self.nb)), blk), kb.i64(LANES))
                prefetch(kb, kb.ptr(self.sc, b.add(at, kb.i64(prefetch_distance() // 16))))
                scale = b.load(kb.ptr(self.sc, at), typ=V16F, align=64)
                zp = self._zero_point(at)
                g0 = b.add(b.mul(p, kb.i64(self.kp // GROUP)), b.mul(blk, kb.i64(groups)))
                k0 = b.mul(blk, kb.i64(self.block))
                with kb.loop(0, groups // 2, name="g") as gp:
                    for half in range(2):  # two groups a step: the first on sums 0, 1, the second 2, 3
                        g = b.add(b.mul(gp, kb.i64(2)), kb.i64(half))
                        at_g = b.mul(b.add(g0, g), kb.i64(LANES))
                        prefetch(kb, kb.ptr(self.codes, b.add(at_g, kb.i64(prefetch_distance() // 4)), I32))
                        v = b.load(kb.ptr(self.codes, at_g, I32), typ=V16I, align=64)
                        k = b.add(k0, b.mul(g, kb.i64(GROUP)))
                        sums = [[d[(2 * half + j) % nacc] for j in range(2)] for d in self.dot[:rows]]
                        if self.ints:
                            self._int_group(v, k, sums)
                        else:
                            self._float_group(v, k, zp, sums)
                for r in range(rows):
                    parts = [b.load(d) for d in self.dot[r][:nacc]]
                    add = b.add if self.ints else b.fadd
                    while len(parts) > 1:
                        parts = [add(x, y) for x, y in zip(parts[0::2], parts[1::2])]
                    d = parts[0]
                    if self.ints:  # scale_w * (dot - zp * sum(qa)) * scale_a, the integer part exact
                        at = b.add(kb.i64(r * self.nb), blk)
                        qs = kb.splat(kb.load(self.qsum, at, I32), LANES)
                        t = b.fmul(scale, b.sitofp(b.sub(d, b.mul(zp, qs)), V16F))
                        b.store(kb.fma(t, kb.splat(kb.load(self.sa, at), LANES), b.load(self.acc[r])), self.acc[r])
                    else:
                        b.store(kb.fma(scale, d, b.load(self.acc[r])), self.acc[r])
            for r in range(rows):
                self._store(b.load(self.acc[r]), b.add(r0, kb.i64(r)), p)

    def _zero_point(self, at):
        """The 16 columns' zero points of a (panel, block) at element `at`: int32 lanes for the int8
        path, float32 for the float one."""
        kb, b = self.kb, self.kb.b
        if not self.has_zp:
            return ir.Constant(V16I, [8] * LANES) if self.ints else ir.Constant(V16F, [8.0] * LANES)
        if self.ints:
            z = b.load(kb.ptr(self.zp, at, I8), typ=ir.VectorType(I8, LANES), align=16)
            return b.zext(z, V16I)
        return b.load(kb.ptr(self.zp, at), typ=V16F, align=64)

    def _int_group(self, v, k, sums):
        """One group into each row's two partial sums `sums[r]` (low nibbles, high nibbles)."""
        kb, b = self.kb, self.kb.b
        mask = ir.Constant(V16I, [0x0F0F0F0F] * LANES)
        lo = b.and_(v, mask)
        hi = b.and_(b.lshr(v, ir.Constant(V16I, [4] * LANES)), mask)
        for r, pair in enumerate(sums):
            row = kb.ptr(self.qa, b.add(kb.i64(r * self.kp), k), I8)
            for half, (w, d) in enumerate(zip((lo, hi), pair)):
                a4 = b.load(kb.ptr(row, 4 * half, I8), typ=I32, align=1)
                b.store(self._dot4(b.load(d), w, a4), d)

    def _dot4(self, acc, w, a4):
        """acc + per lane the 4 products of w's unsigned bytes by a4's signed ones."""
        kb, b = self.kb, self.kb.b
        if self.vnni:
            f = kb.intrinsic("llvm.x86.avx512.vpdpbusd.512", V16I, [V16I, V16I, V16I])
            return b.call(f, [acc, w, kb.splat(a4, LANES)])
        v32i8, v16i16, v8i32 = ir.VectorType(I8, 32), ir.VectorType(ir.IntType(16), 16), ir.VectorType(I32, 8)
        ubsw = kb.intrinsic("llvm.x86.avx2.pmadd.ub.sw", v16i16, [v32i8, v32i8])
        wd = kb.intrinsic("llvm.x86.avx2.pmadd.wd", v8i32, [v16i16, v16i16])
        ones = ir.Constant(v16i16, [1] * 16)
        a_bytes = b.bitcast(kb.splat(a4, 8), v32i8)
        halves = []
        for q in range(2):  # 8 lanes (columns) x 4 bytes each
            wq = b.shuffle_vector(w, w, ir.Constant(ir.VectorType(I32, 8), list(range(8 * q, 8 * q + 8))))
            halves.append(b.call(wd, [b.call(ubsw, [b.bitcast(wq, v32i8), a_bytes]), ones]))
        both = b.shuffle_vector(halves[0], halves[1], ir.Constant(V16I, list(range(16))))
        return b.add(acc, both)

    def _float_group(self, v, k, zp, sums):
        kb, b = self.kb, self.kb.b
        ws = []
        for kk in range(GROUP):  # code of k + kk: byte kk % 4, nibble kk // 4
            shift = 8 * (kk % 4) + 4 * (kk // 4)
            q = b.lshr(v, ir.Constant(V16I, [shift] * LANES)) if shift else v
            if shift < 28:
                q = b.and_(q, ir.Constant(V16I, [15] * LANES))
            ws.append(b.fsub(b.sitofp(q, V16F), zp))
        for r, pair in enumerate(sums):
            row = kb.ptr(self.xa, b.add(kb.i64(r * self.kp), k))
            d = [b.load(x) for x in pair]
            for kk, w in enumerate(ws):
                d[kk % 2] = kb.fma(kb.splat(kb.load(row, kk), LANES), w, d[kk % 2])
            for x, val in zip(pair, d):
                b.store(val, x)

    def _store(self, v, row, p):
        """Y[row, 16p : 16p + 16] = v (+ bias); the last panel's columns past N are not written."""
        kb, b = self.kb, self.kb.b
        col = b.mul(p, kb.i64(LANES))
        dst = kb.ptr(self.Y, b.add(b.mul(row, kb.i64(self.N)), col))
        tail = self.N % LANES
        whole = b.icmp_signed("<", p, kb.i64(self.panels - 1)) if tail else ir.Constant(ir.IntType(1), 1)
        with b.if_else(whole, likely=True) as (full, part):
            with full:
                out = b.fadd(v, b.load(kb.ptr(self.bias, col), typ=V16F, align=4)) if self.has_bias else v
                b.store(out, dst, align=4)
            with part:
                with kb.loop(0, tail, name="tail") as c:
                    x = b.extract_element(v, b.trunc(c, I32))
                    if self.has_bias:
                        x = b.fadd(x, kb.load(self.bias, b.add(col, c)))
                    kb.store(x, dst, c)


def _store_any(b, value, ptr, align=1):
    """Store `value` at `ptr` whatever its pointee: a stack array's pointer is typed by its element
    (llvmlite's alloca), LLVM's pointers are not; IRBuilder.store would refuse the mismatch."""
    st = ir.instructions.StoreInstr(b.block, value, ptr)
    st.align = align
    b._insert(st)


@cpu_kernel("MatMulNBits", domain=MS, supports=_supported)
def emit_matmul_nbits(cg, instr):
    a, b, scales, zp, _, bias = (list(instr.inputs) + [None] * 6)[:6]
    out = instr.outputs[0]
    at = instr.attrs
    K, N, block = at["K"], at["N"], at["block_size"]
    bd, sd = weight_data(b), weight_data(scales)
    zd = None if zp is None else weight_data(zp)
    ints = int8_path(at["accuracy_level"], None if zp is None else zp.type.dtype)
    nb, panels = -(-K // block), -(-N // LANES)
    codes = cg.weight_out((panels, (nb * block) // GROUP, LANES, 4), np.uint8,
                          lambda o: pack_codes(bd, K, N, block, out=o), source=bd, how=("nbits4", K, N, block))
    sc = cg.weight_out((panels, nb, LANES), np.float32, lambda o: pack_scales(sd, K, N, block, out=o),
                       source=sd, how=("nbits4-scales", K, N, block))
    zpp = ir.Constant(PTR, None)
    if zd is not None:
        zpp = cg.weight_out((panels, nb, LANES), np.uint8 if ints else np.float32,
                            lambda o: pack_zero_points(zd, K, N, block, ints, out=o), source=zd,
                            how=("nbits4-zero-points", K, N, block, ints))
    rows = int(np.prod(out.type.shape[:-1])) if len(out.type.shape) > 1 else 1
    key = ("nbits4", K, N, block, ints, zd is not None, bias is not None)
    fn = cg.shared(key, lambda: _Emitter(cg, K, N, block, ints, zd is not None, bias is not None).kb.fn)
    null = ir.Constant(PTR, None)
    args = [cg.ptr(a), codes, sc, zpp, null if bias is None else cg.ptr(bias), cg.ptr(out), cg.value(rows)]
    if rows * K * N < SMALL:
        cg.call(fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, args + [cg.tid, cg.nth])


# -- GatherBlockQuantized: rows of a 4-bit table dequantized as they are gathered ------------------

def _gbq_supported(node) -> bool:
    data, idx, scales, zp = (list(node.inputs) + [None])[:4]
    at = node.attrs
    if at["bits"] != 4 or data.type.dtype != dt.uint8 or not _is_f32(scales) or not _is_f32(node.outputs[0]):
        return False
    if not (data.is_constant and scales.is_constant and (zp is None or (zp.is_constant and zp.type.dtype == dt.uint8))):
        return False
    shape = data.type.shape
    return (len(shape) == 2 and at["gather_axis"] % 2 == 0 and at["quantize_axis"] % 2 == 1
            and idx.type.dtype in (dt.int32, dt.int64) and idx.type.is_static)


@cpu_kernel("GatherBlockQuantized", domain=MS, supports=_gbq_supported)
def emit_gather_block_quantized(cg, instr):
    """out[i, k] = (code(ids[i], k) - zp) * scale, read from the packed table where it lies (the
    LM head's codes, which onnxruntime-genai's builder ties the embedding to): a row is
    dequantized only when a token asks for it, never the whole table (545 MB in float32 for
    Qwen2.5-0.5B's vocabulary). Indices are checked as Gather's are."""
    from glow.ops.index import WRAPS, site_id

    from .index import record_bad_index, table_row

    data, idx, scales, zp = (list(instr.inputs) + [None])[:4]
    out = instr.outputs[0]
    V, half = data.type.shape
    K = half * 2
    block = instr.attrs["block_size"]
    nb = -(-K // block)
    n_idx = int(np.prod(idx.type.shape, dtype=np.int64))
    kb = cg.function("GatherBlockQuantized", [PTR, PTR, PTR, PTR, PTR, I64, I64, I64, I64])
    x, sc, z, ind, y, site, rows, tid, nth = kb.args
    b = kb.b
    lo, hi = split_range(kb, rows, tid, nth)
    with kb.loop(lo, hi, name="row") as row:
        k, raw = table_row(kb, ind, row, idx.type.dtype, kb.i64(V))
        dst = b.mul(row, kb.i64(K))
        with b.if_else(b.icmp_unsigned("<", k, kb.i64(V)), likely=True) as (ok, bad):
            with ok:
                with kb.loop(0, K, name="k") as j:
                    byte = b.zext(kb.load(x, b.add(b.mul(k, kb.i64(half)), b.lshr(j, kb.i64(1))), I8, align=1), I32)
                    q = b.and_(b.lshr(byte, b.trunc(b.shl(b.and_(j, kb.i64(1)), kb.i64(2)), I32)),
                               ir.Constant(I32, 15))
                    blk = b.add(b.mul(k, kb.i64(nb)), b.udiv(j, kb.i64(block)))
                    if zp is None:
                        zq = ir.Constant(I32, 8)
                    else:  # zero points packed two per byte along each row's blocks
                        zrow = b.add(b.mul(k, kb.i64(-(-nb // 2))), b.lshr(b.udiv(j, kb.i64(block)), kb.i64(1)))
                        zbyte = b.zext(kb.load(z, zrow, I8, align=1), I32)
                        shift = b.trunc(b.shl(b.and_(b.udiv(j, kb.i64(block)), kb.i64(1)), kb.i64(2)), I32)
                        zq = b.and_(b.lshr(zbyte, shift), ir.Constant(I32, 15))
                    val = b.fmul(b.sitofp(b.sub(q, zq), F32), kb.load(sc, blk))
                    kb.store(val, y, b.add(dst, j))
            with bad:
                record_bad_index(kb, site, WRAPS, raw, kb.i64(V))
                with kb.loop(0, K, name="k") as j:
                    kb.store(kb.f32(0.0), y, b.add(dst, j))
    kb.finish()
    null = ir.Constant(PTR, None)
    args = [cg.ptr(data), cg.ptr(scales), null if zp is None else cg.ptr(zp), cg.ptr(idx), cg.ptr(out),
            kb.i64(site_id(instr.name)), kb.i64(n_idx)]
    if n_idx * K < SMALL:
        cg.call(kb.fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(kb.fn, args + [cg.tid, cg.nth])


__all__ = ["emit_matmul_nbits", "emit_gather_block_quantized", "pack_codes", "pack_scales", "pack_zero_points",
           "int8_path"]
