"""Block-quantized weights, as onnxruntime defines them (domain com.microsoft): MatMulNBits, a MatMul
whose constant B is stored as 2-, 4- or 8-bit codes in blocks along K, and GatherBlockQuantized, a
Gather from a table stored that way (an int4 embedding tied to the LM head). onnxruntime-genai's
builder writes both for `-p int4`; `glow quantize --weights int4` will too.

A code q of block j dequantizes to (q - zero_point_j) * scale_j. Codes are packed low bits first:
byte i of a block holds codes 8/bits * i, 8/bits * i + 1, ... from its least significant bits up.
Without zero points, unsigned codes sit around 2^(bits - 1) (8 for 4 bits). The reference
dequantizes, then multiplies or gathers in float32; accuracy_level (onnxruntime's licence to
quantize A to int8 on the fly) does not change the reference, which is the exact product.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .registry import NN, Attr, Tier, op

MS = "com.microsoft"
FLT = frozenset({dt.float32, dt.float16, dt.bfloat16})
BITS = (2, 4, 8)


def unpack_codes(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` codes along the last axis of uint8 `packed` (8 / bits per byte, low bits
    first), as uint8."""
    per = 8 // bits
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    codes = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(*packed.shape[:-1], packed.shape[-1] * per)[..., :count]


