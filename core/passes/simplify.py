"""Algebraic simplification: identities, no-op movement, double negation, cast chains.

Every rule keeps results bit-for-bit where it matters (x + 0 may turn -0.0 into -0.0 instead of
+0.0; that is the only liberty taken, as in Glow's OptimizeArithmeticNodes). Movement ops whose
output shape is static are canonicalised into Reshape (Flatten, Squeeze, Unsqueeze, and
Transposes that only move size-1 dims), so that chains of them merge into one Reshape.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .base import Pass
from .patterns import Rules, const, const_ints, is_splat, producer, same_type, static_shape

RULES = Rules("simplify")


def _forward(node, x):
    """Replace the node's single output by `x` when `x` has exactly its type."""
    return [x] if x is not None and same_type(x, node.outputs[0]) else None


def _forward_static(node, x):
    """`_forward`, only for fully static shapes (movement rules reason about concrete extents)."""
    return _forward(node, x) if static_shape(node.outputs[0]) is not None else None


@RULES.rule("Identity")
def identity(ctx, rb, node, ins):
    return [ins[0]] if ins[0].type == node.outputs[0].type else None


@RULES.rule("Add", "Sub")
def add_zero(ctx, rb, node, ins):
    if is_splat(ins[1], 0):
        return _forward(node, ins[0])
    if node.op.name == "Add" and is_splat(ins[0], 0):
        return _forward(node, ins[1])
    return None


@RULES.rule("Mul", "Div", "Pow")
def mul_one(ctx, rb, node, ins):
    if is_splat(ins[1], 1):
        return _forward(node, ins[0])
    if node.op.name == "Mul" and is_splat(ins[0], 1):
        return _forward(node, ins[1])
    return None


@RULES.rule("Neg", "Not", "BitwiseNot")
def double_negation(ctx, rb, node, ins):
    inner = producer(ins[0], node.op.name)
    return _forward(node, inner.inputs[0]) if inner is not None else None


# -- casts ---------------------------------------------------------------------------------------
_FLOAT_CHAIN = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_FLOAT_MANTISSA = {"float32": 24, "float64": 53}


def exact_cast(a: dt.DType, b: dt.DType) -> bool:
    """Every value of type `a` is exactly representable in type `b` (so a cast a->b loses nothing)."""
    if a == b:
        return True
    an, bn = a.name, b.name
    if an == "bool":
        return bn in _INT_BITS or bn in _UINT_BITS or bn in _FLOAT_CHAIN
    if an in _FLOAT_CHAIN and bn in _FLOAT_CHAIN:
        if {an, bn} == {"float16", "bfloat16"}:
            return False
        return _FLOAT_CHAIN[an] < _FLOAT_CHAIN[bn]
    if an in _INT_BITS:
        bits = _INT_BITS[an]
        return (_INT_BITS.get(bn, 0) > bits) or _FLOAT_MANTISSA.get(bn, 0) >= bits
    if an in _UINT_BITS:
        bits = _UINT_BITS[an]
        return (_UINT_BITS.get(bn, 0) > bits or _INT_BITS.get(bn, 0) > bits
                or _FLOAT_MANTISSA.get(bn, 0) >= bits)
    return False


def _plain(t) -> dt.DType | None:
    d = getattr(t, "dtype", None)
    return d if isinstance(d, dt.DType) else None


@RULES.rule("Cast")
def cast_chain(ctx, rb, node, ins):
    x = ins[0]
    src, dst = _plain(x.type), _plain(node.outputs[0].type)
    if src is None or dst is None:
        return None
    if src == dst:
        return _forward(node, x)
    inner = producer(x, "Cast")
    if inner is None:
        return None
    y = inner.inputs[0]
    first = _plain(y.type)
    # Cast(Cast(y, mid), dst) == Cast(y, dst) when y -> mid is exact: mid holds y's value unchanged.
    if first is None or not exact_cast(first, src):
        return None
    if first == dst:
        return _forward(node, y)
    return [rb.emit1("Cast", [y], dict(node.attrs))]


