"""Transpose and reshape sinking: move layout changes below elementwise ops so pairs meet.

    Relu(Transpose(x, p))               -> Transpose(Relu(x), p)
    Add(Transpose(a, p), Transpose(b, p)) -> Transpose(Add(a, b), p)
    Mul(Transpose(a, p), C)             -> Transpose(Mul(a, C'), p)     C' = C transposed back
    Relu(Reshape(x, s))                 -> Reshape(Relu(x), s)

A layout change sinks only when its result has no other reader, so sinking never duplicates work;
once two transposes are adjacent, simplification merges or cancels them (Glow's SinkCode does the
same; its HoistCode undoes sinks that did not pay off, which single-reader sinking cannot need).
"""

from __future__ import annotations

import numpy as np

from ..ops.registry import ELEMENTWISE
from .base import Pass
from .patterns import Rules, const, producer, static_shape

RULES = Rules("sink")
_MOVES = ("Transpose", "Reshape")


def _elementwise(node) -> bool:
    return node.op.in_group(ELEMENTWISE) and node.op.pure and len(node.outputs) == 1


def _move_of(ctx, node, i, ins):
    """The Transpose/Reshape node producing input `i`, if this node is its only reader."""
    p = producer(ins[i])
    if p is None or p.op.name not in _MOVES or not ctx.single_use(node.inputs[i]):
        return None
    if static_shape(p.inputs[0]) is None or static_shape(p.outputs[0]) is None:
        return None
    return p


def _same_move(a, b) -> bool:
    if a.op.name != b.op.name or static_shape(a.inputs[0]) != static_shape(b.inputs[0]):
        return False
    if a.op.name == "Transpose":
        return a.attrs.get("perm") == b.attrs.get("perm")
    return static_shape(a.outputs[0]) == static_shape(b.outputs[0])


def _redo(rb, move, y):
    """Apply the same Transpose/Reshape `move` to `y`."""
    if move.op.name == "Transpose":
        return rb.emit1("Transpose", [y], dict(move.attrs))
    return rb.emit1("Reshape", [y, move.inputs[1]], dict(move.attrs))


def _undo_const(move, c: np.ndarray, out_rank: int) -> np.ndarray | None:
    """The constant that, broadcast against the move's input, matches `c` against its output."""
    if c.size == 1:
        return c.reshape(())
    if move.op.name != "Transpose" or c.ndim > out_rank:
        return None
    perm = move.attrs.get("perm") or tuple(range(out_rank))[::-1]
    full = c.reshape((1,) * (out_rank - c.ndim) + c.shape)
    return np.transpose(full, np.argsort(perm)).copy()


@RULES.group_rule(ELEMENTWISE)
def sink_move(ctx, rb, node, ins):
    if not _elementwise(node) or not any(v is not None for v in ins):
        return None
    moved = [i for i in range(len(ins)) if ins[i] is not None and _move_of(ctx, node, i, ins)]
    if not moved:
        return None
    first = producer(ins[moved[0]])
    out_shape = static_shape(node.outputs[0])
    if out_shape is None or static_shape(first.outputs[0]) != out_shape:
        return None  # the move's result is broadcast: it cannot simply move below
    new_ins = []
    for i, v in enumerate(ins):
        if v is None:
            new_ins.append(None)
        elif i in moved and _same_move(producer(v), first):
            new_ins.append(producer(v).inputs[0])
        elif const(v) is not None:
            c = _undo_const(first, const(v), len(out_shape))
            if c is None:
                return None
            new_ins.append(rb.constant(c.astype(const(v).dtype), v.name))
        else:
            return None  # another runtime input in the old layout: sinking would need a new move
    y = rb.emit1(node.op, new_ins, dict(node.attrs))
    out = _redo(rb, first, y)
    return [out] if out.type == node.outputs[0].type else None


def sink_transposes(graph):
    return RULES.apply(graph)


SINK = Pass("sink-transpose-reshape", sink_transposes,
            "move Transpose/Reshape below elementwise ops so that pairs cancel")
