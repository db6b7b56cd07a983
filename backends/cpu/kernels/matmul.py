"""MatMul and Gemm kernels (registered here) on the register-blocked GEMM emitter of gemm_emit.py.

* A constant B is packed into NR-column panels at compile time (scaled by Gemm's alpha, transposed
  for transB), so the kernel streams it; a runtime B is read in place, row by row.
* Batch dims broadcast NumPy-style. When B has no batch, A's batch rows fold into M: one GEMM.
* Gemm's C (times beta) is a bias added in the tile when it is a constant row or scalar; a C of
  the result's shape is read by the epilogue like a residual.
* float32 runs on the micro-kernel; other element types (float64, float16, integers) on a plain
  loop nest that accumulates in the reference's type (float32 for float16; integers wrap).
"""

from __future__ import annotations

from dataclasses import replace

import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.ir.instr import Expr
from glow.specialize import varying

from .. import gated, jit
from ..codegen import cpu_kernel, has_ltype, ltype, weight_data
from ..irutil import F32, I64, PTR
from . import epilogue as ep
from .gemm_emit import (
    TILES,
    GemmShape,
    bf16_fits,
    choose_tile,
    emit_gemm,
    gemm_code_key,
    gemm_table,
    interleave_gated,
    pack_b,
    pack_b_bf16,
    packed_shape,
    packed_shape_bf16,
)

MAX_PACKED_BYTES = 1 << 31  # constant B beyond this is read in place rather than duplicated


def _static_f32(*values) -> bool:
    return all(v is not None and isinstance(v.type, dt.TensorType) and v.type.is_static
               and v.type.dtype == dt.float32 and v.type.numel > 0 for v in values)


def _strides(shape, unit: int = 1) -> list[int]:
    out, acc = [], unit
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def matmul_shape(a_shape, b_shape, packed: bool) -> tuple[GemmShape, bool]:
    """The GemmShape of A @ B (NumPy semantics); and whether B is one matrix for every batch."""
    a = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b = tuple(b_shape) + (1,) if len(b_shape) == 1 else tuple(b_shape)
    M, K, N = a[-2], a[-1], b[-1]
    # a size a symbolic input dim takes gets code for any size (one kernel for every length)
    n_varies = not packed and varying(N)
    mr, nv = choose_tile(N, n_varies)
    if all(d == 1 for d in b[:-2]):  # one B: A's batch rows are just more rows
        rows = int(np.prod(a[:-1]))
        return GemmShape(rows, N, K, packed=packed, mr=mr, nv=nv, m_varies=varying(rows), n_varies=n_varies), True
    rank = max(len(a), len(b)) - 2
    ab, bb = (1,) * (rank - len(a) + 2) + a[:-2], (1,) * (rank - len(b) + 2) + b[:-2]
    batch = tuple(max(x, y) for x, y in zip(ab, bb))
    sa, sb = _strides(ab, M * K), _strides(bb, 1 if packed else K * N)
    a_b = tuple(0 if ab[i] == 1 else sa[i] for i in range(rank))
    b_b = tuple(0 if bb[i] == 1 else sb[i] for i in range(rank))
    return GemmShape(M, N, K, batch, a_b, b_b, packed=packed, mr=mr, nv=nv, m_varies=varying(M),
                     n_varies=n_varies), False


def _packable(b) -> bool:
    return b.is_constant and b.type.nbytes <= MAX_PACKED_BYTES


def _run_gemm(cg, instr, s: GemmShape, a, b_ptr, bias_ptr, plan, name):
    out = instr.outputs[0]
    kplan = plan if plan is not None else ep.NONE
    operands = [a, instr.inputs[1], out, *(o for _, o, _ in kplan.leaves)]
    # The kernel reads its sizes and strides from a table: GEMMs of one code class share it.
    key = ("gemm", gemm_code_key(s), bias_ptr is not None, kplan.key, ep.alias_key(operands))
    fn = cg.shared(key, lambda: emit_gemm(lambda types: cg.function(name, types), s,
                                          kplan.builder(bias_ptr is not None), len(kplan.leaves)))
    bias = bias_ptr if bias_ptr is not None else ir.Constant(PTR, None)
    small = s.flops < 1 << 18  # one chunk: splitting costs more than the work (as for Conv)
    args = [cg.ptr(a), b_ptr, cg.ptr(out), bias, *kplan.args(cg), cg.weight(gemm_table(s))]
    if small:
        cg.call(fn, args + [cg.entry.i64(0), cg.entry.i64(1)], single=True)
    else:
        cg.call(fn, args + [cg.tid, cg.nth])
    if plan is None:
        ep.fallback(cg, instr)


