"""Lowering rules for the numeric ops of the ai.onnx.ml domain (ops/ml.py): Binarizer, Scaler,
Normalizer, Imputer, ArrayFeatureExtractor, FeatureVectorizer, OneHotEncoder, LabelEncoder
(numeric keys), LinearRegressor and LinearClassifier.

The references compute in float64 and round once to float32; the rules do the same, so results
agree to the last bit or to rounding. Model parameters (coefficients, categories, tables) are
attributes, so they become constants (LinearClassifier's labels too: its string labels are one
Gather from a constant table). No rule for LabelEncoder and OneHotEncoder over strings (host-only
data) nor for the tree ensembles.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..ops.ml import (
    TRANSFORMS,
    imputer_values,
    label_table,
    linear_classifier_model,
    linear_weights,
    onehot_categories,
    per_feature,
)
from ._build import cast, const, ints, op1
from .registry import lowering

F64 = dt.float64
ML = "ai.onnx.ml"



def reshape(rb, v, shape):
    shape = list(shape)
    return op1(rb, "Reshape", v, ints(rb, shape), allowzero=1 if 0 in shape else 0)


def rows_of(rb, x):
    """x as [N, F] float64 rows (a 1-D x is one row); None unless F is static."""
    shape = x.type.shape
    if not shape or not isinstance(shape[-1], int) or len(shape) > 2:
        return None
    xf = cast(rb, x, F64)
    return reshape(rb, xf, [1, shape[0]]) if len(shape) == 1 else xf


# -- elementwise and per-feature ops ---------------------------------------------------------------

@lowering("Binarizer", ML)
def lower_binarizer(rb, node, ins):
    # x > threshold as NumPy compares: in x's type for floats, in float64 for integers.
    (x,) = ins
    t = x.type.dtype
    xc = x if t.is_float else cast(rb, x, F64)
    above = op1(rb, "Greater", xc, const(rb, node.attrs["threshold"], xc.type.dtype))
    return [cast(rb, above, t)]


@lowering("Scaler", ML)
def lower_scaler(rb, node, ins):
    (x,) = ins
    shape = x.type.shape
    if shape is None:
        return None
    f = shape[-1] if shape else 1
    off = per_feature(node.attrs["offset"], "offset", f, "Scaler")
    sc = per_feature(node.attrs["scale"] or [1.0], "scale", f, "Scaler")
    if not shape:
        off, sc = off.reshape(-1)[:1].reshape(()), sc.reshape(-1)[:1].reshape(())
    y = op1(rb, "Mul", op1(rb, "Sub", cast(rb, x, F64), const(rb, off, F64)), const(rb, sc, F64))
    return [cast(rb, y, dt.float32)]


@lowering("Normalizer", ML)
def lower_normalizer(rb, node, ins):
    # Each row divided by its max, L1 or L2 norm; rows whose divisor is 0 are kept as they are.
    (x,) = ins
    shape = x.type.shape
    if shape is None or not isinstance(shape[-1], int):
        return None
    xf = cast(rb, x, F64)
    if shape[-1] == 0:
        return [cast(rb, xf, dt.float32)]
    axes = ints(rb, [-1])
    norm = node.attrs["norm"]
    if norm == "MAX":
        d = op1(rb, "ReduceMax", xf, axes, keepdims=1)
    elif norm == "L1":
        d = op1(rb, "ReduceSum", op1(rb, "Abs", xf), axes, keepdims=1)
    else:
        d = op1(rb, "Sqrt", op1(rb, "ReduceSum", op1(rb, "Mul", xf, xf), axes, keepdims=1))
    zero = op1(rb, "Equal", d, const(rb, 0, F64))
    return [cast(rb, op1(rb, "Where", zero, xf, op1(rb, "Div", xf, d)), dt.float32)]


@lowering("Imputer", ML)
def lower_imputer(rb, node, ins):
    (x,) = ins
    t = x.type.dtype
    shape = x.type.shape
    if shape is None:
        return None
    vals, rep = imputer_values(node.attrs, t, "Imputer")
    if t.is_float and math.isnan(rep):
        hit = op1(rb, "Not", op1(rb, "Equal", x, x))
    else:
        hit = op1(rb, "Equal", x, const(rb, rep, t))
    vals = vals[:1].reshape(()) if not shape else vals
    return [op1(rb, "Where", hit, const(rb, vals, t), x)]


# -- feature selection and assembly ----------------------------------------------------------------

@lowering("ArrayFeatureExtractor", ML)
def lower_array_feature_extractor(rb, node, ins):
    # A Gather along the last axis; a 1-D X gives one row.
    x, idx = ins
    shape = x.type.shape
    if shape is None:
        return None
    y = op1(rb, "Gather", x, reshape(rb, idx, [-1]), axis=len(shape) - 1)
    return [reshape(rb, y, [1, -1]) if len(shape) == 1 else y]


@lowering("FeatureVectorizer", ML)
def lower_feature_vectorizer(rb, node, ins):
    # Each input as [N, C] float64 rows, cut or zero-padded to its declared width, side by side.
    parts = []
    for x, width in zip(ins, node.attrs["inputdimensions"]):
        shape = x.type.shape
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        n = shape[0] if len(shape) > 1 else 1
        cols = math.prod(shape) // n if n else 0
        p = reshape(rb, cast(rb, x, F64), [n, cols])
        if cols > width:
            p = op1(rb, "Slice", p, ints(rb, [0]), ints(rb, [width]), ints(rb, [1]))
        elif cols < width:
            p = op1(rb, "Pad", p, ints(rb, [0, 0, 0, width - cols]), const(rb, 0, F64))
        parts.append(p)
    y = parts[0] if len(parts) == 1 else op1(rb, "Concat", *parts, axis=1)
    return [cast(rb, y, dt.float32)]


@lowering("OneHotEncoder", ML)
def lower_one_hot_encoder(rb, node, ins):
    # x (float inputs truncated to integers) compared with every category along a new last axis.
    # zeros=0 turns an unknown category into a run-time error, which the floor cannot raise.
    (x,) = ins
    shape = x.type.shape
    t = x.type.dtype
    if shape is None or t == dt.string or not node.attrs["zeros"]:
        return None
    cats = onehot_categories(node.attrs, t, "OneHotEncoder")
    key = cast(rb, x, dt.int64)  # a float-to-integer Cast truncates, as int() does
    table = rb.constant(np.asarray(cats, np.int64), name="cats")
    hot = op1(rb, "Equal", reshape(rb, key, list(shape) + [1]), table)
    return [cast(rb, hot, dt.float32)]


@lowering("LabelEncoder", ML)
def lower_label_encoder(rb, node, ins):
    # Numeric keys: a binary search of the sorted keys (log2(keys) Gather/compare steps, each the
    # size of x), then the matching value or the default. String tables stay on the host.
    (x,) = ins
    keys, kt, values, vt, default = label_table(node.attrs, "LabelEncoder")
    t = x.type.dtype
    if dt.string in (kt, vt, t):
        return None
    table, nan_value = {}, None
    for k, v in zip(keys, values):  # a repeated key: the last one wins (as the reference)
        if t.is_float and math.isnan(k):
            nan_value = v
        else:
            kk = np.asarray(k).astype(t.np).item()
            if kk == k:  # a key x's type cannot hold never matches
                table[kk] = v
    out_t = node.outputs[0].type.dtype
    dflt = const(rb, default, out_t)
    y = dflt
    if table:
        y = _lookup(rb, x, sorted(table), [table[k] for k in sorted(table)], dflt, out_t)
    if nan_value is not None:
        y = op1(rb, "Where", op1(rb, "Not", op1(rb, "Equal", x, x)), const(rb, nan_value, out_t), y)
    if y is dflt:  # an empty table: every element gets the default, in x's shape
        y = op1(rb, "Where", op1(rb, "Equal", x, x), dflt, dflt)
    return [y]


def _lookup(rb, x, keys, values, default, out_t):
    """values[i] where x == keys[i] (keys sorted ascending), else default."""
    t = x.type.dtype
    sk = rb.constant(np.asarray(keys, t.np), name="keys")
    n = len(keys)
    pos = const(rb, 0, dt.int64)  # broadcast to x's shape by the first step
    step = 1 << (n.bit_length() - 1)
    while step >= 1:  # pos = the last index whose key is <= x (0 when none is)
        cand = op1(rb, "Min", op1(rb, "Add", pos, const(rb, step, dt.int64)), const(rb, n - 1, dt.int64))
        ok = op1(rb, "Not", op1(rb, "Greater", op1(rb, "Gather", sk, cand), x))
        pos = op1(rb, "Where", ok, cand, pos)
        step //= 2
    hit = op1(rb, "Equal", op1(rb, "Gather", sk, pos), x)
    vals = rb.constant(np.asarray(values, out_t.np), name="values")
    return op1(rb, "Where", hit, op1(rb, "Gather", vals, pos), default)


# -- linear models ---------------------------------------------------------------------------------

def _erfinv(rb, v):
    """Inverse error function as the reference: Winitzki's estimate and four Newton steps on Erf;
    +-1 give +-inf, |v| > 1 NaN (the logarithm of a negative number)."""
    c = lambda a: const(rb, a, F64)  # noqa: E731
    a = 0.147
    ln = op1(rb, "Log", op1(rb, "Sub", c(1), op1(rb, "Mul", v, v)))
    t = op1(rb, "Add", c(2 / (math.pi * a)), op1(rb, "Mul", ln, c(0.5)))
    r = op1(rb, "Sqrt", op1(rb, "Sub", op1(rb, "Sqrt", op1(rb, "Sub", op1(rb, "Mul", t, t),
                                                           op1(rb, "Div", ln, c(a)))), t))
    x = op1(rb, "Where", op1(rb, "Less", v, c(0)), op1(rb, "Sub", c(0), r), r)
    for _ in range(4):
        slope = op1(rb, "Mul", c(2 / math.sqrt(math.pi)),
                    op1(rb, "Exp", op1(rb, "Sub", c(0), op1(rb, "Mul", x, x))))
        x = op1(rb, "Sub", x, op1(rb, "Div", op1(rb, "Sub", op1(rb, "Erf", x), v), slope))
    edge = op1(rb, "Equal", op1(rb, "Abs", v), c(1))
    return op1(rb, "Where", edge, op1(rb, "Mul", v, c(math.inf)), x)


def post_transform(rb, s, kind):
    """The ML post-transforms of float64 [N, K] scores (ops/_ml_trees `post_transform`)."""
    k = TRANSFORMS.index(kind) if isinstance(kind, str) else kind
    c = lambda a: const(rb, a, F64)  # noqa: E731
    if k == 1:
        return op1(rb, "Softmax", s, axis=-1)
    if k == 2:
        return op1(rb, "Sigmoid", s)
    if k == 3:  # softmax over the non-zero scores; zeros (and all-zero rows) stay zero
        nz = op1(rb, "Not", op1(rb, "Equal", s, c(0)))
        axes = ints(rb, [-1])
        m = op1(rb, "ReduceMax", op1(rb, "Where", nz, s, c(-math.inf)), axes, keepdims=1)
        m = op1(rb, "Where", op1(rb, "Equal", m, c(-math.inf)), c(0), m)
        e = op1(rb, "Where", nz, op1(rb, "Exp", op1(rb, "Sub", s, m)), c(0))
        total = op1(rb, "ReduceSum", e, axes, keepdims=1)
        return op1(rb, "Where", op1(rb, "Greater", total, c(0)), op1(rb, "Div", e, total), c(0))
    if k == 4:
        v = op1(rb, "Sub", op1(rb, "Mul", s, c(2)), c(1))
        return op1(rb, "Mul", c(math.sqrt(2)), _erfinv(rb, v))
    return s


def _affine(rb, rows, w, b):
    """rows @ w.T + b in float64, w and b constants."""
    return op1(rb, "Add", op1(rb, "MatMul", rows, rb.constant(np.ascontiguousarray(w.T), name="w")),
               rb.constant(b, name="b"))


@lowering("LinearRegressor", ML)
def lower_linear_regressor(rb, node, ins):
    a = node.attrs
    rows = rows_of(rb, ins[0])
    if rows is None:
        return None
    w, b = linear_weights(a, a["targets"], "LinearRegressor")
    y = post_transform(rb, _affine(rb, rows, w, b), a["post_transform"])
    return [cast(rb, y, dt.float32)]


@lowering("LinearClassifier", ML)
def lower_linear_classifier(rb, node, ins):
    # Scores X W^T + b (two classes given one row score [-s, s]), post-transformed; the label
    # is the class of the first highest score, looked up in a constant table.
    a = node.attrs
    x = ins[0]
    rows = rows_of(rb, x)
    if rows is None:
        return None
    labels, lt, w, b = linear_classifier_model(a, x.type.shape[-1], "LinearClassifier")
    raw = _affine(rb, rows, w, b)
    if w.shape[0] == 1 and len(labels) == 2:
        raw = op1(rb, "Concat", op1(rb, "Sub", const(rb, 0, F64), raw), raw, axis=1)
    scores = post_transform(rb, raw, a["post_transform"])
    best = op1(rb, "ArgMax", scores, axis=1, keepdims=0)
    table = rb.constant(np.asarray(labels, dtype=object if lt == dt.string else np.int64), name="labels")
    return [op1(rb, "Gather", table, best), cast(rb, scores, dt.float32)]
