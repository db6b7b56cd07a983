"""Large arrays at 64-byte aligned addresses.

A backend reads a large constant where it lies only if its address suits its vector loads (the cpu
backend's shared_weights.as_it_lies wants 64 bytes); otherwise it holds an aligned copy beside
the graph's array, twice the memory for the model's biggest weights. NumPy's own allocations of
that size start 16 bytes into a page, so the arrays glow makes (imported weights, folded
constants) are made aligned here, and a constant that is not is copied once when the graph takes
it (graph.Value), not once per compile.
"""

from __future__ import annotations

import mmap
import tempfile

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


def spilled(data, dtype, shape) -> np.ndarray | None:
    """`data` (a contiguous buffer: the proto's raw bytes, a fresh array) as a read-only array
    over an unlinked temporary file's pages, or None where no such file can be made.

    A weight there is like an external-data weight mapped from its file: once a backend has packed
    a copy of it (every convolution's and GEMM's weights on cpu), its pages are dropped from the
    process (backends/cpu/shared_weights.drop_pages) and stay in the page cache, clean once written
    back, which the OS reclaims as it needs; a later read (a new input signature, a profile) maps
    them again. An anonymous array would hold the same bytes a second time for the program's
    lifetime. The file goes away when its last mapping does."""
    view = memoryview(data).cast("B")
    try:
        with tempfile.TemporaryFile(prefix="glow-weights-") as f:
            f.write(view)
            f.flush()
            m = mmap.mmap(f.fileno(), view.nbytes, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # no writable temporary directory, a full disk: memory instead
        return None
    return np.frombuffer(m, np.dtype(dtype)).reshape(shape)
