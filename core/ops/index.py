"""Index ops: gather/scatter by index tensors, selection, sorting-based and scan ops
(Gather, GatherElements, GatherND, ScatterElements, ScatterND, Scatter, TensorScatter, Compress,
NonZero, OneHot, Unique, TopK, CumSum, CumProd, ReverseSequence).

Index tensors are int64 (or int32 where ONNX allows it); negative indices count from the back.
References check index ranges and fail naming the bad index rather than wrapping silently.
"""

from __future__ import annotations

import zlib

import numpy as np

from .. import dtypes as dt
from ..errors import InputError
from ._movement_util import I64, IND, STD, fold_small, merge_dim, scalar_of
from ._shape import ints, numel
from .registry import MOVEMENT, Attr, Tier, op


def index_message(index: int, bound: int, negative: bool = True) -> str:
    """The one wording of an out-of-range index, shared by the reference and the native backends
    (which record the first bad index of a run and raise after it)."""
    if bound <= 0:
        return f"index {index} is out of range: the indexed dim is empty"
    valid = f"[{-bound}, {bound - 1}]" if negative else f"[0, {bound - 1}]"
    return f"index {index} is out of range for a dim of {bound} (valid: {valid})"


#: Kinds in a native error record: negative indices wrap once / must be non-negative.
WRAPS, NON_NEGATIVE = 1, 2


def recorded_index_error(record, sites: dict) -> InputError | None:
    """The InputError for a native backend's error record [kind, site, index, bound] (None when
    the run met no bad index). `sites` maps a site id to the node's description."""
    kind, site, index, bound = (int(v) for v in record[:4])
    if kind == 0:
        return None
    where = sites.get(site, f"an indexing node (site {site})")
    return InputError(f"{where}: {index_message(index, bound, kind == WRAPS)}")


def site_id(name: str) -> int:
    """A node's id in native error records: a hash of its (unique) instruction name, so kernels
    need no numbering pass and the runtime maps it back from the names it has."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _norm_index(idx, dim):
    """Negative indices count from the back; anything outside [-dim, dim) is bad input (ONNX
    makes it an error): an InputError, which the interpreter prefixes with the node's name."""
    idx = np.asarray(idx).astype(np.int64)
    bad = (idx < -dim) | (idx >= dim)
    if bad.any():
        raise InputError(index_message(int(idx[bad].reshape(-1)[0]), dim))
    return np.where(idx < 0, idx + dim, idx)


def _check_known(ctx, i, dims):
    """A constant index tensor (input `i`) out of range is a compile-time GraphError naming the
    node. `dims`: the bound of every entry (an int) or one bound per entry of the last axis;
    unknown (symbolic) bounds are skipped."""
    v = ctx.value(i)
    if v is None or np.asarray(v).dtype.kind not in "iu" or np.asarray(v).size == 0:
        return
    v = np.asarray(v).astype(np.int64)
    cols = [dims] if not isinstance(dims, (list, tuple)) else list(dims)
    if isinstance(dims, (list, tuple)) and (v.ndim == 0 or v.shape[-1] != len(cols)):
        return
    for c, d in enumerate(cols):
        if not isinstance(d, int):
            continue
        col = v if not isinstance(dims, (list, tuple)) else v[..., c]
        bad = (col < -d) | (col >= d)
        if bad.any():
            raise ctx.error(f"constant indices: {index_message(int(col[bad].reshape(-1)[0]), d)}")


def _merge_shapes(ctx, a, b, what):
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise ctx.error(f"{what}: ranks differ ({len(a)} vs {len(b)})")
    return tuple(merge_dim(ctx, x, y, what) for x, y in zip(a, b))


# -- Gather family -------------------------------------------------------------------------------

