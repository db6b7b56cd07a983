"""Pooling: MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool/MaxPool.

One work-item per output element, looping over its window and skipping taps in the padding;
on CPU devices 2-D float32 pools take the vectorised kernel of pool_cpu.py.
Semantics as the references in core/ops/pool.py: padding never wins a max, the first maximum in
window order wins ties, AveragePool's divisor counts padding only with count_include_pad (and
never the extra room ceil_mode adds), halves accumulate in float.
"""

from __future__ import annotations

import math

import numpy as np

from ..indexing import coords, strides
from ..registry import kernel_rule
from .conv import window_geometry


def _pool_setup(w, instr, params):
    x, out = instr.inputs[0], instr.outputs[0]
    a = instr.attrs
    k, s, d, osp, pb = window_geometry(x.type.shape, a["kernel_shape"], a, bool(a.get("ceil_mode", 0)))
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    c = coords(w, i, out.type.shape, "c")
    in_sp = x.type.shape[2:]
    plane = math.prod(in_sp)
    w.line(f"const int xb = ({c[0]} * {x.type.shape[1]} + {c[1]}) * {plane};")
    return x, out, y, i, c[2:], (k, s, d, osp, pb, in_sp)


def _window(w, osp, geo, skip=True):
    """Open the loops over the window; declares ix{a}; returns the input offset expression."""
    k, s, d, _, pb, in_sp = geo
    for a in range(len(k)):
        w.open(f"for (int k{a} = 0; k{a} < {k[a]}; ++k{a})")
        e = osp[a] if s[a] == 1 else f"{osp[a]} * {s[a]}"
        e += f" - {pb[a]}" if pb[a] else ""
        e += f" + k{a}" if d[a] == 1 else f" + k{a} * {d[a]}"
        w.line(f"const int ix{a} = {e};")
        if skip:
            w.line(f"if (ix{a} < 0 || ix{a} >= {in_sp[a]}) continue;")
    st = strides(in_sp)
    return " + ".join(f"ix{a} * {t}" if t != 1 else f"ix{a}" for a, t in enumerate(st))


def _cpu_variant(w, instr, params, kind: str) -> bool:
    """Render the CPU-shaped kernel (pool_cpu.py) when it applies; True when it did."""
    from .pool_cpu import cpu_pool_ok, render_pool_cpu

    if not cpu_pool_ok(instr, params, w.r):
        return False
    x, a = instr.inputs[0], instr.attrs
    k, s, d, osp, pb = window_geometry(x.type.shape, a["kernel_shape"], a, bool(a.get("ceil_mode", 0)))
    pe = _end_pads(instr, x.type.shape) if kind == "avg" else (0, 0)
    render_pool_cpu(w, instr, (k, s, d, osp, pb, tuple(x.type.shape[2:])), kind, tuple(pe))
    return True


@kernel_rule("MaxPool", supports=lambda node, r: node.attrs.get("storage_order", 0) in (0, 1))
def render_maxpool(w, instr, params):
    if _cpu_variant(w, instr, params, "max"):
        return
    x, out, y, i, osp, geo = _pool_setup(w, instr, params)
    dtype = x.type.dtype
    ct = w.r.compute(dtype)
    px = w.arg(x)
    lowest = w.r.literal(-np.inf if dtype.is_float else np.iinfo(dtype.np).min, dtype)
    indices = instr.outputs[1] if len(instr.outputs) > 1 else None
    # As the reference: taps in window order, padding reads as the lowest value, the first tap
    # starts the maximum and only a strictly greater value replaces it.
    w.line(f"{ct} best = {lowest};")
    w.line("int arg = 0, first = 1;")
    off = _window(w, osp, geo, skip=False)
    inside = " && ".join(f"ix{a} >= 0 && ix{a} < {n}" for a, n in enumerate(geo[5]))
    w.line(f"const {ct} v = ({inside}) ? {w.load(px, f'xb + {off}', dtype)} : {lowest};")
    w.line(f"if (first || v > best) {{ best = v; arg = {_flat_tap(geo, instr)}; }}")
    w.line("first = 0;")
    for _ in geo[0]:
        w.close()
    w.line(w.store(y, i, out.type.dtype, "best"))
    if indices is not None:
        pi = w.arg(indices, out=True)
        w.line(f"{pi}[{i}] = ({w.r.storage(indices.type.dtype)})(xb + arg);")


