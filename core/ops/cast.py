"""Element-type conversion: Cast, CastLike (value conversion) and BitCast (bit reinterpretation).

`cast_array` is the one conversion routine; QuantizeLinear reuses it for its float 8 targets.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..narrow import FLOAT_FORMATS, INT_BITS, encode_float_array, encode_int_array
from .registry import ELEMENTWISE, UNARY, Attr, Tier, op

#: Everything Cast converts between (ONNX has no complex or 6-bit float casts).
CASTABLE = frozenset(dt.ALL) - {dt.complex64, dt.complex128}
#: float 8 formats whose out-of-range behaviour the `saturate` attribute picks.
SATURATING_F8 = frozenset({dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz})
ROUND_MODES = ("up", "down", "nearest")

_SUB_BYTE_BITS = {dt.int4: 4, dt.uint4: 4, dt.float4e2m1: 4, dt.int2: 2, dt.uint2: 2}
_IEEE = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_E8M0_NAN = 0xFF
_E8M0_MAX = 0xFE
_E8M0_BIAS = 127


def bit_width(t: dt.DType) -> int:
    return _SUB_BYTE_BITS.get(t, t.itemsize * 8)


# -- strings -------------------------------------------------------------------------------------
def _format_number(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "INF" if f > 0 else "-INF"
    # plain (not scientific) notation, with the fewest digits that read back to the same value
    return np.format_float_positional(v, trim="-")


def _to_strings(x: np.ndarray) -> np.ndarray:
    if x.dtype == object:
        return x.copy()
    if x.dtype.kind not in "biu" and x.dtype not in _IEEE:
        # ml_dtypes types: print through a type numpy formats natively
        x = x.astype(np.int64 if dt.from_numpy(x.dtype).is_int else np.float32)
    out = np.empty(x.shape, dtype=object)
    for idx, v in np.ndenumerate(x):
        out[idx] = _format_number(v)
    return out


def _parse_one(s, want_int: bool, want_bool: bool):
    text = (s.decode() if isinstance(s, bytes) else str(s)).strip()
    if want_bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if want_int or want_bool:
        try:
            return int(text)  # exact for big int64 values, which float() would round
        except ValueError:
            pass
    try:
        f = float(text)  # accepts "1e-5", "INF", "+inf", "-INF", "NaN" in any case
    except ValueError:
        raise ValueError(f"cannot convert string {text!r} to a number") from None
    if want_bool:
        return f != 0
    return int(f) if want_int and math.isfinite(f) else f


def _parse_strings(x: np.ndarray, to: dt.DType) -> np.ndarray:
    want_int, want_bool = to.is_int, to == dt.bool_
    vals = [_parse_one(s, want_int, want_bool) for s in x.reshape(-1)]
    kind = np.bool_ if want_bool else (np.int64 if want_int and to != dt.uint64 else
                                       np.uint64 if want_int else np.float64)
    if want_int and any(isinstance(v, float) for v in vals):
        kind = np.float64  # a non-finite string headed for an integer type: undefined, keep going
    return np.asarray(vals, dtype=kind).reshape(x.shape)


# -- float8e8m0 ----------------------------------------------------------------------------------
def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """E8M0 holds only powers of two 2^-127 .. 2^127 (plus NaN); `round_mode` picks the neighbour."""
    a = np.abs(x.astype(np.float64))  # the sign of an input is undefined behaviour: use |x|
    finite_pos = np.isfinite(a) & (a > 0)
    frac, exp = np.frexp(np.where(finite_pos, a, 1.0))  # a = frac * 2^exp, frac in [0.5, 1)
    lower = exp.astype(np.int64) - 1  # a lies in [2^lower, 2^(lower+1))
    exact = frac == 0.5
    if round_mode == "down":
        e = lower
    elif round_mode == "up":
        e = np.where(exact, lower, lower + 1)
    else:  # nearest, ties (1.5 * 2^lower) go up
        e = np.where(frac >= 0.75, lower + 1, lower)
    code = e + _E8M0_BIAS
    too_small, too_big = code < 0, code > _E8M0_MAX
    if saturate:
        code = np.clip(code, 0, _E8M0_MAX)
        code = np.where(np.isinf(a), _E8M0_MAX, code)
        code = np.where(a == 0, 0, code)
    else:
        code = np.where(too_small | too_big | ~finite_pos, _E8M0_NAN, code)
    code = np.where(np.isnan(a), _E8M0_NAN, code)
    return code.astype(np.uint8).view(dt.float8e8m0.np)


# -- the conversion ------------------------------------------------------------------------------
def cast_array(x: np.ndarray, to: dt.DType, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Convert `x` to element type `to` with ONNX Cast semantics."""
    x = np.asarray(x)
    if to == dt.string:
        return _to_strings(x)
    if x.dtype == object:
        x = _parse_strings(x, to)
    if to == dt.float8e8m0:
        return _to_e8m0(x, saturate, round_mode)
    if to in INT_BITS:
        return encode_int_array(x, to)
    if to in FLOAT_FORMATS:  # glow's own rounding (glow.narrow), whatever ml_dtypes version is installed
        return encode_float_array(x.astype(np.float64), to, saturate)
    if to.is_float and to.np not in _IEEE and x.dtype not in _IEEE:
        # ml_dtypes targets convert reliably from IEEE floats; route everything else through float64
        x = x.astype(np.float64)
    return x.astype(to.np)


