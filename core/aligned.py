"""Large arrays at 64-byte aligned addresses.

A backend reads a large constant where it lies only if its address suits its vector loads (the cpu
backend's shared_weights.as_it_lies wants 64 bytes); otherwise it holds an aligned copy beside
the graph's array, twice the memory for the model's biggest weights. NumPy's own allocations of
that size start 16 bytes into a page, so the arrays glow makes (imported weights, folded
constants) are made aligned here, and a constant that is not is copied once when the graph takes
it (graph.Value), not once per compile.
"""

from __future__ import annotations

import numpy as np

ALIGN = 64
#: Arrays from this size on are kept aligned (smaller ones go into a program's own blob anyway).
ALIGN_MIN_BYTES = 1 << 20


def aligned_empty(shape, dtype, align: int = ALIGN) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of `align` bytes."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(max(n, 1) + align, np.uint8)
    shift = (-raw.ctypes.data) % align
    return raw[shift:shift + n].view(dtype).reshape(shape)


def aligned(a):
    """`a`, or an aligned copy of it where it is large, contiguous, misaligned and owns its memory
    (memory it does not own, a file mapping, is left where it is: copying it would read it all in)."""
    if not isinstance(a, np.ndarray) or a.nbytes < ALIGN_MIN_BYTES or a.dtype.hasobject:
        return a
    if not a.flags.c_contiguous or a.ctypes.data % ALIGN == 0:
        return a  # a strided view (a folded Transpose of a weight) stays one: backends read those
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is not None:
        return a
    out = aligned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return frozen(out)  # glow's own copy: nothing else can write it


def frozen(a: np.ndarray) -> np.ndarray:
    """`a`, it and every array under it made read-only, for arrays glow made and nothing else
    holds (imported weights, folded constants): nothing will write them, so the cpu backend
    shares them between the programs of a model and reads them where they lie rather than
    copying them into each (backends/cpu/shared_weights.py)."""
    b = a
    while isinstance(b, np.ndarray):
        b.flags.writeable = False
        b = b.base
    return a
