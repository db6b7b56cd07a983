"""onnxruntime's quantized contrib ops (domain com.microsoft), which its quantization tool writes in
the QOperator format: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, and QGemm.

All but QGemm are a float op between quantized tensors, and are declared as one: each quantized
operand (x, x_scale, x_zero_point) is dequantized, the float op runs in float32, and the result is
quantized with (y_scale, y_zero_point), which is how onnxruntime defines them (its kernels compute
the same within one quantization step: lookup tables or float requantization). `QLINEAR` says,
per op, which float op and where its operands and output parameters sit; the reference here and
the lowering rule (lowering/rules_qlinear.py) are both made from that one entry.

Two are integer arithmetic instead, as onnxruntime computes them, so that results agree exactly:
QLinearGlobalAveragePool sums x - x_zero_point in int32 and requantizes the sum once with the
float32 factor x_scale / (y_scale * count); QGemm is Gemm on quantized A and B with an int32 bias
C (scale a_scale * b_scale, zero point 0): the product is accumulated exactly in integers, then
scaled, and quantized when y_scale is given (else float32), as QLinearMatMul is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from .quant import INT8S, _centered, _requantize, dequantize, int_range, quantize
from .registry import MATMUL, QUANT, REQUIRED, Attr, InferContext, Tier, get_op, op

DOMAIN = "com.microsoft"
SCALES = frozenset({dt.float32})


@dataclass(frozen=True)
class QLinear:
    """A contrib op that is `float_op` between dequantized operands, quantized after.

    operands: the input index of each quantized operand (its scale and zero point follow it);
    variadic: every input from operands[0] on is such a triple (QLinearConcat). out: the input
    index of y_scale (y_zero_point follows). float_attrs: which of the op's attributes the float
    op takes. channels_last: the op has that attribute (1: the float op, channels first, runs
    between transposes). coerce_2d: the `opset` attribute below 13 asks for Softmax's old 2-D
    semantics (normalise over every dim from `axis` on)."""

    name: str
    float_op: str
    operands: tuple[int, ...]
    out: int
    attrs: tuple[Attr, ...] = ()
    float_attrs: tuple[str, ...] = ()
    variadic: bool = False
    channels_last: bool = False
    coerce_2d: bool = False
    doc: str = ""

    def triples(self, n_inputs: int) -> list[int]:
        return list(range(self.operands[0], n_inputs, 3)) if self.variadic else list(self.operands)


_CL = Attr("channels_last", "int", 0)
_POOL = (Attr("auto_pad", "string", "NOTSET"), Attr("ceil_mode", "int", 0), Attr("count_include_pad", "int", 0),
         Attr("kernel_shape", "ints"), Attr("pads", "ints", None), Attr("strides", "ints", None))

QLINEAR = {q.name: q for q in (
    QLinear("QLinearAdd", "Add", (0, 3), 6, doc="A + B on quantized tensors (broadcasting)."),
    QLinear("QLinearMul", "Mul", (0, 3), 6, doc="A * B on quantized tensors (broadcasting)."),
    QLinear("QLinearSigmoid", "Sigmoid", (0,), 3, doc="Sigmoid of a quantized tensor."),
    QLinear("QLinearLeakyRelu", "LeakyRelu", (0,), 3, attrs=(Attr("alpha", "float", 0.01),),
            float_attrs=("alpha",), doc="LeakyRelu of a quantized tensor."),
    QLinear("QLinearSoftmax", "Softmax", (0,), 3, attrs=(Attr("axis", "int", -1), Attr("opset", "int")),
            float_attrs=("axis",), coerce_2d=True,
            doc="Softmax of a quantized tensor along `axis` (opset < 13: over every dim from `axis` on)."),
    QLinear("QLinearAveragePool", "AveragePool", (0,), 3, attrs=(*_POOL, _CL),
            float_attrs=tuple(a.name for a in _POOL), channels_last=True,
            doc="AveragePool of a quantized tensor (channels_last: NHWC)."),
    QLinear("QLinearConcat", "Concat", (2,), 0, attrs=(Attr("axis", "int"),), float_attrs=("axis",),
            variadic=True, doc="Concat of quantized tensors, each with its own scale and zero point."),
)}


def float_attrs(q: QLinear, attrs: dict) -> dict:
    """The float op's attributes for a node with `attrs`: those it takes, its defaults else."""
    fop = get_op(q.float_op)
    full = {a.name: a.default for a in fop.attrs if a.default is not REQUIRED}
    full.update({k: attrs[k] for k in q.float_attrs})
    return full


def to_channels_first(rank: int) -> list[int]:
    """The permutation NHWC... -> NCHW... (channels_last -> the float op's layout)."""
    return [0, rank - 1, *range(1, rank - 1)]


def to_channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def channels_moved(q: QLinear, attrs: dict) -> bool:
    return q.channels_last and attrs.get("channels_last", 0) == 1


