"""Ops that make, name or re-view tensors: Identity, Constant, Shape, Reshape."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ._shape import ints, numel, same_as
from .registry import GENERATOR, MOVEMENT, VIEW, Attr, Tier, op

op("Identity", inputs=("input",), outputs=("output",), infer=same_as(0),
   reference=lambda x: x, groups={MOVEMENT, VIEW}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="Returns its input unchanged.")


def _constant_value(attrs):
    for k in ("value", "sparse_value"):
        if attrs.get(k) is not None:
            return np.asarray(attrs[k])
    scalars = {"value_float": np.float32, "value_int": np.int64}
    for k, t in scalars.items():
        if attrs.get(k) is not None:
            return np.asarray(attrs[k], dtype=t)
    lists = {"value_floats": np.float32, "value_ints": np.int64}
    for k, t in lists.items():
        if attrs.get(k) is not None:
            return np.asarray(attrs[k], dtype=t)
    if attrs.get("value_string") is not None:
        return np.asarray(attrs["value_string"], dtype=object)
    if attrs.get("value_strings") is not None:
        return np.asarray(list(attrs["value_strings"]), dtype=object)
    return None


def _constant_infer(ctx):
    v = _constant_value(ctx.attrs)
    if v is None:
        raise ctx.error("needs exactly one value attribute")
    return [dt.type_of(v)]


op("Constant", inputs=(), outputs=("output",),
   attrs=(Attr("value", "tensor", None), Attr("sparse_value", "tensor", None),
          Attr("value_float", "float", None), Attr("value_floats", "floats", None),
          Attr("value_int", "int", None), Attr("value_ints", "ints", None),
          Attr("value_string", "string", None), Attr("value_strings", "strings", None)),
   infer=_constant_infer, reference=lambda **attrs: _constant_value(attrs),
   groups={GENERATOR}, tier=Tier.PRIMITIVE, onnx_since=1,
   doc="A constant tensor given by exactly one of its attributes.")


def _shape_slice(shape, start, end):
    r = len(shape)
    start = max(0, min(r, start + r if start < 0 else start))
    end = r if end is None else max(0, min(r, end + r if end < 0 else end))
    return shape[start:end]


def _shape_infer(ctx):
    r = ctx.rank(0)
    n = None if r is None else len(_shape_slice(range(r), ctx.attrs["start"], ctx.attrs["end"]))
    return [dt.TensorType((n,), dt.int64)]


def _shape_known(ctx):
    t = ctx.input(0)
    if not t.is_static:
        return [None]
    return [np.asarray(_shape_slice(t.shape, ctx.attrs["start"], ctx.attrs["end"]), dtype=np.int64)]


op("Shape", inputs=("data",), outputs=("shape",),
   attrs=(Attr("start", "int", 0), Attr("end", "int", None)),
   infer=_shape_infer, known_value=_shape_known,
   reference=lambda x, start, end: np.asarray(_shape_slice(x.shape, start, end), dtype=np.int64),
   groups={GENERATOR}, tier=Tier.HIGH, onnx_since=1,
   doc="The shape of the input as a 1-D int64 tensor (optionally a [start, end) slice of it).")


def _reshape_target(in_shape, target, allowzero):
    """Resolve 0 (copy) and -1 (infer) entries; None where unknown."""
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            out.append(in_shape[i] if in_shape is not None and i < len(in_shape) else None)
        else:
            out.append(d)
    if -1 in out:
        total = numel(in_shape)
        rest = [d for d in out if d != -1]
        if total is not None and all(isinstance(d, int) for d in rest):
            known = math.prod(rest)
            out[out.index(-1)] = total // known if known else 0
        else:
            out[out.index(-1)] = None
    return tuple(out)


def _reshape_infer(ctx):
    target = ints(ctx.value(1))
    if target is None:
        n = ctx.shape(1)[0] if ctx.shape(1) else None
        return [dt.TensorType(None if not isinstance(n, int) else (None,) * n, ctx.dtype(0))]
    if target.count(-1) > 1:
        raise ctx.error(f"shape {target} has more than one -1")
    shape = _reshape_target(ctx.shape(0), target, ctx.attrs["allowzero"])
    a, b = numel(ctx.shape(0)), numel(shape)
    if a is not None and b is not None and a != b:
        raise ctx.error(f"cannot reshape {list(ctx.shape(0))} ({a} elements) to {target}")
    return [dt.TensorType(shape, ctx.dtype(0))]


def _reshape_ref(data, shape, allowzero):
    target = _reshape_target(data.shape, [int(d) for d in shape], allowzero)
    return data.reshape(target)


def _reshape_from_onnx(ic):
    if ic.opset < 5 and "shape" in ic.attrs:  # opset 1-4 carried the shape as an attribute
        return ic.emit("Reshape", [ic.inputs[0], ic.const(np.asarray(ic.attrs["shape"], np.int64))])
    return ic.emit("Reshape", ic.inputs, ic.attrs)


op("Reshape", inputs=("data", "shape:I"), outputs=("reshaped",), types={"I": frozenset({dt.int64})},
   attrs=(Attr("allowzero", "int", 0),), infer=_reshape_infer, reference=_reshape_ref,
   groups={MOVEMENT, VIEW}, tier=Tier.PRIMITIVE, onnx_since=5, from_onnx=_reshape_from_onnx,
   doc="Same data, new shape; 0 copies the input dim (unless allowzero), -1 is inferred.")
