"""Records for the numeric ai.onnx.ml ops: Binarizer, Scaler, Normalizer, Imputer,
ArrayFeatureExtractor, FeatureVectorizer, OneHotEncoder, LabelEncoder (numeric tables),
LinearRegressor and LinearClassifier (every post-transform, one-row binary models), over float and
integer inputs, 1-D (one row) and 0-d where legal. String class labels are not recorded: the
record harness compares outputs as numbers."""

import numpy as np

from ..op_records import Const, In, OpRecord


def R(op, inputs, attrs=None, name="", **kw):
    return OpRecord(op, inputs, attrs or {}, name=name, domain="ai.onnx.ml", **kw)


ZEROED = Const(np.array([[1.0, -2.0, 3.0], [0.0, 0.0, 0.0], [-4.0, 0.5, 2.0]], np.float32))
WITH_NAN = Const(np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 0.0]], np.float32))

RECORDS = [
    R("Binarizer", [In((3, 4, 5))], {"threshold": 1.0}, name="float32"),
    R("Binarizer", [In((6,), "int64", -5, 5)], {"threshold": 0.5}, name="int64-fractional"),
    R("Binarizer", [In((2, 3), "int32", -5, 5)], {"threshold": -2.0}, name="int32-negative"),
    R("Binarizer", [In((), "float64")], name="0d"),
    R("Scaler", [In((3, 4))], {"offset": [0.1, -0.2, 0.3, 0.0], "scale": [2.0, 0.5, 1.0, -1.0]},
      name="per-feature"),
    R("Scaler", [In((2, 3), "int64", -9, 9)], {"offset": [1.5], "scale": [0.25]}, name="int64-single"),
    R("Scaler", [In((5,), "float64")], {"scale": [3.0]}, name="1d-scale-only"),
]
for norm in ("MAX", "L1", "L2"):
    RECORDS += [
        R("Normalizer", [In((3, 4))], {"norm": norm}, name=f"{norm}-float32"),
        R("Normalizer", [ZEROED], {"norm": norm}, name=f"{norm}-zero-row"),
        R("Normalizer", [In((4,), "int32", -5, 5)], {"norm": norm}, name=f"{norm}-int32-1d"),
    ]
RECORDS += [
    R("Imputer", [WITH_NAN], {"imputed_value_floats": [7.0, 8.0, 9.0], "replaced_value_float": np.nan},
      name="nan-per-feature"),
    R("Imputer", [In((3, 4), low=-2, high=2)], {"imputed_value_floats": [5.5], "replaced_value_float": 0.0},
      name="float-zero"),
    R("Imputer", [In((4, 3), "int64", -2, 2)], {"imputed_value_int64s": [10, 20, 30],
                                                 "replaced_value_int64": 1}, name="int64"),
    R("Imputer", [In((5,), "int32", 0, 3)], {"imputed_value_int64s": [-1], "replaced_value_int64": 2},
      name="int32-1d"),
    R("ArrayFeatureExtractor", [In((3, 4)), Const(np.array([0, 2], np.int64))], name="2d"),
    R("ArrayFeatureExtractor", [In((5,), "int64"), Const(np.array([4, 0, 4], np.int64))], name="1d"),
    R("ArrayFeatureExtractor", [In((2, 3, 4), "float64"), Const(np.array([[3]], np.int64))],
      name="3d"),
    R("ArrayFeatureExtractor", [In((2, 6)), In((3,), "int64", 0, 5)], name="runtime-indices"),
    R("FeatureVectorizer", [In((2, 3), "int64"), In((2, 2), "int64")], {"inputdimensions": [2, 4]},
      name="cut-and-pad"),
    R("FeatureVectorizer", [In((1, 2, 2)), In((3,)), In((1, 1))], {"inputdimensions": [4, 3, 2]},
      name="3d-and-1d"),
    R("OneHotEncoder", [In((2, 3), "int64", 0, 6)], {"cats_int64s": [1, 3, 5, 6]}, name="int64"),
    R("OneHotEncoder", [In((4,), "float32", -3, 4)], {"cats_int64s": [0, -2, 3]}, name="float-truncated"),
    R("LabelEncoder", [In((2, 5), "int64", -3, 8)], {"keys_int64s": [1, 3, 5, 7, 1],
                                                      "values_floats": [0.5, 1.5, 2.5, 3.5, 4.5]},
      name="int-to-float-repeated-key"),
    R("LabelEncoder", [WITH_NAN], {"keys_floats": [1.0, 3.0, float("nan")], "values_int64s": [10, 30, -1],
                                   "default_int64": 99}, name="float-nan-key"),
    R("LabelEncoder", [In((40,), "int64", 0, 130)],
      {"keys_int64s": list(range(0, 120, 3)), "values_int64s": list(range(40)), "default_int64": -7},
      name="int-big-table"),
    R("LabelEncoder", [In((6,), "int32", 0, 4)],
      {"keys_tensor": np.array([1, 2], np.int32), "values_tensor": np.array([5, 6], np.int16),
       "default_tensor": np.array([0], np.int16)}, name="tensors"),
    R("LabelEncoder", [In((3,), "int64", 0, 3)], {"keys_int64s": [2], "values_int64s": [20]},
      name="single-key"),
]

# -- linear models ---------------------------------------------------------------------------------
COEF = [0.5, -1.0, 0.25, 2.0, 0.1, -0.3, 1.5, 0.7, -0.2]  # 3 rows of 3 features
for pt in ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"):
    small = pt == "PROBIT"
    coef = [c * 0.02 for c in COEF] if small else COEF
    icpt = [0.5, 0.4, 0.6] if small else [0.1, -0.2, 0.0]
    RECORDS += [
        R("LinearRegressor", [In((4, 3))], {"coefficients": coef, "intercepts": icpt, "targets": 3,
                                             "post_transform": pt}, name=pt, rtol=1e-5, atol=1e-6),
        R("LinearClassifier", [In((4, 3))], {"coefficients": coef, "intercepts": icpt,
                                              "classlabels_ints": [7, 8, 9], "post_transform": pt},
          name=pt, num_outputs=2),
    ]
RECORDS += [
    R("LinearRegressor", [In((3,), "int64", -3, 3)], {"coefficients": [1.0, 2.0, 3.0]}, name="1d-int64"),
    R("LinearRegressor", [Const(np.zeros((2, 2), np.float32))],
      {"coefficients": [1.0, 1.0, 0.0, 0.0], "targets": 2, "post_transform": "SOFTMAX_ZERO"},
      name="softmax-zero-all-zero"),
    R("LinearClassifier", [In((5, 2))], {"coefficients": [1.0, -2.0], "intercepts": [0.5],
                                          "classlabels_ints": [0, 1]}, name="binary-one-row",
      num_outputs=2),
    R("LinearClassifier", [In((3, 2), "float64")], {"coefficients": [1.0, -2.0, 0.5, 0.5],
                                                     "classlabels_ints": [-5, 5],
                                                     "post_transform": "LOGISTIC"},
      name="float64-logistic", num_outputs=2),
]