def _gather_infer(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    if data is not None and len(data) == 0:
        raise ctx.error("cannot gather from a scalar")
    if data is None or idx is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    axis = ctx.axis(ctx.attrs["axis"], len(data))
    _check_known(ctx, 1, data[axis])
    return [dt.TensorType(data[:axis] + idx + data[axis + 1:], ctx.dtype(0))]


def _gather_ref(data, indices, axis=0):
    axis %= data.ndim
    # np.take returns a NumPy scalar for a scalar index; the interpreter wants an ndarray
    return np.asarray(np.take(data, _norm_index(indices, data.shape[axis]), axis=axis))


op("Gather", inputs=("data:T", "indices:Tind"), outputs=("output:T",),
   types={"T": STD, "Tind": IND}, attrs=(Attr("axis", "int", 0),),
   infer=_gather_infer, reference=_gather_ref, groups={MOVEMENT}, tier=Tier.PRIMITIVE,
   onnx_since=1,
   doc="Takes the entries of `data` along `axis` at the given indices (output rank = r + q - 1).")


def _gather_elements_infer(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    if data is not None and idx is not None and len(data) != len(idx):
        raise ctx.error(f"data rank {len(data)} and indices rank {len(idx)} differ")
    rank = len(data) if data is not None else len(idx) if idx is not None else None
    if rank == 0:
        raise ctx.error("expects inputs of rank >= 1")
    axis = ctx.axis(ctx.attrs["axis"], rank)
    if data is not None:
        _check_known(ctx, 1, data[axis])
        for d, (a, b) in enumerate(zip(data, idx or ())):
            if d != axis and isinstance(a, int) and isinstance(b, int) and b > a:
                raise ctx.error(f"indices shape {list(idx)} is larger than data shape {list(data)} at axis {d} "
                                f"(only the gathered axis {axis} may differ freely)")
    return [dt.TensorType(idx if idx is not None else (None,) * rank if rank else None, ctx.dtype(0))]


def _gather_elements_ref(data, indices, axis=0):
    # out[i][j] = data[i][indices[i][j]] (axis 1): outside the axis, indices may be smaller than
    # data (the op's text constrains only the gathered axis; onnxruntime takes them, onnx.reference
    # refuses), and then read the leading part of it.
    axis %= data.ndim
    if any(b > a for d, (a, b) in enumerate(zip(data.shape, indices.shape)) if d != axis):
        raise ValueError(f"indices shape {list(indices.shape)} is larger than data shape {list(data.shape)} "
                         f"outside axis {axis}")
    data = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))]
    return np.take_along_axis(data, _norm_index(indices, data.shape[axis]), axis=axis)


op("GatherElements", inputs=("data:T", "indices:Tind"), outputs=("output:T",),
   types={"T": STD, "Tind": IND}, attrs=(Attr("axis", "int", 0),),
   infer=_gather_elements_infer, reference=_gather_elements_ref, groups={MOVEMENT},
   tier=Tier.KERNEL, onnx_since=11,
   doc="out[i][j][k] = data[index[i][j][k]][j][k] (for axis 0): an elementwise gather.")


def _gather_nd_infer(ctx):
    data, idx, b = ctx.shape(0), ctx.shape(1), ctx.attrs["batch_dims"]
    if data is not None and len(data) < 1 or idx is not None and len(idx) < 1:
        raise ctx.error("data and indices must have rank >= 1")
    if b < 0 or (data is not None and b >= len(data)) or (idx is not None and b >= len(idx)):
        raise ctx.error(f"batch_dims {b} must be less than both ranks")
    if data is None or idx is None or not isinstance(idx[-1], int):
        return [dt.TensorType(None, ctx.dtype(0))]
    k = idx[-1]
    if k > len(data) - b:
        raise ctx.error(f"index tuples of length {k} are too long for data rank {len(data)} with "
                        f"{b} batch dims")
    _check_known(ctx, 1, list(data[b:b + k]))
    batch = tuple(merge_dim(ctx, x, y, "batch dims") for x, y in zip(data[:b], idx[:b]))
    return [dt.TensorType(batch + idx[b:-1] + data[b + k:], ctx.dtype(0))]


def _gather_nd_ref(data, indices, batch_dims=0):
    b, k = batch_dims, indices.shape[-1]
    out_shape = indices.shape[:-1] + data.shape[b + k:]
    nb = numel(data.shape[:b])
    d = data.reshape((nb,) + data.shape[b:])
    idx = indices.reshape((nb, -1, k)) if nb else indices.reshape((0, 0, k))
    cols = [_norm_index(idx[..., c], data.shape[b + c]) for c in range(k)]
    parts = [d[j][tuple(c[j] for c in cols)] for j in range(nb)]
    if not parts:
        return np.empty(out_shape, dtype=data.dtype)
    return np.stack(parts).reshape(out_shape)


