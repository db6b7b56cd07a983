"""QuantizeLinear / DequantizeLinear simplification, Glow's quantization clean-ups on ONNX's QDQ form:

    QuantizeLinear(DequantizeLinear(q, s, z), s, z)       -> q          a round trip cancels
    QuantizeLinear(M(DequantizeLinear(q, s, z)), s, z)    -> M(q)       M moves or picks elements:
                                                                        Reshape, Flatten, Squeeze,
                                                                        Unsqueeze, Transpose, Slice,
                                                                        Identity, MaxPool (s > 0)

    QuantizeLinear(Conv(DQ(x), DQ(w), DQ(b)))             -> QLinearConv(x, w, b, ...)
    QuantizeLinear(MatMul(DQ(a), DQ(b)))  (b constant)    -> QLinearMatMul(a, b, ...)
    QuantizeLinear(Relu(y))                               -> Max(QuantizeLinear(y), y_zero_point)
    QuantizeLinear(Relu(DQ(q, s, z)), s, z)               -> Max(q, z)
    QuantizeLinear(DQ(q, s1, z1), s2, z2)                 -> Requantize(q - z1, s1, 1, s2, z2)
                                                           (also across one of the movers)

The first two are exact. Dequantizing an 8- or 16-bit integer and quantizing it back with the
same scale and zero point gives it back (the float error of (q - z) * s / s is far below the half
step that rounding would need), and an op that only moves elements, or picks the largest of a
window, does the same to the integers as to their dequantized values (dequantization is
increasing for a positive scale). Quantizers write such chains around every op (a DQ -> MaxPool
-> Q, a DQ -> Reshape -> Q between two quantized ops); afterwards the data moves as bytes, not
floats, and the Q/DQ pair is gone. Only per-tensor parameters (one scale, one zero point) are
matched, so an axis the op moves never meets a per-axis scale.

The islands (Glow's "a DQ -> op -> Q island becomes a quantized op") are what the quantizers
mean: the integer accumulation of QLinearConv / QLinearMatMul is the exact value of the float
product of the dequantized operands, which float32 only approximates, so the results agree but
for values on a half step, which may round the other way; onnxruntime fuses the same islands.
Weights may be per output channel. They run before constant folding (`islands_pass`), while the
weights are still DQ(integer constant), and only for a backend that runs ConvInteger /
MatMulInteger natively (the pipeline's `supports`): elsewhere the quantized op would lower to
exact float32 slices, slower than the float op the model wrote. The Relu rules are exact:
quantization is increasing, so Q(max(v, 0)) = max(Q(v), Q(0)), and Q(0) is the zero point.
"""

from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from .. import dtypes as dt
from ..ops import get_op
from .base import Pass
from .patterns import Rules, const, producer

RULES = Rules("qdq")
ISLANDS = Rules("qdq-ops")
#: The backend's node predicate while `islands_pass` runs.
_SUPPORTS: ContextVar = ContextVar("qdq_islands_supports", default=None)
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


def _int_params(node):
    """(scale, zero point as an array of the integer type) of a per-tensor Q or DQ node on 8-bit
    integers, else None."""
    p = _params(node)
    t = node.outputs[0].type.dtype if node.op.name == "QuantizeLinear" else node.inputs[0].type.dtype
    if p is None or p[0] <= 0 or not np.isfinite(p[0]) or t not in (dt.int8, dt.uint8):
        return None
    return np.asarray(p[0], np.float32), np.asarray(0 if p[1] is None else p[1][1], t.np)


def _weights(dq, m: int, axis: int = 0):
    """(w, w_scale, w_zero_point) of a DQ of a constant 8-bit weight, per tensor or per output
    channel (`axis`: 0 for a Conv's weight, 1 for a MatMul's B; m channels), else None."""
    w, s = const(dq.inputs[0]), const(dq.inputs[1])
    z = const(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] is not None else None
    if w is None or s is None or w.dtype not in (np.int8, np.uint8) or dq.attrs.get("block_size", 0):
        return None
    if len(dq.inputs) > 2 and dq.inputs[2] is not None and z is None:
        return None
    if s.size != 1 and not (s.size == m and dq.attrs.get("axis", 1) % w.ndim == axis):
        return None
    s = s.reshape(-1).astype(np.float32)
    s = s[:1].reshape(()) if s.size == 1 else s
    z = np.zeros(s.shape, w.dtype) if z is None else z.reshape(s.shape).astype(w.dtype)
    if not np.all(s > 0) or not np.all(np.isfinite(s)):
        return None
    return w, s, z


