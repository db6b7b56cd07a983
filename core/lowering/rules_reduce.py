"""Lowering rules for the reductions outside the floor (ops/reduce.py): ReduceMean/L1/L2/LogSum/
LogSumExp/SumSquare, ArgMax and ArgMin.

Each is a short formula around a floor reduction (ReduceSum/ReduceMax/ReduceMin). The floor
reduction gets the node's own axes: a constant when the axes are known at compile time (so a
backend sees a constant), else the run-time axes input as is, which the floor op interprets with the
same rules (absent = all axes). `noop_with_empty_axes` with no axes is a reduction over the empty
set of axes, not an identity of the whole op: the floor reductions are then identities, the formula
around them still applies (ReduceL1 gives |x|, ReduceSumSquare x*x), as the ONNX function bodies
say; with run-time axes the floor reductions carry the attribute and decide at run time.

Types follow the references exactly: sums of 16-bit floats accumulate in float32 (so do the floor
reductions, so a plain ReduceSum needs no cast), while the formulas that the reference evaluates in
float32 (16-bit inputs) or float64 (integer inputs: mean, L2) are widened here too and cast back
once; a float result cast to an integer type truncates, as the reference's np.trunc does.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ._build import ints, scalar, static_shape
from .registry import lowering

HALF = frozenset({dt.float16, dt.bfloat16})
#: Element types the floor ReduceMax/ReduceMin take; others (int16, uint16) are widened exactly.
MINMAX_TYPES = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int8, dt.uint8,
                          dt.int32, dt.int64, dt.uint32, dt.uint64, dt.bool_})


class RuntimeAxes:
    """Axes known only at run time, with the node's `noop_with_empty_axes` (which the floor
    reductions built from them must carry, so empty axes reduce nothing there too)."""

    def __init__(self, value, noop: int):
        self.value, self.noop = value, noop


# -- shared building blocks (also used by rules_nn) ------------------------------------------------

def reduce(rb, op, x, axes, keepdims=1):
    """A floor reduction over `axes`: a list of ints (a constant; [] reduces nothing, so it is x
    itself), None (all axes), or a RuntimeAxes / Value (the run-time axes input)."""
    if axes is None:
        return rb.emit1(op, [x], {"keepdims": keepdims})
    if isinstance(axes, RuntimeAxes):
        return rb.emit1(op, [x, axes.value], {"keepdims": keepdims, "noop_with_empty_axes": axes.noop})
    if not isinstance(axes, (list, tuple)):
        return rb.emit1(op, [x, axes], {"keepdims": keepdims})
    if not axes:
        return x
    return rb.emit1(op, [x, ints(rb, axes)], {"keepdims": keepdims})


def cast(rb, x, dtype):
    return x if x.type.dtype == dtype else rb.emit1("Cast", [x], {"to": dtype})


def count(rb, x, axes, like, keepdims):
    """The number of elements each reduction over `axes` sees: a 0-d constant of `like`'s type, or
    for run-time axes over a static shape, the same reduction of ones. None when not known."""
    shape = x.type.shape
    if shape is None:
        return None
    if axes is None or isinstance(axes, (list, tuple)):
        dims = list(shape) if axes is None else [shape[a] for a in axes]
        if not all(isinstance(d, int) for d in dims):
            return None
        return scalar(rb, math.prod(dims), like)
    full = static_shape(x)
    if full is None:
        return None
    ones = rb.emit1("Expand", [scalar(rb, 1, like), ints(rb, full)])
    return reduce(rb, "ReduceSum", ones, axes, keepdims)


def node_axes(node, ins):
    """The reduction's axes: a sorted list of non-negative axes ([] with noop_with_empty_axes and
    no axes: nothing is reduced), None (all axes), a RuntimeAxes (known only at run time), or
    False (cannot be lowered)."""
    x, axes = ins[0], ins[1] if len(ins) > 1 else None
    noop = node.attrs["noop_with_empty_axes"]
    if axes is not None and axes.known is None:
        if isinstance(axes.type.shape, tuple) and axes.type.shape[:1] == (0,):
            axes = None  # statically empty
        else:
            return RuntimeAxes(axes, noop)
    values = [] if axes is None else [int(a) for a in np.asarray(axes.known).reshape(-1)]
    if not values:
        return [] if noop else None
    rank = x.type.rank
    if rank is None:
        return False
    if rank == 0:
        return None  # a 0-d input reduces over "all" (no) axes, whatever the axes say
    return sorted(a % rank for a in values)


def _reduction(fn):
    """Wraps `fn(rb, node, x, axes, keepdims) -> Value` with axes resolution and the no-op case."""

    def rule(rb, node, ins):
        axes = node_axes(node, ins)
        if axes is False:
            return None
        out = fn(rb, node, ins[0], axes, node.attrs["keepdims"])
        if out is None:
            return None
        return [cast(rb, out, node.outputs[0].type.dtype)]

    rule.__name__ = fn.__name__
    rule.__doc__ = fn.__doc__
    return rule


def _wide(rb, x):
    """16-bit floats in float32, the rest as is (the reference's `wide`)."""
    return cast(rb, x, dt.float32) if x.type.dtype in HALF else x


def _float_work(rb, x):
    """Integers in float64, 16-bit floats in float32 (the reference's `float_work`)."""
    return cast(rb, x, dt.float64) if not x.type.dtype.is_float else _wide(rb, x)


# -- the reductions --------------------------------------------------------------------------------

def lower_reduce_mean(rb, node, x, axes, keep):
    """Sum / count, in float64 for integers (the result truncates back)."""
    w = _float_work(rb, x)
    n = count(rb, w, axes, w, keep)
    if n is None:
        return None
    return rb.emit1("Div", [reduce(rb, "ReduceSum", w, axes, keep), n])


def lower_reduce_l1(rb, node, x, axes, keep):
    """sum |x|: |x| is exact in any type and ReduceSum widens 16-bit floats itself."""
    return reduce(rb, "ReduceSum", rb.emit1("Abs", [x]), axes, keep)


def lower_reduce_sum_square(rb, node, x, axes, keep):
    """sum x*x: the squares are rounded in float32 for 16-bit inputs, as the reference does."""
    w = _wide(rb, x)
    return reduce(rb, "ReduceSum", rb.emit1("Mul", [w, w]), axes, keep)


def lower_reduce_l2(rb, node, x, axes, keep):
    w = _float_work(rb, x)
    return rb.emit1("Sqrt", [reduce(rb, "ReduceSum", rb.emit1("Mul", [w, w]), axes, keep)])


def lower_reduce_log_sum(rb, node, x, axes, keep):
    w = _float_work(rb, x)
    return rb.emit1("Log", [reduce(rb, "ReduceSum", w, axes, keep)])


def lower_reduce_log_sum_exp(rb, node, x, axes, keep):
    """log(sum(exp(x - m))) + m with m the max, so exp cannot overflow. A slice without a finite
    max (all -inf, empty, or holding +inf/NaN) is shifted by 0 instead, as the reference does:
    m - m is 0 exactly when m is finite."""
    w = _float_work(rb, x)
    m = _finite_or_zero(rb, reduce(rb, "ReduceMax", w, axes, 1))
    s = reduce(rb, "ReduceSum", rb.emit1("Exp", [rb.emit1("Sub", [w, m])]), axes, keep)
    if not keep:  # the shift again, with the reduced axes dropped
        m = _finite_or_zero(rb, reduce(rb, "ReduceMax", w, axes, 0))
    return rb.emit1("Add", [rb.emit1("Log", [s]), m])


def _finite_or_zero(rb, m):
    zero = scalar(rb, 0, m)
    return rb.emit1("Where", [rb.emit1("Equal", [rb.emit1("Sub", [m, m]), zero]), m, zero])


for _op, _fn in (("ReduceMean", lower_reduce_mean), ("ReduceL1", lower_reduce_l1),
                 ("ReduceL2", lower_reduce_l2), ("ReduceSumSquare", lower_reduce_sum_square),
                 ("ReduceLogSum", lower_reduce_log_sum),
                 ("ReduceLogSumExp", lower_reduce_log_sum_exp)):
    lowering(_op)(_reduction(_fn))


# -- ArgMax / ArgMin -------------------------------------------------------------------------------

def ramp(rb, n, axis, rank):
    """The int64 indices 0..n-1 laid along `axis` of a rank-`rank` tensor (1 elsewhere)."""
    shape = [1] * rank
    shape[axis] = n
    return rb.constant(np.arange(n, dtype=np.int64).reshape(shape), name="ramp")


def arg_extreme(rb, x, axis, keepdims, largest, last):
    """Index of the first (or last) max/min of x along `axis`, int64: reduce to the extreme,
    mark where x equals it, and take the smallest (largest) marked index. NaN counts as the
    extreme when present (NumPy's argmax/argmin pick the first NaN). Needs a static axis size."""
    shape = x.type.shape
    n = shape[axis] if shape is not None else None
    if not isinstance(n, int):
        return None
    if x.type.dtype not in MINMAX_TYPES:
        x = cast(rb, x, dt.float32 if x.type.dtype.is_float else dt.int64)
    ext = reduce(rb, "ReduceMax" if largest else "ReduceMin", x, [axis], 1)
    hit = rb.emit1("Equal", [x, ext])
    if x.type.dtype.is_float:  # the extreme is NaN exactly when the slice holds one
        nan_ext = rb.emit1("Not", [rb.emit1("Equal", [ext, ext])])
        nan_x = rb.emit1("Not", [rb.emit1("Equal", [x, x])])
        hit = rb.emit1("Or", [hit, rb.emit1("And", [nan_ext, nan_x])])
    idx = ramp(rb, n, axis, len(shape))
    miss = rb.constant(np.asarray(-1 if last else n, dtype=np.int64), name="miss")
    picked = rb.emit1("Where", [hit, idx, miss])
    return reduce(rb, "ReduceMax" if last else "ReduceMin", picked, [axis], keepdims)


def _arg_rule(largest):
    def rule(rb, node, ins):
        x = ins[0]
        rank = x.type.rank
        if not rank:
            return None
        a = node.attrs
        out = arg_extreme(rb, x, a["axis"] % rank, a["keepdims"], largest, a["select_last_index"])
        return None if out is None else [out]

    return rule


lower_argmax = lowering("ArgMax")(_arg_rule(True))
lower_argmin = lowering("ArgMin")(_arg_rule(False))
