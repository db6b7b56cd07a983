"""QuantizeLinear / DequantizeLinear simplification, Glow's quantization clean-ups on ONNX's QDQ form:

    QuantizeLinear(DequantizeLinear(q, s, z), s, z)       -> q          a round trip cancels
    QuantizeLinear(M(DequantizeLinear(q, s, z)), s, z)    -> M(q)       M moves or picks elements:
                                                                        Reshape, Flatten, Squeeze,
                                                                        Unsqueeze, Transpose, Slice,
                                                                        Identity, MaxPool (s > 0)

Both are exact. Dequantizing an 8- or 16-bit integer and quantizing it back with the same scale
and zero point gives it back (the float error of (q - z) * s / s is far below the half step that
rounding would need), and an op that only moves elements, or picks the largest of a window, does
the same to the integers as to their dequantized values (dequantization is increasing for a
positive scale). Quantizers write such chains around every op (a DQ -> MaxPool -> Q, a DQ -> Reshape
-> Q between two quantized ops); afterwards the data moves as bytes, not floats, and the Q/DQ
pair is gone. Only per-tensor parameters (one scale, one zero point) are matched, so an axis the
op moves never meets a per-axis scale.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .base import Pass
from .patterns import Rules, const, producer

RULES = Rules("qdq")
#: Ops that commute with a per-tensor quantization (MaxPool: for a positive scale).
_MOVERS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Identity", "MaxPool")
_INTS = (dt.int8, dt.uint8, dt.int16, dt.uint16)


def _params(node):
    """(scale, zero point) of a Q or DQ node as scalars, if constant and per tensor; else None."""
    s = const(node.inputs[1])
    z = const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else None
    if s is None or s.size != 1 or (len(node.inputs) > 2 and node.inputs[2] is not None and
                                    (z is None or z.size != 1)):
        return None
    if node.attrs.get("block_size", 0) or (node.op.name == "QuantizeLinear" and node.attrs.get("precision")):
        return None
    return float(s.reshape(-1)[0]), None if z is None else (z.dtype, int(z.reshape(-1)[0]))


def _round_trip(q_node, dq_node) -> bool:
    """Whether Q(DQ(x)) gives x back: the same per-tensor parameters and an integer type that
    Q produces (its output type is the DQ input's)."""
    pq, pd = _params(q_node), _params(dq_node)
    if pq is None or pd is None or pq != pd or pq[0] <= 0 or not np.isfinite(pq[0]):
        return False
    x = dq_node.inputs[0].type.dtype
    return x in _INTS and q_node.outputs[0].type.dtype == x and dq_node.outputs[0].type.dtype == dt.float32


@RULES.rule("QuantizeLinear")
def cancel_round_trip(ctx, rb, node, ins):
    dq = producer(ins[0], "DequantizeLinear")
    if dq is not None and _round_trip(node, dq) and dq.inputs[0].type == node.outputs[0].type:
        return [dq.inputs[0]]
    return None


@RULES.rule("QuantizeLinear")
def quantize_before_moving(ctx, rb, node, ins):
    mover = producer(ins[0])
    if mover is None or mover.op.name not in _MOVERS or len(mover.outputs) != 1 or not ctx.single_use(node.inputs[0]):
        return None
    dq = producer(mover.inputs[0], "DequantizeLinear")
    if dq is None or not _round_trip(node, dq):
        return None
    if mover.op.name == "MaxPool" and dq.inputs[0].type.dtype not in (dt.int8, dt.uint8):
        return None  # the integer types MaxPool takes
    y = rb.emit1(mover.op, [dq.inputs[0], *mover.inputs[1:]], dict(mover.attrs))
    return [y] if y.type == node.outputs[0].type else None


def simplify_qdq(graph):
    # most models have no QuantizeLinear: skip the rebuild (10 ms on DenseNet-121's 910 nodes)
    if not any(n.op.name == "QuantizeLinear" for n in graph.nodes):
        return graph
    return RULES.apply(graph)


QDQ = Pass("qdq", simplify_qdq, "cancel Q(DQ(q)) round trips and move data ops before them (as integers)")