def _bias(dq, scale: np.ndarray, m: int):
    """The int32 bias of DQ(b) when its scale is x_scale * w_scale (so it adds to the integer
    accumulator as it is) and its zero point 0, else None."""
    b, s = const(dq.inputs[0]), const(dq.inputs[1])
    z = const(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] is not None else None
    if b is None or s is None or b.dtype != np.int32 or b.shape != (m,) or (z is not None and np.any(z != 0)):
        return None
    if len(dq.inputs) > 2 and dq.inputs[2] is not None and z is None:
        return None
    if not np.allclose(s.reshape(-1).astype(np.float64), np.broadcast_to(scale, (m,)), rtol=1e-6, atol=0):
        return None
    return b


def _feeding(ctx, node, ins, op: str):
    """(the `op` node whose one result only the Q `node` reads, the Q's per-tensor 8-bit
    parameters), or None."""
    p, qy = producer(ins[0], op), _int_params(node)
    if p is None or qy is None or len(p.outputs) != 1 or not ctx.single_use(node.inputs[0]):
        return None
    return p, qy


def _where_native(rb, node, probe, quantized, attrs=None):
    """[quantized op's result] replacing the Q `node`, if the backend runs the integer op `probe`
    ((op, inputs)) natively, else None. The probe is asked of the backend as a node; unused, it
    goes with the dead code."""
    supports = _SUPPORTS.get()
    if supports is None or not supports(rb.emit1(probe[0], probe[1], dict(attrs or {})).node):
        return None
    y = rb.emit1(quantized[0], quantized[1], dict(attrs or {}))
    return [y] if y.type == node.outputs[0].type else None


def _dq_operands(op, channels, axis: int = 0):
    """(x's integer tensor, (x_scale, x_zero_point), (w, w_scale, w_zero_point)) when `op` reads
    DQ(x) with per-tensor integer parameters and DQ(constant 8-bit w) with `channels` channels
    along `axis`; else None."""
    dx, dw = producer(op.inputs[0], "DequantizeLinear"), producer(op.inputs[1], "DequantizeLinear")
    qx = None if dx is None else _int_params(dx)
    if qx is None or dw is None or not isinstance(channels, int):
        return None
    wq = _weights(dw, channels, axis=axis)
    return None if wq is None else (dx.inputs[0], qx, wq)


@ISLANDS.rule("QuantizeLinear")
def quantized_conv(ctx, rb, node, ins):
    found = _feeding(ctx, node, ins, "Conv")
    if found is None:
        return None
    conv, qy = found
    m = conv.inputs[1].type.shape[0] if conv.inputs[1].type.shape else None
    operands = _dq_operands(conv, m)
    if operands is None:
        return None
    x, qx, (w, ws, wz) = operands
    ins_q = [x, rb.constant(qx[0], "x_scale"), rb.constant(qx[1], "x_zero_point"),
             rb.constant(w, "w"), rb.constant(ws, "w_scale"), rb.constant(wz, "w_zero_point"),
             rb.constant(qy[0], "y_scale"), rb.constant(qy[1], "y_zero_point")]
    if len(conv.inputs) > 2 and conv.inputs[2] is not None:
        db = producer(conv.inputs[2], "DequantizeLinear")
        b = None if db is None else _bias(db, qx[0].astype(np.float64) * ws.astype(np.float64), m)
        if b is None:
            return None
        ins_q.append(rb.constant(b, "bias"))
    return _where_native(rb, node, ("ConvInteger", [ins_q[0], ins_q[3], ins_q[2], ins_q[5]]), ("QLinearConv", ins_q),
                         conv.attrs)


