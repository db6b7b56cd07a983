"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin.

The Reduce* ops take their axes as an optional int64 input (the newest ONNX form); older opsets
carried them as an attribute, which the importer adapter turns into a constant input. Reducing
over an empty set gives the reduction's identity (0 for sums, 1 for products, -inf / the type's
lowest value for max, -inf for log-sums), as ONNX specifies. With `noop_with_empty_axes` and no
axes the set of reduced axes is empty: ReduceSum/Mean/Max/Min/Prod return the input, the others
their elementwise part (|x|, x*x, sqrt(x*x), log x, log exp x).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._shape import ints
from .registry import ACCUMULATES, REDUCE, Attr, Tier, op

#: The float types ONNX normalisation and softmax-like ops take.
FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
#: ONNX's type list for most reductions: floats and the 32/64-bit integers.
RED = FLT | {dt.int32, dt.int64, dt.uint32, dt.uint64}
#: ReduceMax/ReduceMin also take 8-bit integers and bool (opset 20).
RED_MINMAX = RED | {dt.int8, dt.uint8, dt.bool_}
I64 = frozenset({dt.int64})

_HALF = ("float16", "bfloat16")  # dtype names: an ml_dtypes type compares by name without the import


def wide(x: np.ndarray) -> np.ndarray:
    """Half-precision floats computed in float32 (NumPy has no bfloat16 kernels, and float16
    accumulation loses too much); every other type as is. Callers cast the result back."""
    return x.astype(np.float32) if x.dtype.name in _HALF else x


def float_work(x: np.ndarray) -> np.ndarray:
    """x as a float array for math that needs one (float64 for integers, float32 for halves)."""
    if x.dtype.kind in "iub":
        return x.astype(np.float64)
    return wide(x)


# -- shape rule ------------------------------------------------------------------------------------
def _axes_value(ctx):
    """The axes input: a list when known, [] when absent or known empty, None when unknown."""
    if not ctx.has(1):
        return []
    shape = ctx.shape(1)
    if shape is not None and len(shape) != 1:
        raise ctx.error(f"axes must be a 1-D tensor, got shape {list(shape)}")
    axes = ints(ctx.value(1))
    if axes is None and shape is not None and shape[0] == 0:
        return []
    return axes


def _reduce_infer(ctx):
    x = ctx.input(0)
    shape, keep = x.shape, bool(ctx.attrs["keepdims"])
    axes = _axes_value(ctx)
    if axes == [] and ctx.attrs["noop_with_empty_axes"]:
        return [x]
    if axes is None:  # axes computed at run time: the rank may still be known
        n = ctx.shape(1)[0] if ctx.shape(1) is not None else None
        if shape is None:
            return [x.with_shape(None)]
        if keep:
            return [x.with_shape(tuple(1 if d == 1 else None for d in shape))]
        if not isinstance(n, int):
            return [x.with_shape(None)]
        if n > len(shape):
            raise ctx.error(f"{n} axes given for a rank-{len(shape)} input")
        return [x.with_shape((None,) * (len(shape) - n))]
    if shape is None:
        return [x.with_shape(None if keep or axes else ())]
    rank = len(shape)
    axes = [ctx.axis(a, rank) for a in axes] if axes else list(range(rank))
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} contain a duplicate")
    if keep:
        out = tuple(1 if i in axes else d for i, d in enumerate(shape))
    else:
        out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return [x.with_shape(out)]


# -- reference -------------------------------------------------------------------------------------
def _resolve_axes(x: np.ndarray, axes, noop: int):
    """Axes as a tuple of non-negative ints. No axes with noop_with_empty_axes is the empty tuple:
    a reduction over no axes, so each output element "reduces" one input element and the op's
    elementwise part still applies (ReduceL1 gives |x|, ReduceSumSquare x*x, ReduceLogSum log x),
    as the ONNX function bodies, onnxruntime and onnx.reference do; NumPy takes axis=() so."""
    axes = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not axes:
        return () if noop else tuple(range(x.ndim))
    r = x.ndim
    for a in axes:
        if not -r <= a < max(r, 1):
            raise ValueError(f"axis {a} out of range for rank {r}")
    out = tuple(a % r if r else 0 for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"axes {axes} contain a duplicate")
    return out if r else ()


def _count(x: np.ndarray, axes) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _lowest(dtype: np.dtype):
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _highest(dtype: np.dtype):
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


def _sum(x, axes, keep):
    w = wide(x)
    return np.sum(w, axis=axes, keepdims=keep, dtype=w.dtype)


def _mean(x, axes, keep):
    w = float_work(x)
    with np.errstate(invalid="ignore", divide="ignore"):  # an empty set gives NaN (0 / 0)
        return np.sum(w, axis=axes, keepdims=keep) / w.dtype.type(_count(x, axes))


def _max(x, axes, keep):
    w = wide(x)
    return np.max(w, axis=axes, keepdims=keep, initial=_lowest(w.dtype))


def _min(x, axes, keep):
    w = wide(x)
    return np.min(w, axis=axes, keepdims=keep, initial=_highest(w.dtype))


def _prod(x, axes, keep):
    w = wide(x)
    return np.prod(w, axis=axes, keepdims=keep, dtype=w.dtype)


def _l1(x, axes, keep):
    w = wide(x)
    return np.sum(np.abs(w), axis=axes, keepdims=keep, dtype=w.dtype)


def _sum_square(x, axes, keep):
    w = wide(x)
    return np.sum(w * w, axis=axes, keepdims=keep, dtype=w.dtype)