op("GatherND", inputs=("data:T", "indices:I"), outputs=("output:T",), types={"T": STD, "I": I64},
   attrs=(Attr("batch_dims", "int", 0),), infer=_gather_nd_infer, reference=_gather_nd_ref,
   groups={MOVEMENT}, tier=Tier.KERNEL, onnx_since=11,
   doc="Gathers slices of `data` addressed by the index tuples in the last axis of `indices`.")


# -- Scatter family ------------------------------------------------------------------------------

REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _check_reduction(ctx):
    r = ctx.attrs.get("reduction", "none")
    if r not in REDUCTIONS:
        raise ctx.error(f"unknown reduction '{r}' (expected one of {', '.join(REDUCTIONS)})")


def _scatter_elements_infer(ctx):
    _check_reduction(ctx)
    data = ctx.shape(0)
    idx = _merge_shapes(ctx, ctx.shape(1), ctx.shape(2), "indices and updates shapes")
    if data is not None and idx is not None and len(data) != len(idx):
        raise ctx.error(f"data rank {len(data)} and indices rank {len(idx)} differ")
    if data is not None:
        if len(data) == 0:
            raise ctx.error("expects inputs of rank >= 1")
        _check_known(ctx, 1, data[ctx.axis(ctx.attrs["axis"], len(data))])
    return [ctx.input(0)]


def _scatter_elements_ref(data, indices, updates, axis=0, reduction="none"):
    axis %= data.ndim
    out = data.copy()
    key = list(np.indices(indices.shape, sparse=True))
    key[axis] = _norm_index(indices, data.shape[axis])
    fn = REDUCTIONS[reduction]
    if fn is None:
        out[tuple(key)] = updates
    else:
        fn.at(out, tuple(key), updates)
    return out


_SCATTER_DOC = ("Copies `data` and writes `updates` at the positions `indices` gives along `axis` "
                "(optionally combining with add/mul/max/min).")
op("ScatterElements", inputs=("data:T", "indices:Tind", "updates:T"), outputs=("output:T",),
   types={"T": STD, "Tind": IND},
   attrs=(Attr("axis", "int", 0), Attr("reduction", "string", "none")),
   infer=_scatter_elements_infer, reference=_scatter_elements_ref, groups={MOVEMENT},
   tier=Tier.KERNEL, onnx_since=11, doc=_SCATTER_DOC)


def _scatter_from_onnx(ic):
    return ic.emit("ScatterElements", ic.inputs, ic.attrs)


op("Scatter", inputs=("data:T", "indices:Tind", "updates:T"), outputs=("output:T",),
   types={"T": STD, "Tind": IND}, attrs=(Attr("axis", "int", 0),),
   infer=_scatter_elements_infer, reference=_scatter_elements_ref, from_onnx=_scatter_from_onnx,
   groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=9,
   doc="Deprecated ONNX alias of ScatterElements (no reduction); the importer emits "
       "ScatterElements.")


def _scatter_nd_infer(ctx):
    _check_reduction(ctx)
    data, idx, upd = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if idx is not None and len(idx) == 0:
        raise ctx.error("indices must have rank >= 1")
    if data is not None and idx is not None and isinstance(idx[-1], int):
        k = idx[-1]
        if k > len(data):
            raise ctx.error(f"index tuples of length {k} are too long for data rank {len(data)}")
        _check_known(ctx, 1, list(data[:k]))
        _merge_shapes(ctx, upd, idx[:-1] + data[k:], "updates shape vs indices/data")
    return [ctx.input(0)]


