"""Index arithmetic for kernels: strides, broadcasting and coordinates, as C expressions.

Shapes are static, so every extent and stride is a literal, except sizes that vary between calls
(a sequence length: see .sizes), which are arguments; dimensions that move together are merged
first, so a bias add over (1, 64, 56, 56) reads its (64, 1, 1) operand at `i / 3136`.
"""

from __future__ import annotations

import math

import numpy as np

from .sizes import div, mod


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
            coord = flat if out_stride == 1 else f"({div(flat, out_stride)})"
            if k > 0:
                coord = f"({mod(coord, extent)})"
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
        e = flat if s == 1 else div(flat, s)
        if a > 0 and any(x != 1 for x in shape[:a]):
            e = mod(f"({e})", d)
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


# -- index checks ----------------------------------------------------------------------------------
# A kernel cannot raise: one that meets an out-of-range data index records the first one of the
# run in the program's error record, an int64[4] (kind, site, index, bound; see glow.ops.index)
# placed with the weights, skips the access and goes on. The runtime reads the record after the
# run (`IndexRecord.error`) and raises the InputError naming the node, the index and the bound.

RECORD = "@index_errors"  # the record's buffer name ('@' is in no ONNX value name we make)
_RECORD_KEY = ("index_errors",)
#: first-writer-wins on the record's kind, per dialect (32-bit, the widest every device has)
_CAS = {"opencl": "atomic_cmpxchg((volatile global int*)({p}), 0, {v})",
        "cuda": "atomicCAS((int*)({p}), 0, {v})"}


def record_bad_index(w, index: str, bound: int, negative: bool = True) -> None:
    """Emit: record `index` (a C expression) as out of range for `bound` unless this run
    recorded one already. `negative`: whether [-bound, -1] was valid (it wraps)."""
    from .. import dtypes as dt
    from ..ir.instr import WEIGHT, Buffer
    from ..ops.index import NON_NEGATIVE, WRAPS, site_id

    buf = w.derived.get(_RECORD_KEY)
    if buf is None:
        buf = w.derived[_RECORD_KEY] = Buffer(RECORD, dt.TensorType((4,), dt.int64), WEIGHT,
                                              np.zeros(4, np.int64))
    p = w.arg(buf, out=True)
    kind = WRAPS if negative else NON_NEGATIVE
    cas = _CAS.get(w.r.name)
    # a dialect without a known atomic: a plain test-and-set (racing writers may mix fields)
    first = cas.format(p=p, v=kind) + " == 0" if cas else f"{p}[0] == 0 && ({p}[0] = {kind}, 1)"
    w.open(f"if ({first})")
    w.line(f"{p}[1] = {site_id(w.instr.name)}; {p}[2] = {index}; {p}[3] = {bound};")
    w.close()


class IndexRecord:
    """Where a rendered program keeps its error record, and the nodes its site ids stand for;
    `offset` is None when no kernel checks indices."""

    def __init__(self, program, layout):
        from ..ops.index import site_id

        self.offset, self.sites = None, {}
        for k in program.launches:
            buf = next((o.root for o in k.operands if o.root.name == RECORD), None)
            if buf is not None and k.instr is not None:
                self.offset = layout.offsets[id(buf)]
                self.sites[site_id(k.instr.name)] = f"node '{k.instr.name}' ({k.instr.opname})"

    def error(self, record):
        """The InputError for the record read back after a run (None: no bad index)."""
        from ..ops.index import recorded_index_error

        return recorded_index_error(np.asarray(record).reshape(-1), self.sites)
