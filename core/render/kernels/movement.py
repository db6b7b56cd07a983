"""Movement kernels: Transpose, Expand, Slice, Pad, Concat, Gather, Reshape/Identity copies.

One work-item per output element; each reads the input element it maps to. Index operands that
shape the result (Slice bounds, Pad widths, axes) are constants: the support predicate requires
it, so they are baked into the kernel text as literals.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as dt
from ..cstyle import NARROW_TYPES
from ..indexing import broadcast_index, coords, offset, record_bad_index, strides
from ..registry import kernel_rule
from .elementwise import render_copy


def const_ints(operand) -> list[int] | None:
    """The values of a constant (weight) operand, or None when it is computed at run time."""
    if operand is None:
        return None
    data = getattr(operand.root, "data", None)
    if operand.kind != "weight" or data is None or operand is not operand.root:
        return None
    return [int(v) for v in np.asarray(data).reshape(-1)]


def _const_inputs(*positions):
    """Support predicate: the inputs at `positions` (when present) are graph constants."""
    def pred(node, r):
        ins = list(node.inputs)
        return all(p >= len(ins) or ins[p] is None or ins[p].data is not None for p in positions)

    return pred


def _start(w, instr, params):
    out = instr.outputs[0]
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    return out, y, i


# -- copies ------------------------------------------------------------------------------------------
@kernel_rule("Identity")
def render_identity(w, instr, params):
    render_copy(w, instr.replace(inputs=instr.inputs[:1]), params)


@kernel_rule("Reshape", supports=_const_inputs(1))
def render_reshape(w, instr, params):
    render_copy(w, instr.replace(inputs=instr.inputs[:1]), params)


# -- Transpose / Expand ----------------------------------------------------------------------------
@kernel_rule("Transpose")
def render_transpose(w, instr, params):
    out, y, i = _start(w, instr, params)
    x = instr.inputs[0]
    perm = instr.attrs.get("perm") or list(range(len(x.type.shape)))[::-1]
    c = coords(w, i, out.type.shape, "c")
    in_st = strides(x.type.shape)
    terms = [f"{cc} * {in_st[p]}" if in_st[p] != 1 else cc for cc, p in zip(c, perm) if cc != "0"]
    p = w.arg(x)
    w.line(f"{y}[{i}] = {p}[{' + '.join(terms) or '0'}];")


@kernel_rule("Expand", supports=_const_inputs(1))
def render_expand(w, instr, params):
    out, y, i = _start(w, instr, params)
    x = instr.inputs[0]
    p = w.arg(x)
    w.line(f"{y}[{i}] = {p}[{broadcast_index(out.type.shape, x.type.shape, i)}];")


# -- Slice ----------------------------------------------------------------------------------------
def slice_plan(shape, starts, ends, axes, steps) -> list[tuple[int, int]]:
    """Per axis (first input index, step), ONNX clamping as in the op's reference."""
    from ...ops.movement import slice_bounds

    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else [a + rank if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    plan = [(0, 1)] * rank
    for a, s, e, st in zip(axes, starts, ends, steps):
        s, _, _ = slice_bounds(shape[a], s, e, st)
        plan[a] = (s, st)
    return plan


@kernel_rule("Slice", supports=_const_inputs(1, 2, 3, 4))
def render_slice(w, instr, params):
    out, y, i = _start(w, instr, params)
    x, starts, ends, axes, steps = (list(instr.inputs) + [None] * 5)[:5]
    plan = slice_plan(x.type.shape, const_ints(starts), const_ints(ends), const_ints(axes),
                      const_ints(steps))
    c = coords(w, i, out.type.shape, "c")
    idx = [_affine(cc, s, st) for cc, (s, st) in zip(c, plan)]
    p = w.arg(x)
    w.line(f"{y}[{i}] = {p}[{offset(idx, x.type.shape)}];")


def _affine(c: str, start: int, step: int) -> str:
    e = c if step == 1 else f"{c} * {step}" if c != "0" else "0"
    if start == 0:
        return e
    return str(start) if e == "0" else f"({e} + {start})"


# -- Pad ------------------------------------------------------------------------------------------
@kernel_rule("Pad", supports=_const_inputs(1, 3))
def render_pad(w, instr, params):
    out, y, i = _start(w, instr, params)
    x, pads, value, axes = (list(instr.inputs) + [None] * 4)[:4]
    shape, rank = x.type.shape, len(x.type.shape)
    pads, ax = const_ints(pads), const_ints(axes)
    ax = list(range(rank)) if ax is None else [a + rank if a < 0 else a for a in ax]
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(ax):
        begin[a], end[a] = pads[k], pads[k + len(ax)]
    mode = instr.attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    c = coords(w, i, out.type.shape, "c")
    dtype = x.type.dtype
    p = w.arg(x)
    if mode == "constant":
        fill = _pad_value(w, value, dtype)
        conds, idx = [], []
        for a, cc in enumerate(c):
            j = _affine(cc, -begin[a], 1) if begin[a] else cc
            idx.append(j)
            if begin[a] > 0:
                conds.append(f"{j} >= 0")
            if out.type.shape[a] - begin[a] > shape[a]:
                conds.append(f"{j} < {shape[a]}")
        read = f"{p}[{offset(idx, shape)}]"
        w.line(f"{y}[{i}] = {' && '.join(conds)} ? {read} : {fill};" if conds else f"{y}[{i}] = {read};")
        return
    idx = []
    for a, cc in enumerate(c):
        cb, ce = max(-begin[a], 0), max(-end[a], 0)  # negative pads crop first
        n, gb = shape[a] - cb - ce, max(begin[a], 0)
        if gb == 0 and max(end[a], 0) == 0:
            idx.append(_affine(cc, cb, 1))
            continue
        w.line(f"int j{a} = {cc} - {gb};")
        if mode == "edge":
            w.line(f"j{a} = j{a} < 0 ? 0 : j{a} >= {n} ? {n - 1} : j{a};")
        elif mode == "wrap":
            w.line(f"j{a} = ((j{a} % {n}) + {n}) % {n};")
        elif n == 1:  # reflect over one element: always that element
            w.line(f"j{a} = 0;")
        else:
            period = 2 * (n - 1)
            w.line(f"j{a} = ((j{a} % {period}) + {period}) % {period};")
            w.line(f"j{a} = j{a} >= {n} ? {period} - j{a} : j{a};")
        idx.append(_affine(f"j{a}", cb, 1))
    w.line(f"{y}[{i}] = {p}[{offset(idx, shape)}];")


def _pad_value(w, value, dtype) -> str:
    """The fill as a storage-type C expression: a literal, or read from a run-time scalar."""
    if value is None or value.type.numel == 0:
        return "0"
    data = getattr(value.root, "data", None)
    if value.kind == "weight" and data is not None:
        v = np.asarray(data).reshape(-1)[:1]
        if dtype in NARROW_TYPES:  # the stored byte itself
            return str(int(v.view(np.uint8)[0]))
        return w.to_storage(w.r.literal(v[0], dtype), dtype)
    return f"{w.arg(value)}[0]"


# -- Concat ---------------------------------------------------------------------------------------
@kernel_rule("Concat")
def render_concat(w, instr, params):
    out, y, i = _start(w, instr, params)
    shape = out.type.shape
    axis = instr.attrs.get("axis", 0) % len(shape)
    inner = math.prod(shape[axis + 1:])
    n = shape[axis]
    w.line(f"const int outer = {i} / {n * inner};")
    w.line(f"const int a = ({i} / {inner}) % {n};")
    w.line(f"const int r = {i} % {inner};" if inner > 1 else "const int r = 0;")
    start, first = 0, True
    for x in instr.inputs:
        ext = x.type.shape[axis]
        if ext == 0:
            continue
        p = w.arg(x)
        cond = f"a < {start + ext}"
        src = f"{p}[(outer * {ext} + a - {start}) * {inner} + r]"
        w.line(f"{'if' if first else 'else if'} ({cond}) {y}[{i}] = {src};")
        start, first = start + ext, False


# -- Gather ---------------------------------------------------------------------------------------
@kernel_rule("Gather")
def render_gather(w, instr, params):
    out, y, i = _start(w, instr, params)
    x, ind = instr.inputs
    axis = instr.attrs.get("axis", 0) % len(x.type.shape)
    inner = math.prod(x.type.shape[axis + 1:])
    d, ni = x.type.shape[axis], max(ind.type.numel, 1)
    pi = w.arg(ind)
    if axis == 0:  # an embedding lookup: no outer dim, and no index count in the code (a new
        w.line("const int outer = 0;")  # batch of token ids finds this kernel built)
        w.line(f"const int j = {i} / {inner};" if inner > 1 else f"const int j = {i};")
    else:
        w.line(f"const int outer = {i} / {ni * inner};")
        w.line(f"const int j = ({i} / {inner}) % {ni};")
    ll = w.r.storage(dt.int64)  # int64 indices stay 64-bit: 2**32 + 1 is not 1
    w.line(f"{ll} k = {pi}[j];")
    # A negative index counts from the end; anything still outside is an error: recorded for
    # the runtime to raise (a kernel cannot), and the element skipped (never read out of bounds).
    w.line(f"if (k < 0) k += {d};")
    w.open(f"if (k < 0 || k >= {d})")
    record_bad_index(w, f"{pi}[j]", d)
    w.line(f"{y}[{i}] = 0;")
    w.line("return;")
    w.close()
    p = w.arg(x)
    r = f" + {i} % {inner}" if inner > 1 else ""
    w.line(f"{y}[{i}] = {p}[(({ll})outer * {d} + k) * {inner}{r}];")


# -- Constant ---------------------------------------------------------------------------------------
#: Constants with more elements than this stay weights (constant folding makes them so upstream).
CONSTANT_TABLE_LIMIT = 4096


def _constant_value(instr_or_node):
    return np.asarray(instr_or_node.op.reference(**{k: v for k, v in instr_or_node.attrs.items()
                                                      if not k.startswith("_")}))


@kernel_rule("Constant", supports=lambda node, r: node.outputs[0].type.numel <= CONSTANT_TABLE_LIMIT)
def render_constant(w, instr, params):
    out, y, i = _start(w, instr, params)
    dtype = out.type.dtype
    vals = _constant_value(instr).reshape(-1)
    if dtype in NARROW_TYPES:  # the stored bytes themselves
        lits = [str(int(b)) for b in np.ascontiguousarray(vals).view(np.uint8)]
    else:
        lits = [w.to_storage(w.r.literal(v, dtype), dtype) for v in vals]
    if len(set(lits)) == 1:
        w.line(f"{y}[{i}] = {lits[0]};")
        return
    st = w.r.storage(dtype)
    w.line(f"const {st} table[{len(lits)}] = {{{', '.join(lits)}}};")
    w.line(f"{y}[{i}] = table[{i}];")