def _l2(x, axes, keep):
    w = float_work(x)
    return np.sqrt(np.sum(w * w, axis=axes, keepdims=keep))


def _log_sum(x, axes, keep):
    w = float_work(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.sum(w, axis=axes, keepdims=keep))


def _log_sum_exp(x, axes, keep):
    # Shift by the max so large inputs do not overflow; an all -inf (or empty) slice has no
    # finite max, so it is shifted by 0 and gives log(0) = -inf.
    w = float_work(x)
    m = np.max(w, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(w.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sum(np.exp(w - m), axis=axes, keepdims=True)
        out = np.log(s) + m
    return out if keep else np.squeeze(out, axis=axes)


def _reference(fn):
    def ref(data, axes=None, *, keepdims, noop_with_empty_axes):
        ax = _resolve_axes(data, axes, noop_with_empty_axes)
        out = np.asarray(fn(data, ax, bool(keepdims)))
        if data.dtype.kind in "iu" and out.dtype.kind == "f":
            out = np.trunc(out)  # integer results of float math truncate, as a cast would
        return out.astype(data.dtype)

    return ref


def _reduce_from_onnx(name: str, axes_input_since: int):
    def adapter(ic):
        attrs = dict(ic.attrs)
        if ic.opset >= axes_input_since:
            return ic.emit(name, ic.inputs, attrs)
        axes = attrs.pop("axes", None)  # before `axes_input_since`, an attribute (absent = all)
        inputs = [ic.inputs[0]]
        if axes is not None:
            inputs.append(ic.const(np.asarray(list(axes), dtype=np.int64)))
        return ic.emit(name, inputs, attrs)

    return adapter


def _reduce(name, fn, types, since, tier, doc, groups=frozenset()):
    return op(name, inputs=("data:T", "axes:I?"), outputs=("reduced:T",), types={"T": types, "I": I64},
              attrs=(Attr("keepdims", "int", 1), Attr("noop_with_empty_axes", "int", 0)),
              infer=_reduce_infer, reference=_reference(fn), groups={REDUCE, *groups}, tier=tier,
              onnx_since=since, from_onnx=_reduce_from_onnx(name, since), doc=doc)


_reduce("ReduceSum", _sum, RED, 13, Tier.PRIMITIVE, "Sum over the given axes (all when none given).",
        {ACCUMULATES})
_reduce("ReduceMax", _max, RED_MINMAX, 18, Tier.PRIMITIVE,
        "Maximum over the given axes; an empty set gives the type's lowest value (-inf for floats).")
_reduce("ReduceMin", _min, RED_MINMAX, 18, Tier.PRIMITIVE,
        "Minimum over the given axes; an empty set gives the type's highest value (+inf for floats).")
_reduce("ReduceProd", _prod, RED, 18, Tier.PRIMITIVE, "Product over the given axes.")
_reduce("ReduceMean", _mean, RED, 18, Tier.HIGH,
        "Arithmetic mean over the given axes (integer results truncate toward zero).", {ACCUMULATES})
_reduce("ReduceL1", _l1, RED, 18, Tier.HIGH, "Sum of absolute values over the given axes.")
_reduce("ReduceL2", _l2, RED, 18, Tier.HIGH, "Euclidean norm over the given axes.")
_reduce("ReduceSumSquare", _sum_square, RED, 18, Tier.HIGH, "Sum of squares over the given axes.")
_reduce("ReduceLogSum", _log_sum, FLT, 18, Tier.HIGH, "log(sum(x)) over the given axes.")
_reduce("ReduceLogSumExp", _log_sum_exp, FLT, 18, Tier.HIGH,
        "log(sum(exp(x))) over the given axes, computed without overflow.")


# -- ArgMax / ArgMin -------------------------------------------------------------------------------
def _arg_infer(ctx):
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None, dt.int64)]
    if not shape:
        raise ctx.error("input must have rank >= 1")
    axis = ctx.axis(ctx.attrs["axis"], len(shape))
    if shape[axis] == 0:
        raise ctx.error(f"cannot take {ctx.op.name} over axis {axis}, which is empty")
    if ctx.attrs["keepdims"]:
        out = shape[:axis] + (1,) + shape[axis + 1:]
    else:
        out = shape[:axis] + shape[axis + 1:]
    return [dt.TensorType(out, dt.int64)]


def _arg_reference(pick):
    def ref(data, *, axis, keepdims, select_last_index):
        if data.ndim == 0:
            raise ValueError("input must have rank >= 1")
        axis = axis % data.ndim
        if data.shape[axis] == 0:
            raise ValueError(f"axis {axis} is empty")
        w = wide(data)
        if select_last_index:  # search the reversed axis, then map the index back
            idx = data.shape[axis] - 1 - pick(np.flip(w, axis), axis=axis, keepdims=True)
        else:
            idx = pick(w, axis=axis, keepdims=True)
        idx = idx.astype(np.int64)
        return idx if keepdims else np.squeeze(idx, axis=axis)

    return ref


for _name, _pick, _what in (("ArgMax", np.argmax, "largest"), ("ArgMin", np.argmin, "smallest")):
    op(_name, inputs=("data:T",), outputs=("reduced:I",), types={"T": dt.NUMERIC, "I": I64},
       attrs=(Attr("axis", "int", 0), Attr("keepdims", "int", 1), Attr("select_last_index", "int", 0)),
       infer=_arg_infer, reference=_arg_reference(_pick), groups={REDUCE}, tier=Tier.HIGH,
       onnx_since=13,
       doc=f"Index (int64) of the {_what} element along `axis`; the first one, or the last one with "
           "select_last_index.")
