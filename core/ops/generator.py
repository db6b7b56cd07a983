"""Generator ops: tensors made from shapes and scalars rather than from input data
(ConstantOfShape, EyeLike, Trilu, Range, Size).

Their outputs are often shape-like values feeding Reshape/Expand/Slice, so they fold at compile
time when their inputs are known, but only while the result stays small (`fold_small`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..aligned import aligned_empty
from ._movement_util import ALL, FOLD_LIMIT, I64, STD, fold_small, scalar_of, value_len, zero_of
from ._shape import ints, numel
from .registry import GENERATOR, Attr, Tier, op

# -- ConstantOfShape -----------------------------------------------------------------------------


def _fill_value(ctx, value):
    if value is None:
        return np.zeros((), np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise ctx.error(f"'value' must hold exactly one element, got shape {list(value.shape)}")
    return value.reshape(())


def _cos_infer(ctx):
    fill = _fill_value(ctx, ctx.attrs["value"])
    dtype = dt.from_numpy(fill.dtype)
    s = ctx.shape(0)
    if s is not None and len(s) != 1:
        raise ctx.error(f"the shape input must be 1-D, got rank {len(s)}")
    shape = ints(ctx.value(0))
    if shape is None:
        n = value_len(ctx, 0)
        return [dt.TensorType(None if n is None else (None,) * n, dtype)]
    if any(d < 0 for d in shape):
        raise ctx.error(f"shape {shape} has a negative dim")
    return [dt.TensorType(tuple(shape), dtype)]


def _cos_ref(shape, value=None):
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(())
    if fill.dtype.hasobject:
        return np.full(tuple(ints(shape)), fill, dtype=fill.dtype)
    out = aligned_empty(tuple(ints(shape)), fill.dtype)  # a folded weight (the light models') is read in place
    out[...] = fill
    return out


op("ConstantOfShape", inputs=("input:I",), outputs=("output",), types={"I": I64},
   attrs=(Attr("value", "tensor", None),), infer=_cos_infer, reference=_cos_ref,
   known_value=fold_small(_cos_infer, _cos_ref), groups={GENERATOR}, tier=Tier.HIGH,
   onnx_since=9,
   doc="A tensor of the given shape filled with the one-element `value` (default float32 0).")


# -- EyeLike / Trilu -----------------------------------------------------------------------------

EYE_TYPES = dt.NUMERIC | {dt.bool_}


def _eyelike_infer(ctx):
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 2:
        raise ctx.error(f"expects a 2-D input, got rank {len(shape)}")
    dtype = ctx.attrs["dtype"] or ctx.dtype(0)
    if dtype not in EYE_TYPES:
        raise ctx.error(f"cannot make an identity matrix of {dtype}")
    return [dt.TensorType(shape if shape is not None else (None, None), dtype)]


def _eyelike_ref(x, dtype=None, k=0):
    npdt = x.dtype if dtype is None else dtype.np
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=npdt)


def _eyelike_known(ctx):
    """The result depends only on the input's shape, so it is known whenever that is static."""
    t = _eyelike_infer(ctx)[0]
    if not t.is_static or t.numel > FOLD_LIMIT:
        return [None]
    return [np.eye(*t.shape, k=ctx.attrs["k"], dtype=t.dtype.np)]


op("EyeLike", inputs=("input:T1",), outputs=("output:T2",),
   types={"T1": EYE_TYPES, "T2": EYE_TYPES},
   attrs=(Attr("dtype", "dtype", None), Attr("k", "int", 0)),
   infer=_eyelike_infer, reference=_eyelike_ref, known_value=_eyelike_known,
   groups={GENERATOR}, tier=Tier.HIGH, onnx_since=9,
   doc="A 2-D matrix shaped like the input with ones on diagonal k (default: the input's type).")


def _trilu_infer(ctx):
    shape = ctx.shape(0)
    if shape is not None and len(shape) < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {len(shape)}")
    if ctx.has(1):
        scalar_of(ctx, 1)
    return [ctx.input(0)]


def _trilu_ref(x, k=None, upper=1):
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    rows, cols = x.shape[-2:]
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    keep = (j - i >= k) if upper else (j - i <= k)
    return np.where(keep, x, zero_of(x.dtype)).astype(x.dtype)


