"""Integer convolution: ConvInteger with constant 8-bit weights on the integer GEMM of int8_gemm.py.

layout.py makes ConvIntegerNHWC of every eligible ConvInteger: an NHWC input padded with its zero
point (so padding adds (zp - zp) x w = 0, as ONNX defines) and an int32 NHWC output. Each output
pixel is a row of A read in place from the input, one run of C channels per kernel tap
(`Rows.conv`: implicit GEMM, no im2col copy), and the weights [M, C, kh, kw] are B [(kh, kw, C), M],
packed at compile time tap by tap. A ConvInteger that reaches code generation in NCHW (the graph
was not optimised) goes the same way through module-private scratch buffers.
"""

from __future__ import annotations

import numpy as np
from glow import dtypes as dt
from glow.errors import BackendError

from .. import layout
from ..codegen import InstrNode, constant, cpu_kernel, has_ltype
from ..irutil import I8, I32
from .conv import InstrShapes, relayout, scratch
from .epilogue import operands, typed_acc
from .gemm_emit import leaf_kind
from .int8_gemm import IntEpilogue, Rows, column_row, emit_int8_gemm, faster_than_float, int32_row, pack, to_u8s8, vnni


def _zero_points(instr):
    ins = list(instr.inputs) + [None, None]
    return ins[2], ins[3]


def run_conv_integer(cg, instr, x_ptr, y_ptr, x_nhwc, y_nhwc, epilogue=None):
    """The integer convolution of instr (its weights, zero points and attributes) from the padded
    NHWC input at x_ptr (shape x_nhwc) into the int32 NHWC output at y_ptr (shape y_nhwc), or its
    `epilogue` (an int8_gemm.IntEpilogue) of those sums."""
    w = instr.inputs[1]
    xzp, wzp = _zero_points(instr)
    n, hp, wp, c = x_nhwc
    _, ho, wo, m = y_nhwc
    kh, kw = w.type.shape[2:]
    s = instr.attrs.get("strides") or (1, 1)
    d = instr.attrs.get("dilations") or (1, 1)
    if (kh, kw) == (1, 1) and tuple(s) == (1, 1) and (hp, wp) == (ho, wo):
        rows = Rows.matrix(c)  # a pointwise convolution: the input is A itself
    else:
        rows = Rows.conv(hp, wp, c, ho, wo, (kh, kw), s, d)
    b = constant(w).transpose(2, 3, 1, 0).reshape(kh * kw * c, m)  # k in (tap, channel) order
    zb = np.zeros(1, np.int64) if wzp is None else constant(wzp).reshape(-1).astype(np.int64)
    bs, zb2 = to_u8s8(b, zb)
    flip = 0x80 if instr.inputs[0].type.dtype == dt.int8 else 0
    emit_int8_gemm(cg, x_ptr, instr.inputs[0].type.dtype, xzp, y_ptr, n * ho * wo, rows, m, flip,
                   pack(bs, kh * kw), column_row(bs, zb2), int32_row(zb2, m) if np.any(zb2 != 0) else None,
                   epilogue)


def _fast(node) -> bool:
    """Whether lowering keeps the node for the integer kernel (faster_than_float). An instruction
    that reaches code generation was kept when the graph was lowered: the emitter takes it, at
    whatever level the code is made for (the compile option `isa` applies to code generation)."""
    if isinstance(node, InstrNode):
        return True
    w = node.inputs[1]
    wzp = _zero_points(node)[1]
    zb = np.zeros(1, np.int64) if wzp is None else np.asarray(wzp.data).reshape(-1).astype(np.int64)
    bs, _ = to_u8s8(np.asarray(w.data).reshape(w.type.shape[0], -1).T, zb)
    return faster_than_float(int(np.abs(bs.astype(np.int16)).max(initial=0)))


def _nhwc_ok(node) -> bool:
    if isinstance(node, InstrNode):  # kept when the graph was lowered; its output may be an epilogue's
        return True
    return layout.integer_operands_ok(node) and not any(node.attrs.get("pads") or ()) and _fast(node)


