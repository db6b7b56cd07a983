"""Register-blocked GEMM micro-kernels (AVX-512) and a batched GEMM driver: emitters only (the
MatMul and Gemm kernels are registered in matmul.py, convolutions in conv.py).

C[M, N] = A[M, K] @ B[K, N] (+ bias[N]) (+ elementwise epilogue). B is read in panels of
NR = 16 * NV columns, either packed at compile time (Bp[N/NR][K][NR], zero-padded: each panel one
contiguous stream) or straight from a row-major runtime tensor (row k of a panel at k * ldb, the
last panel read with masked loads). A tile of MR rows x NR columns keeps its MR * NV accumulators
in zmm registers; each k step broadcasts MR scalars of A and issues MR * NV FMAs on NV vector loads
of B. With MR = 14 and NV = 2 that is 28 accumulators: all 32 zmm registers busy and enough
independent FMAs to cover their latency (215-250 GFLOP/s on one Zen 5 core).

The same tile serves convolutions (NHWC implicit GEMM, conv_emit.py): rows are output pixels, and a
row's A elements are read from the (padded) input at offsets the caller supplies per kernel tap.

A finished tile goes through its `Epilogue` before the store: + bias[col], then the instruction's
elementwise expression (the accumulator is leaf -1; other leaves are tensors read at the same
element, a row vector read at the column, or a scalar), evaluated on the vector in registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.ir as ir
import numpy as np

from .. import jit
from ..irutil import BF16, F32, I1, I16, I32, I64, PTR, VEC, KernelBuilder, vec
from . import vmath

MR = 14
NV = 2
NR = NV * VEC
#: Register tiles per instruction-set level (GLOW_CPU_ISA, jit.isa()): {vectors per row: rows}
#: (a tile is rows x 16 * nv columns) and each tile's speed relative to the best.
#: avx512 (32 zmm): rows * nv <= 28 accumulators; speeds measured on ResNet-50's layers on Zen 5.
#: avx2 (16 ymm): a 16-lane vector is two ymm registers, so 6 x 16 (12 ymm accumulators, two for
#: B, one broadcast of A: the classic AVX2 micro-kernel) or 3 x 32; 14 x 32 would spill.
#: generic (16 xmm, SSE2): a 16-lane vector is four xmm registers: 3 x 16.
TILES = {
    "avx512": ({1: 14, 2: 14, 3: 8, 4: 6}, {1: 0.75, 2: 0.95, 3: 0.88, 4: 1.0}),
    "avx2": ({1: 6, 2: 3}, {1: 1.0, 2: 0.8}),
    "generic": ({1: 3}, {1: 1.0}),
}


#: Widths over which a tile for a varying width (a sequence length) is chosen.
_ANY_WIDTH = range(16, 257, 16)


def choose_tile(cols: int, varies: bool = False) -> tuple[int, int]:
    """(rows, vectors) of the register tile for a result `cols` wide, for the instruction-set
    level the code is made for: the least time per column computed, counting the padding of
    the last panel. Where the width `varies` between calls (attention scores over the sequence
    length), the least mean time per column over widths 16-256, so that one tile, and one
    compiled kernel, serves every length (on AVX-512 14 x 32: by the speeds in TILES, 8 % more
    time than each width's best tile, on average over those widths).

    On AVX-512, wide results take 6 x 64 tiles: 24 accumulators, and each k step broadcasts only
    6 scalars of A for 24 FMAs, which measured 5-10 % faster than 14 x 32 on ResNet's layers and
    up to 60 % on its small 7 x 7 ones (fewer A streams, less row waste). 80 columns (ShuffleNet's
    groups) take 14 x 32 tiles instead (96 columns computed rather than 128); 10 columns 14 x 16.
    """
    rows, speed = TILES[jit.isa()]

    def cost(nv, cols=cols):
        width = 16 * nv
        return -(-cols // width) * width / speed[nv]

    if varies:
        nv = min(rows, key=lambda v: (sum(cost(v, w) / w for w in _ANY_WIDTH), -v))
    else:
        nv = min(rows, key=lambda v: (cost(v), -v))
    return rows[nv], nv


def pack_b(b: np.ndarray, nr: int = NR, transposed: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """B [K, N] (or, `transposed`, B^T [N, K]) -> [ceil(N/nr), K, nr], zero-padded: each panel
    contiguous for the micro-kernel. One strided copy (a transposed B is moved panel by panel,
    so a 25088 x 4096 fc layer packs in a fraction of a second); into `out` (zeros, that shape,
    e.g. `Codegen.weight_out`'s window onto the weights blob) when given."""
    b = np.asarray(b, np.float32)
    if not transposed and not b.flags.c_contiguous and b.T.flags.c_contiguous:
        b, transposed = b.T, True  # a folded Transpose of a weight: read its rows, not its columns
    n, k = b.shape if transposed else b.shape[::-1]
    full, rem = divmod(n, nr)
    np_ = full + (rem > 0)
    if out is None:
        out = np.zeros((np_, k, nr), np.float32)
    if transposed:  # b[p * nr + j, kk] -> out[p, kk, j]
        out[:full] = b[:full * nr].reshape(full, nr, k).transpose(0, 2, 1)
        if rem:
            out[full, :, :rem] = b[full * nr:].T
    else:  # b[kk, p * nr + j] -> out[p, kk, j]
        out[:full] = b[:, :full * nr].reshape(k, full, nr).transpose(1, 0, 2)
        if rem:
            out[full, :, :rem] = b[:, full * nr:]
    return out


def interleave_gated(gate: np.ndarray, partner: np.ndarray, nr: int) -> np.ndarray:
    """Two [K, N] matrices as one [K, P nr] for a gated product (GemmShape.gated): panel p's first
    nr/2 columns are the gate's columns [p nr/2, (p + 1) nr/2), its last nr/2 the partner's same
    columns, zeros past N. A tile then holds a gate value and its partner in one register tile."""
    k, n = gate.shape
    h = nr // 2
    p = -(-n // h)
    out = np.zeros((k, p, 2, h), np.float32)
    for j, m in enumerate((gate, partner)):
        cols = np.zeros((k, p * h), np.float32)
        cols[:, :n] = m
        out[:, :, j, :] = cols.reshape(k, p, h)
    return out.reshape(k, p * nr)


def packed_shape(k: int, n: int, nr: int = NR) -> tuple[int, int, int]:
    """The shape `pack_b` gives a [K, N] B."""
    return (-(-n // nr), k, nr)


def lane_mask(count: int) -> ir.Constant:
    """<16 x i1> with the first `count` lanes on."""
    return ir.Constant(ir.VectorType(I1, VEC), [1 if i < count else 0 for i in range(VEC)])


def masked_load(kb: KernelBuilder, ptr, mask):
    f = kb.intrinsic("llvm.masked.load.v16f32.p0", vec(), [PTR, I32, mask.type, vec()])
    return kb.b.call(f, [ptr, ir.Constant(I32, 4), mask, ir.Constant(vec(), [0.0] * VEC)])


def masked_store(kb: KernelBuilder, value, ptr, mask):
    f = kb.intrinsic("llvm.masked.store.v16f32.p0", ir.VoidType(), [vec(), PTR, I32, mask.type])
    kb.b.call(f, [value, ptr, ir.Constant(I32, 4), mask])


def load_vec(kb: KernelBuilder, ptr, mask=None):
    return kb.b.load(ptr, typ=vec(), align=4) if mask is None else masked_load(kb, ptr, mask)


def _vcall(kb, name, *args):
    return kb.b.call(kb.intrinsic(f"llvm.{name}.v16f32", vec(), [vec()] * len(args)), list(args))


# Where an epilogue leaf is read, relative to the tile's output element (row, col):
FULL, ROW, SCALAR = "full", "row", "scalar"  # C's own offset | the column | element 0


def leaf_kind(shape, out_rows: int, out_cols: int) -> str | None:
    """How a float32 operand of `shape` broadcasts against a [rows, cols] result, or None."""
    numel = int(np.prod(shape)) if len(shape) else 1
    if numel == 1:
        return SCALAR
    if numel == out_rows * out_cols and shape[-1] == out_cols:
        return FULL
    if numel == out_cols and shape[-1] == out_cols:
        return ROW
    return None


@dataclass
class Epilogue:
    """What happens to a finished tile before the store.

    bias: pointer to N floats (by column) or None. expr: an elementwise `Expr` whose leaf -1 is the
    accumulator; leaves: {arg: (pointer value, FULL | ROW | SCALAR)} for the tensors it reads.
    activation: "relu" | "clip" (with `clip` bounds) for callers without an expression.
    """

    bias: object = None
    expr: object = None
    leaves: dict = field(default_factory=dict)
    activation: str | None = None
    clip: tuple[float, float] = (0.0, 6.0)

    def apply(self, kb: KernelBuilder, v, col, c_off, mask=None):
        b = kb.b
        if self.bias is not None:
            v = b.fadd(v, load_vec(kb, kb.ptr(self.bias, col), mask))
        if self.expr is not None:
            from .elementwise import evaluate
            from .lanes import Lanes

            values = {}
            for arg, (ptr, kind) in self.leaves.items():
                if kind == SCALAR:
                    values[arg] = kb.splat(b.load(ptr, typ=F32, align=4))
                else:
                    values[arg] = load_vec(kb, kb.ptr(ptr, c_off if kind == FULL else col), mask)
            n = max(values, default=-1) + 1
            v = evaluate(Lanes(kb, VEC), self.expr, [values.get(k) for k in range(n)], v)
        if self.activation == "relu":
            v = _vcall(kb, "maxnum", v, ir.Constant(vec(), [0.0] * VEC))
        elif self.activation == "clip":
            v = _vcall(kb, "maxnum", v, ir.Constant(vec(), [self.clip[0]] * VEC))
            v = _vcall(kb, "minnum", v, ir.Constant(vec(), [self.clip[1]] * VEC))
        return v


def runtime_lane_mask(kb: KernelBuilder, count):
    """<16 x i1>: lanes i < count (an i64 value; <= 0 gives none, >= 16 all)."""
    b = kb.b
    iota = ir.Constant(ir.VectorType(I64, VEC), list(range(VEC)))
    return b.icmp_signed("<", iota, kb.splat(count))


def emit_tile(kb: KernelBuilder, mr: int, a_ptr, row_offsets: list, b_ptr, b_base, k_segments,
              c_ptr, c_offsets: list, col0, epilogue: Epilogue, *, n_valid=None, rows_valid=None,
              k_stride: int = NR, b_masked: bool = False, nv: int = NV, bf16: Bf16Tile | None = None,
              pairs: bool = False, gated: str | None = None):
    """One mr x (16 nv) tile of C.

    row_offsets[r]: i64 element offset of row r's A data; c_offsets[r]: of row r's C data.
    B element (k, j) of this panel is at b_base + k * k_stride + j (k_stride: an int or an i64 value).
    k_segments(emit): calls emit(a_off, b_k) inside the caller's loops for every k, where a_off is
    the element offset added to each row's A offset and b_k the k index into the panel.
    n_valid: columns of this panel that exist in C (None: all; an int, or an i64 value): the rest
    are not stored, and with `b_masked` not read from B either (B is a runtime tensor, not a
    zero-padded panel). rows_valid (an i64 value or None): rows r >= rows_valid are computed
    (the caller points them at a valid row) but not stored.
    One code path serves every tile, so a kernel compiles once, not once per edge case.
    bf16 (a `Bf16Tile`): B is bfloat16 pairs (`pack_b_bf16`) and A is rounded to bfloat16 first;
    k_segments is not used. `pairs`: A and B are bfloat16 pairs already (a convolution's rounded
    input): k_segments' offsets and k count 32-bit pairs. `gated` ("silu"): the panel's first nv/2
    vectors are a gate's columns and the rest their partners' (`interleave_gated`); C gets
    silu(gate) * partner, nv/2 vectors a row, and n_valid counts those columns.
    """
    b = kb.b
    live, masks = _column_masks(kb, n_valid, nv // 2 if gated else nv)
    if gated:
        stored, live = live, nv  # every vector of B's panel is read (zero-padded), half are stored
    zero = ir.Constant(vec(), [0.0] * VEC)
    accs = [[kb.var(vec(), zero) for _ in range(live)] for _ in range(mr)]
    if bf16 is not None:
        _bf16_accumulate(kb, mr, a_ptr, row_offsets, b_ptr, b_base, bf16, accs, k_stride)
        k_segments = None

    def body(a_off, b_k):
        base = b.add(b_base, b.mul(b_k, kb.i64(k_stride) if isinstance(k_stride, int) else k_stride))
        if pairs:
            _pairs_step(kb, mr, a_ptr, row_offsets, a_off, b_ptr, base, accs)
            return
        bvs = [load_vec(kb, kb.ptr(b_ptr, b.add(base, kb.i64(v * VEC))), masks[v] if b_masked else None)
               for v in range(live)]
        for r in range(mr):
            a = b.load(kb.ptr(a_ptr, b.add(row_offsets[r], a_off)), typ=F32, align=4)
            av = kb.splat(a)
            for v in range(live):
                slot = accs[r][v]
                b.store(kb.fma(av, bvs[v], b.load(slot)), slot)

    if k_segments is not None:
        k_segments(body)

    def store_vec(r, v, mask):
        col = b.add(col0, kb.i64(v * VEC))
        off = b.add(c_offsets[r], col)
        acc = b.load(accs[r][v])
        if gated:  # (g * sigmoid(g)) * u, as the graph's Sigmoid, Mul and Mul compute it
            acc = b.fmul(b.fmul(acc, vmath.emit_unary(kb, "Sigmoid", acc)), b.load(accs[r][v + nv // 2]))
        val = epilogue.apply(kb, acc, col, off, mask)
        if mask is None:
            b.store(val, kb.ptr(c_ptr, off), align=4)
        else:
            masked_store(kb, val, kb.ptr(c_ptr, off), mask)

    def store_row(r):
        for v in range(stored if gated else live):
            if masks[v] is None or not isinstance(n_valid, ir.Value):
                store_vec(r, v, masks[v])
                continue
            # A column count known only at run time masks every panel's stores, yet only the
            # last panel is partial: whole vectors branch to a plain store (a masked one costs
            # more, on AVX-512 too: `lanes.lanes_loop`).
            whole = b.icmp_signed(">=", b.sub(n_valid, kb.i64(v * VEC)), kb.i64(VEC))
            with b.if_else(whole) as (then, otherwise):
                with then:
                    store_vec(r, v, None)
                with otherwise:
                    store_vec(r, v, masks[v])

    for r in range(mr):
        if rows_valid is None or r == 0:
            store_row(r)
        else:
            with b.if_then(b.icmp_signed("<", kb.i64(r), rows_valid)):
                store_row(r)


def _column_masks(kb: KernelBuilder, n_valid, nv: int) -> tuple[int, list]:
    """(vectors to compute, their store masks) of a tile nv vectors wide with `n_valid` columns
    (None: all; an int; an i64 value)."""
    if n_valid is None:
        return nv, [None] * nv
    if isinstance(n_valid, int):
        live = min(nv, -(-n_valid // VEC))
        return live, [None if (v + 1) * VEC <= n_valid else lane_mask(n_valid - v * VEC) for v in range(live)]
    return nv, [runtime_lane_mask(kb, kb.b.sub(n_valid, kb.i64(v * VEC))) for v in range(nv)]


def split_range(kb: KernelBuilder, total, tid, nthreads):
    """[lo, hi) of `total` items for thread `tid` of `nthreads` (i64 values)."""
    b = kb.b
    t = kb.i64(total) if isinstance(total, int) else total
    lo = b.sdiv(b.mul(t, tid), nthreads)
    hi = b.sdiv(b.mul(t, b.add(tid, kb.i64(1))), nthreads)
    return lo, hi


@dataclass(frozen=True)
class GemmShape:
    """C[batch][M, N] = A[batch][M, K] @ B[batch][K, N], every operand row-major.

    batch: the output batch dims; a_batch / b_batch: per output batch dim, the stride of A / B (0
    where broadcast): in elements, except for packed B, in whole packed batches. packed: B is
    packed panels (per batch, `pack_b` layout), else a row-major [K, N] runtime tensor per batch
    with row stride `ldb`.
    """

    M: int
    N: int
    K: int
    batch: tuple = ()
    a_batch: tuple = ()
    b_batch: tuple = ()
    lda: int | None = None
    ldb: int | None = None
    packed: bool = True
    mr: int = MR  # register tile (see choose_tile)
    nv: int = NV
    m_varies: bool = False  # M or N differs between calls (glow.specialize.varying): the code
    n_varies: bool = False  # then does not depend on its value (whole row tiles, masked panels)
    bf16: bool = False  # packed B holds bfloat16 pairs (pack_b_bf16); A is rounded per tile
    #: "silu": B is two matrices side by side per panel (`interleave_gated`), C = silu(A @ B1) * (A @ B2)
    #: with N its columns; a panel's tile then makes half as many columns of C as B's panel has
    gated: str | None = None

    @property
    def nr(self) -> int:
        return self.nv * VEC

    @property
    def width(self) -> int:
        """Columns of C one panel of B makes."""
        return self.nr // 2 if self.gated else self.nr

    @property
    def panels(self) -> int:
        return -(-self.N // self.width)

    @property
    def batches(self) -> int:
        return int(np.prod(self.batch, dtype=np.int64)) if self.batch else 1

    @property
    def flops(self) -> int:
        return 2 * self.batches * self.M * self.N * self.K


def packed_batch_stride(s: GemmShape) -> int:
    """Floats per batch of packed B (bfloat16 B: 32-bit slots, each a pair)."""
    return s.panels * _k_steps(s) * s.nr


def _k_steps(s: GemmShape) -> int:
    """Rows of a packed panel: K, or K's pairs for bfloat16."""
    return -(-s.K // 2) if s.bf16 else s.K


def kernel_factory(module: ir.Module, name: str):
    """`make_kb(arg_types) -> KernelBuilder` for a public function `name` (tests, benchmarks)."""
    return lambda arg_types: KernelBuilder(module, name, arg_types)


#: int64 fields of a GEMM kernel's geometry table (`gemm_table`), in this order; then, per output
#: batch dim, its size and A's and B's strides (B's in floats of packed panels where B is packed).
GEMM_FIELDS = ("M", "N", "K", "lda", "ldb", "tiles", "per_batch", "items", "c_batch", "panel_stride")


def _tile_rows(s: GemmShape) -> int:
    return s.mr if s.m_varies else min(s.mr, s.M)


def gemm_code_key(s: GemmShape) -> tuple:
    """What a GEMM kernel's code depends on; GEMMs with equal keys share one function (sizes and
    strides come from the table at run time)."""
    return (_tile_rows(s), s.nv, s.packed, len(s.batch), not s.n_varies and s.N % s.width == 0, s.bf16, s.gated)


def gemm_table(s: GemmShape) -> np.ndarray:
    """The int64 geometry table of `s` (GEMM_FIELDS, then the batch dims)."""
    npanels = s.panels
    tiles = -(-s.M // _tile_rows(s))
    unit = packed_batch_stride(s) if s.packed else 1
    head = [s.M, s.N, s.K, s.K if s.lda is None else s.lda, s.N if s.ldb is None else s.ldb, tiles,
            npanels * tiles, s.batches * npanels * tiles, s.M * s.N, _k_steps(s) * s.nr if s.packed else s.nr]
    dims = [x for d in range(len(s.batch)) for x in (s.batch[d], s.a_batch[d], s.b_batch[d] * unit)]
    return np.array(head + dims, np.int64)


def emit_gemm(make_kb, s: GemmShape, epilogue=None, extra_args: int = 0) -> ir.Function:
    """`void (float* A, float* B, float* C, float* bias, ptr extra..., i64* table, i64 tid,
    i64 nthreads)`, the table being `gemm_table(s)`: the code depends on `gemm_code_key(s)` only.

    make_kb(arg_types) -> KernelBuilder makes the function (`cg.function`, or `kernel_factory`).
    `epilogue(kb, bias, extras) -> Epilogue` builds the tile epilogue from the kernel's arguments.
    Work items are (batch, panel, row tile), batch-major then panel-major, so a thread's share
    keeps one B panel hot in L2 while it streams row tiles of A; threads take equal contiguous
    shares of the items.
    """
    kb = make_kb([PTR] * (5 + extra_args) + [I64, I64])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    A, B, C, bias = kb.args[:4]
    extras = kb.args[4:4 + extra_args]
    geo, tid, nth = kb.args[4 + extra_args:]
    b = kb.b
    epi = epilogue(kb, bias, extras) if epilogue is not None else Epilogue()
    g = {name: kb.load(geo, i, I64, align=8) for i, name in enumerate(GEMM_FIELDS)}
    dims = [[kb.load(geo, len(GEMM_FIELDS) + 3 * d + j, I64, align=8) for j in range(3)]
            for d in range(len(s.batch))]
    mr = _tile_rows(s)
    lo, hi = split_range(kb, g["items"], tid, nth)
    tile16 = None
    if s.bf16:
        tile16 = Bf16Tile(bf16_buffer(kb), g["K"], prefetch=s.packed and mr == 1)

    with kb.loop(lo, hi, name="item") as item:
        bi = b.sdiv(item, g["per_batch"])
        rem = b.sub(item, b.mul(bi, g["per_batch"]))
        panel = b.sdiv(rem, g["tiles"])
        t = b.sub(rem, b.mul(panel, g["tiles"]))
        a_base, b_base = _batch_offsets(kb, bi, dims)
        c_base = b.mul(bi, g["c_batch"])
        b_base = b.add(b_base, b.mul(panel, g["panel_stride"]))
        col0 = b.mul(panel, kb.i64(s.width))
        i0 = b.mul(t, kb.i64(mr))
        last = b.sub(g["M"], kb.i64(1))
        # rows past the end recompute the last row; they are not stored
        idx = [i0] + [b.select(b.icmp_signed("<", b.add(i0, kb.i64(r)), last), b.add(i0, kb.i64(r)), last)
                      for r in range(1, mr)]
        rows = [b.add(a_base, b.mul(i, g["lda"])) for i in idx]
        crow = [b.add(c_base, b.mul(i, g["N"])) for i in idx]
        n_valid = None if gemm_code_key(s)[4] else b.sub(g["N"], col0)

        next_panel = _next_panel_lines(kb, s, mr, g, b_base, t)

        def segs(emit):
            with kb.loop(0, g["K"], name="k") as k:
                if s.packed and mr == 1:  # a matrix-vector product streams B: ask for it ahead
                    ahead = b.add(b_base, b.add(b.mul(k, kb.i64(s.nr)), kb.i64(prefetch_distance() // 4)))
                    for j in range(s.nv):
                        prefetch(kb, kb.ptr(B, b.add(ahead, kb.i64(j * VEC))))
                elif next_panel is not None:
                    base, step = next_panel
                    prefetch(kb, kb.ptr(B, b.add(base, b.mul(k, step))), locality=2)
                emit(k, k)

        emit_tile(kb, mr, A, rows, B, b_base, segs, C, crow, col0, epi, n_valid=n_valid,
                  rows_valid=b.sub(g["M"], i0), k_stride=s.nr if s.packed else g["ldb"],
                  b_masked=not s.packed, nv=s.nv, bf16=tile16, gated=s.gated)
    return kb.finish()


def prefetch_distance() -> int:
    """Bytes ahead of a streamed operand (the weights of a matrix-vector product) that a kernel
    asks for. 2 KiB on Intel: one Sapphire Rapids core read an int4 LM head at 9.4 GB/s without
    it, 27 with it. AMD Zen cores want more in flight: on a Zen 3 (EPYC, 2026-12-07) a float32
    matrix-vector product of 512 x 32,000 read 11.8 GB/s at 2 KiB, 12.5 at 8, 13.5 at 16 and 13.3
    at 32 KiB, one of 896 x 4864 20.7 -> 27.9 GB/s, and a Llama-shaped fp32 decoder went from
    53.0 to 57.2 tokens/s (interleaved, medians of 4); the int4 kernel gained 2-4 %."""
    return 16384 if jit.cpu_name().startswith("znver") else 2048


def prefetch(kb, ptr, locality: int = 3):
    """Ask for the cache line at `ptr` (a read; `locality` 3 keeps it in every level, 2 in L2 and
    beyond). One core streaming weights alone had its misses served one after another: an int4 LM
    head read at 9.4 GB/s, 27 with this 2 KiB ahead; hardware prefetchers stop at page boundaries."""
    f = kb.intrinsic("llvm.prefetch.p0", ir.VoidType(), [PTR, ir.IntType(32), ir.IntType(32), ir.IntType(32)])
    i32 = ir.IntType(32)
    kb.b.call(f, [ptr, ir.Constant(i32, 0), ir.Constant(i32, locality), ir.Constant(i32, 1)])


def _next_panel_lines(kb, s: GemmShape, mr: int, g: dict, b_base, t):
    """(base, step): row tile t of a packed panel asks for the next panel's lines [t K, (t + 1) K),
    one per k step, at base + k * step (floats), so that the panel's first nv tiles bring all of
    it (K nr / 16 lines) into L2 while they compute; later tiles get step 0 (one line, cached).
    Without this, a prompt-sized product (M = 64, 11 row tiles per panel) waited on memory for
    each panel's first tile: Qwen's 64 x 896 x 4864 took 2.8 ms on one Zen 5 core, 1.9 on two
    (0.4 ms of its 17 MB of weights at the two cores' bandwidth). None where B is not packed
    weights, or for a matrix-vector product (its own prefetch streams ahead)."""
    if not s.packed or mr == 1 or s.bf16:
        return None
    b = kb.b
    step = b.select(b.icmp_signed("<", t, kb.i64(s.nr // VEC)), kb.i64(VEC), kb.i64(0))
    return b.add(b.add(b_base, g["panel_stride"]), b.mul(b.mul(t, g["K"]), step)), step


def _batch_offsets(kb, bi, dims):
    """Element offsets of A's and B's batch `bi` (flat index over the output batch dims; dims:
    per dim, [size, A's stride, B's stride] as i64 values)."""
    b = kb.b
    a_off, b_off = kb.i64(0), kb.i64(0)
    for size, sa, sb in reversed(dims):
        nxt = b.sdiv(bi, size)
        idx = b.sub(bi, b.mul(nxt, size))
        a_off = b.add(a_off, b.mul(idx, sa))
        b_off = b.add(b_off, b.mul(idx, sb))
        bi = nxt
    return a_off, b_off


# -- bfloat16 operands, float32 accumulators (precision="bf16") ------------------------------------
# B is packed at compile time as bfloat16 pairs: a panel's row kk holds, per column, the values of
# k = 2kk (low half) and 2kk + 1 (high half) in one 32-bit slot, so one 64-byte load is 16 columns
# x 2 k. A tile first rounds its A rows (mr x K floats, read as for float32) into a stack buffer of
# bfloat16, k-contiguous; then each k pair broadcasts a row's 32-bit pair and issues one
# vdpbf16ps per B vector: twice the multiply-adds of an FMA for the same registers. Rounding A once
# per tile, not once per GEMM, costs about 1 / (8 nv) of the tile's arithmetic and needs no buffer
# planned in memory; repeated per column panel, it is still cheap next to the products.

#: Bytes of the stack buffer a bf16 GEMM rounds a tile's A rows into: a GEMM whose tile (mr rows x
#: K, K even) needs more stays float32. 224 KiB: a 14-row tile of K 8192. (A convolution rounds
#: its whole input once instead: conv_emit.emit_bf16_input.)
BF16_TILE_BYTES = 224 * 1024


def bf16_fits(rows: int, k: int) -> bool:
    """Whether a tile of `rows` rows of depth `k` fits the bf16 buffer."""
    return rows * (k + k % 2) * 2 <= BF16_TILE_BYTES


def to_bf16_bits(x) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16) as vcvtneps2bf16 rounds: to nearest even, a NaN stays a
    (quiet) NaN, and zeros and denormals become a zero of the same sign."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    exp = u & 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    sign = (u >> 16).astype(np.uint16) & 0x8000
    nan = (exp == 0x7F800000) & ((u & 0x007FFFFF) != 0)
    out = np.where(exp == 0, sign, rounded)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), out).astype(np.uint16)


def from_bf16_bits(h) -> np.ndarray:
    return (np.asarray(h, np.uint16).astype(np.uint32) << 16).view(np.float32)


def packed_shape_bf16(k: int, n: int, nr: int = NR) -> tuple[int, int, int]:
    """The shape (32-bit slots) `pack_b_bf16` gives a [K, N] B."""
    return (-(-n // nr), -(-k // 2), nr)


def pack_b_bf16(b: np.ndarray, nr: int = NR, transposed: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """B [K, N] (or B^T) -> [ceil(N/nr), ceil(K/2), nr] float32 slots, each holding the bfloat16
    values of k = 2kk (low half) and 2kk + 1 (high half) of one column, zero-padded; into `out`
    when given."""
    p = pack_b(b, nr, transposed)
    panels, k, _ = p.shape
    if k % 2:
        p = np.concatenate([p, np.zeros((panels, 1, nr), np.float32)], axis=1)
    bits = to_bf16_bits(p).reshape(panels, -1, 2, nr).transpose(0, 1, 3, 2)  # [panel, kk, col, half]
    slots = np.ascontiguousarray(bits).view(np.float32).reshape(panels, -1, nr)
    if out is None:
        return slots
    out[...] = slots
    return out


@dataclass
class Bf16Tile:
    """A bf16 GEMM tile's A rows, each `k` (an i64 value) contiguous floats from its row offset,
    rounded into `buffer` (`bf16_buffer(kb)`). `prefetch`: B is streamed once (a matrix-vector
    product): ask for it ahead."""

    buffer: object
    k: object
    prefetch: bool = False


def bf16_buffer(kb: KernelBuilder):
    """The kernel's stack buffer for a tile's A rows in bfloat16 (BF16_TILE_BYTES, 64-aligned)."""
    buf = kb.array(I16, BF16_TILE_BYTES // 2)
    buf.align = 64
    # untyped (llvmlite keeps an alloca's element type): rows are written 16 values at a time and
    # read in pairs
    return kb.b.gep(buf, [kb.i64(0)], source_etype=I16) if buf.type.is_opaque else \
        kb.b.inttoptr(kb.b.ptrtoint(buf, I64), PTR)


def _bf16_accumulate(kb: KernelBuilder, mr: int, a_ptr, row_offsets, b_ptr, b_base, t: Bf16Tile, accs, k_stride):
    b = kb.b
    kp = b.and_(b.add(t.k, kb.i64(1)), kb.i64(-2))  # K rounded up to even: an odd K's last pair ends in 0
    pairs = b.lshr(kp, kb.i64(1))
    for r in range(mr):
        round_run(kb, a_ptr, row_offsets[r], t.buffer, b.mul(kb.i64(r), kp), t.k, kp)
    rows = [b.mul(kb.i64(r), pairs) for r in range(mr)]  # in 32-bit pairs
    with kb.loop(0, pairs, name="kk") as kk:
        base = b.add(b_base, b.mul(kk, kb.i64(k_stride)))
        if t.prefetch:
            for j in range(len(accs[0])):
                prefetch(kb, kb.ptr(b_ptr, b.add(base, kb.i64(prefetch_distance() // 4 + j * VEC))))
        _pairs_step(kb, mr, t.buffer, rows, kk, b_ptr, base, accs)


def _pairs_step(kb: KernelBuilder, mr: int, a_ptr, row_offsets, a_off, b_ptr, base, accs):
    """One k pair of a tile whose A rows are bfloat16 pairs already (32-bit units)."""
    b = kb.b
    pair_vec = ir.VectorType(I32, VEC)
    bvs = [b.load(kb.ptr(b_ptr, b.add(base, kb.i64(v * VEC))), typ=pair_vec, align=4) for v in range(len(accs[0]))]
    for r in range(mr):
        a = kb.splat(b.load(kb.ptr(a_ptr, b.add(row_offsets[r], a_off), I32), typ=I32, align=4))
        for v, bv in enumerate(bvs):
            slot = accs[r][v]
            b.store(_dot_pairs(kb, b.load(slot), a, bv), slot)


def _dot_pairs(kb: KernelBuilder, acc, a, bv):
    """acc + a.hi * b.hi + a.lo * b.lo per 32-bit lane of bfloat16 pairs (vdpbf16ps: the high
    product first, each sum rounded to float32; each product is exact in float32, so two FMAs
    give the same bits where the instruction is missing)."""
    b = kb.b
    if jit.bf16_native():
        t = ir.VectorType(BF16, 2 * VEC)
        f = kb.intrinsic("llvm.x86.avx512bf16.dpbf16ps.512", vec(), [vec(), t, t])
        return b.call(f, [acc, b.bitcast(a, t), b.bitcast(bv, t)])
    high = ir.Constant(ir.VectorType(I32, VEC), [-65536] * VEC)
    sixteen = ir.Constant(ir.VectorType(I32, VEC), [16] * VEC)

    def halves(x):
        return b.bitcast(b.and_(x, high), vec()), b.bitcast(b.shl(x, sixteen), vec())

    (ah, al), (bh, bl) = halves(a), halves(bv)
    return kb.fma(al, bl, kb.fma(ah, bh, acc))


def round_run(kb: KernelBuilder, src, src_start, dst, dst_start, count, width):
    """dst[dst_start + j] = bfloat16(src[src_start + j]) for j < count, and 0 for count <= j <
    width (count and width are i64 values; width is count or count + 1: an odd run padded to
    whole pairs), 16 at a time, the last 16 masked."""
    b = kb.b
    whole = b.and_(count, kb.i64(-VEC))
    with kb.loop(0, whole, step=VEC, name="cv") as j:
        x = b.load(kb.ptr(src, b.add(src_start, j)), typ=vec(), align=4)
        b.store(round_to_bf16(kb, x), kb.ptr(dst, b.add(dst_start, j), I16), align=2)
    with b.if_then(b.icmp_signed(">", width, whole)):
        x = masked_load(kb, kb.ptr(src, b.add(src_start, whole)), runtime_lane_mask(kb, b.sub(count, whole)))
        h = round_to_bf16(kb, x)  # lanes past count load 0.0, which rounds to 0
        mask = runtime_lane_mask(kb, b.sub(width, whole))
        f = kb.intrinsic(f"llvm.masked.store.v{VEC}i16.p0", ir.VoidType(), [h.type, PTR, I32, mask.type])
        b.call(f, [h, kb.ptr(dst, b.add(dst_start, whole), I16), ir.Constant(I32, 2), mask])


def round_to_bf16(kb: KernelBuilder, x):
    """<16 x float> -> <16 x i16> bfloat16 bits, rounded as `to_bf16_bits` says."""
    b = kb.b
    i16v = ir.VectorType(I16, VEC)
    if jit.bf16_native():
        return b.bitcast(b.fptrunc(x, ir.VectorType(BF16, VEC)), i16v)
    iv = ir.VectorType(I32, VEC)

    def c(n):
        return ir.Constant(iv, [n] * VEC)

    u = b.bitcast(x, iv)
    exp = b.and_(u, c(0x7F800000))
    rounded = b.lshr(b.add(u, b.add(c(0x7FFF), b.and_(b.lshr(u, c(16)), c(1)))), c(16))
    sign = b.and_(b.lshr(u, c(16)), c(0x8000))
    nan = b.and_(b.icmp_unsigned("==", exp, c(0x7F800000)), b.icmp_unsigned("!=", b.and_(u, c(0x7FFFFF)), c(0)))
    out = b.select(b.icmp_unsigned("==", exp, c(0)), sign, rounded)
    out = b.select(nan, b.or_(b.lshr(u, c(16)), c(0x40)), out)
    return b.trunc(out, i16v)