op("Trilu", inputs=("input:T", "k:I?"), outputs=("output:T",), types={"T": STD, "I": I64},
   attrs=(Attr("upper", "int", 1),), infer=_trilu_infer, reference=_trilu_ref,
   groups={GENERATOR}, tier=Tier.HIGH, onnx_since=14,
   doc="Keeps the upper (or lower) triangle above (below) diagonal k of the last two axes; "
       "zeroes the rest.")


# -- Range ---------------------------------------------------------------------------------------

RANGE_TYPES = frozenset({dt.float32, dt.float64, dt.int16, dt.int32, dt.int64, dt.float16,
                         dt.bfloat16})


def _range_count(start, limit, delta):
    """max(ceil((limit - start) / delta), 0), computed in the inputs' own type (0-D arrays) as
    ONNX does: exactly for integers, and with float32 rounding for float32 inputs."""
    if delta == 0:
        raise ValueError("delta must be non-zero")
    if start.dtype.kind in "iu":
        s, lim, d = int(start), int(limit), int(delta)
        return max(0, -((s - lim) // d))
    with np.errstate(all="ignore"):
        q = float((limit - start) / delta)
    if not math.isfinite(q):  # inf/NaN bounds, or a count past float range: no tensor has it
        raise ValueError(f"the element count ({limit} - {start}) / {delta} is not finite")
    return max(0, math.ceil(q))


def _scalars(vals, npdt):
    return [np.asarray(v).reshape(-1)[0].astype(npdt) for v in vals]


def _stash(dtype, stash_type):
    """The type Range computes in: `stash_type` for float16/bfloat16 inputs, else the input's."""
    if dtype in (dt.float16, dt.bfloat16) and stash_type is not None:
        return stash_type.np
    return dtype.np


def _range_infer(ctx):
    for i in range(3):
        s = ctx.shape(i)
        if s is not None and numel(s) not in (None, 1):
            raise ctx.error(f"input {i} must be a scalar, got shape {list(s)}")
    st = ctx.attrs["stash_type"]
    if st is not None and not st.is_float:
        raise ctx.error(f"stash_type must be a float type, got {st}")
    vals = [ctx.value(i) for i in range(3)]
    if any(v is None for v in vals):
        return [dt.TensorType((None,), ctx.dtype(0))]
    npdt = _stash(ctx.dtype(0), st)
    start, limit, delta = _scalars(vals, npdt)
    if delta == 0:
        raise ctx.error("delta must be non-zero")
    try:
        n = _range_count(start, limit, delta)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    return [dt.TensorType((n,), ctx.dtype(0))]


def _range_ref(start, limit, delta, stash_type=dt.float32):
    out = start.dtype
    npdt = _stash(dt.from_numpy(out), stash_type)
    s, lim, d = _scalars((start, limit, delta), npdt)
    n = _range_count(s, lim, d)
    # start + i * delta, each element computed directly (no running sum to drift)
    return (s + np.arange(n).astype(npdt) * d).astype(npdt).astype(out)


def _range_from_onnx(ic):
    attrs = dict(ic.attrs)
    x = ic.inputs[0]
    low = x is not None and getattr(x.type, "dtype", None) in (dt.float16, dt.bfloat16)
    if ic.opset < 27 and low and "stash_type" not in attrs:
        attrs["stash_type"] = x.type.dtype  # before opset 27 these were computed in their own type
    return ic.emit("Range", ic.inputs, attrs)


op("Range", inputs=("start:T", "limit:T", "delta:T"), outputs=("output:T",),
   types={"T": RANGE_TYPES}, attrs=(Attr("stash_type", "dtype", dt.float32),),
   infer=_range_infer, reference=_range_ref, known_value=fold_small(_range_infer, _range_ref),
   from_onnx=_range_from_onnx, groups={GENERATOR}, tier=Tier.HIGH, onnx_since=11,
   doc="start, start + delta, ... up to limit (exclusive): max(ceil((limit - start) / delta), 0) "
       "elements.")


# -- Size ----------------------------------------------------------------------------------------

def _size_known(ctx):
    n = numel(ctx.shape(0))
    return [None if n is None else np.asarray(n, dtype=np.int64)]


op("Size", inputs=("data:T",), outputs=("size:I",), types={"T": ALL, "I": I64},
   infer=lambda ctx: [dt.TensorType((), dt.int64)], known_value=_size_known,
   reference=lambda x: np.asarray(x.size, dtype=np.int64), groups={GENERATOR}, tier=Tier.HIGH,
   onnx_since=1,
   doc="The number of elements of the input, as an int64 scalar.")
