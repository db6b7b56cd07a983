"""Lowering rules for block-quantized weights (glow.ops.nbits): MatMulNBits and GatherBlockQuantized
whose codes, scales and zero points are constants (as every exporter writes them) become a MatMul
or a Gather over the dequantized float weight, made at compile time by the reference's own
dequantization (so results agree with it bit for bit). The weight is then held in float32: 8x the
memory of 4-bit codes, and decoding reads 8x the bytes; a backend that wants int4's speed keeps the
op and unpacks the codes in its kernel. Codes known only at run time have no rule.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops.nbits import dequantize_blocks, dequantize_nbits
from ._build import cast
from .registry import lowering

MS = "com.microsoft"


def _all_known(*values) -> bool:
    return all(v is None or v.known is not None for v in values)


def _known(v):
    return None if v is None else np.asarray(v.known)


@lowering("MatMulNBits", MS)
def lower_matmul_nbits(rb, node, ins):
    a, b, scales, zp, g_idx, bias = (list(ins) + [None] * 6)[:6]
    if not _all_known(b, scales, zp, g_idx):
        return None
    at = node.attrs
    w = dequantize_nbits(_known(b), _known(scales), _known(zp), _known(g_idx), K=at["K"], N=at["N"],
                         bits=at["bits"], block_size=at["block_size"])
    y = rb.emit1("MatMul", [cast(rb, a, dt.float32), rb.constant(w, name="w")])
    if bias is not None:
        y = rb.emit1("Add", [y, cast(rb, bias, dt.float32)])
    return [cast(rb, y, a.type.dtype)]


@lowering("GatherBlockQuantized", MS)
def lower_gather_block_quantized(rb, node, ins):
    data, indices, scales, zp = (list(ins) + [None])[:4]
    if not _all_known(data, scales, zp):
        return None
    at = node.attrs
    table = dequantize_blocks(_known(data), _known(scales), _known(zp), quantize_axis=at["quantize_axis"],
                              block_size=at["block_size"], bits=at["bits"])
    table = table.astype(scales.type.dtype.np)
    return [rb.emit1("Gather", [rb.constant(table, name="table"), indices], {"axis": at["gather_axis"]})]
