"""Lowering rules for generator ops (ConstantOfShape, EyeLike, Range, Size) and Trilu.

A generator's output depends only on shapes and small scalars, so when those are known it becomes
a constant (small outputs, whose value the graph builder already folded) or a broadcast of one
scalar. Range with run-time bounds and Size of a tensor with unknown dims have data-dependent
results and stay unlowered (the driver reports them).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._build import ints, static_shape
from .registry import lowering
from .rules_movement import known_ints, reshape_to


def _known_output(rb, node):
    """The node's output as a constant, when the builder could compute it at compile time."""
    v = node.outputs[0].known
    if v is None:
        return None
    return rb.constant(np.asarray(v, dtype=node.outputs[0].type.dtype.np), name="c")


def _zero(rb, dtype):
    return rb.constant(np.asarray("", dtype=object) if dtype == dt.string else np.zeros((), dtype.np),
                       name="c")


def _iotas(rb, rows, cols):
    """Row and column positions as (rows, 1) and (1, cols) int64 constants."""
    return (rb.constant(np.arange(rows, dtype=np.int64).reshape(rows, 1), name="c"),
            rb.constant(np.arange(cols, dtype=np.int64).reshape(1, cols), name="c"))


@lowering("ConstantOfShape")
def lower_constant_of_shape(rb, node, ins):
    known = _known_output(rb, node)
    if known is not None:
        return [known]
    shape = known_ints(ins[0]) or static_shape(node.outputs[0])
    if shape is None:
        return None
    fill = node.attrs["value"]
    fill = np.zeros((), np.float32) if fill is None else np.asarray(fill).reshape(())
    return [rb.emit1("Expand", [rb.constant(fill, name="c"), ints(rb, shape)])]


@lowering("EyeLike")
def lower_eye_like(rb, node, ins):
    known = _known_output(rb, node)
    if known is not None:
        return [known]
    shape = node.outputs[0].type.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    # Large outputs: ones where column - row == k, computed rather than stored.
    rows, cols = _iotas(rb, *shape)
    k = rb.constant(np.asarray(node.attrs["k"], np.int64), name="c")
    hot = rb.emit1("Equal", [rb.emit1("Sub", [cols, rows]), k])
    return [rb.emit1("Cast", [hot], {"to": node.outputs[0].type.dtype})]


@lowering("Size")
def lower_size(rb, node, ins):
    known = _known_output(rb, node)
    return None if known is None else [known]


@lowering("Range")
def lower_range(rb, node, ins):
    known = _known_output(rb, node)
    if known is not None:
        return [known]
    if all(v.known is not None for v in ins):  # too long to have been folded
        return [rb.constant(np.asarray(node.op.reference(*[v.known for v in ins], **node.attrs)),
                            name="c")]
    n = node.outputs[0].type.shape[0]
    if not isinstance(n, int):
        return None  # the length depends on run-time values
    # start + i * delta, computed in the stash type as the reference does
    dtype = node.outputs[0].type.dtype
    work = (node.attrs["stash_type"] or dtype) if dtype in (dt.float16, dt.bfloat16) else dtype
    start, delta = (v if v.type.dtype == work else rb.emit1("Cast", [v], {"to": work}) for v in ins[::2])
    iota = rb.constant(np.arange(n).astype(work.np), name="c")
    y = rb.emit1("Add", [reshape_to(rb, start, []), rb.emit1("Mul", [iota, reshape_to(rb, delta, [])])])
    return [y if work == dtype else rb.emit1("Cast", [y], {"to": dtype})]


@lowering("Trilu")
def lower_trilu(rb, node, ins):
    # Keep x where (col - row) >= k (upper) or <= k (lower), zero elsewhere: a Where over a mask of
    # the last two axes (a constant when k is known), broadcast over the leading axes.
    x, k = (list(ins) + [None])[:2]
    shape = x.type.shape
    if shape is None or not all(isinstance(d, int) for d in shape[-2:]):
        return None
    upper = node.attrs["upper"]
    rows, cols = shape[-2:]
    kv = [0] if k is None else known_ints(k)
    if kv is not None:
        diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        keep = rb.constant(diff >= kv[0] if upper else diff <= kv[0], name="mask")
    else:
        r, c = _iotas(rb, rows, cols)
        diff = rb.emit1("Sub", [c, r])
        kk = reshape_to(rb, k, [])
        keep = rb.emit1("Not", [rb.emit1("Less" if upper else "Greater", [diff, kk])])
    return [rb.emit1("Where", [keep, x, _zero(rb, x.type.dtype)])]