# -- MatMul ------------------------------------------------------------------------------------

def _matmul_f32(node) -> bool:
    a, b = node.inputs[:2]
    return _static_f32(a, b, node.outputs[0])


@cpu_kernel("MatMul", supports=_matmul_f32, priority=10, epilogue=True)
def emit_matmul(cg, instr):
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    data = weight_data(b)
    packed = data is not None and b.type.nbytes <= MAX_PACKED_BYTES
    s, single = matmul_shape(a.type.shape, b.type.shape, packed)
    if packed:
        s = with_precision(s)
        bp = packed_matmul_b(cg, data, s, single)
    else:
        bp = cg.ptr(b)
    rows = int(np.prod(out.type.shape[:-1])) if len(out.type.shape) > 1 else 1
    cols = out.type.shape[-1] if len(b.type.shape) > 1 else 1
    _run_gemm(cg, instr, s, a, bp, None, ep.plan(instr, rows, cols), "MatMul")


def packed_matmul_b(cg, data: np.ndarray, s: GemmShape, single: bool):
    """Pointer to MatMul's constant B `data` packed into s.nr-column panels (`pack_b`), made once
    per process for every program that packs it alike (Codegen.weight_out); the Gather of a
    tied embedding table reads its rows from the same copy (index.py)."""
    mats = np.asarray(data, np.float32).reshape((-1, s.K, s.N))
    one = (packed_shape_bf16 if s.bf16 else packed_shape)(s.K, s.N, s.nr)
    pack = pack_b_bf16 if s.bf16 else pack_b

    def fill(panels):
        for m, o in zip(mats[:1] if single else mats, panels):
            pack(m, s.nr, out=o)

    return cg.weight_out((1 if single else len(mats), *one), np.float32, fill, source=data,
                         how=("matmul", s.K, s.N, s.nr, single, s.bf16))


# -- GatedMatMul (gated.py): silu(A @ Wg) * (A @ Wu) in one GEMM -------------------------------------

def _gated_ok(node) -> bool:
    a, wg, wu = node.inputs
    return (_static_f32(a, wg, wu, node.outputs[0]) and wg.is_constant and wu.is_constant
            and 2 * wg.type.nbytes <= MAX_PACKED_BYTES)


def gated_tile() -> tuple[int, int]:
    """(rows, vectors) of a gated product's register tile: the widest even vector count the
    level's tiles list (half the vectors are gate columns, half their partners'): 6 x 64 on
    AVX-512, 3 x 32 on AVX2; 1 x 32 where no even width is listed."""
    rows, _ = TILES[jit.isa()]
    even = [v for v in rows if v % 2 == 0]
    return (rows[max(even)], max(even)) if even else (1, 2)


@cpu_kernel(gated.NAME, domain=gated.DOMAIN, supports=_gated_ok)
def emit_gated_matmul(cg, instr):
    a, wg, wu = instr.inputs
    K, N = wg.type.shape
    rows = int(np.prod(a.type.shape[:-1]))
    mr, nv = gated_tile()
    s = with_precision(GemmShape(rows, N, K, packed=True, mr=mr, nv=nv, m_varies=varying(rows), gated="silu"))
    g, u = weight_data(wg), weight_data(wu)
    pack = pack_b_bf16 if s.bf16 else pack_b
    bp = cg.weight_out(((packed_shape_bf16 if s.bf16 else packed_shape)(K, s.panels * s.nr, s.nr)), np.float32,
                       lambda panels: pack(interleave_gated(g, u, s.nr), s.nr, out=panels),
                       source=g, how=("gated", K, N, s.nr, s.bf16), partners=(u,))
    _run_gemm(cg, instr, s, a, bp, None, ep.NONE, "GatedMatMul")


