"""The softmax family: Softmax, LogSoftmax, Hardmax, each along one axis.

Before opset 13 these ops flattened the input to 2-D at `axis` ([d0*...*d(axis-1), d(axis)*...])
and normalised each row. The adapter rewrites that form as Reshape -> op(axis=-1) -> Reshape,
or as the plain op when the two forms agree (axis is the last non-unit dimension).

Softmax and LogSoftmax round each step of ONNX's function body (subtract the max, exp, sum,
divide / log) to the input type, the sum accumulated in float32 like ReduceSum: in half precision
the kernel then agrees with its own lowering.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .reduce import FLT, wide
from .registry import ACTIVATION, NN, Attr, Tier, op


def _axis_infer(ctx):
    x = ctx.input(0)
    if x.rank == 0:
        raise ctx.error("input must have rank >= 1")
    ctx.axis(ctx.attrs["axis"], x.rank)
    return [x]


def _shifted_exp(x, axis):
    """x - max (so exp cannot overflow) and exp(x - max), each rounded to x's type."""
    shifted = (x - np.max(x, axis=axis, keepdims=True)).astype(x.dtype)
    return shifted, np.exp(shifted).astype(x.dtype)


def _sum(e, axis):
    return np.sum(wide(e), axis=axis, keepdims=True).astype(e.dtype)


def _softmax(x, axis):
    if x.size == 0:
        return x.copy()
    _, e = _shifted_exp(x, axis)
    return (e / _sum(e, axis)).astype(x.dtype)


def _log_softmax(x, axis):
    if x.size == 0:
        return x.copy()
    shifted, e = _shifted_exp(x, axis)
    return (shifted - np.log(_sum(e, axis)).astype(x.dtype)).astype(x.dtype)


def _hardmax(x, axis):
    """1 at the first maximum along `axis`, 0 elsewhere."""
    if x.size == 0:
        return x.copy()
    first = np.argmax(wide(x), axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis]).reshape([-1 if i == axis % x.ndim else 1
                                                   for i in range(x.ndim)])
    return (positions == first).astype(x.dtype)


def _coerced_2d_from_onnx(name: str):
    def adapter(ic):
        if ic.opset >= 13:
            return ic.emit(name, ic.inputs, ic.attrs)
        x = ic.inputs[0]
        axis = int(ic.attrs.get("axis", 1))
        shape = x.type.shape if isinstance(x.type, dt.TensorType) else None
        if shape is not None:
            rank = len(shape)
            if not -rank <= axis < max(rank, 1):
                raise ic.error(f"axis {axis} out of range for rank {rank}")
            axis = axis % rank if rank else 0
            if all(d == 1 for d in shape[axis + 1:]):  # the 2-D view changes nothing
                return ic.emit(name, [x], {"axis": axis})
        elif axis < 0:
            raise ic.error(f"a negative axis ({axis}) needs an input of known rank before opset 13")
        # Keep the leading dims (0 = copy) and flatten the rest into one: rows stay independent,
        # so normalising the last axis of this view is the old 2-D semantics.
        view = ic.add("Reshape", [x, ic.const(np.asarray([0] * axis + [-1], dtype=np.int64))])[0]
        y = ic.add(name, [view], {"axis": -1})[0]
        return ic.emit("Reshape", [y, ic.add("Shape", [x])[0]])

    return adapter


for _name, _fn, _tier, _doc in (
        ("Softmax", _softmax, Tier.KERNEL, "exp(x) / sum(exp(x)) along `axis`."),
        ("LogSoftmax", _log_softmax, Tier.KERNEL, "log(softmax(x)) along `axis`, computed stably."),
        ("Hardmax", _hardmax, Tier.HIGH, "1 at the first maximum along `axis`, 0 elsewhere.")):
    op(_name, inputs=("input:T",), outputs=("output:T",), types={"T": FLT},
       attrs=(Attr("axis", "int", -1),), infer=_axis_infer,
       reference=lambda x, axis, _fn=_fn: _fn(x, axis), groups={NN, ACTIVATION}, tier=_tier,
       onnx_since=13, from_onnx=_coerced_2d_from_onnx(_name), doc=_doc)