def softmax_2d_axis(q: QLinear, attrs: dict, rank: int) -> int | None:
    """The axis from which Softmax's old (opset < 13) semantics flatten, where they differ from
    normalising `axis` alone; else None."""
    if not q.coerce_2d or attrs["opset"] >= 13:
        return None
    axis = attrs["axis"] % max(rank, 1)
    return axis if axis < rank - 1 else None


def output_dtype(q: QLinear, ins) -> dt.DType:
    """y_zero_point's type, else the first quantized operand's (onnxruntime: T is one type)."""
    zp = ins[q.out + 1] if q.out + 1 < len(ins) else None
    return zp if zp is not None else ins[q.triples(len(ins))[0]]


# -- shape and type rule ------------------------------------------------------------------------------

def _infer(q: QLinear):
    def infer(ctx):
        fop = get_op(q.float_op)  # at use: the float ops may register after this module
        n = len(ctx.inputs)
        idx = q.triples(n)
        if q.variadic and (n - q.operands[0]) % 3:
            raise ctx.error(f"inputs after y_zero_point come in (x, scale, zero point) triples, got {n - 2}")
        types = [ctx.input(i) for i in idx]
        for i, t in zip(idx, types):
            if t.dtype not in INT8S:
                raise ctx.error(f"input {i} is {t.dtype.name}; quantized operands are int8 or uint8")
            if t.dtype != types[0].dtype:
                raise ctx.error(f"quantized operands mix {types[0].dtype.name} and {t.dtype.name}")
            if ctx.dtype(i + 1) not in SCALES:  # (typed ports check these; QLinearConcat's are not)
                raise ctx.error(f"input {i + 1} (a scale) is {ctx.dtype(i + 1).name}; float32 expected")
            if ctx.has(i + 2) and ctx.dtype(i + 2) != t.dtype:
                raise ctx.error(f"input {i + 2} (a zero point) is {ctx.dtype(i + 2).name}, its data {t.dtype.name}")
        zp_type = ctx.dtype(q.out + 1) if ctx.has(q.out + 1) else types[0].dtype
        if zp_type not in INT8S:
            raise ctx.error(f"y_zero_point is {zp_type.name}; int8 or uint8 expected")
        shapes = [t.shape for t in types]
        moved = channels_moved(q, ctx.attrs)
        if moved:
            shapes = [None if s is None else tuple(s[p] for p in to_channels_first(len(s))) for s in shapes]
        sub = InferContext(fop, ctx.node_name, [dt.TensorType(s, dt.float32) for s in shapes],
                           float_attrs(q, ctx.attrs), 1)
        (out,) = fop.infer(sub)
        shape = out.shape
        if moved and shape is not None:
            shape = tuple(shape[p] for p in to_channels_last(len(shape)))
        return [dt.TensorType(shape, zp_type)]

    return infer


# -- reference ----------------------------------------------------------------------------------------

def _reference(q: QLinear):
    def reference(*ins, **attrs):
        fop = get_op(q.float_op)
        n = len(ins)
        xs = [dequantize(ins[i], ins[i + 1], ins[i + 2], dt.float32) for i in q.triples(n)]
        moved = channels_moved(q, attrs)
        if moved:
            xs = [np.transpose(x, to_channels_first(x.ndim)) for x in xs]
        shape = xs[0].shape
        flat_from = softmax_2d_axis(q, attrs, xs[0].ndim)
        if flat_from is not None:
            xs = [x.reshape(*shape[:flat_from], -1) for x in xs]
        fattrs = float_attrs(q, attrs)
        if flat_from is not None:
            fattrs["axis"] = -1
        y = np.asarray(fop.reference(*xs, **fattrs), np.float32)
        if flat_from is not None:
            y = y.reshape(shape)
        if moved:
            y = np.transpose(y, to_channels_last(y.ndim))
        zp = ins[q.out + 1] if q.out + 1 < n else None
        out = dt.from_numpy(zp.dtype) if zp is not None else dt.from_numpy(ins[q.triples(n)[0]].dtype)
        return quantize(y, ins[q.out], zp, out)

    return reference


def _inputs(q: QLinear) -> tuple[str, ...]:
    if q.variadic:
        return ("Y_scale:S", "Y_zero_point:T", "inputs*")
    names = []
    for k in range(len(q.operands)):
        x = "AB"[k] if len(q.operands) > 1 else "X"
        names += [f"{x}:T", f"{x}_scale:S", f"{x}_zero_point:T?"]
    return (*names, "Y_scale:S", "Y_zero_point:T?")


for _q in QLINEAR.values():
    op(_q.name, inputs=_inputs(_q), outputs=("Y:T",), types={"T": INT8S, "S": SCALES}, attrs=_q.attrs,
       infer=_infer(_q), reference=_reference(_q), groups={QUANT}, tier=Tier.HIGH, domain=DOMAIN,
       onnx_since=1, doc=_q.doc)


# -- QLinearGlobalAveragePool ----------------------------------------------------------------------------

def global_pool_axes(rank: int, channels_last: int) -> list[int]:
    """The spatial axes: after N and C, or between N and a trailing C."""
    return list(range(1, rank - 1)) if channels_last else list(range(2, rank))