def with_precision(s: GemmShape) -> GemmShape:
    """`s` (B packed) with bfloat16 operands where the compile asked for them (jit.bf16) and a
    tile's A rows fit the kernel's buffer."""
    return replace(s, bf16=True) if jit.bf16() and bf16_fits(min(s.mr, s.M), s.K) else s


def _matmul_generic(node) -> bool:
    vals = (*node.inputs[:2], node.outputs[0])
    return all(isinstance(v.type, dt.TensorType) and v.type.is_static and has_ltype(v.type.dtype)
               for v in vals) and node.outputs[0].type.dtype != dt.bool_


@cpu_kernel("MatMul", supports=_matmul_generic)
def emit_matmul_generic(cg, instr):
    """A plain i-j-k loop nest for element types the micro-kernel does not handle; 16-bit floats
    accumulate in float32 and round once, integers wrap, as the reference does. The sizes and
    batch strides are read from a table, so MatMuls of one element type and batch rank share
    one kernel (ResNet-50 lowered to the floor: 56 float64 MatMuls, 20 shapes)."""
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    s, _ = matmul_shape(a.type.shape, b.type.shape, packed=False)
    rank = len(s.batch)
    table = [s.batches, s.M, s.N, s.K] + [x for dim in zip(s.batch, s.a_batch, s.b_batch) for x in dim]
    args = [cg.ptr(a), cg.ptr(b), cg.ptr(out), cg.weight(np.array(table, np.int64))]
    d = out.type.dtype
    cg.call_memo(("matmul-generic", d, rank), lambda: _matmul_loops(cg, d, rank), args, single=True)


def _matmul_loops(cg, d, rank: int):
    from .gemm_emit import _batch_offsets
    from .lanes import Lanes, compute_type

    st = ltype(d)
    half = d in (dt.float16, dt.bfloat16)
    wide = F32 if half else compute_type(d)
    is_float = isinstance(wide, (ir.FloatType, ir.DoubleType, ir.HalfType))
    kb = cg.function("MatMul", [PTR, PTR, PTR, PTR])
    kb.fn.attributes.add("noinline")  # one call each: inlining only slows LLVM down
    A, B, C, geo = kb.args
    bld = kb.b
    lanes = Lanes(kb, 1)
    batches, M, N, K = (kb.load(geo, k, I64, align=8) for k in range(4))
    dims = [[kb.load(geo, 4 + 3 * r + j, I64, align=8) for j in range(3)] for r in range(rank)]

    def load(ptr, idx):
        v = lanes.from_storage(kb.load(ptr, idx, st, d.itemsize), d)
        return bld.fpext(v, wide) if d == dt.float16 else v

    with kb.loop(0, batches, name="batch") as bi:
        a0, b0 = _batch_offsets(kb, bi, dims) if rank else (kb.i64(0), kb.i64(0))
        c0 = bld.mul(bi, bld.mul(M, N))
        with kb.loop(0, M, name="i") as i:
            with kb.loop(0, N, name="j") as j:
                acc = kb.var(wide, ir.Constant(wide, 0.0 if is_float else 0))
                with kb.loop(0, K, name="k") as k:
                    x = load(A, bld.add(a0, bld.add(bld.mul(i, K), k)))
                    y = load(B, bld.add(b0, bld.add(bld.mul(k, N), j)))
                    cur = bld.load(acc)
                    bld.store(bld.fadd(cur, bld.fmul(x, y)) if is_float else bld.add(cur, bld.mul(x, y)), acc)
                r = bld.load(acc)
                if d == dt.float16:
                    r = bld.fptrunc(r, st)
                kb.store(lanes.to_storage(r, d), C, bld.add(c0, bld.add(bld.mul(i, N), j)), st, d.itemsize)
    return kb.finish()


# -- Gemm --------------------------------------------------------------------------------------

def _gemm_c_kind(node) -> str | None:
    """How Gemm's C enters: None (absent or beta 0), "bias" (constant row/scalar) or "full"."""
    if len(node.inputs) < 3 or node.inputs[2] is None or node.attrs.get("beta", 1.0) == 0.0:
        return None
    c, out = node.inputs[2], node.outputs[0]
    M, N = out.type.shape
    shape = tuple(c.type.shape)
    if c.is_constant and int(np.prod(shape)) in (1, N) and (len(shape) == 0 or shape[-1] in (1, N)) \
            and (len(shape) < 2 or shape[0] == 1):
        return "bias"
    if shape == (M, N) and node.attrs.get("beta", 1.0) == 1.0:
        return "full"
    return "unsupported"