def _flat_tap(geo, instr) -> str:
    """The tap's flat position in the unpadded input plane, row- or column-major."""
    in_sp = geo[5]
    n = len(in_sp)
    if instr.attrs.get("storage_order", 0):
        st = [math.prod(in_sp[:a]) for a in range(n)]
    else:
        st = [math.prod(in_sp[a + 1:]) for a in range(n)]
    return " + ".join(f"ix{a} * {s}" if s != 1 else f"ix{a}" for a, s in enumerate(st))


@kernel_rule("AveragePool")
def render_avgpool(w, instr, params):
    if _cpu_variant(w, instr, params, "avg"):
        return
    x, out, y, i, osp, geo = _pool_setup(w, instr, params)
    k, s, d, _, pb, in_sp = geo
    include = bool(instr.attrs.get("count_include_pad", 0))
    dtype = x.type.dtype
    ct = w.r.compute(dtype)
    px = w.arg(x)
    w.line(f"{ct} acc = 0;")
    w.line("int cnt = 0;")
    if include:  # the divisor counts taps inside [-begin pad, n + end pad)
        pe = _end_pads(instr, x.type.shape)
        for a in range(len(k)):
            w.open(f"for (int k{a} = 0; k{a} < {k[a]}; ++k{a})")
            e = (osp[a] if s[a] == 1 else f"{osp[a]} * {s[a]}") + (f" - {pb[a]}" if pb[a] else "")
            w.line(f"const int ix{a} = {e} + k{a} * {d[a]};")
            w.line(f"if (ix{a} < {-pb[a]} || ix{a} >= {in_sp[a] + pe[a]}) continue;")
        w.line("++cnt;")
        conds = " && ".join(f"ix{a} >= 0 && ix{a} < {in_sp[a]}" for a in range(len(k)))
        off = " + ".join(f"ix{a} * {t}" if t != 1 else f"ix{a}" for a, t in enumerate(strides(in_sp)))
        w.line(f"if ({conds}) acc += {w.load(px, f'xb + {off}', dtype)};")
    else:
        off = _window(w, osp, geo)
        w.line("++cnt;")
        w.line(f"acc += {w.load(px, f'xb + {off}', dtype)};")
    for _ in k:
        w.close()
    w.line(w.store(y, i, out.type.dtype, f"acc / ({ct})cnt"))


def _end_pads(instr, x_shape):
    from ...ops.conv import out_extents, window_attrs

    a = instr.attrs
    nsp = len(x_shape) - 2
    k, s, d, p = window_attrs(ValueError, nsp, a["kernel_shape"], a.get("strides"), a.get("dilations"),
                              a.get("pads"))
    auto = a.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    _, _, pe = out_extents(ValueError, list(x_shape[2:]), k, s, d, p, auto, a.get("ceil_mode", 0))
    return pe


def _render_global(w, instr, params, op: str):
    x, out = instr.inputs[0], instr.outputs[0]
    dtype = x.type.dtype
    ct = w.r.compute(dtype)
    plane = math.prod(x.type.shape[2:])
    y = w.arg(out, out=True)
    i = w.flat_index(out.type.numel, params.flat_local)
    px = w.arg(x)
    init = "0" if op == "avg" else w.r.literal(-np.inf, dtype)
    w.line(f"{ct} acc = {init};")
    w.open(f"for (int r = 0; r < {plane}; ++r)")
    w.line(f"const {ct} v = {w.load(px, f'{i} * {plane} + r', dtype)};")
    w.line("acc += v;" if op == "avg" else "acc = (v > acc || v != v) && acc == acc ? v : acc;")
    w.close()
    w.line(w.store(y, i, out.type.dtype, f"acc / ({ct}){plane}" if op == "avg" else "acc"))


@kernel_rule("GlobalAveragePool")
def render_global_avg(w, instr, params):
    _render_global(w, instr, params, "avg")


@kernel_rule("GlobalMaxPool")
def render_global_max(w, instr, params):
    _render_global(w, instr, params, "max")
