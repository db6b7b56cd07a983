"""Index arithmetic for kernels: strides, broadcasting and coordinates, as C expressions.

Shapes are static, so every extent and stride is a literal; dimensions that move together are
merged first, so a bias add over (1, 64, 56, 56) reads its (64, 1, 1) operand at `i / 3136`.
"""

from __future__ import annotations

import math


def strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _merged(out_shape, flags):
    """Merge adjacent dims with equal flags, dropping unit dims: [(extent, flag)]."""
    groups: list[list] = []
    for d, f in zip(out_shape, flags):
        if d == 1:
            continue
        if groups and groups[-1][1] == f:
            groups[-1][0] *= d
        else:
            groups.append([d, f])
    return groups


def broadcast_index(out_shape, in_shape, flat: str) -> str:
    """The element offset into an `in_shape` tensor broadcast to `out_shape`, for flat output
    index `flat` (NumPy broadcasting: shapes right-aligned, unit dims repeat)."""
    out_shape, in_shape = tuple(out_shape), tuple(in_shape)
    if in_shape == out_shape or math.prod(in_shape) == math.prod(out_shape):
        return flat
    if math.prod(in_shape) == 1:
        return "0"
    pad = (1,) * (len(out_shape) - len(in_shape)) + in_shape
    groups = _merged(out_shape, [p != 1 for p in pad])
    terms, out_stride, in_stride = [], 1, 1
    for k in range(len(groups) - 1, -1, -1):
        extent, keep = groups[k]
        if keep:
            coord = flat if out_stride == 1 else f"({flat} / {out_stride})"
            if k > 0:
                coord = f"({coord} % {extent})"
            terms.append(coord if in_stride == 1 else f"{coord} * {in_stride}")
            in_stride *= extent
        out_stride *= extent
    return " + ".join(reversed(terms)) or "0"


def coords(w, flat: str, shape, prefix: str) -> list[str]:
    """Declare the coordinates of flat index `flat` in `shape` (`{prefix}{axis}`); unit axes get
    the literal "0". Returns one C expression per axis."""
    names, st = [], strides(shape)
    for a, (d, s) in enumerate(zip(shape, st)):
        if d == 1:
            names.append("0")
            continue
        e = flat if s == 1 else f"{flat} / {s}"
        if a > 0 and any(x != 1 for x in shape[:a]):
            e = f"({e}) % {d}"
        w.line(f"const int {prefix}{a} = {e};")
        names.append(f"{prefix}{a}")
    return names


def offset(coordinates, shape) -> str:
    """Row-major flat offset of `coordinates` (C expressions) in `shape`."""
    terms = []
    for c, s, d in zip(coordinates, strides(shape), shape):
        if c == "0" or d == 1:
            continue
        terms.append(c if s == 1 else f"{c} * {s}")
    return " + ".join(terms) or "0"