# -- the epilogue: what follows the convolution, applied to each panel of sums before the store ----
def epilogue_fits(head, members) -> bool:
    """The cpu backend's FuseActivation.epilogue_ok: an elementwise chain after ConvIntegerNHWC
    (its requantisation, a residual Add, Relu: QDQ and QLinearConv models) runs in the integer
    kernel's epilogue when every other tensor it reads is a scalar, a value per output channel or
    of the output's own shape, so the int32 sums never go to memory; it may end in any element
    type. Other producers keep the float epilogue's rule: the chain ends in their own type.

    Only with VNNI: there an int8 ResNet-50 took 27.8 ms with it against 31.1 without (24.0
    against 25.8 with its batch norms folded; Zen 4, 1 thread), its requantisation passes having
    been bound by memory. At the avx2 level it was slower (50.5 against 48.2 ms; 45.3 against
    44.8): the kernel's 4 x 16 tile gives each epilogue less independent work to hide its
    latency behind than a streaming pass has, and the slower products leave memory to spare."""
    out = members[-1].outputs[0].type
    if head.op is not layout.CONV_INTEGER_NHWC:
        return head.outputs[0].type == out
    if not vnni():
        return False
    chain = {id(head.outputs[0])} | {id(m.outputs[0]) for m in members}
    cols = out.shape[-1]
    for m in members:
        for v in m.inputs:
            if v is None or id(v) in chain or (v.data is not None and v.data.size <= 1):
                continue  # the chain's own values, and immediates
            t = v.type
            if not (isinstance(t, dt.TensorType) and t.is_static and has_ltype(t.dtype)):
                return False
            if leaf_kind(t.shape, out.numel // cols, cols) is None:
                return False
    return True


def _epilogue(cg, instr, rows: int, cols: int):
    """The IntEpilogue of instr's expression (None without one)."""
    from .elementwise import expr_supported

    e = instr.expr
    if e is None:
        return None
    e = typed_acc(e, dt.TensorType(instr.outputs[0].type.shape, dt.int32))
    leaves = [(a, o.type.dtype, leaf_kind(o.type.shape, rows, cols), o) for a, o in operands(instr, e)]
    if not expr_supported(e) or any(kind is None for _, _, kind, _ in leaves):
        # epilogue_fits let only such chains in: reaching here is a bug, not a model to run
        raise BackendError(f"instruction '{instr.name}': the epilogue of an integer convolution reads a "
                           f"tensor it cannot index ({[str(o.type) for *_, o in leaves]})")
    return IntEpilogue(e, tuple((a, d, k, cg.ptr(o)) for a, d, k, o in leaves), instr.outputs[0].type.dtype)


def _nchw_ok(node) -> bool:
    """Else ConvInteger lowers to exact float32 convolutions (rules_quant), faster on this target."""
    return layout.conv_integer_ok(node) and _fast(node)


@cpu_kernel("ConvIntegerNHWC", domain=layout.DOMAIN, supports=_nhwc_ok, epilogue=True)
def emit_conv_integer_nhwc(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    n, ho, wo, m = y.type.shape
    run_conv_integer(cg, instr, cg.ptr(x), cg.ptr(y), x.type.shape, y.type.shape,
                     _epilogue(cg, instr, n * ho * wo, m))


@cpu_kernel("ConvInteger", supports=_nchw_ok)
def emit_conv_integer_nchw(cg, instr):
    x, y = instr.inputs[0], instr.outputs[0]
    k, s, d, pb, pe = layout.conv_geometry(InstrShapes(instr))
    n, c, h, w = x.type.shape
    _, m, ho, wo = y.type.shape
    hp, wp = h + pb[0] + pe[0], w + pb[1] + pe[1]
    xzp, _ = _zero_points(instr)
    fill = 0 if xzp is None else int(np.asarray(constant(xzp)).reshape(-1)[0]) & 0xFF
    a = scratch(cg, n * hp * wp * c, fill)  # the border keeps x_zero_point: it is never written
    o = scratch(cg, n * ho * wo * m * 4)
    relayout(cg, cg.ptr(x), a, (n, c, h, w), True, (pb[0], pb[1], pe[0], pe[1]), etype=I8)
    run_conv_integer(cg, instr, a, o, (n, hp, wp, c), (n, ho, wo, m))
    relayout(cg, o, cg.ptr(y), (n, m, ho, wo), False, etype=I32)


__all__ = ["emit_conv_integer_nhwc", "emit_conv_integer_nchw", "epilogue_fits", "run_conv_integer"]