def _check_round_mode(ctx):
    if ctx.attrs["round_mode"] not in ROUND_MODES:
        raise ctx.error(f"round_mode must be one of {list(ROUND_MODES)}, got {ctx.attrs['round_mode']!r}")


def _cast_infer(ctx):
    _check_round_mode(ctx)
    to = ctx.attrs["to"]
    if to not in CASTABLE:
        raise ctx.error(f"cannot cast to {to.name}")
    return [dt.TensorType(ctx.shape(0), to)]


op("Cast", inputs=("input:T1",), outputs=("output:T2",), types={"T1": CASTABLE, "T2": CASTABLE},
   attrs=(Attr("to", "dtype", doc="target element type"),
          Attr("saturate", "int", 1, "float 8 targets: clamp out-of-range values to the largest finite"),
          Attr("round_mode", "string", "up", "float8e8m0 targets: up, down or nearest")),
   infer=_cast_infer,
   reference=lambda x, to, saturate, round_mode: cast_array(x, to, bool(saturate), round_mode),
   groups={ELEMENTWISE, UNARY}, tier=Tier.PRIMITIVE, onnx_since=6,
   doc="Converts each element to the element type `to` (strings parse and print as decimal numbers).")


def _castlike_infer(ctx):
    _check_round_mode(ctx)
    return [dt.TensorType(ctx.shape(0), ctx.dtype(1))]


op("CastLike", inputs=("input:T1", "target_type:T2"), outputs=("output:T2",),
   types={"T1": CASTABLE, "T2": CASTABLE},
   attrs=(Attr("saturate", "int", 1), Attr("round_mode", "string", "up")),
   infer=_castlike_infer,
   reference=lambda x, like, saturate, round_mode: cast_array(x, dt.from_numpy(like.dtype),
                                                               bool(saturate), round_mode),
   groups={ELEMENTWISE, UNARY}, tier=Tier.HIGH, onnx_since=15,
   doc="Cast to the element type of the second input (whose values are ignored).")


# -- BitCast -------------------------------------------------------------------------------------
BITCASTABLE = frozenset(dt.ALL) - {dt.string}


def _bitcast_infer(ctx):
    src, to = ctx.dtype(0), ctx.attrs["to"]
    if to not in BITCASTABLE:
        raise ctx.error(f"cannot bit-cast to {to.name}")
    if bit_width(src) != bit_width(to):
        raise ctx.error(f"cannot bit-cast {src.name} ({bit_width(src)} bits) to {to.name} "
                        f"({bit_width(to)} bits): the widths differ")
    return [dt.TensorType(ctx.shape(0), to)]


def _bitcast_ref(x, to):
    src = dt.from_numpy(x.dtype)
    bits = _SUB_BYTE_BITS.get(src)
    if bits is None:
        return np.ascontiguousarray(x).view(to.np).reshape(x.shape)
    # sub-byte values each sit in a byte of their own: move the low `bits` bits over
    code = x.view(np.uint8) & ((1 << bits) - 1)
    if to.is_signed and to.is_int:
        signed = code.astype(np.int16) - np.where(code >= 1 << (bits - 1), 1 << bits, 0)
        return signed.astype(to.np)
    return code.view(to.np)


op("BitCast", inputs=("input:T1",), outputs=("output:T2",),
   types={"T1": BITCASTABLE, "T2": BITCASTABLE}, attrs=(Attr("to", "dtype"),),
   infer=_bitcast_infer, reference=_bitcast_ref, groups={ELEMENTWISE, UNARY}, tier=Tier.HIGH,
   onnx_since=26,
   doc="Reinterprets each element's bits (little-endian) as type `to`, which must be as wide.")