def _scatter_nd_ref(data, indices, updates, reduction="none"):
    out = data.copy()
    k = indices.shape[-1]
    idx = indices.reshape(-1, k)
    upd = updates.reshape((idx.shape[0],) + data.shape[k:])
    key = tuple(_norm_index(idx[:, c], data.shape[c]) for c in range(k))
    fn = REDUCTIONS[reduction]
    if k == 0:  # every index tuple addresses the whole tensor
        for u in upd:
            out[...] = u if fn is None else fn(out, u)
    elif fn is None:
        out[key] = upd
    else:
        fn.at(out, key, upd)
    return out


op("ScatterND", inputs=("data:T", "indices:I", "updates:T"), outputs=("output:T",),
   types={"T": STD, "I": I64}, attrs=(Attr("reduction", "string", "none"),),
   infer=_scatter_nd_infer, reference=_scatter_nd_ref, groups={MOVEMENT}, tier=Tier.KERNEL,
   onnx_since=11,
   doc="Copies `data` and writes `updates` at the index tuples in the last axis of `indices` "
       "(optionally combining with add/mul/max/min).")


def _tensor_scatter_infer(ctx):
    mode = ctx.attrs["mode"]
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode must be 'linear' or 'circular', got '{mode}'")
    cache, upd = ctx.shape(0), ctx.shape(1)
    rank = len(cache) if cache is not None else len(upd) if upd is not None else None
    if rank is None:
        return [ctx.input(0)]
    if rank < 2:
        raise ctx.error("past_cache must have rank >= 2 (batch and sequence axes)")
    axis = ctx.axis(ctx.attrs["axis"], rank)
    if axis == 0:
        raise ctx.error("axis cannot be 0 (the batch axis)")
    if cache is not None and upd is not None:
        if len(upd) != rank:
            raise ctx.error(f"update rank {len(upd)} differs from past_cache rank {rank}")
        for i, (c, u) in enumerate(zip(cache, upd)):
            if i == axis:
                if isinstance(c, int) and isinstance(u, int) and u > c:
                    raise ctx.error(f"update sequence length {u} exceeds the cache's {c}")
            else:
                merge_dim(ctx, c, u, f"past_cache and update dims on axis {i}")
    if ctx.has(2) and cache is not None:
        wshape = ctx.shape(2)
        if wshape is not None:
            if len(wshape) != 1:
                raise ctx.error("write_indices must be 1-D (one index per batch entry)")
            merge_dim(ctx, wshape[0], cache[0], "write_indices length and batch size")
    starts = ctx.value(2) if ctx.has(2) else None
    if mode == "linear" and starts is not None and cache is not None and upd is not None:
        size, seq = cache[axis], upd[axis]
        if isinstance(size, int) and isinstance(seq, int) and seq:
            for b, start in enumerate(ints(starts)):  # a constant window past the end
                if start < 0 or start + seq > size:
                    raise ctx.error(f"batch {b}: writing {seq} entries at {start} overruns a cache "
                                    f"of {size}")
    return [ctx.input(0)]


def _tensor_scatter_ref(past_cache, update, write_indices=None, mode="linear", axis=-2):
    axis %= past_cache.ndim
    out = past_cache.copy()
    size, seq = past_cache.shape[axis], update.shape[axis]
    view = np.moveaxis(out, axis, 1)  # a view: writes land in `out`
    upd = np.moveaxis(update, axis, 1)
    starts = np.zeros(past_cache.shape[0], np.int64) if write_indices is None else write_indices
    for b, start in enumerate(ints(starts)):
        pos = start + np.arange(seq)
        if mode == "circular":
            pos %= size
        elif seq and (start < 0 or pos[-1] >= size):
            raise InputError(f"batch {b}: writing {seq} entries at {start} overruns a cache of {size}")
        view[b, pos] = upd[b]
    return out


op("TensorScatter", inputs=("past_cache:T", "update:T", "write_indices:I?"),
   outputs=("present_cache:T",), types={"T": frozenset(dt.ALL) - {dt.int2, dt.uint2}, "I": I64},
   attrs=(Attr("mode", "string", "linear"), Attr("axis", "int", -2)),
   infer=_tensor_scatter_infer, reference=_tensor_scatter_ref, groups={MOVEMENT},
   tier=Tier.HIGH, onnx_since=24,
   doc="KV-cache update: writes `update` into a copy of `past_cache` along the sequence `axis` "
       "at each batch entry's write index (linear, or wrapping around when circular).")