def global_pool_factor(x_scale, y_scale, count: int) -> np.float32:
    """x_scale / (y_scale * count) in float32, the factor a sum of x - x_zero_point is
    requantized by (onnxruntime's formula, operation for operation)."""
    return np.float32(np.float32(x_scale) / (np.float32(y_scale) * np.float32(count)))


def _qgap_infer(ctx):
    x = ctx.input(0)
    if x.rank is not None and x.rank < 3:
        raise ctx.error(f"X has rank {x.rank}; N, C and at least one spatial dim expected")
    if ctx.attrs["channels_last"] not in (0, 1):
        raise ctx.error(f"channels_last must be 0 or 1, got {ctx.attrs['channels_last']}")
    zp = ctx.dtype(4) if ctx.has(4) else x.dtype
    shape = None
    if x.shape is not None:
        axes = global_pool_axes(len(x.shape), ctx.attrs["channels_last"])
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return [dt.TensorType(shape, zp)]


def _qgap(x, x_scale, x_zp, y_scale, y_zp=None, *, channels_last):
    axes = tuple(global_pool_axes(x.ndim, channels_last))
    count = int(np.prod([x.shape[a] for a in axes]))
    acc = (x.astype(np.int64) - (0 if x_zp is None else int(x_zp))).sum(axes, keepdims=True)
    q = acc.astype(np.float32) * global_pool_factor(x_scale, y_scale, count)
    out = dt.from_numpy(x.dtype if y_zp is None else y_zp.dtype)
    lo, hi = int_range(out)
    return np.clip(np.rint(q).astype(np.float64) + (0 if y_zp is None else int(y_zp)), lo, hi).astype(out.np)


op("QLinearGlobalAveragePool", inputs=("X:T", "x_scale:S", "x_zero_point:T?", "y_scale:S", "y_zero_point:T?"),
   outputs=("Y:T",), types={"T": INT8S, "S": SCALES}, attrs=(_CL,), infer=_qgap_infer, reference=_qgap,
   groups={QUANT}, tier=Tier.HIGH, domain=DOMAIN, onnx_since=1,
   doc="GlobalAveragePool of a quantized tensor (channels_last: NHWC): the int32 sum of x - x_zero_point "
       "times x_scale / (y_scale * count), rounded half to even, plus y_zero_point.")


# -- QGemm ----------------------------------------------------------------------------------------------

def _qgemm_infer(ctx):
    a, b = ctx.input(0), ctx.input(3)
    if a.shape is not None and len(a.shape) != 2 or b.shape is not None and len(b.shape) != 2:
        raise ctx.error("A and B must be matrices")
    m = None if a.shape is None else a.shape[1 if ctx.attrs["transA"] else 0]
    n = None if b.shape is None else b.shape[0 if ctx.attrs["transB"] else 1]
    if ctx.has(6) and ctx.dtype(6) != dt.int32:
        raise ctx.error(f"C is {ctx.dtype(6).name}; QGemm's bias is int32")
    if ctx.has(8) and not ctx.has(7):
        raise ctx.error("y_zero_point without y_scale")
    out = (ctx.dtype(8) if ctx.has(8) else a.dtype) if ctx.has(7) else dt.float32
    return [dt.TensorType((m, n), out)]


def _qgemm(a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None, *, alpha, transA, transB):
    a = a.T if transA else a
    b = b.T if transB else b
    acc = np.matmul(_centered(a, a_zp), _centered(b, b_zp))
    if c is not None:
        acc = acc + c.astype(np.int64)
    scale = np.asarray(a_scale, np.float64) * np.asarray(b_scale, np.float64) * np.float64(np.float32(alpha))
    if y_scale is None:
        return (acc.astype(np.float64) * scale).astype(np.float32)
    if y_zp is None:
        lo, hi = int_range(dt.from_numpy(a.dtype))
        real = (acc.astype(np.float64) * scale).astype(np.float32) / np.asarray(y_scale, np.float32)
        return np.clip(np.rint(real), lo, hi).astype(a.dtype)
    return _requantize(acc, scale, np.asarray(y_scale), np.asarray(y_zp))


op("QGemm", inputs=("A:TA", "a_scale:S", "a_zero_point:TA", "B:TB", "b_scale:S", "b_zero_point:TB",
                    "C:TC?", "y_scale:S?", "y_zero_point:TY?"),
   outputs=("Y:TYZ",), types={"TA": INT8S, "TB": INT8S, "TC": frozenset({dt.int32}), "S": SCALES,
                              "TY": INT8S, "TYZ": INT8S | SCALES},
   attrs=(Attr("alpha", "float", 1.0), Attr("transA", "int", 0), Attr("transB", "int", 0)),
   infer=_qgemm_infer, reference=_qgemm, groups={QUANT, MATMUL}, tier=Tier.HIGH, domain=DOMAIN,
   onnx_since=1,
   doc="Gemm of quantized A and B (b_scale and b_zero_point per tensor or per column) plus an int32 "
       "bias C at scale a_scale * b_scale; quantized with y_scale/y_zero_point, float32 without y_scale.")
