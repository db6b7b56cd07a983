"""Classic ML ops of the ai.onnx.ml domain: LabelEncoder, TreeEnsemble (and the deprecated
TreeEnsembleRegressor), ArrayFeatureExtractor, Binarizer, Normalizer, Scaler, Imputer,
OneHotEncoder, FeatureVectorizer, LinearRegressor, LinearClassifier.

The deprecated TreeEnsembleClassifier is left out on purpose: its two-class score conventions
differ between ONNX's reference and onnxruntime; TreeEnsemble + ArgMax + LabelEncoder replace it.
Where the spec is silent, these follow ONNX's reference implementation (noted where onnxruntime
differs).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from ._ml_trees import LEGACY_TREE_ATTRS, TRANSFORMS, TREE_ATTRS, Forest, legacy_forest, post_transform
from ._shape import numel, same_as
from .registry import ML, Attr, Tier, op

DOMAIN = "ai.onnx.ml"
F32 = frozenset({dt.float32})
NUM4 = frozenset({dt.float32, dt.float64, dt.int64, dt.int32})
I64 = frozenset({dt.int64})


def ml_op(name, **kw):
    return op(name, domain=DOMAIN, groups={ML}, tier=Tier.HIGH, **kw)


def _as_2d_rows(ctx, i=0):
    """[N, C] (a 1-D input is one row): the shape every per-row ML op works on."""
    shape = ctx.shape(i)
    if shape is None:
        return None, None
    if len(shape) == 1:
        return 1, shape[0]
    if len(shape) == 2:
        return shape
    raise ctx.error(f"input must be 1-D or 2-D, got shape {list(shape)}")


# -- LabelEncoder ----------------------------------------------------------------------------------
_KIND_DTYPE = {"strings": dt.string, "int64s": dt.int64, "floats": dt.float32}


def _one_of(attrs, prefix, where):
    given = [k for k in ("strings", "int64s", "floats", "tensor") if attrs.get(f"{prefix}_{k}") is not None]
    if len(given) != 1:
        raise GraphError(f"{where}: exactly one of {prefix}_strings, {prefix}_int64s, {prefix}_floats, "
                         f"{prefix}_tensor must be given (got {len(given)})")
    k = given[0]
    v = attrs[f"{prefix}_{k}"]
    if k == "tensor":
        arr = np.asarray(v).reshape(-1)
        return list(arr.tolist()), dt.from_numpy(arr.dtype)
    return list(v), _KIND_DTYPE[k]


def label_table(a, where):
    keys, kt = _one_of(a, "keys", where)
    values, vt = _one_of(a, "values", where)
    if len(keys) != len(values):
        raise GraphError(f"{where}: {len(keys)} keys but {len(values)} values")
    if a["default_tensor"] is not None:
        d = np.asarray(a["default_tensor"]).reshape(-1)
        if d.size != 1 or dt.from_numpy(d.dtype) != vt:
            raise GraphError(f"{where}: default_tensor must hold one {vt.name} value")
        default = d[0]
    elif vt == dt.string:
        default = a["default_string"]
    elif vt.is_float:
        default = a["default_float"]
    else:
        default = a["default_int64"]
    return keys, kt, values, vt, default


def _kind(t):
    return "string" if t == dt.string else "float" if t.is_float else "int"


def _label_infer(ctx):
    try:
        _, kt, _, vt, _ = label_table(ctx.attrs, "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    if _kind(kt) != _kind(ctx.dtype(0)):
        raise ctx.error(f"input type {ctx.dtype(0).name} does not match the keys' type {kt.name}")
    return [dt.TensorType(ctx.shape(0), vt)]


def _label_ref(x, **a):
    keys, kt, values, vt, default = label_table(a, "LabelEncoder")
    floats = _kind(kt) == "float"
    table, nan_value = {}, None
    for k, v in zip(keys, values):  # a repeated key: the last one wins
        if floats and math.isnan(k):
            nan_value = v  # NaN keys match any NaN input
        else:
            table[k] = v
    out = []
    for e in x.reshape(-1).tolist():
        if floats and math.isnan(e):
            out.append(default if nan_value is None else nan_value)
        else:
            out.append(table.get(e, default))
    res = np.empty(len(out), dtype=vt.np)
    res[:] = out
    return res.reshape(x.shape)


def _label_from_onnx(ic):
    if ic.opset >= 2:
        return ic.emit(ic.opdef, ic.inputs, ic.attrs)
    # ai.onnx.ml v1: a string <-> int64 mapping through the positions of `classes_strings`.
    classes = list(ic.attrs.get("classes_strings", ()))
    idx = list(range(len(classes)))
    if ic.inputs[0].type.dtype == dt.string:
        attrs = {"keys_strings": classes, "values_int64s": idx,
                 "default_int64": ic.attrs.get("default_int64", -1)}
    else:
        attrs = {"keys_int64s": idx, "values_strings": classes,
                 "default_string": ic.attrs.get("default_string", "_Unused")}
    return ic.emit(ic.opdef, ic.inputs, attrs)


ml_op("LabelEncoder", inputs=("X:T1",), outputs=("Y:T2",),
      types={"T1": frozenset({dt.string, dt.int64, dt.float32, dt.int32, dt.int16, dt.float64}),
             "T2": frozenset({dt.string, dt.int64, dt.float32, dt.int32, dt.int16, dt.float64})},
      attrs=tuple(Attr(f"{p}_{k}", kind, None) for p in ("keys", "values")
                  for k, kind in (("strings", "strings"), ("int64s", "ints"), ("floats", "floats"),
                                  ("tensor", "tensor")))
      + (Attr("default_string", "string", "_Unused"), Attr("default_int64", "int", -1),
         Attr("default_float", "float", -0.0), Attr("default_tensor", "tensor", None)),
      infer=_label_infer, reference=_label_ref, onnx_since=4, from_onnx=_label_from_onnx,
      doc="Maps each element through the keys_* -> values_* table; unknown keys give the default.")


# -- TreeEnsemble ----------------------------------------------------------------------------------
def _tree_infer(ctx):
    try:
        forest = Forest.from_attrs(ctx.attrs, "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 2:
        raise ctx.error(f"X must be 2-D [N, F], got shape {list(shape)}")
    return [dt.TensorType((None if shape is None else shape[0], forest.n_targets), ctx.dtype(0))]


def _tree_ref(x, **a):
    forest = Forest.from_attrs(a, "TreeEnsemble")
    # The scores are X-typed values before the transform (a float32 sum of 0.4 and 0.6 is 1).
    scores = forest.aggregate(x.astype(np.float64)).astype(x.dtype)
    return post_transform(scores, a["post_transform"]).astype(x.dtype)


ml_op("TreeEnsemble", inputs=("X:T",), outputs=("Y:T",),
      types={"T": frozenset({dt.float32, dt.float64, dt.float16})}, attrs=TREE_ATTRS,
      infer=_tree_infer, reference=_tree_ref, onnx_since=5,
      doc="Evaluates an ensemble of decision trees on each row of X, aggregating leaf weights per "
          "target and applying the post-transform.")


def _tree_reg_infer(ctx):
    try:
        forest = legacy_forest(ctx.attrs, "target", "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    return [dt.TensorType((_as_2d_rows(ctx)[0], forest.n_targets), dt.float32)]


def _tree_reg_ref(x, **a):
    forest = legacy_forest(a, "target", "TreeEnsembleRegressor")
    x = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    scores = forest.aggregate(x).astype(np.float32)
    return post_transform(scores, a["post_transform"]).astype(np.float32)


ml_op("TreeEnsembleRegressor", inputs=("X:T",), outputs=("Y:F",), types={"T": NUM4, "F": F32},
      attrs=LEGACY_TREE_ATTRS + (Attr("target_ids", "ints", None), Attr("target_nodeids", "ints", None),
                                 Attr("target_treeids", "ints", None),
                                 Attr("target_weights", "floats", None),
                                 Attr("target_weights_as_tensor", "tensor", None),
                                 Attr("n_targets", "int", None),
                                 Attr("aggregate_function", "string", "SUM")),
      infer=_tree_reg_infer, reference=_tree_reg_ref, onnx_since=3,
      doc="Deprecated tree-ensemble regressor (node ids per tree); same evaluation as TreeEnsemble.")


# -- ArrayFeatureExtractor -------------------------------------------------------------------------
def _afe_infer(ctx):
    shape = ctx.shape(0)
    k = numel(ctx.shape(1))
    if shape is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if not shape:
        raise ctx.error("X must have at least one dimension")
    lead = (1,) if len(shape) == 1 else shape[:-1]
    return [dt.TensorType(lead + (k,), ctx.dtype(0))]


def _afe_ref(x, y):
    idx = y.reshape(-1)
    n = x.shape[-1]
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise GraphError(f"ArrayFeatureExtractor: index {int(bad[0])} out of range for a last "
                         f"dimension of {n}")
    out = x[..., idx]
    return out.reshape(1, -1) if x.ndim == 1 else out


ml_op("ArrayFeatureExtractor", inputs=("X:T", "Y:I"), outputs=("Z:T",),
      types={"T": frozenset({dt.float32, dt.float64, dt.int64, dt.int32, dt.string}), "I": I64},
      infer=_afe_infer, reference=_afe_ref, onnx_since=1,
      doc="Selects the given indices along the last axis (a 1-D X gives a [1, len(Y)] result).")


# -- Binarizer, Normalizer, Scaler, Imputer --------------------------------------------------------
ml_op("Binarizer", inputs=("X:T",), outputs=("Y:T",), types={"T": NUM4},
      attrs=(Attr("threshold", "float", 0.0),), infer=same_as(0),
      reference=lambda x, threshold: (x > threshold).astype(x.dtype), onnx_since=1,
      doc="1 where X > threshold, else 0, in X's type.")


def _normalizer_infer(ctx):
    if ctx.attrs["norm"] not in ("MAX", "L1", "L2"):
        raise ctx.error(f"norm must be MAX, L1 or L2, got '{ctx.attrs['norm']}'")
    _as_2d_rows(ctx)
    return [dt.TensorType(ctx.shape(0), dt.float32)]


def _normalizer_ref(x, norm):
    rows = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    if norm == "MAX":
        d = rows.max(axis=1, keepdims=True, initial=-np.inf)
    elif norm == "L1":
        d = np.abs(rows).sum(axis=1, keepdims=True)
    else:
        d = np.sqrt((rows * rows).sum(axis=1, keepdims=True))
    y = np.divide(rows, d, out=rows.copy(), where=d != 0)
    return y.astype(np.float32).reshape(x.shape)


ml_op("Normalizer", inputs=("X:T",), outputs=("Y:F",), types={"T": NUM4, "F": F32},
      attrs=(Attr("norm", "string", "MAX"),), infer=_normalizer_infer, reference=_normalizer_ref,
      onnx_since=1,
      doc="Divides each row by its max, L1 norm or L2 norm (rows with a zero divisor are kept).")


def per_feature(values, name, features, where):
    v = np.asarray(values if values else [0.0], np.float64)
    if v.size not in (1, features) and isinstance(features, int):
        raise GraphError(f"{where}: {name} has {v.size} values; need 1 or one per feature "
                         f"({features})")
    return v


def _scaler_infer(ctx):
    shape = ctx.shape(0)
    f = shape[-1] if shape else 1
    try:
        per_feature(ctx.attrs["offset"], "offset", f, "attributes")
        per_feature(ctx.attrs["scale"] or [1.0], "scale", f, "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    return [dt.TensorType(shape, dt.float32)]


def _scaler_ref(x, offset, scale):
    f = x.shape[-1] if x.ndim else 1
    off = per_feature(offset, "offset", f, "Scaler")
    sc = per_feature(scale or [1.0], "scale", f, "Scaler")
    return ((x.astype(np.float64) - off) * sc).astype(np.float32)


ml_op("Scaler", inputs=("X:T",), outputs=("Y:F",), types={"T": NUM4, "F": F32},
      attrs=(Attr("offset", "floats", ()), Attr("scale", "floats", ())),
      infer=_scaler_infer, reference=_scaler_ref, onnx_since=1,
      doc="(X - offset) * scale per feature (last axis), as float.")


def imputer_values(a, dtype, where):
    if dtype.is_float:
        vals, rep = a["imputed_value_floats"], a["replaced_value_float"]
    else:
        vals, rep = a["imputed_value_int64s"], a["replaced_value_int64"]
    if not vals:
        raise GraphError(f"{where}: {dtype.name} input needs "
                         f"{'imputed_value_floats' if dtype.is_float else 'imputed_value_int64s'}")
    return np.asarray(vals, dtype.np), rep


def _imputer_infer(ctx):
    shape = ctx.shape(0)
    try:
        vals, _ = imputer_values(ctx.attrs, ctx.dtype(0), "attributes")
        if shape and isinstance(shape[-1], int):
            per_feature(list(vals), "the imputed values", shape[-1], "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    return [ctx.input(0)]


def _imputer_ref(x, **a):
    vals, rep = imputer_values(a, dt.from_numpy(x.dtype), "Imputer")
    hit = np.isnan(x) if x.dtype.kind == "f" and math.isnan(rep) else x == rep
    return np.where(hit, np.broadcast_to(vals, x.shape) if x.ndim else vals[0], x).astype(x.dtype)


ml_op("Imputer", inputs=("X:T",), outputs=("Y:T",), types={"T": NUM4},
      attrs=(Attr("imputed_value_floats", "floats", None), Attr("imputed_value_int64s", "ints", None),
             Attr("replaced_value_float", "float", 0.0), Attr("replaced_value_int64", "int", 0)),
      infer=_imputer_infer, reference=_imputer_ref, onnx_since=1,
      doc="Replaces elements equal to the replaced value (NaN matches NaN) with the per-feature "
          "imputed value.")


# -- OneHotEncoder, FeatureVectorizer --------------------------------------------------------------
def onehot_categories(a, dtype, where):
    ints, strs = a["cats_int64s"], a["cats_strings"]
    if (ints is None) == (strs is None):
        raise GraphError(f"{where}: exactly one of cats_int64s and cats_strings must be given")
    if (dtype == dt.string) != (strs is not None):
        raise GraphError(f"{where}: {dtype.name} input needs "
                         f"{'cats_strings' if dtype == dt.string else 'cats_int64s'}")
    return list(strs if strs is not None else ints)


def _onehot_infer(ctx):
    try:
        cats = onehot_categories(ctx.attrs, ctx.dtype(0), "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    shape = ctx.shape(0)
    return [dt.TensorType(None if shape is None else shape + (len(cats),), dt.float32)]


def _onehot_ref(x, cats_int64s, cats_strings, zeros):
    cats = onehot_categories({"cats_int64s": cats_int64s, "cats_strings": cats_strings},
                 dt.from_numpy(x.dtype), "OneHotEncoder")
    pos = {c: i for i, c in enumerate(cats)}
    flat = x.reshape(-1).tolist()
    out = np.zeros((len(flat), len(cats)), np.float32)
    for r, e in enumerate(flat):
        key = e if isinstance(e, str) else int(e)  # float inputs are truncated to integers
        if key in pos:
            out[r, pos[key]] = 1.0
        elif not zeros:
            raise GraphError(f"OneHotEncoder: category {e!r} not found (zeros=0)")
    return out.reshape(x.shape + (len(cats),))


ml_op("OneHotEncoder", inputs=("X:T",), outputs=("Y:F",),
      types={"T": frozenset({dt.string, dt.int64, dt.int32, dt.float32, dt.float64}), "F": F32},
      attrs=(Attr("cats_int64s", "ints", None), Attr("cats_strings", "strings", None),
             Attr("zeros", "int", 1)),
      infer=_onehot_infer, reference=_onehot_ref, onnx_since=1,
      doc="One-hot encodes each element against the category list, adding a last axis.")


def _fv_infer(ctx):
    dims = ctx.attrs["inputdimensions"]
    if len(dims) != len(ctx.inputs):
        raise ctx.error(f"inputdimensions has {len(dims)} entries for {len(ctx.inputs)} inputs")
    rows = None
    for i in range(len(ctx.inputs)):
        shape = ctx.shape(i)
        if shape is not None and len(shape) > 1 and isinstance(shape[0], int):
            rows = shape[0]
    return [dt.TensorType((rows, sum(dims)), dt.float32)]


def _fv_ref(*xs, inputdimensions):
    n = max((x.shape[0] if x.ndim > 1 else 1) for x in xs)
    cols = []
    for x, d in zip(xs, inputdimensions):
        rows = x.reshape(n, -1) if x.ndim > 1 else x.reshape(1, -1)
        part = np.zeros((n, d), np.float64)  # each input is cut or zero-padded to its dimension
        k = min(d, rows.shape[1])
        part[:, :k] = rows[:, :k]
        cols.append(part)
    return np.concatenate(cols, axis=1).astype(np.float32)


ml_op("FeatureVectorizer", inputs=("X:T*",), outputs=("Y:F",), types={"T": NUM4, "F": F32},
      attrs=(Attr("inputdimensions", "ints", ()),), infer=_fv_infer, reference=_fv_ref, onnx_since=1,
      doc="Concatenates the inputs' features ([N, C] each; 1-D is one row) into one float matrix.")


# -- LinearRegressor, LinearClassifier -------------------------------------------------------------


def linear_weights(a, n_out, where):  # LinearRegressor
    coef = np.asarray(a["coefficients"] or (), np.float64)
    if a["post_transform"] not in TRANSFORMS:
        raise GraphError(f"{where}: post_transform must be one of {list(TRANSFORMS)}")
    if n_out <= 0 or coef.size % n_out:
        raise GraphError(f"{where}: {coef.size} coefficients do not split into {n_out} rows")
    b = np.asarray(a["intercepts"] or [0.0] * n_out, np.float64)
    if b.size != n_out:
        raise GraphError(f"{where}: {b.size} intercepts for {n_out} outputs")
    return coef.reshape(n_out, -1), b


def _check_features(ctx, w):
    _, f = _as_2d_rows(ctx)
    if isinstance(f, int) and f != w.shape[1]:
        raise ctx.error(f"X has {f} features but the coefficients have {w.shape[1]} per output")


def _linreg_infer(ctx):
    try:
        w, _ = linear_weights(ctx.attrs, ctx.attrs["targets"], "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    _check_features(ctx, w)
    n, _ = _as_2d_rows(ctx)
    return [dt.TensorType((n, ctx.attrs["targets"]), dt.float32)]


def _linreg_ref(x, **a):
    w, b = linear_weights(a, a["targets"], "LinearRegressor")
    rows = np.asarray(x, np.float64).reshape(-1, w.shape[1])
    y = rows @ w.T + b
    return post_transform(y, TRANSFORMS.index(a["post_transform"])).astype(np.float32)


ml_op("LinearRegressor", inputs=("X:T",), outputs=("Y:F",), types={"T": NUM4, "F": F32},
      attrs=(Attr("coefficients", "floats", None), Attr("intercepts", "floats", None),
             Attr("targets", "int", 1), Attr("post_transform", "string", "NONE")),
      infer=_linreg_infer, reference=_linreg_ref, onnx_since=1,
      doc="Y = X W^T + b for `targets` outputs, then the post-transform.")


def linear_classifier_model(a, features, where):
    """Labels, label type and the [classes or 1, F] weights and intercepts; F may be unknown."""
    ints, strs = a["classlabels_ints"], a["classlabels_strings"]
    if (ints is None) == (strs is None):
        raise GraphError(f"{where}: exactly one of classlabels_ints and classlabels_strings must be "
                         "given")
    labels, lt = (list(strs), dt.string) if strs is not None else (list(ints), dt.int64)
    if a["post_transform"] not in TRANSFORMS:
        raise GraphError(f"{where}: post_transform must be one of {list(TRANSFORMS)}")
    coef = np.asarray(a["coefficients"], np.float64)
    if not isinstance(features, int):
        return labels, lt, None, None
    if features == 0 or coef.size % features:
        raise GraphError(f"{where}: {coef.size} coefficients do not split into rows of {features} "
                         "features")
    w = coef.reshape(-1, features)
    # Two classes may be given one row, the second class's score s: the scores are then [-s, s]
    # (ONNX's reference; onnxruntime gives [1 - s, s] without a transform).
    if w.shape[0] != len(labels) and not (len(labels) == 2 and w.shape[0] == 1):
        raise GraphError(f"{where}: {w.shape[0]} rows of coefficients for {len(labels)} classes")
    b = np.asarray(a["intercepts"] or [0.0] * w.shape[0], np.float64)
    if b.size != w.shape[0]:
        raise GraphError(f"{where}: {b.size} intercepts for {w.shape[0]} rows of coefficients")
    return labels, lt, w, b


def _lincls_infer(ctx):
    n, f = _as_2d_rows(ctx)
    try:
        labels, lt, _, _ = linear_classifier_model(ctx.attrs, f, "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    return [dt.TensorType((n,), lt), dt.TensorType((n, len(labels)), dt.float32)]


def _lincls_ref(x, **a):
    rows = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    labels, lt, w, b = linear_classifier_model(a, rows.shape[1], "LinearClassifier")
    raw = rows @ w.T + b
    if w.shape[0] == 1 and len(labels) == 2:
        raw = np.stack([-raw[:, 0], raw[:, 0]], axis=1)
    scores = post_transform(raw, a["post_transform"])
    out = np.empty(scores.shape[0], dtype=lt.np)
    out[:] = [labels[i] for i in np.argmax(scores, axis=1)]
    return out, scores.astype(np.float32)


ml_op("LinearClassifier", inputs=("X:T1",), outputs=("Y:T2", "Z:F"),
      types={"T1": NUM4, "T2": frozenset({dt.string, dt.int64}), "F": F32},
      attrs=(Attr("coefficients", "floats"), Attr("intercepts", "floats", None),
             Attr("classlabels_ints", "ints", None), Attr("classlabels_strings", "strings", None),
             Attr("multi_class", "int", 0), Attr("post_transform", "string", "NONE")),
      infer=_lincls_infer, reference=_lincls_ref, onnx_since=1,
      doc="Linear classifier: per-class scores X W^T + b (post-transformed) and the top label.")