# -- selection -----------------------------------------------------------------------------------

def _compress_infer(ctx):
    shape, cond = ctx.shape(0), ctx.value(1)
    cshape = ctx.shape(1)
    if cshape is not None and len(cshape) != 1:
        raise ctx.error(f"condition must be 1-D, got rank {len(cshape)}")
    axis = ctx.attrs["axis"]
    if axis is None:
        n = numel(shape)
        if cond is not None and n is not None:
            return [dt.TensorType((int(np.count_nonzero(cond.reshape(-1)[:n])),), ctx.dtype(0))]
        return [dt.TensorType((None,), ctx.dtype(0))]
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    axis = ctx.axis(axis, len(shape))
    d = shape[axis]
    if cond is not None and isinstance(d, int):
        if cond.size > d:
            raise ctx.error(f"condition has {cond.size} entries for an axis of {d}")
        d = int(np.count_nonzero(cond))
    else:
        d = None
    return [dt.TensorType(shape[:axis] + (d,) + shape[axis + 1:], ctx.dtype(0))]


op("Compress", inputs=("input:T", "condition:B"), outputs=("output:T",),
   types={"T": STD, "B": frozenset({dt.bool_})}, attrs=(Attr("axis", "int", None),),
   infer=_compress_infer,
   reference=lambda x, condition, axis=None: np.compress(condition.reshape(-1), x, axis=axis),
   groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=9,
   doc="Keeps the slices along `axis` (or the elements of the flattened input) where condition "
       "is true.")


def _nonzero_ref(x):
    if x.ndim == 0:  # no coordinates to list; one column when the scalar is non-zero
        return np.zeros((0, 1 if bool(x.item()) else 0), dtype=np.int64)
    return np.asarray(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


op("NonZero", inputs=("X:T",), outputs=("Y:I",), types={"T": STD, "I": I64},
   infer=lambda ctx: [dt.TensorType((ctx.rank(0), None), dt.int64)], reference=_nonzero_ref,
   tier=Tier.HIGH, onnx_since=9,
   doc="Coordinates of the non-zero elements, as a (rank, count) int64 tensor in row-major order.")


# -- OneHot --------------------------------------------------------------------------------------

def _onehot_infer(ctx):
    shape = ctx.shape(0)
    vshape = ctx.shape(2)
    if vshape is not None and numel(vshape) not in (None, 2):
        raise ctx.error(f"values must hold [off_value, on_value], got shape {list(vshape)}")
    depth = ctx.value(1)
    if depth is not None:
        if depth.size != 1:
            raise ctx.error(f"depth must be a scalar, got {depth.size} values")
        depth = int(depth.reshape(-1)[0])
        if depth <= 0:
            raise ctx.error(f"depth must be positive, got {depth}")
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(2))]
    r, axis = len(shape), ctx.attrs["axis"]
    if not -r - 1 <= axis <= r:
        raise ctx.error(f"axis {axis} out of range for output rank {r + 1}")
    axis = axis + r + 1 if axis < 0 else axis
    return [dt.TensorType(shape[:axis] + (depth,) + shape[axis:], ctx.dtype(2))]


def _onehot_ref(indices, depth, values, axis=-1):
    depth = int(np.asarray(depth).reshape(-1)[0])
    r = indices.ndim
    axis = axis + r + 1 if axis < 0 else axis
    idx = np.asarray(indices).astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)  # still-out-of-range indices match nothing: all off
    classes = np.arange(depth).reshape([-1 if i == axis else 1 for i in range(r + 1)])
    hot = np.expand_dims(idx, axis) == classes
    off, on = values.reshape(-1)
    return np.where(hot, on, off).astype(values.dtype)


op("OneHot", inputs=("indices:T1", "depth:T2", "values:T3"), outputs=("output:T3",),
   types={"T1": dt.NUMERIC, "T2": dt.NUMERIC, "T3": STD}, attrs=(Attr("axis", "int", -1),),
   infer=_onehot_infer, reference=_onehot_ref, known_value=fold_small(_onehot_infer, _onehot_ref),
   tier=Tier.HIGH, onnx_since=9,
   doc="One-hot encoding along a new `axis` of size depth: on_value at each index, off_value "
       "elsewhere (values = [off, on]).")


