"""Reductions: ReduceSum / ReduceProd / ReduceMax / ReduceMin over any constant set of axes.

One work-item per output element loops over the reduced elements; adjacent reduced axes merge
into one loop. Halves accumulate in float, every other type in itself (as the reference does);
Max/Min let NaN win, starting from the type's lowest/highest value.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ..indexing import coords, strides
from ..registry import kernel_rule
from .elementwise import render_copy
from .movement import _const_inputs, const_ints

COMBINE = {
    "ReduceSum": lambda acc, v, flt: f"{acc} += {v};",
    "ReduceProd": lambda acc, v, flt: f"{acc} *= {v};",
    "ReduceMax": lambda acc, v, flt: (f"{acc} = ({v} > {acc} || {v} != {v}) ? {v} : {acc};" if flt
                                      else f"{acc} = {v} > {acc} ? {v} : {acc};"),
    "ReduceMin": lambda acc, v, flt: (f"{acc} = ({v} < {acc} || {v} != {v}) ? {v} : {acc};" if flt
                                      else f"{acc} = {v} < {acc} ? {v} : {acc};"),
}


def _init(op: str, dtype):
    if op == "ReduceSum":
        return 0
    if op == "ReduceProd":
        return 1
    lowest = op == "ReduceMax"
    if dtype == dt.bool_:
        return 0 if lowest else 1
    if dtype.is_float:
        return -np.inf if lowest else np.inf
    info = np.iinfo(dtype.np)
    return info.min if lowest else info.max


def reduce_axes(instr) -> tuple | None:
    """The reduced axes (sorted, non-negative); None when the op is a no-op copy."""
    x = instr.inputs[0]
    rank = len(x.type.shape)
    axes = const_ints(instr.inputs[1]) if len(instr.inputs) > 1 and instr.inputs[1] is not None else []
    if not axes:
        return None if instr.attrs.get("noop_with_empty_axes") else tuple(range(rank))
    return tuple(sorted(a % rank for a in axes))


def reduce_loops(shape, axes) -> list[tuple[int, int]]:
    """(extent, stride) of each loop over the reduced elements, adjacent axes merged."""
    st = strides(shape)
    loops: list[list[int]] = []
    prev = None
    for a in axes:
        if shape[a] == 1:
            continue
        if loops and prev == a - 1:
            loops[-1] = [loops[-1][0] * shape[a], st[a]]
        else:
            loops.append([shape[a], st[a]])
        prev = a
    return [tuple(x) for x in loops]


def render_reduce(w, instr, params):
    x, out = instr.inputs[0], instr.outputs[0]
    axes = reduce_axes(instr)
    if axes is None:
        render_copy(w, instr.replace(inputs=instr.inputs[:1]), params)
        return
    shape, dtype, op = x.type.shape, x.type.dtype, instr.op.name
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    kept = [a for a in range(len(shape)) if a not in axes]
    st = strides(shape)
    c = coords(w, i, [shape[a] for a in kept], "c")
    base = " + ".join(f"{cc} * {st[a]}" if st[a] != 1 else cc for cc, a in zip(c, kept) if cc != "0")
    ct = w.r.compute(dtype)
    w.line(f"{ct} acc = {w.r.literal(_init(op, dtype), dtype)};")
    p = w.arg(x)
    terms = [base] if base else []
    for k, (n, s) in enumerate(reduce_loops(shape, axes)):
        w.open(f"for (int r{k} = 0; r{k} < {n}; ++r{k})")
        terms.append(f"r{k}" if s == 1 else f"r{k} * {s}")
    w.line(f"const {ct} v = {w.load(p, ' + '.join(terms) or '0', dtype)};")
    w.line(COMBINE[op]("acc", "v", dtype.is_float))
    for _ in reduce_loops(shape, axes):
        w.close()
    w.line(w.store(y, i, out.type.dtype, "acc"))


def _supports_reduce(node, r):
    bool_ok = node.op.name in ("ReduceMax", "ReduceMin")  # as logical or / and
    return _const_inputs(1)(node, r) and (bool_ok or node.inputs[0].type.dtype != dt.bool_)


for _op in COMBINE:
    kernel_rule(_op, supports=_supports_reduce)(render_reduce)
