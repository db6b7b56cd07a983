"""Element types and tensor types: the type system of the graph IR.

Every value in a graph has a type: a `TensorType` (shape + element type), or, for ONNX's
sequence and optional values (reference backend only), a `SequenceType` / `OptionalType`.
Dimensions are ints when known, a string for a named symbolic dimension (ONNX `dim_param`),
or None when nothing is known. Types are immutable and hashable.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from .errors import GraphError

# ONNX's TensorProto.DataType codes (fixed by the ONNX spec; tests/test_graph.py checks them against
# the onnx package). Spelled here so that `import glow` needs neither onnx nor ml_dtypes: importing
# either costs over a second, and most processes (the CLI's help, `glow backends`) use neither.
_ONNX_CODES = {"FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7,
               "STRING": 8, "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13,
               "COMPLEX64": 14, "COMPLEX128": 15, "BFLOAT16": 16, "FLOAT8E4M3FN": 17, "FLOAT8E4M3FNUZ": 18,
               "FLOAT8E5M2": 19, "FLOAT8E5M2FNUZ": 20, "UINT4": 21, "INT4": 22, "FLOAT4E2M1": 23,
               "FLOAT8E8M0": 24, "UINT2": 25, "INT2": 26}


_NP: dict = {}  # DType name -> NumPy dtype, resolved on first use


@dataclass(frozen=True, slots=True)
class DType:
    """An element type. `np` is the NumPy dtype used to hold it (ml_dtypes for the exotic ones,
    imported on first use)."""

    name: str
    holder: object = field(repr=False, compare=False)  # a NumPy type, or the name of an ml_dtypes one
    onnx: int = 0
    is_float: bool = False
    is_int: bool = False
    is_signed: bool = False

    @property
    def np(self) -> np.dtype:
        try:
            return _NP[self.name]
        except KeyError:
            h = self.holder
            if isinstance(h, str):
                import ml_dtypes

                h = getattr(ml_dtypes, h)
            return _NP.setdefault(self.name, np.dtype(h))

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    def __repr__(self) -> str:
        return self.name


def _d(name, npdt, onnx_code, kind):
    return DType(name, npdt, onnx_code, is_float=kind == "f", is_int=kind in "iu", is_signed=kind in "fi")


float32 = _d("float32", np.float32, _ONNX_CODES["FLOAT"], "f")
float64 = _d("float64", np.float64, _ONNX_CODES["DOUBLE"], "f")
float16 = _d("float16", np.float16, _ONNX_CODES["FLOAT16"], "f")
bfloat16 = _d("bfloat16", "bfloat16", _ONNX_CODES["BFLOAT16"], "f")
float8e4m3fn = _d("float8e4m3fn", "float8_e4m3fn", _ONNX_CODES["FLOAT8E4M3FN"], "f")
float8e4m3fnuz = _d("float8e4m3fnuz", "float8_e4m3fnuz", _ONNX_CODES["FLOAT8E4M3FNUZ"], "f")
float8e5m2 = _d("float8e5m2", "float8_e5m2", _ONNX_CODES["FLOAT8E5M2"], "f")
float8e5m2fnuz = _d("float8e5m2fnuz", "float8_e5m2fnuz", _ONNX_CODES["FLOAT8E5M2FNUZ"], "f")
float8e8m0 = _d("float8e8m0", "float8_e8m0fnu", _ONNX_CODES["FLOAT8E8M0"], "f")
float4e2m1 = _d("float4e2m1", "float4_e2m1fn", _ONNX_CODES["FLOAT4E2M1"], "f")
int8 = _d("int8", np.int8, _ONNX_CODES["INT8"], "i")
int16 = _d("int16", np.int16, _ONNX_CODES["INT16"], "i")
int32 = _d("int32", np.int32, _ONNX_CODES["INT32"], "i")
int64 = _d("int64", np.int64, _ONNX_CODES["INT64"], "i")
uint8 = _d("uint8", np.uint8, _ONNX_CODES["UINT8"], "u")
uint16 = _d("uint16", np.uint16, _ONNX_CODES["UINT16"], "u")
uint32 = _d("uint32", np.uint32, _ONNX_CODES["UINT32"], "u")
uint64 = _d("uint64", np.uint64, _ONNX_CODES["UINT64"], "u")
int4 = _d("int4", "int4", _ONNX_CODES["INT4"], "i")
uint4 = _d("uint4", "uint4", _ONNX_CODES["UINT4"], "u")
int2 = _d("int2", "int2", _ONNX_CODES["INT2"], "i")
uint2 = _d("uint2", "uint2", _ONNX_CODES["UINT2"], "u")
bool_ = _d("bool", np.bool_, _ONNX_CODES["BOOL"], "b")
string = _d("string", np.object_, _ONNX_CODES["STRING"], "s")
complex64 = _d("complex64", np.complex64, _ONNX_CODES["COMPLEX64"], "c")
complex128 = _d("complex128", np.complex128, _ONNX_CODES["COMPLEX128"], "c")

ALL = (float32, float64, float16, bfloat16, float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz,
       float8e8m0, float4e2m1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, int4, uint4,
       int2, uint2, bool_, string, complex64, complex128)
BY_NAME = {d.name: d for d in ALL}
BY_ONNX = {d.onnx: d for d in ALL}
_BY_NP: dict = {}  # filled on first use (NumPy's types; ml_dtypes' once it is loaded)

FLOATS = frozenset(d for d in ALL if d.is_float)
INTS = frozenset(d for d in ALL if d.is_int)
#: The types ordinary arithmetic is defined on (no 4-bit/8-bit float storage formats).
NUMERIC = frozenset({float32, float64, float16, bfloat16, int8, int16, int32, int64,
                     uint8, uint16, uint32, uint64})


def from_numpy(dt) -> DType:
    """The DType of a NumPy dtype (or array)."""
    dt = np.dtype(getattr(dt, "dtype", dt))
    if dt.kind in "US":
        return string
    if not _BY_NP:  # NumPy's own types first: resolving ml_dtypes' would import it (a second)
        _BY_NP.update({d.np: d for d in ALL if not isinstance(d.holder, str)})
    try:
        return _BY_NP[dt]
    except KeyError:
        pass
    if dt.kind == "V" and "ml_dtypes" in sys.modules:  # an ml_dtypes array: ml_dtypes is loaded
        _BY_NP.update({d.np: d for d in ALL if isinstance(d.holder, str)})
        if dt in _BY_NP:
            return _BY_NP[dt]
    raise GraphError(f"unsupported NumPy dtype {dt}")


def from_onnx(code: int) -> DType:
    try:
        return BY_ONNX[code]
    except KeyError:
        names = {v: k for k, v in _ONNX_CODES.items()}
        name = names.get(code, code)
        raise GraphError(f"unsupported ONNX element type {name}") from None


def from_name(name: str) -> DType:
    try:
        return BY_NAME[name]
    except KeyError:
        raise GraphError(f"unknown element type '{name}'") from None


@dataclass(frozen=True, slots=True)
class QuantizedDType:
    """A quantized integer type: real = scale * (q - offset). Glow-style, carried on the type."""

    base: DType
    scale: float
    offset: int

    def __post_init__(self):
        if self.base not in (int8, uint8, int32):
            raise GraphError(f"quantized type needs int8, uint8 or int32 storage, not {self.base}")
        if not self.scale > 0:
            raise GraphError(f"quantized scale must be positive, got {self.scale}")
        info = np.iinfo(self.base.np)
        if not info.min <= self.offset <= info.max:
            raise GraphError(f"quantized offset {self.offset} out of range for {self.base}")

    @property
    def name(self) -> str:
        return f"{self.base.name}q<{self.scale:g},{self.offset}>"

    @property
    def np(self):
        return self.base.np

    @property
    def itemsize(self) -> int:
        return self.base.itemsize

    is_float = False
    is_int = True

    def quantize(self, x: np.ndarray) -> np.ndarray:
        info = np.iinfo(self.base.np)
        q = np.rint(np.asarray(x, np.float64) / self.scale) + self.offset
        return np.clip(q, info.min, info.max).astype(self.base.np)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return ((q.astype(np.float64) - self.offset) * self.scale).astype(np.float32)

    def __repr__(self) -> str:
        return self.name


Dim = int | str | None


@dataclass(frozen=True, slots=True)
class TensorType:
    """Shape plus element type. Dims: int (static), str (named symbol) or None (unknown)."""

    shape: tuple | None  # None: rank unknown
    dtype: DType | QuantizedDType

    def __post_init__(self):
        if self.shape is not None:
            shape = tuple(self.shape)
            for d in shape:
                if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                    if d < 0:
                        raise GraphError(f"negative dimension in shape {shape}")
                elif d is not None and not isinstance(d, str):
                    raise GraphError(f"bad dimension {d!r} in shape {shape}")
            object.__setattr__(self, "shape", tuple(int(d) if isinstance(d, (int, np.integer)) else d
                                                    for d in shape))

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int | None:
        if not self.is_static:
            return None
        return math.prod(self.shape)  # exact: NumPy's int64 product wraps past 2**63

    @property
    def nbytes(self) -> int | None:
        n = self.numel
        return None if n is None else n * self.dtype.itemsize

    def with_shape(self, shape) -> TensorType:
        return TensorType(shape, self.dtype)

    def with_dtype(self, dtype) -> TensorType:
        return TensorType(self.shape, dtype)

    def accepts(self, arr: np.ndarray) -> bool:
        """Whether a concrete array fits this type (symbolic and unknown dims match anything)."""
        if from_numpy(arr.dtype) != (self.dtype.base if isinstance(self.dtype, QuantizedDType)
                                     else self.dtype):
            return False
        return shape_fits(self.shape, arr.shape)

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype.name}[*]"
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"


def shape_fits(expected, actual) -> bool:
    if expected is None:
        return True
    if len(expected) != len(actual):
        return False
    return all(not isinstance(e, int) or e == a for e, a in zip(expected, actual))


@dataclass(frozen=True, slots=True)
class SequenceType:
    """An ONNX sequence of tensors (reference backend only)."""

    elem: TensorType

    def __str__(self) -> str:
        return f"seq<{self.elem}>"


@dataclass(frozen=True, slots=True)
class OptionalType:
    """An ONNX optional value (reference backend only)."""

    elem: TensorType | SequenceType

    def __str__(self) -> str:
        return f"opt<{self.elem}>"


def tensor(shape, dtype) -> TensorType:
    """Shorthand: `tensor((2, 3), "float32")`."""
    return TensorType(tuple(shape), from_name(dtype) if isinstance(dtype, str) else dtype)


def type_of(arr: np.ndarray) -> TensorType:
    arr = np.asarray(arr)
    return TensorType(arr.shape, from_numpy(arr.dtype))