# -- Unique / TopK -------------------------------------------------------------------------------

def _unique_infer(ctx):
    shape, axis = ctx.shape(0), ctx.attrs["axis"]
    i64 = dt.int64
    if axis is None:
        return [dt.TensorType((None,), ctx.dtype(0)), dt.TensorType((None,), i64),
                dt.TensorType((numel(shape),), i64), dt.TensorType((None,), i64)]
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))] + [dt.TensorType((None,), i64)] * 3
    axis = ctx.axis(axis, len(shape))
    return [dt.TensorType(shape[:axis] + (None,) + shape[axis + 1:], ctx.dtype(0)),
            dt.TensorType((None,), i64), dt.TensorType((shape[axis],), i64),
            dt.TensorType((None,), i64)]


def _unique_ref(x, axis=None, sorted=1):  # noqa: A002 - the ONNX attribute's name
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:  # re-order by first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))


op("Unique", inputs=("X:T",), outputs=("Y:T", "indices:I?", "inverse_indices:I?", "counts:I?"),
   types={"T": STD, "I": I64}, attrs=(Attr("axis", "int", None), Attr("sorted", "int", 1)),
   infer=_unique_infer, reference=_unique_ref, tier=Tier.HIGH, onnx_since=11,
   doc="Unique elements (or sub-tensors along `axis`), sorted or in first-occurrence order, with "
       "first indices, inverse indices and counts.")


def _topk_infer(ctx):
    shape = ctx.shape(0)
    k = scalar_of(ctx, 1)
    if k is not None and k < 0:
        raise ctx.error(f"k must be >= 0, got {k}")
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0)), dt.TensorType(None, dt.int64)]
    axis = ctx.axis(ctx.attrs["axis"], len(shape))
    if len(shape) == 0:
        raise ctx.error("expects an input of rank >= 1")
    if k is not None and isinstance(shape[axis], int) and k > shape[axis]:
        raise ctx.error(f"k={k} exceeds the axis dim {shape[axis]}")
    out = shape[:axis] + (k,) + shape[axis + 1:]
    return [dt.TensorType(out, ctx.dtype(0)), dt.TensorType(out, dt.int64)]


def _topk_ref(x, k, axis=-1, largest=1, sorted=1):  # noqa: A002 - the ONNX attribute's name
    k = int(np.asarray(k).reshape(-1)[0])
    axis %= x.ndim
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"k={k} out of range for an axis of {n}")
    if largest:
        # Descending with ties by lower index: stable ascending sort of the reversed axis, read
        # backwards, then map positions back to the original axis.
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = n - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def _topk_from_onnx(ic):
    if ic.opset < 10:  # opset 1-9: k was an attribute
        if "k" not in ic.attrs:
            raise ic.error("needs a 'k' attribute")
        attrs = {a: v for a, v in ic.attrs.items() if a != "k"}
        return ic.emit("TopK", [ic.inputs[0], ic.const(np.asarray([ic.attrs["k"]], np.int64))],
                       attrs)
    return ic.emit("TopK", ic.inputs, ic.attrs)


op("TopK", inputs=("X:T", "K:I"), outputs=("Values:T", "Indices:I"),
   types={"T": dt.NUMERIC, "I": I64},
   attrs=(Attr("axis", "int", -1), Attr("largest", "int", 1), Attr("sorted", "int", 1)),
   infer=_topk_infer, reference=_topk_ref, from_onnx=_topk_from_onnx, tier=Tier.KERNEL,
   onnx_since=1,
   doc="The k largest (or smallest) entries along `axis` and their indices; ties go to the lower "
       "index.")


# -- CumSum / CumProd ----------------------------------------------------------------------------

CUM_TYPES = frozenset({dt.uint32, dt.uint64, dt.int32, dt.int64, dt.float16, dt.float32, dt.float64,
                       dt.bfloat16})


