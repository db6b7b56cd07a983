"""Softmax and LogSoftmax along the last axis: one work-item per row, three passes over it.

    m = max(x) (NaN wins);  e = exp(x - m), stored, s = sum(e);  y = e / s
    LogSoftmax: y = (x - m) - log(s)

One kernel where the lowered form (ReduceMax, Sub + Exp, ReduceSum, Div) is four, each a
device-compiler build and a pass over memory. Rows and their length are kernel arguments, so
every Softmax of a model, at any batch or sequence length, shares one build. exp and log come
from the elementwise rules (on CPU-kind devices the vectorisable float32 helpers).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...ir.instr import Expr
from ...ops import get_op
from ..expr import render_expr
from ..registry import kernel_rule


def _supports(node, r) -> bool:
    x, y = node.inputs[0].type, node.outputs[0].type
    if x.dtype not in (dt.float32, dt.float64) or y != x or not x.shape or x.numel == 0:
        return False  # 16-bit floats: the lowered form rounds each step as the reference does
    return node.attrs.get("axis", -1) % len(x.shape) == len(x.shape) - 1


def _unary(w, op: str, dtype, value: str) -> str:
    """C name of `op`(value) through the elementwise rule of `op` (in its own block)."""
    t = dt.TensorType((1,), dtype)
    return render_expr(w, Expr(t, op=get_op(op), args=(Expr(t, arg=0),)), lambda k: value)


def render_softmax(w, instr, params):
    x, out = instr.inputs[0], instr.outputs[0]
    dtype = x.type.dtype
    length = x.type.shape[-1]
    rows = x.type.numel // length
    log = instr.op.name == "LogSoftmax"
    ct = w.r.compute(dtype)
    y, px = w.arg(out, out=True), w.arg(x)
    i = w.flat_index(rows, params.flat_local)
    L = w.param("L", length)
    w.line(f"const int base = {i} * {L};")
    w.line(f"{ct} m = {w.r.literal(-np.inf, dtype)};")
    w.open(f"for (int j = 0; j < {L}; ++j)")
    w.line(f"const {ct} v = {px}[base + j];")
    w.line("m = (v > m || v != v) ? v : m;")
    w.close()
    w.line(f"{ct} s = 0;")
    w.open(f"for (int j = 0; j < {L}; ++j)")
    w.line(f"const {ct} d = {px}[base + j] - m;")
    e = _unary(w, "Exp", dtype, "d")
    w.line(f"s += {e};")
    if not log:
        w.line(f"{y}[base + j] = {e};")
    w.close()
    if log:
        w.open("")
        w.line(f"const {ct} ls = {_unary(w, 'Log', dtype, 's')};")
        w.line(f"for (int j = 0; j < {L}; ++j) {y}[base + j] = ({px}[base + j] - m) - ls;")
        w.close()
    else:
        w.line(f"for (int j = 0; j < {L}; ++j) {y}[base + j] = {y}[base + j] / s;")


for _op in ("Softmax", "LogSoftmax"):
    kernel_rule(_op, supports=_supports)(render_softmax)