def _blocks(k: int, block_size: int) -> int:
    return -(-k // block_size)


def _check_block_size(ctx, block_size: int):
    if block_size < 16 or block_size & (block_size - 1):
        raise ctx.error(f"block_size {block_size} must be a power of 2 of at least 16")


def _numel(shape):
    return int(np.prod(shape)) if shape is not None and all(isinstance(d, int) for d in shape) else None


# -- MatMulNBits -----------------------------------------------------------------------------------

def _nbits_geometry(attrs):
    """(K, N, bits, block_size, k_blocks, blob_size) of a MatMulNBits node."""
    k, n, bits, bs = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    kb = _blocks(k, bs)
    return k, n, bits, bs, kb, bs * bits // 8


def _nbits_infer(ctx):
    a = ctx.attrs
    if a["bits"] not in BITS:
        raise ctx.error(f"bits {a['bits']} is not supported (2, 4 or 8)")
    _check_block_size(ctx, a["block_size"])
    if a["K"] < 1 or a["N"] < 1:
        raise ctx.error(f"K {a['K']} and N {a['N']} must be positive")
    k, n, bits, bs, kb, blob = _nbits_geometry(a)
    x = ctx.input(0)
    if x.rank == 0:
        raise ctx.error("A must have rank >= 1")
    last = None if x.shape is None else x.shape[-1]
    if isinstance(last, int) and last != k:
        raise ctx.error(f"A's last dim {last} is not K {k}")
    want = {1: ("B", n * kb * blob), 2: ("scales", n * kb)}
    if ctx.has(3) and ctx.input(3).dtype == dt.uint8:
        want[3] = ("zero_points", n * _blocks(kb * bits, 8))
    elif ctx.has(3):
        want[3] = ("zero_points", n * kb)
    if len(ctx.inputs) > 4 and ctx.has(4):
        want[4] = ("g_idx", k)
    if len(ctx.inputs) > 5 and ctx.has(5):
        want[5] = ("bias", n)
    for i, (name, count) in want.items():
        got = _numel(ctx.shape(i))
        if got is not None and got != count:
            raise ctx.error(f"{name} has {got} elements ({list(ctx.shape(i))}); K {k}, N {n}, bits {bits} and "
                            f"block_size {bs} need {count}")
    shape = None if x.shape is None else tuple(x.shape[:-1]) + (n,)
    return [dt.TensorType(shape, x.dtype)]


def dequantize_nbits(b, scales, zero_points=None, g_idx=None, *, K, N, bits, block_size) -> np.ndarray:
    """W [K, N] in float32: MatMulNBits' B dequantized."""
    _, _, _, _, kb, blob = _nbits_geometry(dict(K=K, N=N, bits=bits, block_size=block_size))
    codes = unpack_codes(np.asarray(b, np.uint8).reshape(N, kb, blob), bits, block_size)
    codes = codes.reshape(N, kb * block_size)[:, :K].astype(np.float32)
    s = np.asarray(scales).astype(np.float32).reshape(N, kb)
    if zero_points is None:
        zp = np.full((N, kb), 2 ** (bits - 1), np.float32)
    elif zero_points.dtype == np.uint8:
        zp = unpack_codes(zero_points.reshape(N, -1), bits, kb).astype(np.float32)
    else:
        zp = np.asarray(zero_points).astype(np.float32).reshape(N, kb)
    if g_idx is not None:
        blk = np.asarray(g_idx).astype(np.int64).reshape(K)
        if blk.size and (blk.min() < 0 or blk.max() >= kb):
            raise ValueError(f"g_idx values must lie in [0, {kb}), got {int(blk.min())}..{int(blk.max())}")
    else:
        blk = np.arange(K) // block_size
    w = (codes - zp[:, blk]) * s[:, blk]
    return np.ascontiguousarray(w.T)


def _nbits_ref(a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, bits, block_size,
               accuracy_level):
    w = dequantize_nbits(b, scales, zero_points, g_idx, K=K, N=N, bits=bits, block_size=block_size)
    y = np.matmul(a.astype(np.float32), w)
    if bias is not None:
        y = y + bias.astype(np.float32)
    return y.astype(a.dtype)


def quantize_activations(a, block_size: int):
    """onnxruntime's int8 activations of accuracy_level 4 (MLAS's per-row block quantizer): per
    block of K (the last partial one too), scale = max|a| / 127 and codes a * (127 / max|a|)
    rounded half to even (0 where the block is all zero). (codes [.., blocks, block_size] int8,
    zero past K; scales [.., blocks] float32)."""
    a = np.asarray(a, np.float32)
    k = a.shape[-1]
    kb = _blocks(k, block_size)
    x = np.zeros(a.shape[:-1] + (kb * block_size,), np.float32)
    x[..., :k] = a
    x = x.reshape(a.shape[:-1] + (kb, block_size))
    amax = np.abs(x).max(axis=-1)
    with np.errstate(divide="ignore"):
        inv = np.where(amax != 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
    codes = np.rint(x * inv[..., None]).astype(np.int8)
    return codes, (amax / np.float32(127.0)).astype(np.float32)


def matmul_nbits_int8(a, b, scales, zero_points=None, bias=None, *, K, N, bits, block_size) -> np.ndarray:
    """MatMulNBits as onnxruntime computes it at accuracy_level 4 (int8 activations): per block,
    scale_a * scale_w * sum qa (qw - zp), summed over blocks in float64 (so only the
    quantization, not the order of the sums, makes it differ from the exact product)."""
    _, _, _, _, kb, blob = _nbits_geometry(dict(K=K, N=N, bits=bits, block_size=block_size))
    qa, sa = quantize_activations(a, block_size)
    qw = unpack_codes(np.asarray(b, np.uint8).reshape(N, kb, blob), bits, block_size).astype(np.int64)
    s = np.asarray(scales).astype(np.float64).reshape(N, kb)
    if zero_points is None:
        zp = np.full((N, kb), 2 ** (bits - 1), np.int64)
    else:
        zp = unpack_codes(zero_points.reshape(N, -1), bits, kb).astype(np.int64)
    dots = np.einsum("...jk,njk->...nj", qa.astype(np.int64), qw - zp[..., None])  # [.., N, blocks]
    y = (dots * sa.astype(np.float64)[..., None, :] * s).sum(axis=-1)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y.astype(np.float32)


op("MatMulNBits", inputs=("A:T1", "B:T2", "scales:T1", "zero_points:T3?", "g_idx:T4?", "bias:T1?"),
   outputs=("Y:T1",),
   types={"T1": FLT, "T2": frozenset({dt.uint8, dt.int32}), "T3": frozenset({dt.uint8, dt.int32}) | FLT,
          "T4": frozenset({dt.int32})},
   attrs=(Attr("K", "int"), Attr("N", "int"), Attr("bits", "int", 4),
          Attr("block_size", "int"), Attr("accuracy_level", "int", 0)),
   infer=_nbits_infer, reference=_nbits_ref, groups={NN}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="A @ W (+ bias), W [K, N] stored transposed as 2/4/8-bit codes in blocks of block_size along K, "
       "each block with a scale and an optional zero point (onnxruntime's contrib op).")


# -- GatherBlockQuantized --------------------------------------------------------------------------

def _gbq_geometry(shape, dtype, bits):
    """(logical data shape, codes per stored element) of GatherBlockQuantized's data."""
    per = 8 // bits if dtype == dt.uint8 else 1
    if shape is None:
        return None, per
    return tuple(shape[:-1]) + ((shape[-1] * per) if isinstance(shape[-1], int) else None,), per


def _gbq_infer(ctx):
    a = ctx.attrs
    data, idx = ctx.input(0), ctx.input(1)
    bits = a["bits"]
    if bits not in (4, 8) if data.dtype == dt.uint8 else bits != 4:
        raise ctx.error(f"bits {bits} is not supported for {data.dtype} data")
    _check_block_size(ctx, a["block_size"])
    if data.rank is None:
        return [dt.TensorType(None, ctx.input(2).dtype)]
    r = data.rank
    gax = ctx.axis(a["gather_axis"], r)
    qax = ctx.axis(a["quantize_axis"], r)
    if data.dtype == dt.uint8 and qax != r - 1:
        raise ctx.error("uint8 data packs its codes along the last dim: quantize_axis must be it")
    shape, _ = _gbq_geometry(data.shape, data.dtype, bits)
    if isinstance(shape[qax], int):
        want = list(shape)
        want[qax] = _blocks(shape[qax], a["block_size"])
        zp_want = list(want)
        if data.dtype == dt.uint8:  # packed like the data: 8 / bits per byte along the last dim
            zp_want[-1] = _blocks(want[-1] * bits, 8)
        for i, name, need in ((2, "scales", want), (3, "zero_points", zp_want)):
            got = ctx.shape(i) if ctx.has(i) else None
            if got is not None and list(got) != need:
                raise ctx.error(f"{name} has shape {list(got)}; data of logical shape {list(shape)} in blocks "
                                f"of {a['block_size']} needs {need}")
    out = None if idx.shape is None else tuple(shape[:gax]) + tuple(idx.shape) + tuple(shape[gax + 1:])
    return [dt.TensorType(out, ctx.input(2).dtype)]


def dequantize_blocks(data, scales, zero_points=None, *, quantize_axis, block_size, bits) -> np.ndarray:
    """GatherBlockQuantized's whole table dequantized, float32, in its logical shape."""
    data = np.asarray(data)
    r = data.ndim
    qax = quantize_axis % r
    if data.dtype == np.uint8:
        n = data.shape[-1] * (8 // bits)
        codes = unpack_codes(data, bits, n).astype(np.float32)
        default = 2 ** (bits - 1)
    else:  # int4 / uint4 arrays hold one code per element
        codes = data.astype(np.float32)
        default = 0 if data.dtype.kind == "i" or "int4" == str(data.dtype) else 8
    idx = np.arange(codes.shape[qax]) // block_size
    s = np.take(np.asarray(scales).astype(np.float32), idx, axis=qax)
    if zero_points is None:
        zp = np.float32(default)
    else:
        z = np.asarray(zero_points)
        z = unpack_codes(z, bits, _blocks(codes.shape[qax], block_size)) if z.dtype == np.uint8 else z
        zp = np.take(z.astype(np.float32), idx, axis=qax)
    return (codes - zp) * s


def _gbq_ref(data, indices, scales, zero_points=None, *, gather_axis, quantize_axis, block_size, bits):
    table = dequantize_blocks(data, scales, zero_points, quantize_axis=quantize_axis, block_size=block_size,
                              bits=bits)
    gax = gather_axis % table.ndim
    ind = np.asarray(indices).astype(np.int64)
    d = table.shape[gax]
    if ind.size and (ind.min() < -d or ind.max() >= d):
        bad = int(ind[(ind < -d) | (ind >= d)].reshape(-1)[0])
        raise ValueError(f"index {bad} is out of range for a dim of {d}")
    return np.take(table, np.where(ind < 0, ind + d, ind), axis=gax).astype(scales.dtype)


op("GatherBlockQuantized", inputs=("data:T1", "indices:Tind", "scales:T2", "zero_points:T1?"),
   outputs=("output:T2",),
   types={"T1": frozenset({dt.uint8, dt.int4, dt.uint4}), "Tind": frozenset({dt.int32, dt.int64}), "T2": FLT},
   attrs=(Attr("gather_axis", "int", 0), Attr("quantize_axis", "int", 1), Attr("block_size", "int", 128),
          Attr("bits", "int", 4)),
   infer=_gbq_infer, reference=_gbq_ref, groups={NN}, tier=Tier.HIGH, domain=MS, onnx_since=1,
   doc="Gather from a table stored as 4- or 8-bit codes in blocks along quantize_axis, each block with a "
       "scale and an optional zero point, dequantized (onnxruntime's contrib op).")