# -- movement ------------------------------------------------------------------------------------
def _reshape(rb, x, shape):
    shape = [int(d) for d in shape]
    attrs = {"allowzero": 1} if 0 in shape else {}
    return rb.emit1("Reshape", [x, rb.constant(np.asarray(shape, np.int64), "shape")], attrs)


@RULES.rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape_chain(ctx, rb, node, ins):
    out = node.outputs[0]
    x = ins[0]
    shape = static_shape(out)
    if shape is None or static_shape(x) is None:
        return None
    if static_shape(x) == shape:
        return _forward(node, x)
    inner = producer(x)
    while inner is not None and inner.op.name == "Reshape" and static_shape(inner.inputs[0]) is not None:
        x, inner = inner.inputs[0], producer(inner.inputs[0])
    if x is ins[0] and node.op.name == "Reshape" and const(ins[1]) is not None:
        return None  # already a single Reshape by a constant shape
    if static_shape(x) == shape:
        return _forward(node, x)
    return [_reshape(rb, x, shape)]


def _perm(node, rank):
    p = node.attrs.get("perm")
    return list(range(rank))[::-1] if p is None else list(p)


@RULES.rule("Transpose")
def transpose_chain(ctx, rb, node, ins):
    x = ins[0]
    shape = getattr(x.type, "shape", None)
    if shape is None:
        return None
    perm = _perm(node, len(shape))
    inner = producer(x, "Transpose")
    if inner is not None and getattr(inner.inputs[0].type, "shape", None) is not None:
        # transpose(transpose(y, p1), p2) == transpose(y, [p1[i] for i in p2])
        p1 = _perm(inner, len(shape))
        combined = [p1[i] for i in perm]
        y = inner.inputs[0]
        if combined == sorted(combined):
            return _forward(node, y)
        if ctx.single_use(node.inputs[0]):
            return [rb.emit1("Transpose", [y], {"perm": combined})]
    if perm == sorted(perm):
        return _forward(node, x)
    # Moving only size-1 dims keeps the data order: a Reshape, which a backend can make a view.
    if static_shape(x) is not None:
        moved = [p for p in perm if shape[p] != 1]
        if moved == sorted(moved):
            return [_reshape(rb, x, static_shape(node.outputs[0]))]
    return None


@RULES.rule("Expand", "Tile")
def no_op_expand(ctx, rb, node, ins):
    return _forward_static(node, ins[0])


@RULES.rule("Slice")
def full_slice(ctx, rb, node, ins):
    steps = const_ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1]
    if steps is None or any(s != 1 for s in steps):
        return None
    return _forward_static(node, ins[0])  # same shape with unit steps: the whole tensor


@RULES.rule("Pad")
def zero_pad(ctx, rb, node, ins):
    pads = const_ints(ins[1])
    return _forward_static(node, ins[0]) if pads is not None and not any(pads) else None


@RULES.rule("Concat", "Sum", "Max", "Min", "Mean")
def single_input(ctx, rb, node, ins):
    return _forward(node, ins[0]) if len(ins) == 1 else None


@RULES.rule("Dropout")
def inference_dropout(ctx, rb, node, ins):
    """Dropout is the identity at inference (no training_mode input, mask unused)."""
    if len(ins) > 2 and ins[2] is not None and not is_splat(ins[2], 0):
        return None
    out = _forward(node, ins[0])
    if out is None or len(node.outputs) == 1:
        return out
    mask = node.outputs[1]
    if ctx.users(mask) or ctx.is_output(mask) or static_shape(mask) is None:
        return None
    # An unused mask still needs a value for rebuild; a constant nobody reads costs nothing.
    return out + [rb.constant(np.ones(static_shape(mask), bool), "mask")]


def simplify(graph):
    return RULES.apply(graph)


SIMPLIFY = Pass("simplify", simplify, "algebraic identities, no-op movement, cast chains")