def _cum_infer(ctx):
    a = scalar_of(ctx, 1)
    ashape = ctx.shape(1)
    if ashape is not None and (len(ashape) > 1 or numel(ashape) not in (None, 1)):
        raise ctx.error(f"axis must be a scalar, got shape {list(ashape)}")
    if a is not None:
        rank = ctx.rank(0)
        if rank == 0:
            raise ctx.error("expects an input of rank >= 1")
        ctx.axis(a, rank)
    return [ctx.input(0)]


def _cum(fn, identity):
    def ref(x, axis, exclusive=0, reverse=0):
        a = int(np.asarray(axis).reshape(-1)[0]) % x.ndim
        y = np.flip(x, a) if reverse else x
        out = fn(y, axis=a, dtype=x.dtype)
        if exclusive:  # shift by one: out[i] covers y[:i]
            shifted = np.empty_like(out)
            head = [slice(None)] * x.ndim
            head[a] = slice(0, 1)
            shifted[tuple(head)] = identity
            head[a], body = slice(1, None), list(head)
            body[a] = slice(None, -1)
            shifted[tuple(head)] = out[tuple(body)]
            out = shifted
        return np.flip(out, a).copy() if reverse else out

    return ref


_CUM_ATTRS = (Attr("exclusive", "int", 0), Attr("reverse", "int", 0))
op("CumSum", inputs=("x:T", "axis:T2"), outputs=("y:T",), types={"T": CUM_TYPES, "T2": IND},
   attrs=_CUM_ATTRS, infer=_cum_infer, reference=_cum(np.cumsum, 0), tier=Tier.KERNEL,
   onnx_since=11,
   doc="Running sum along `axis` (optionally exclusive of the current element, or reversed).")
op("CumProd", inputs=("x:T", "axis:T2"), outputs=("y:T",), types={"T": CUM_TYPES, "T2": IND},
   attrs=_CUM_ATTRS, infer=_cum_infer, reference=_cum(np.cumprod, 1), tier=Tier.HIGH,
   onnx_since=26,
   doc="Running product along `axis` (optionally exclusive of the current element, or reversed).")


# -- ReverseSequence -----------------------------------------------------------------------------

def _revseq_infer(ctx):
    b, t = ctx.attrs["batch_axis"], ctx.attrs["time_axis"]
    if {b, t} != {0, 1}:
        raise ctx.error(f"batch_axis and time_axis must be 0 and 1 in some order, got {b} and {t}")
    shape, lens = ctx.shape(0), ctx.shape(1)
    if shape is not None and len(shape) < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {len(shape)}")
    if lens is not None:
        if len(lens) != 1:
            raise ctx.error("sequence_lens must be 1-D")
        if shape is not None:
            merge_dim(ctx, lens[0], shape[b], "sequence_lens length and batch size")
    known = ctx.value(1)
    if known is not None and shape is not None and isinstance(shape[t], int):
        for i, n in enumerate(ints(known)):  # constant lengths past the time axis
            if not 0 <= n <= shape[t]:
                raise ctx.error(f"sequence_lens[{i}] = {n} outside [0, {shape[t]}]")
    return [ctx.input(0)]


def _revseq_ref(x, sequence_lens, batch_axis=1, time_axis=0):
    out = x.copy()
    t_after = time_axis - (1 if time_axis > batch_axis else 0)  # time axis once batch is indexed
    for i, n in enumerate(ints(sequence_lens)):
        if not 0 <= n <= x.shape[time_axis]:
            raise InputError(f"sequence_lens[{i}] = {n} outside [0, {x.shape[time_axis]}]")
        sel = [slice(None)] * x.ndim
        sel[batch_axis], sel[time_axis] = i, slice(0, n)
        out[tuple(sel)] = np.flip(x[tuple(sel)], t_after)
    return out


op("ReverseSequence", inputs=("input:T", "sequence_lens:I"), outputs=("Y:T",),
   types={"T": STD, "I": I64}, attrs=(Attr("batch_axis", "int", 1), Attr("time_axis", "int", 0)),
   infer=_revseq_infer, reference=_revseq_ref, groups={MOVEMENT}, tier=Tier.HIGH, onnx_since=10,
   doc="Reverses the first sequence_lens[i] time steps of each batch entry i.")
