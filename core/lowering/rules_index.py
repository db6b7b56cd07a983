"""Lowering rules for index ops: the gathers (GatherElements, GatherND, ReverseSequence) become one
floor Gather on a flattened view with computed int64 indices; OneHot is a comparison with an iota;
CumSum/CumProd are log-step scans; the scatters (ScatterElements, ScatterND, TensorScatter) pick,
for every target, its source update by comparing target positions with the index tensor; TopK
ranks each entry by counting the entries that beat it.

Data indices keep ONNX's range check through lowering: each index column goes through a floor
Gather from a small table (`_checked`), which wraps negatives and makes an out-of-range index a
run-time error naming this node, the index and the bound on every backend.

Not lowered (no rule): Compress, NonZero and Unique have data-dependent output shapes.

Scatters with indices known at compile time are matched in NumPy and cost one Gather and Where
per round of duplicate targets. With run-time indices there is no linear-memory expansion in the
floor: matching U updates against M targets is a (U x M) comparison. The rules then process the
targets in chunks so that no intermediate exceeds the driver's memory limit, and give up (return
None) when that would take more than `MAX_CHUNKS` chunks.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops import get_op
from ._build import ints, static_shape
from .driver import MEMORY_BLOWUP_LIMIT
from .registry import lowering
from .rules_movement import concat, known_ints, norm_axis, pad_axis, reshape_to, slice_axis

#: A scatter needing more chunks than this does quadratic work too large to be worth lowering.
MAX_CHUNKS = 64


# -- small builders --------------------------------------------------------------------------------


def _i64(rb, values, shape=None):
    a = np.asarray(values, dtype=np.int64)
    return rb.constant(a if shape is None else a.reshape(shape), name="i")


def _as_int64(rb, v):
    return v if v.type.dtype == dt.int64 else rb.emit1("Cast", [v], {"to": dt.int64})


def _wrap_negative(rb, idx, dims):
    """Negative int64 indices count from the back of `dims` (a scalar or a per-column vector)."""
    dims = _i64(rb, dims)
    neg = rb.emit1("Less", [idx, _i64(rb, 0)])
    return rb.emit1("Where", [neg, rb.emit1("Add", [idx, dims]), idx])


#: Largest axis checked through a table (8 bytes an entry); past it, see `_checked`.
TABLE_LIMIT = 1 << 20
#: What a bad index becomes on an axis too long for a table: so negative that sums of a few such
#: terms plus any real offset stay below -(any tensor's size), which the final Gather rejects.
POISON = -(1 << 56)


def _checked(rb, idx, d, scale=1, poison=True):
    """`idx` (int32 or int64) wrapped once (negatives count from the back) and times `scale`, as
    int64, with the range check ONNX asks for: a floor Gather from the table arange(d) * scale,
    so an index outside [-d, d) is that Gather's run-time error on every backend, reporting this
    node, the index and d. (Lowering to flat offsets must not lose the check: a bad index on one
    axis would otherwise read another row.) An axis too long for a table gets POISON instead,
    which the Gather consuming the offsets rejects; a scatter has no such Gather (`poison=False`:
    None, no lowering)."""
    if d <= TABLE_LIMIT:
        return rb.emit1("Gather", [_i64(rb, np.arange(d, dtype=np.int64) * scale), idx], {"axis": 0})
    if not poison:
        return None
    w = _wrap_negative(rb, _as_int64(rb, idx), d)
    ok = rb.emit1("And", [rb.emit1("Not", [rb.emit1("Less", [w, _i64(rb, 0)])]),
                          rb.emit1("Less", [w, _i64(rb, d)])])
    return rb.emit1("Where", [ok, rb.emit1("Mul", [w, _i64(rb, scale)]), _i64(rb, POISON)])


def _in_range(rb, x, n, scale=1, poison=False):
    """`x` as int64 times `scale`, checked to lie in [0, n) (lengths, window starts, loss targets:
    no wrapping). A negative entry is moved below -n first, so the checking Gather rejects it
    (reporting x - n). `poison` as for `_checked` (only where a Gather consumes the result)."""
    x = _as_int64(rb, x)
    shifted = rb.emit1("Where", [rb.emit1("Less", [x, _i64(rb, 0)]), rb.emit1("Sub", [x, _i64(rb, n)]), x])
    return _checked(rb, shifted, n, scale, poison)


def _linear(rb, idx, dims, strides, poison=True):
    """sum over c of checked idx[..., c] * strides[c]: the row of each index tuple of `idx`."""
    last = len(idx.type.shape) - 1
    lin = None
    for c, (d, st) in enumerate(zip(dims, strides)):
        col = rb.emit1("Gather", [idx, _i64(rb, c)], {"axis": last})
        term = _checked(rb, col, d, st, poison)
        if term is None:
            return None
        lin = term if lin is None else rb.emit1("Add", [lin, term])
    return lin


def _strides(shape):
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


def _iota_on_axis(rb, n, axis, rank, scale=1):
    """arange(n) * scale as an int64 constant shaped to broadcast along `axis` of a rank-`rank` tensor."""
    shape = [1] * rank
    shape[axis] = n
    return _i64(rb, np.arange(n) * scale, shape)


def _movable(v) -> bool:
    """Gather and Where (the floor's data-moving selects) accept this element type."""
    return v.type.dtype in get_op("Gather").types["T"]


def _io_bytes(node) -> int:
    vals = [v for v in list(node.inputs) + list(node.outputs) if v is not None]
    return max([v.type.nbytes or 0 for v in vals if isinstance(v.type, dt.TensorType)] + [1])


# -- gathers --------------------------------------------------------------------------------------


@lowering("GatherElements")
def lower_gather_elements(rb, node, ins):
    # out[i] = data[i with axis coordinate replaced by idx[i]]: a Gather from the flattened data at
    # idx * stride[axis] + sum over the other axes of coordinate * stride.
    data, idx = ins
    ds, shape = static_shape(data), static_shape(idx)
    if ds is None or shape is None or not _movable(data):
        return None
    rank = len(ds)
    axis = norm_axis(node.attrs["axis"], rank)
    strides = _strides(ds)
    flat = _checked(rb, idx, ds[axis], strides[axis])
    for d in range(rank):
        if d != axis and shape[d] > 1:
            flat = rb.emit1("Add", [flat, _iota_on_axis(rb, shape[d], d, rank, strides[d])])
    return [rb.emit1("Gather", [reshape_to(rb, data, [int(np.prod(ds))]), flat], {"axis": 0})]


@lowering("GatherND")
def lower_gather_nd(rb, node, ins):
    # Flatten data to (batch * prod(indexed dims), *tail) and gather rows at
    # batch * prod(indexed dims) + sum_c idx[..., c] * stride_c.
    data, idx = ins
    ds, shape = static_shape(data), static_shape(idx)
    if ds is None or shape is None or not _movable(data):
        return None
    b, k = node.attrs["batch_dims"], shape[-1]
    indexed, tail = ds[b:b + k], list(ds[b + k:])
    rows = int(np.prod(indexed, dtype=np.int64))
    if k:
        lin = _linear(rb, idx, indexed, _strides(indexed))
    else:  # empty index tuples select the whole of data[batch]
        lin = rb.emit1("Expand", [_i64(rb, 0), ints(rb, shape[:-1])])
    if b:
        batch = _i64(rb, np.arange(int(np.prod(ds[:b]))) * rows, list(ds[:b]) + [1] * (len(shape) - 1 - b))
        lin = rb.emit1("Add", [lin, batch])
    flat = reshape_to(rb, data, [int(np.prod(ds[:b], dtype=np.int64)) * rows] + tail)
    return [rb.emit1("Gather", [flat, lin], {"axis": 0})]


@lowering("ReverseSequence")
def lower_reverse_sequence(rb, node, ins):
    # Time step t of batch entry b reads step lens[b] - 1 - t while t < lens[b], else t itself:
    # one Gather from the (batch, time)-flattened input.
    x, lens = ins
    shape = static_shape(x)
    if shape is None or not _movable(x):
        return None
    ta = node.attrs["time_axis"]
    n0, n1 = shape[:2]
    batch, steps = (n1, n0) if ta == 0 else (n0, n1)
    t = _iota_on_axis(rb, steps, ta, 2)
    lens = _in_range(rb, lens, steps + 1)  # a length past the time axis would read another entry
    if lens is None:
        return None
    lens = reshape_to(rb, lens, [1, batch] if ta == 0 else [batch, 1])
    back = rb.emit1("Sub", [rb.emit1("Sub", [lens, _i64(rb, 1)]), t])
    src = rb.emit1("Where", [rb.emit1("Less", [t, lens]), back, t])
    b = _iota_on_axis(rb, batch, 1 - ta, 2)
    if ta == 0:  # row index in the (time, batch) flattening
        flat = rb.emit1("Add", [rb.emit1("Mul", [src, _i64(rb, batch)]), b])
    else:
        flat = rb.emit1("Add", [rb.emit1("Mul", [b, _i64(rb, steps)]), src])
    x2 = reshape_to(rb, x, [n0 * n1] + list(shape[2:]))
    return [rb.emit1("Gather", [x2, flat], {"axis": 0})]


# -- OneHot ---------------------------------------------------------------------------------------


@lowering("OneHot")
def lower_one_hot(rb, node, ins):
    indices, depth, values = ins
    shape, out = indices.type.shape, node.outputs[0].type.shape
    if shape is None:
        return None
    r = len(shape)
    axis = norm_axis(node.attrs["axis"], r + 1)
    # a run-time depth is still in the output type
    depth = (known_ints(depth) or [None if out is None else out[axis]])[0]
    if not isinstance(depth, int):
        return None
    idx = _wrap_negative(rb, _as_int64(rb, indices), depth)  # float indices truncate, as the reference
    idx = reshape_to(rb, idx, list(shape[:axis]) + [1] + list(shape[axis:]))
    if idx is None:
        return None
    hot = rb.emit1("Equal", [idx, _iota_on_axis(rb, depth, axis, r + 1)])
    pair = reshape_to(rb, values, [2])
    off = rb.emit1("Gather", [pair, _i64(rb, 0)], {"axis": 0})
    on = rb.emit1("Gather", [pair, _i64(rb, 1)], {"axis": 0})
    return [rb.emit1("Where", [hot, on, off])]


# -- CumSum / CumProd -----------------------------------------------------------------------------


def _scan_axis(rb, node, x, a, combine, identity):
    # Hillis-Steele scan: after the step with shift s every entry combines the 2s entries ending at
    # it, so ceil(log2(n)) steps suffice; each step's shift is one Pad whose negative end crops the
    # entries shifted out, filling with the identity. Every intermediate is the input's size.
    n = x.type.shape[a]
    if not isinstance(n, int):
        return None
    fill = rb.constant(np.asarray(identity, dtype=x.type.dtype.np), name="c")
    sign = -1 if node.attrs["reverse"] else 1  # reverse scans run toward index 0

    def shifted(y, s):
        return pad_axis(rb, y, a, sign * s, -sign * s, fill)

    y = x
    if node.attrs["exclusive"] and n:
        y = shifted(y, 1)  # an exclusive scan is the inclusive scan of the input shifted by one
    s = 1
    while s < n:
        y = rb.emit1(combine, [y, shifted(y, s)])
        s *= 2
    return y


def _scan(rb, node, ins, combine, identity):
    x, axis = ins
    rank = x.type.rank
    a = known_ints(axis)
    if rank is None:
        return None
    if a is not None or rank == 1:  # a rank-1 input has only one valid axis
        y = _scan_axis(rb, node, x, norm_axis(a[0], rank) if a is not None else 0, combine, identity)
    else:  # axis known only at run time: scan along every axis and select the asked-for one
        which = _wrap_negative(rb, reshape_to(rb, _as_int64(rb, axis), []), rank)
        y = None
        for a in reversed(range(rank)):
            ya = _scan_axis(rb, node, x, a, combine, identity)
            if ya is None:
                return None
            y = ya if y is None else rb.emit1("Where", [rb.emit1("Equal", [which, _i64(rb, a)]), ya, y])
    if y is None:
        return None
    return [y if y is not x else rb.emit1("Identity", [x])]


@lowering("CumSum")
def lower_cumsum(rb, node, ins):
    return _scan(rb, node, ins, "Add", 0)


@lowering("CumProd")
def lower_cumprod(rb, node, ins):
    return _scan(rb, node, ins, "Mul", 1)


# -- scatters -------------------------------------------------------------------------------------

_REDUCE = {"add": ("ReduceSum", 0), "mul": ("ReduceProd", 1), "max": ("ReduceMax", None),
           "min": ("ReduceMin", None)}
_COMBINE = {"add": "Add", "mul": "Mul", "max": "Max", "min": "Min"}


def _chunk(node, c, u, m, t, itemsize):
    """Targets per chunk so that the (c, u, chunk, t) comparison stays within the memory limit."""
    budget = MEMORY_BLOWUP_LIMIT * _io_bytes(node)
    per_target = c * u * max(t, 1) * max(itemsize, 8)
    return max(1, min(m, budget // max(per_target, 1)))


def _scatter_rows(rb, node, data, lin, upd, reduction):
    """The common core: data (C, M, T), lin (C, U) int64 targets in [0, M), upd (C, U, T); `lin`
    is a graph value, or a NumPy array when the indices are known at compile time.

    For target m of column c: 'none' takes the last update u with lin[c, u] == m; a reduction
    folds all of them into data[c, m]. Unmatched targets keep data."""
    c, m, t = data.type.shape
    u = lin.shape[1] if isinstance(lin, np.ndarray) else lin.type.shape[1]
    if u == 0:
        return data
    if isinstance(lin, np.ndarray):
        return _scatter_known(rb, data, lin, reshape_to(rb, upd, [c * u, t]), reduction)
    if reduction != "none":
        op, identity = _REDUCE[reduction]
        if data.type.dtype not in get_op(op).types["T"]:
            return None
    step = _chunk(node, c, u, m, t, data.type.dtype.itemsize)
    if -(-m // step) > MAX_CHUNKS:
        return None
    lin3 = reshape_to(rb, lin, [c, u, 1])
    upd_rows = reshape_to(rb, upd, [c * u, t])
    upd4 = reshape_to(rb, upd, [c, u, 1, t])
    pieces = []
    for m0 in range(0, m, step):
        m1 = min(m, m0 + step)
        hot = rb.emit1("Equal", [lin3, _i64(rb, np.arange(m0, m1), [1, 1, m1 - m0])])  # (C, U, m)
        old = slice_axis(rb, data, 1, m0, m1) if (m0, m1) != (0, m) else data
        if reduction == "none":
            pos = rb.emit1("Where", [hot, _iota_on_axis(rb, u, 1, 3), _i64(rb, -1)])
            src = rb.emit1("ReduceMax", [pos, _i64(rb, [1])], {"keepdims": 0})  # (C, m)
            has = reshape_to(rb, rb.emit1("Not", [rb.emit1("Less", [src, _i64(rb, 0)])]), [c, m1 - m0, 1])
            rows = rb.emit1("Add", [rb.emit1("Max", [src, _i64(rb, 0)]), _iota_on_axis(rb, c, 0, 2, u)])
            got = rb.emit1("Gather", [upd_rows, rows], {"axis": 0})
            pieces.append(rb.emit1("Where", [has, got, old]))
            continue
        hot4 = reshape_to(rb, hot, [c, u, m1 - m0, 1])
        # non-matching updates become the identity (max/min have none: the old value serves)
        fill = (reshape_to(rb, old, [c, 1, m1 - m0, t]) if identity is None
                else rb.constant(np.asarray(identity, dtype=data.type.dtype.np), name="c"))
        folded = rb.emit1(op, [rb.emit1("Where", [hot4, upd4, fill]), _i64(rb, [1])], {"keepdims": 0})
        pieces.append(rb.emit1(_COMBINE[reduction], [old, folded]))
    return concat(rb, pieces, 1)


def _scatter_known(rb, data, lin, upd_rows, reduction):
    # Known indices: the matching is done here, in NumPy. Round r gathers, for every target, the
    # update that is its r-th writer (one round, the last writer, for 'none'), so the graph does
    # one cache-sized Gather and Where per round instead of comparing every update with every
    # target.
    c, m, _ = data.type.shape
    if ((lin < 0) | (lin >= m)).any():
        return None  # the reference rejects out-of-range indices
    key = (np.arange(c)[:, None] * m + lin).reshape(-1)  # target of update row i = c * U + u
    order = np.argsort(key, kind="stable")
    starts = np.r_[True, key[order][1:] != key[order][:-1]]
    occurrence = np.empty_like(order)
    occurrence[order] = np.arange(key.size) - np.maximum.accumulate(np.where(starts, np.arange(key.size), 0))
    if reduction == "none":  # later writes win: keep only each target's last writer
        rounds = [occurrence == np.bincount(key, minlength=c * m)[key] - 1]
    else:
        rounds = [occurrence == r for r in range(occurrence.max() + 1)]
    if len(rounds) > MAX_CHUNKS:
        return None
    out = data
    for writers in rounds:
        src = np.full(c * m, -1, np.int64)
        src[key[writers]] = np.flatnonzero(writers)
        got = rb.emit1("Gather", [upd_rows, _i64(rb, np.maximum(src, 0), [c, m])], {"axis": 0})
        new = got if reduction == "none" else rb.emit1(_COMBINE[reduction], [out, got])
        out = rb.emit1("Where", [rb.constant((src >= 0).reshape(c, m, 1), name="mask"), new, out])
    return out


def _known_index(idx, dims):
    """A known index tensor as int64 with negative entries counted from the back of `dims`."""
    if idx.known is None:
        return None
    v = np.asarray(idx.known).astype(np.int64)
    return np.where(v < 0, v + np.asarray(dims, np.int64), v)


def _lower_scatter_elements(rb, node, ins):
    # Move the scatter axis last and view everything as (columns, axis): each column is an
    # independent 1-D scatter. Indices may cover only a leading block of the other axes; the
    # rest of data is joined back unchanged.
    data, idx, upd = ins
    ds, shape = static_shape(data), static_shape(idx)
    if ds is None or shape is None or not _movable(data):
        return None
    rank = len(ds)
    a = norm_axis(node.attrs["axis"], rank)
    block = [shape[d] if d != a else ds[a] for d in range(rank)]
    sub = data
    if block != list(ds):
        sub = rb.emit1("Slice", [data, ints(rb, [0] * rank), ints(rb, block), ints(rb, range(rank))])
    perm = [d for d in range(rank) if d != a] + [a]
    cols = int(np.prod([shape[d] for d in perm[:-1]], dtype=np.int64))

    def columns(v, n, dims):
        v = v if perm == list(range(rank)) else rb.emit1("Transpose", [v], {"perm": perm})
        return reshape_to(rb, v, [cols, n] + dims)

    known = _known_index(idx, ds[a])
    if known is not None:
        lin = np.transpose(known, perm).reshape(cols, shape[a])
    else:
        lin = _checked(rb, idx, ds[a], poison=False)
        if lin is None:
            return None
        lin = columns(lin, shape[a], [])
    res = _scatter_rows(rb, node, columns(sub, ds[a], [1]), lin, columns(upd, shape[a], [1]),
                        node.attrs.get("reduction", "none"))
    if res is None:
        return None
    res = reshape_to(rb, res, [block[d] for d in perm])
    if perm != list(range(rank)):
        res = rb.emit1("Transpose", [res], {"perm": [int(p) for p in np.argsort(perm)]})
    for d in range(rank):  # join back the parts of data the indices do not reach
        if block[d] < ds[d]:
            lo = [0] * rank
            hi = [ds[e] if e < d or e == a else block[e] for e in range(rank)]
            lo[d], hi[d] = block[d], ds[d]
            rest = rb.emit1("Slice", [data, ints(rb, lo), ints(rb, hi), ints(rb, range(rank))])
            res = concat(rb, [res, rest], d)
    return [res]


lower_scatter_elements = lowering("ScatterElements")(_lower_scatter_elements)
lower_scatter = lowering("Scatter")(_lower_scatter_elements)


@lowering("ScatterND")
def lower_scatter_nd(rb, node, ins):
    # Index tuples address rows of data viewed as (prod(indexed dims), prod(tail dims)).
    data, idx, upd = ins
    ds, shape = static_shape(data), static_shape(idx)
    if ds is None or shape is None or not _movable(data):
        return None
    k = shape[-1]
    rows, width = int(np.prod(ds[:k], dtype=np.int64)), int(np.prod(ds[k:], dtype=np.int64))
    n = int(np.prod(shape[:-1], dtype=np.int64))
    known = _known_index(idx, list(ds[:k]))
    if known is not None:
        lin = (known * np.asarray(_strides(ds[:k]), np.int64)).sum(-1).reshape(1, n)
    elif k:
        lin = _linear(rb, idx, list(ds[:k]), _strides(ds[:k]), poison=False)
        if lin is None:
            return None
        lin = reshape_to(rb, lin, [1, n])
    else:  # every update replaces (or folds into) the whole tensor
        lin = _i64(rb, np.zeros((1, n)))
    res = _scatter_rows(rb, node, reshape_to(rb, data, [1, rows, width]), lin,
                        reshape_to(rb, upd, [1, n, width]), node.attrs["reduction"])
    return None if res is None else [reshape_to(rb, res, ds)]


@lowering("TensorScatter")
def lower_tensor_scatter(rb, node, ins):
    # A window write: cache position p of batch b reads update step p - start[b] (modulo the cache
    # length when circular) if that step exists, else keeps the cache. One Gather of update rows
    # and a Where, all cache-sized.
    cache, upd, starts = (list(ins) + [None])[:3]
    cs, us = static_shape(cache), static_shape(upd)
    if cs is None or us is None or not _movable(cache):
        return None
    rank = len(cs)
    a = norm_axis(node.attrs["axis"], rank)
    batch, size, seq = cs[0], cs[a], us[a]
    if seq == 0:
        return [rb.emit1("Identity", [cache])]
    perm = [0, a] + [d for d in range(1, rank) if d != a]
    rest = int(np.prod([cs[d] for d in perm[2:]], dtype=np.int64))

    def rows(v, n):
        return reshape_to(rb, rb.emit1("Transpose", [v], {"perm": perm}), [batch, n, rest])

    if starts is not None and node.attrs["mode"] == "linear":  # a window past the end: an error
        starts = _in_range(rb, starts, size - seq + 1)
        if starts is None:
            return None
    start = _i64(rb, np.zeros((batch, 1))) if starts is None else reshape_to(rb, starts, [batch, 1])
    step = rb.emit1("Sub", [_i64(rb, np.arange(size), [1, size]), start])  # (B, S)
    if node.attrs["mode"] == "circular":  # starts lie in [0, size): one wrap suffices
        step = _wrap_negative(rb, step, size)
    inside = rb.emit1("And", [rb.emit1("Not", [rb.emit1("Less", [step, _i64(rb, 0)])]),
                              rb.emit1("Less", [step, _i64(rb, seq)])])
    step = rb.emit1("Min", [rb.emit1("Max", [step, _i64(rb, 0)]), _i64(rb, seq - 1)])
    flat = rb.emit1("Add", [step, _iota_on_axis(rb, batch, 0, 2, seq)])
    got = rb.emit1("Gather", [reshape_to(rb, rows(upd, seq), [batch * seq, rest]), flat], {"axis": 0})
    out = rb.emit1("Where", [reshape_to(rb, inside, [batch, size, 1]), got, rows(cache, size)])
    out = reshape_to(rb, out, [cs[d] for d in perm])
    return [rb.emit1("Transpose", [out], {"perm": [int(p) for p in np.argsort(perm)]})]


# -- TopK -----------------------------------------------------------------------------------------


def _rank_in_row(rb, node, x2, largest):
    """rank[r, i]: how many entries of row r come before entry i in TopK order (larger, or equal
    at a lower index; smaller for largest=0). A row-against-itself comparison, chunked over i.
    As in the reference's sort, a NaN is above every number and equal to another NaN."""
    rows, n = x2.type.shape
    step = _chunk(node, rows, n, n, 1, 8)
    if -(-n // step) > MAX_CHUNKS:
        return None
    xj = reshape_to(rb, x2, [rows, 1, n])
    nan = rb.emit1("Not", [rb.emit1("Equal", [x2, x2])]) if x2.type.dtype.is_float else None
    ranks = []
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        xi = reshape_to(rb, slice_axis(rb, x2, 1, i0, i1), [rows, i1 - i0, 1])
        above = rb.emit1("Greater", [xj, xi])  # entry j above entry i
        below = rb.emit1("Less", [xj, xi])
        if nan is not None:  # a NaN is above a number
            nj = reshape_to(rb, nan, [rows, 1, n])
            ni = reshape_to(rb, slice_axis(rb, nan, 1, i0, i1), [rows, i1 - i0, 1])
            above = rb.emit1("Or", [above, rb.emit1("And", [nj, rb.emit1("Not", [ni])])])
            below = rb.emit1("Or", [below, rb.emit1("And", [ni, rb.emit1("Not", [nj])])])
        ahead = above if largest else below
        level = rb.emit1("Not", [below if largest else above])
        before = np.arange(n)[None, None, :] < np.arange(i0, i1)[None, :, None]  # j < i: ties count
        beats = rb.emit1("Where", [rb.constant(before, name="mask"), level, ahead])
        beats = rb.emit1("Cast", [beats], {"to": dt.int64})
        ranks.append(rb.emit1("ReduceSum", [beats, _i64(rb, [2])], {"keepdims": 0}))
    return concat(rb, ranks, 1)


@lowering("TopK")
def lower_top_k(rb, node, ins):
    # Rank every entry of a row (the axis moved last), then for each output slot p find the entry
    # ranked p, and gather it. O(n^2) comparisons per row, chunked like the scatters (the cpu
    # backend's TopK kernel, backends/cpu/kernels/topk.py, is a heap: O(n log k)).
    x, k = ins
    shape, out = static_shape(x), node.outputs[0].type.shape
    if shape is None or not shape:
        return None
    rank = len(shape)
    a = norm_axis(node.attrs["axis"], rank)
    k = (known_ints(k) or [None if out is None else out[a]])[0]  # a run-time k is in the output type
    if not isinstance(k, int):
        return None
    n = shape[a]
    perm = [d for d in range(rank) if d != a] + [a]
    rows = int(np.prod(shape, dtype=np.int64)) // n if n else 0
    xt = x if perm == list(range(rank)) else rb.emit1("Transpose", [x], {"perm": perm})
    if k == 0:
        vals = slice_axis(rb, xt, rank - 1, 0, 0)
        src = rb.emit1("Cast", [vals], {"to": dt.int64})
    else:
        x2 = reshape_to(rb, xt, [rows, n])
        order = _rank_in_row(rb, node, x2, node.attrs["largest"])
        step = _chunk(node, rows, n, k, 1, 8)
        if order is None or -(-k // step) > MAX_CHUNKS:
            return None
        order = reshape_to(rb, order, [rows, n, 1])
        srcs = []
        for p0 in range(0, k, step):
            p1 = min(k, p0 + step)
            hot = rb.emit1("Equal", [order, _i64(rb, np.arange(p0, p1), [1, 1, p1 - p0])])
            pick = rb.emit1("Where", [hot, _iota_on_axis(rb, n, 1, 3), _i64(rb, 0)])
            srcs.append(rb.emit1("ReduceSum", [pick, _i64(rb, [1])], {"keepdims": 0}))
        src = concat(rb, srcs, 1)  # (rows, k) positions along the axis
        flat = rb.emit1("Add", [src, _iota_on_axis(rb, rows, 0, 2, n)])
        vals = rb.emit1("Gather", [reshape_to(rb, x2, [rows * n]), flat], {"axis": 0})
        dims = [shape[d] for d in perm[:-1]] + [k]
        vals, src = reshape_to(rb, vals, dims), reshape_to(rb, src, dims)
    if perm != list(range(rank)):
        back = [int(p) for p in np.argsort(perm)]
        vals, src = (rb.emit1("Transpose", [v], {"perm": back}) for v in (vals, src))
    return [vals, src]