@ISLANDS.rule("QuantizeLinear")
def quantized_matmul(ctx, rb, node, ins):
    found = _feeding(ctx, node, ins, "MatMul")
    if found is None:
        return None
    mm, qy = found
    b_shape = mm.inputs[1].type.shape
    if b_shape is None or len(b_shape) != 2:
        return None
    operands = _dq_operands(mm, b_shape[1], axis=1)
    if operands is None:
        return None
    a, qa, (b, bs, bz) = operands
    az = rb.constant(qa[1], "a_zero_point")
    bq, bzc = rb.constant(b, "b"), rb.constant(bz, "b_zero_point")
    return _where_native(rb, node, ("MatMulInteger", [a, bq, az, bzc]),
                         ("QLinearMatMul", [a, rb.constant(qa[0], "a_scale"), az, bq, rb.constant(bs, "b_scale"), bzc,
                                            rb.constant(qy[0], "y_scale"), rb.constant(qy[1], "y_zero_point")]))


@ISLANDS.rule("QuantizeLinear")
def rescale(ctx, rb, node, ins):
    """Q(DQ(q, s1, z1), s2, z2) with other 8-bit per-tensor parameters (a round trip cancels
    instead), also across one of the movers (Q(M(DQ(q))) -> Rescale(M(q))): Glow's Rescale, the
    `Requantize` op of the centered integers, (q - z1) times s1 (times 1) divided by s2. Exact: DQ
    rounds the exact product (q - z1) s1 to float32 once, as Requantize's float64 product rounded
    to float32 does, and both then divide in float32 and round half to even. Only where the
    backend runs Requantize natively; elsewhere it would lower to more work than the pair."""
    m = producer(ins[0])
    mover = m if m is not None and m.op.name in _MOVERS and len(m.outputs) == 1 else None
    if mover is not None and not ctx.single_use(node.inputs[0]):
        return None
    dq = producer(mover.inputs[0] if mover is not None else ins[0], "DequantizeLinear")
    px, py = (None, None) if dq is None else (_int_params(dq), _int_params(node))
    if px is None or py is None or _round_trip(node, dq) or dq.outputs[0].type.dtype != dt.float32:
        return None
    q = dq.inputs[0]
    if mover is not None:
        q = rb.emit1(mover.op, [q, *mover.inputs[1:]], dict(mover.attrs))
    wide = rb.emit1("Cast", [q], {"to": dt.int32})
    centered = rb.emit1("Sub", [wide, rb.constant(px[1].astype(np.int32), "zero_point")])
    args = [centered, rb.constant(px[0], "scale"), rb.constant(np.float32(1), "one"), rb.constant(py[0], "scale"),
            rb.constant(py[1], "zero_point")]
    requantize = get_op("Requantize", "glow")
    return _where_native(rb, node, (requantize, args), (requantize, args))


@RULES.rule("QuantizeLinear")
@ISLANDS.rule("QuantizeLinear")
def quantize_after_relu(ctx, rb, node, ins):
    found = _feeding(ctx, node, ins, "Relu")
    if found is None:
        return None
    relu, qy = found
    dq = producer(relu.inputs[0], "DequantizeLinear")
    if dq is not None and _round_trip(node, dq):
        q = dq.inputs[0]  # Q(Relu(DQ(q))) with the same parameters: max(q, z)
    else:
        q = rb.emit1(node.op, [relu.inputs[0], *ins[1:]], dict(node.attrs))
    y = rb.emit1("Max", [q, rb.constant(qy[1], "zero_point")])
    return [y] if y.type == node.outputs[0].type else None


def simplify_qdq(graph):
    # most models have no QuantizeLinear: skip the rebuild (10 ms on DenseNet-121's 910 nodes)
    if not any(n.op.name == "QuantizeLinear" for n in graph.nodes):
        return graph
    return RULES.apply(graph)


QDQ = Pass("qdq", simplify_qdq, "cancel Q(DQ(q)) round trips and move data ops before them (as integers)")


def islands_pass(supports) -> Pass:
    """The island rules for a backend whose node predicate is `supports` (None: no islands)."""

    def quantized_ops(graph):
        if supports is None or not any(n.op.name == "QuantizeLinear" for n in graph.nodes):
            return graph
        token = _SUPPORTS.set(supports)
        try:
            return ISLANDS.apply(graph)
        finally:
            _SUPPORTS.reset(token)

    return Pass("qdq-ops", quantized_ops, "DQ -> Conv/MatMul -> Q islands to QLinearConv/QLinearMatMul where "
                "the backend runs ConvInteger/MatMulInteger natively; Q(Relu) to Max with the zero point")
