"""Lowering rules for the softmax family, the matmul family and the normalizations
(ops/softmax.py, matmul.py, normalization.py): Softmax, LogSoftmax, Hardmax, Gemm, Einsum, Det,
BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization,
RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN, Dropout.

Each rule computes in the type its reference computes in (`work` types: float32 for 16-bit floats,
float64 when an input is float64; the `stash_type` where an op has one) and rounds once to the
output type, at the same steps as the reference, so results agree to rounding. Softmax-like rules
subtract the max first, so exp never overflows. Statistics are taken with ReduceMean (lowered by
rules_reduce) over constant axes; the variance is the mean of squared deviations (never negative).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops.matmul import parse_einsum
from ._build import ints, scalar, static_shape
from .registry import lowering
from .rules_reduce import HALF, arg_extreme, cast, ramp, reduce


def op1(rb, op, *inputs, **attrs):
    return rb.emit1(op, list(inputs), attrs or None)


def _axis(node, x):
    rank = x.type.rank
    return None if rank is None else node.attrs["axis"] % max(rank, 1)


def _work(*values):
    """float64 when any input is float64, else float32 (the normalizations' `_work_dtype`)."""
    return dt.float64 if any(v is not None and v.type.dtype == dt.float64 for v in values) else dt.float32


def _stash(node):
    return dt.float64 if node.attrs["stash_type"] == dt.float64 else dt.float32


def const(rb, value, dtype):
    return rb.constant(np.asarray(value, dtype=dtype.np), name="c")


def _reshape(rb, x, shape):
    return op1(rb, "Reshape", x, ints(rb, shape), allowzero=1)


# -- softmax family --------------------------------------------------------------------------------

def _shifted(rb, x, axis):
    """x - max along axis, and its exp, in x's type (the reference rounds both to it)."""
    shifted = op1(rb, "Sub", x, reduce(rb, "ReduceMax", x, [axis]))
    return shifted, op1(rb, "Exp", shifted)


@lowering("Softmax")
def lower_softmax(rb, node, ins):
    axis = _axis(node, ins[0])
    if axis is None:
        return None
    _, e = _shifted(rb, ins[0], axis)
    return [op1(rb, "Div", e, reduce(rb, "ReduceSum", e, [axis]))]


@lowering("LogSoftmax")
def lower_log_softmax(rb, node, ins):
    axis = _axis(node, ins[0])
    if axis is None:
        return None
    shifted, e = _shifted(rb, ins[0], axis)
    return [op1(rb, "Sub", shifted, op1(rb, "Log", reduce(rb, "ReduceSum", e, [axis])))]


@lowering("Hardmax")
def lower_hardmax(rb, node, ins):
    (x,) = ins
    axis = _axis(node, x)
    if axis is None:
        return None
    first = arg_extreme(rb, x, axis, 1, largest=True, last=False)
    if first is None:
        return None
    one_hot = op1(rb, "Equal", ramp(rb, x.type.shape[axis], axis, x.type.rank), first)
    return [cast(rb, one_hot, x.type.dtype)]


# -- matmul family ---------------------------------------------------------------------------------

def _transpose(rb, x, perm):
    if list(perm) == list(range(len(perm))):
        return x
    return op1(rb, "Transpose", x, perm=tuple(perm))


def _gemm_product(rb, at, a, b):
    return op1(rb, "MatMul", _transpose(rb, a, (1, 0)) if at["transA"] else a,
               _transpose(rb, b, (1, 0)) if at["transB"] else b)


@lowering("Gemm")
def lower_gemm(rb, node, ins):
    a, b, c = (list(ins) + [None])[:3]
    at = node.attrs
    out_t = node.outputs[0].type.dtype
    if out_t.is_int:
        return [_int_gemm(rb, at, a, b, c, out_t)]
    a, b, c = (None if v is None else cast(rb, v, dt.float32) if v.type.dtype in HALF else v
               for v in (a, b, c))  # 16-bit floats: multiply and accumulate in float32, round once
    y = _gemm_product(rb, at, a, b)
    if at["alpha"] != 1.0:  # (a product with 1 is exact: skip it)
        y = op1(rb, "Mul", y, scalar(rb, at["alpha"], y))
    if c is not None:
        y = op1(rb, "Add", y, c if at["beta"] == 1.0 else op1(rb, "Mul", c, scalar(rb, at["beta"], c)))
    return [cast(rb, y, out_t)]


def _int_gemm(rb, at, a, b, c, out_t):
    """Exact integer products; an alpha or beta other than 1 scales in float64 and truncates."""
    def scaled(v, k):
        if k == 1.0:
            return v
        return cast(rb, op1(rb, "Mul", cast(rb, v, dt.float64), const(rb, k, dt.float64)), out_t)

    y = scaled(_gemm_product(rb, at, a, b), at["alpha"])
    if c is not None:
        y = op1(rb, "Add", y, scaled(c, at["beta"]))
    return y


class _Term:
    """One einsum operand: a value and the letter naming each of its dims."""

    def __init__(self, value, letters):
        self.v, self.letters = value, letters

    @property
    def sizes(self):
        return dict(zip(self.letters, self.v.type.shape))


def _diagonal(rb, t):
    """Collapse each repeated letter to the diagonal: move both dims last, flatten them, and
    Gather every (n+1)-th element."""
    while len(set(t.letters)) < len(t.letters):
        ch = next(c for c in t.letters if t.letters.count(c) > 1)
        i = t.letters.index(ch)
        j = t.letters.index(ch, i + 1)
        shape = t.v.type.shape
        n = shape[i]
        if shape[j] != n:
            return None
        rest = [k for k in range(len(t.letters)) if k not in (i, j)]
        v = _transpose(rb, t.v, rest + [i, j])
        v = _reshape(rb, v, [shape[k] for k in rest] + [n * n])
        idx = rb.constant(np.arange(n, dtype=np.int64) * (n + 1), name="diag")
        t = _Term(op1(rb, "Gather", v, idx, axis=len(rest)), "".join(t.letters[k] for k in rest) + ch)
    return t


def _sum_out(rb, t, letters):
    """Sum t over the given letters (dropping them)."""
    axes = [k for k, ch in enumerate(t.letters) if ch in letters]
    if not axes:
        return t
    return _Term(reduce(rb, "ReduceSum", t.v, axes, 0), "".join(ch for ch in t.letters if ch not in letters))


def _contract(rb, a, b, keep):
    """a * b summed over their shared letters not in `keep`, as one batched MatMul:
    [batch, a-only, shared] x [batch, shared, b-only]."""
    shared = [ch for ch in a.letters if ch in b.letters and ch not in keep]
    # A shared letter of size 1 on one side broadcasts: sum each side over it separately.
    uneven = [ch for ch in shared if a.sizes[ch] != b.sizes[ch]]
    a, b = _sum_out(rb, a, uneven), _sum_out(rb, b, uneven)
    shared = [ch for ch in shared if ch not in uneven]
    batch = [ch for ch in a.letters if ch in b.letters and ch in keep]
    a_only = [ch for ch in a.letters if ch not in b.letters]
    b_only = [ch for ch in b.letters if ch not in a.letters]
    sa, sb = a.sizes, b.sizes

    def prod(sizes, chars):
        return int(np.prod([sizes[ch] for ch in chars], dtype=np.int64))

    av = _transpose(rb, a.v, [a.letters.index(ch) for ch in batch + a_only + shared])
    av = _reshape(rb, av, [sa[ch] for ch in batch] + [prod(sa, a_only), prod(sa, shared)])
    bv = _transpose(rb, b.v, [b.letters.index(ch) for ch in batch + shared + b_only])
    bv = _reshape(rb, bv, [sb[ch] for ch in batch] + [prod(sb, shared), prod(sb, b_only)])
    y = op1(rb, "MatMul", av, bv)
    out = [max(sa[ch], sb[ch]) if 0 not in (sa[ch], sb[ch]) else 0 for ch in batch]
    y = _reshape(rb, y, out + [sa[ch] for ch in a_only] + [sb[ch] for ch in b_only])
    return _Term(y, "".join(batch + a_only + b_only))


#: Integer types MatMul/ReduceSum lack, computed in a 32-bit type (wrapping agrees modulo 2^k).
_SMALL_INT = {dt.int8: dt.int32, dt.int16: dt.int32, dt.uint8: dt.uint32, dt.uint16: dt.uint32}


@lowering("Einsum")
def lower_einsum(rb, node, ins):
    # Operands are combined left to right; letters no later operand or the output needs are
    # summed as early as possible, so no intermediate is larger than it must be.
    shapes = [static_shape(v) for v in ins]
    if any(s is None for s in shapes):
        return None
    eq = parse_einsum(node.attrs["equation"], [len(s) for s in shapes], ValueError)
    out_t = node.outputs[0].type.dtype
    work = dt.float32 if out_t in HALF else _SMALL_INT.get(out_t, out_t)
    terms = []
    for v, letters in zip(ins, eq.terms):
        t = _diagonal(rb, _Term(cast(rb, v, work), letters))
        if t is None:
            return None
        terms.append(t)
    acc = None
    for k, t in enumerate(terms):
        keep = set(eq.output).union(*[u.letters for u in terms[k + 1:]])
        t = _sum_out(rb, t, set(t.letters) - keep - (set(acc.letters) if acc else set()))
        if acc is None:
            acc = t
            continue
        acc = _sum_out(rb, acc, set(acc.letters) - keep - set(t.letters))
        acc = _contract(rb, acc, t, keep)
    acc = _sum_out(rb, acc, set(acc.letters) - set(eq.output))
    y = _transpose(rb, acc.v, [acc.letters.index(ch) for ch in eq.output])
    if y is ins[0]:
        y = op1(rb, "Identity", y)
    return [cast(rb, y, out_t)]


#: Det is unrolled per row: beyond this size the graph would grow too large.
DET_MAX_N = 64


@lowering("Det")
def lower_det(rb, node, ins):
    # Gaussian elimination with partial pivoting (as LAPACK's getrf, which the reference uses),
    # unrolled over the static matrix size n, for every matrix of the batch at once: each step
    # picks the row with the largest |pivot| (first one on ties), moves the top row into its
    # place, multiplies the determinant by the pivot (negated when rows were swapped) and
    # eliminates the pivot column. A zero pivot (singular matrix) makes the determinant 0.
    (x,) = ins
    shape = static_shape(x)
    if shape is None or shape[-1] > DET_MAX_N:
        return None
    out_t = node.outputs[0].type.dtype
    work = dt.float64 if out_t == dt.float64 else dt.float32
    batch, n = list(shape[:-2]), shape[-1]
    a = cast(rb, x, work)
    det = const(rb, 1, work)
    zero, one = const(rb, 0, work), const(rb, 1, work)
    for m in range(n, 0, -1):
        p = op1(rb, "ArgMax", op1(rb, "Abs", _cols(rb, a, 0, 1)), axis=-2, keepdims=1)
        hit = op1(rb, "Equal", rb.constant(np.arange(m, dtype=np.int64).reshape(m, 1), name="rows"), p)
        pivot_row = reduce(rb, "ReduceSum", op1(rb, "Where", hit, a, zero), [len(batch)], 1)
        pivot = _cols(rb, pivot_row, 0, 1)
        swapped = op1(rb, "Not", op1(rb, "Equal", p, const(rb, 0, dt.int64)))
        sign = op1(rb, "Where", swapped, const(rb, -1, work), one)
        det = op1(rb, "Mul", det, op1(rb, "Mul", pivot, sign))
        if m == 1:
            break
        rest = op1(rb, "Where", hit, _rows(rb, a, 0, 1), a)
        rest = _rows(rb, rest, 1, m)  # every row but the pivot row
        safe = op1(rb, "Where", op1(rb, "Equal", pivot, zero), one, pivot)
        factors = op1(rb, "Div", _cols(rb, rest, 0, 1), safe)
        a = op1(rb, "Sub", _cols(rb, rest, 1, m),
                op1(rb, "Mul", factors, _cols(rb, pivot_row, 1, m)))
    if n == 0:
        det = op1(rb, "Expand", det, ints(rb, batch))
    else:
        det = _reshape(rb, det, batch)
    return [cast(rb, det, out_t)]


def _slice(rb, x, axis, start, end):
    return op1(rb, "Slice", x, ints(rb, [start]), ints(rb, [end]), ints(rb, [axis]))


def _rows(rb, x, start, end):
    return _slice(rb, x, -2, start, end)


def _cols(rb, x, start, end):
    return _slice(rb, x, -1, start, end)


# -- normalizations --------------------------------------------------------------------------------

def _channel_view(rb, p, ndim):
    """A per-channel vector shaped to broadcast against an (N, C, D1, ...) tensor."""
    return _reshape(rb, p, [-1] + [1] * (ndim - 2)) if ndim > 2 else p


def _standardize(rb, xw, axes):
    """(x - mean, variance, mean) over `axes` (kept as 1s): the variance as the mean squared
    deviation, which rounding cannot make negative."""
    mean = op1(rb, "ReduceMean", xw, ints(rb, axes), keepdims=1)
    d = op1(rb, "Sub", xw, mean)
    return d, op1(rb, "ReduceMean", op1(rb, "Mul", d, d), ints(rb, axes), keepdims=1), mean


def _std(rb, var, epsilon):
    return op1(rb, "Sqrt", op1(rb, "Add", var, scalar(rb, epsilon, var)))


@lowering("BatchNormalization")
def lower_batch_norm(rb, node, ins):
    x, scale, b, mean, var = ins
    ndim = x.type.rank
    if ndim is None:
        return None
    w = _work(*ins)
    xw = cast(rb, x, w)
    s_, b_, m_, v_ = (_channel_view(rb, cast(rb, p, w), ndim) for p in (scale, b, mean, var))
    eps = node.attrs["epsilon"]
    if not node.attrs["training_mode"]:
        y = op1(rb, "Div", op1(rb, "Mul", s_, op1(rb, "Sub", xw, m_)), _std(rb, v_, eps))
        return [cast(rb, op1(rb, "Add", y, b_), x.type.dtype)]
    # Training: normalise with the batch statistics (the population variance) and blend them
    # into the running ones.
    axes = [i for i in range(ndim) if i != 1] if ndim >= 2 else [0]
    d, cur_var, cur_mean = _standardize(rb, xw, axes)
    y = op1(rb, "Add", op1(rb, "Div", op1(rb, "Mul", s_, d), _std(rb, cur_var, eps)), b_)
    outs = [cast(rb, y, x.type.dtype)]
    mom = node.attrs["momentum"]
    for run, cur, out in zip((mean, var), (cur_mean, cur_var), node.outputs[1:]):
        cur = _reshape(rb, cur, [-1])
        blended = op1(rb, "Add", op1(rb, "Mul", cast(rb, run, w), const(rb, mom, w)),
                      op1(rb, "Mul", cur, const(rb, 1 - const_value(mom, w), w)))
        outs.append(cast(rb, blended, out.type.dtype))
    return outs


def const_value(v, dtype):
    """v rounded to dtype, as a Python number (to fold `1 - momentum` as the reference does)."""
    return np.asarray(v, dtype=dtype.np).item()


@lowering("InstanceNormalization")
def lower_instance_norm(rb, node, ins):
    x, scale, b = ins
    ndim = x.type.rank
    if ndim is None:
        return None
    w = _work(x)
    d, var, _ = _standardize(rb, cast(rb, x, w), list(range(2, ndim)))
    y = op1(rb, "Div", d, _std(rb, var, node.attrs["epsilon"]))
    y = op1(rb, "Mul", y, _channel_view(rb, cast(rb, scale, w), ndim))
    y = op1(rb, "Add", y, _channel_view(rb, cast(rb, b, w), ndim))
    return [cast(rb, y, x.type.dtype)]


@lowering("LayerNormalization")
def lower_layer_norm(rb, node, ins):
    # Statistics in the stash type, then the affine stage in X's type, as the reference does.
    x, scale, b = (list(ins) + [None])[:3]
    axis = _axis(node, x)
    if axis is None:
        return None
    w = _stash(node)
    axes = list(range(axis, x.type.rank))
    d, var, mean = _standardize(rb, cast(rb, x, w), axes)
    inv_std = op1(rb, "Div", const(rb, 1, w), _std(rb, var, node.attrs["epsilon"]))
    y = op1(rb, "Mul", cast(rb, op1(rb, "Mul", d, inv_std), x.type.dtype), scale)
    if b is not None:
        y = op1(rb, "Add", y, b)
    outs = [cast(rb, y, x.type.dtype)]
    for v, out in zip((mean, inv_std), node.outputs[1:]):
        outs.append(cast(rb, v, out.type.dtype))
    return outs


@lowering("GroupNormalization")
def lower_group_norm(rb, node, ins):
    x, scale, bias = ins
    shape = static_shape(x)
    if shape is None:
        return None
    g = node.attrs["num_groups"]
    per_group = int(np.prod(shape[1:], dtype=np.int64)) // g
    grouped = _reshape(rb, cast(rb, x, _stash(node)), [shape[0], g, per_group])
    d, var, _ = _standardize(rb, grouped, [2])
    y = op1(rb, "Div", d, _std(rb, var, node.attrs["epsilon"]))
    y = cast(rb, _reshape(rb, y, shape), x.type.dtype)
    y = op1(rb, "Mul", y, _channel_view(rb, scale, len(shape)))
    return [op1(rb, "Add", y, _channel_view(rb, bias, len(shape)))]


@lowering("RMSNormalization")
def lower_rms_norm(rb, node, ins):
    x, scale = ins
    axis = _axis(node, x)
    if axis is None:
        return None
    xw = cast(rb, x, _stash(node))
    ms = op1(rb, "ReduceMean", op1(rb, "Mul", xw, xw), ints(rb, list(range(axis, x.type.rank))),
             keepdims=1)
    y = cast(rb, op1(rb, "Div", xw, _std(rb, ms, node.attrs["epsilon"])), x.type.dtype)
    return [op1(rb, "Mul", cast(rb, y, scale.type.dtype), scale)]


@lowering("LpNormalization")
def lower_lp_norm(rb, node, ins):
    (x,) = ins
    axis = _axis(node, x)
    if axis is None:
        return None
    w = cast(rb, x, dt.float32) if x.type.dtype in HALF else x
    if node.attrs["p"] == 1:
        norm = reduce(rb, "ReduceSum", op1(rb, "Abs", w), [axis])
    else:
        norm = op1(rb, "Sqrt", reduce(rb, "ReduceSum", op1(rb, "Mul", w, w), [axis]))
    zero = scalar(rb, 0, w)
    y = op1(rb, "Where", op1(rb, "Equal", norm, zero), zero, op1(rb, "Div", w, norm))
    return [cast(rb, y, x.type.dtype)]  # an all-zero slice stays zero (not 0/0)


@lowering("MeanVarianceNormalization")
def lower_mvn(rb, node, ins):
    (x,) = ins
    rank = x.type.rank
    if rank is None:
        return None
    w = cast(rb, x, dt.float32) if x.type.dtype in HALF else x
    d, var, _ = _standardize(rb, w, sorted(a % rank for a in node.attrs["axes"]))
    y = op1(rb, "Div", d, op1(rb, "Add", op1(rb, "Sqrt", var), scalar(rb, 1e-9, w)))
    return [cast(rb, y, x.type.dtype)]


@lowering("LRN")
def lower_lrn(rb, node, ins):
    # The window sum over channels: pad the squares with zeros on the channel axis, then add
    # `size` shifted channel slices (channel c sums c-before .. c+after).
    (x,) = ins
    shape = x.type.shape
    if shape is None or not isinstance(shape[1], int):
        return None
    a = node.attrs
    size, c, ndim = a["size"], shape[1], len(shape)
    w = cast(rb, x, dt.float32) if x.type.dtype in HALF else x
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    pads = [0] * (2 * ndim)
    pads[1], pads[ndim + 1] = before, after
    sq = op1(rb, "Pad", op1(rb, "Mul", w, w), ints(rb, pads), mode="constant")
    total = None
    for k in range(size):
        part = _slice(rb, sq, 1, k, k + c)
        total = part if total is None else op1(rb, "Add", total, part)
    base = op1(rb, "Add", scalar(rb, a["bias"], w),
               op1(rb, "Mul", scalar(rb, a["alpha"] / size, w), total))
    y = op1(rb, "Div", w, op1(rb, "Pow", base, scalar(rb, a["beta"], w)))
    return [cast(rb, y, x.type.dtype)]


# -- Dropout ---------------------------------------------------------------------------------------

@lowering("Dropout")
def lower_dropout(rb, node, ins):
    # Inference (no training_mode, or known false): the identity and an all-true mask. Training
    # draws a random mask: only a seeded Dropout is lowerable, since its draw is fixed (the
    # reference draws RandomState(seed).uniform per element on every run), so it is a constant.
    x, ratio, training = (list(ins) + [None, None])[:3]
    shape = static_shape(x)
    if shape is None:
        return None
    if training is not None and training.known is not None and not np.asarray(training.known).any():
        training = None
    if ratio is not None and ratio.known is not None and not np.asarray(ratio.known).any():
        training = None  # a ratio of 0 drops nothing, even in training
    if training is None:
        mask = op1(rb, "Expand", rb.constant(np.asarray(True), name="true"), ints(rb, shape))
        return [op1(rb, "Identity", x), mask][:len(node.outputs)]
    seed = node.attrs["seed"]
    if seed is None:
        return None
    draw = rb.constant(np.random.RandomState(seed).uniform(0.0, 1.0, shape), name="draw")
    r = const(rb, 0.5, dt.float64) if ratio is None else _reshape(rb, cast(rb, ratio, dt.float64), [])
    keep = op1(rb, "Not", op1(rb, "Less", draw, r))
    w = dt.float64 if x.type.dtype == dt.float64 else dt.float32
    one = const(rb, 1, dt.float64)
    factor = cast(rb, op1(rb, "Div", one, op1(rb, "Sub", one, r)), w)
    xw = cast(rb, x, w)
    y = cast(rb, op1(rb, "Mul", op1(rb, "Mul", xw, cast(rb, keep, w)), factor), x.type.dtype)
    on = _reshape(rb, training, [])
    y = op1(rb, "Where", on, y, x)
    mask = op1(rb, "Or", keep, op1(rb, "Not", on))
    return [y, mask][:len(node.outputs)]
