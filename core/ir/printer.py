"""Stable text of the instruction IR and the memory plan (stable: golden tests compare it)."""

from __future__ import annotations

import numpy as np

from .instr import KINDS, Expr, Instr, IRFunction, View


def _attr(v) -> str:
    if isinstance(v, float):
        return repr(round(v, 7))
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, np.ndarray):
        return f"<tensor {v.dtype}{list(v.shape)}>"
    if hasattr(v, "nodes") and hasattr(v, "outputs"):
        return f"<graph {v.name}>"
    return str(v)


def _attrs(attrs) -> str:
    shown = {k: v for k, v in attrs.items() if v is not None and not k.startswith("_")}
    if not shown:
        return ""
    return " {" + ", ".join(f"{k}={_attr(v)}" for k, v in sorted(shown.items())) + "}"


def format_expr(e: Expr) -> str:
    if e.op is None:
        if e.arg is None:
            v = np.asarray(e.value)
            return _attr(v.reshape(()).item()) if v.size == 1 else f"<tensor {v.dtype}{list(v.shape)}>"
        return "acc" if e.arg == -1 else f"in{e.arg}"
    args = ", ".join("_" if a is None else format_expr(a) for a in e.args)
    return f"{e.op.name}{_attrs(e.attrs)}({args})"


def _operand(o) -> str:
    return "_" if o is None else f"%{o.name}"


def format_instr(i: Instr) -> str:
    if i.kind in ("alloc", "dealloc"):
        return f"{i.kind} %{i.outputs[0].name}"
    ops = ", ".join(f"@{mode} {_operand(o)}" for mode, o in i.operands())
    absent = sum(1 for v in i.inputs if v is None)
    head = i.opname if i.kind == "kernel" else i.kind
    text = f"{head} {ops}{_attrs(i.attrs) if i.kind == 'kernel' else ''}"
    if absent:
        text += f"  # {absent} absent optional input(s)"
    if i.expr is not None:
        text += (" = " if i.kind == "fused" else " then ") + format_expr(i.expr)
    return text


def format_ir(fn: IRFunction, plan=None) -> str:
    """The function as text: declarations by kind, views, then the numbered program."""
    offsets = plan.offsets if plan is not None else {}
    lines = [f"function {fn.name} {{", "  declare {"]
    for kind in KINDS:
        for b in fn.buffers:
            if b.kind != kind:
                continue
            where = ""
            if b.boxed:
                where = "  (boxed)"
            elif id(b) in offsets:
                where = f"  @{offsets[id(b)]}"
            lines.append(f"    {kind:<10} %{b.name}: {b.type}{where}")
    lines.append("  }")
    views, seen = [], set()
    for i in fn.instrs:
        for o in i.touches():
            if isinstance(o, View) and id(o) not in seen:
                seen.add(id(o))
                views.append(o)
    if views:
        lines.append("  views {")
        for v in views:
            lines.append(f"    %{v.name} = view %{v.base.name} +{v.offset}: {v.type}")
        lines.append("  }")
    lines.append("  program {")
    width = len(str(max(len(fn.instrs) - 1, 0)))
    for k, i in enumerate(fn.instrs):
        lines.append(f"    {k:>{width}}  {format_instr(i)}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def format_memory_plan(fn: IRFunction, plan) -> str:
    """One row per arena buffer (offset, size, live range), then the totals."""
    rows = [f"memory plan for {fn.name}: {len(plan.intervals)} activations in one arena, "
            f"{plan.alignment}-byte aligned",
            f"  {'offset':>12} {'bytes':>12} {'live':>13}  buffer"]
    for iv in sorted(plan.intervals, key=lambda iv: (plan.offsets[iv.key], iv.start)):
        rows.append(f"  {plan.offsets[iv.key]:>12} {iv.size:>12} {f'[{iv.start}, {iv.end}]':>13}  "
                    f"%{iv.name}")
    rows.append(f"  arena:       {plan.arena_bytes:>12} bytes")
    rows.append(f"  lower bound: {plan.lower_bound_bytes:>12} bytes (most bytes live at once)")
    rows.append(f"  no reuse:    {plan.no_reuse_bytes:>12} bytes (every activation its own space)")
    if plan.arena_bytes:
        rows.append(f"  arena / lower bound = {plan.arena_bytes / max(plan.lower_bound_bytes, 1):.3f}; "
                    f"no reuse / arena = {plan.no_reuse_bytes / plan.arena_bytes:.2f}")
    if plan.boxed:
        rows.append(f"  {plan.boxed} boxed activation(s) outside the arena (dynamic size or not bytes)")
    return "\n".join(rows)