def _gemm_f32(node) -> bool:
    a, b = node.inputs[:2]
    if not _static_f32(a, b, node.outputs[0]) or node.attrs.get("transA", 0):
        return False
    if len(node.inputs) > 2 and node.inputs[2] is not None and not _static_f32(node.inputs[2]):
        return False
    if not _packable(b) and (node.attrs.get("transB", 0) or node.attrs.get("alpha", 1.0) != 1.0):
        return False
    return _gemm_c_kind(node) != "unsupported"


@cpu_kernel("Gemm", supports=_gemm_f32, priority=10, epilogue=True)
def emit_gemm_op(cg, instr):
    a, b = instr.inputs[:2]
    out = instr.outputs[0]
    M, N = out.type.shape
    K = a.type.shape[1]
    alpha, beta = instr.attrs.get("alpha", 1.0), instr.attrs.get("beta", 1.0)
    node_c = _gemm_c_kind(_InstrView(instr))
    data = weight_data(b)
    packed = data is not None and b.type.nbytes <= MAX_PACKED_BYTES
    n_varies = not packed and varying(N)
    mr, nv = choose_tile(N, n_varies)
    if packed:
        bm = np.asarray(data, np.float32)
        if alpha != 1.0:
            bm = bm * np.float32(alpha)
        s = with_precision(GemmShape(M, N, K, packed=True, mr=mr, nv=nv, m_varies=varying(M)))
        transposed = bool(instr.attrs.get("transB", 0))
        shape, pack = (packed_shape_bf16, pack_b_bf16) if s.bf16 else (packed_shape, pack_b)
        bp = cg.weight_out(shape(*(bm.shape[::-1] if transposed else bm.shape), s.nr), np.float32,
                           lambda panels: pack(bm, s.nr, transposed=transposed, out=panels), source=data,
                           how=("gemm", float(alpha), transposed, s.nr, s.bf16))
    else:
        bp = cg.ptr(b)
        s = GemmShape(M, N, K, packed=False, mr=mr, nv=nv, m_varies=varying(M), n_varies=n_varies)
    bias = None
    if node_c == "bias":
        c = np.asarray(weight_data(instr.inputs[2]), np.float32).reshape(-1)
        bias = cg.weight(np.broadcast_to(c * np.float32(beta), (N,)).astype(np.float32))
    view = instr
    if node_c == "full":  # Y = acc + C, then the instruction's own epilogue
        view = _with_c_added(instr)
    _run_gemm(cg, view, s, a, bp, bias, ep.plan(view, M, N), "Gemm")


class _InstrView:
    """The attrs/inputs/outputs of a Gemm instruction in the shape `_gemm_c_kind` reads."""

    def __init__(self, instr):
        n = len(instr.inputs) if instr.n_args is None else instr.n_args
        self.attrs = instr.attrs
        self.inputs = tuple(None if o is None else _Val(o) for o in instr.inputs[:n])
        self.outputs = (_Val(instr.outputs[0]),)


class _Val:
    def __init__(self, o):
        self.type = o.type
        self.is_constant = weight_data(o) is not None


def _with_c_added(instr):
    """The instruction with `acc + C` folded in front of its epilogue expression."""
    t = instr.outputs[0].type
    from glow.ops import get_op

    added = Expr(t, op=get_op("Add"), args=(Expr(None, arg=-1), Expr(instr.inputs[2].type, arg=2)))
    expr = added if instr.expr is None else _substitute(instr.expr, added)
    return instr.replace(expr=expr)


def _substitute(e: Expr, acc: Expr) -> Expr:
    if e.op is None:
        return acc if e.arg == -1 else e
    return Expr(e.type, e.op, tuple(None if x is None else _substitute(x, acc) for x in e.args), e.attrs)


__all__ = ["emit_matmul", "emit_gemm_op", "matmul_shape"]
