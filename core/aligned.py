"""Large arrays at 64-byte aligned addresses.

A backend reads a large constant where it lies only if its address suits its vector loads (the cpu
backend's shared_weights.as_it_lies wants 64 bytes); otherwise it holds an aligned copy beside
the graph's array, twice the memory for the model's biggest weights. NumPy's own allocations of
that size start 16 bytes into a page, so the arrays glow makes (imported weights, folded
constants) are made aligned here, and a constant that is not is copied once when the graph takes
it (graph.Value), not once per compile.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import tempfile
import threading

import numpy as np

ALIGN = 64
#: Arrays from this size on are kept aligned (smaller ones go into a program's own blob anyway).
ALIGN_MIN_BYTES = 1 << 20
#: Weights from this size on live in a temporary file's pages (`spilled`): a convolutional
#: network's weights are mostly 64 KB - 1 MB, and held in memory they were held twice (the
#: graph's array and the packed copy in the program; Inception-v2: 45 MB of weights, 345 MiB peak).
SPILL_MIN_BYTES = 64 << 10


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
    process (`drop_pages`) and stay in the page cache, clean once written back, which the OS
    reclaims as it needs; a later read (a new input signature, a profile) maps them again. An
    anonymous array would hold the same bytes a second time for the program's lifetime. (Where
    the temporary directory is a tmpfs, the pages are memory all the same: nothing is saved.)"""
    return spilled_parts([data], dtype, shape)


def spilled_parts(parts, dtype, shape) -> np.ndarray | None:
    """As `spilled`, from an iterable of contiguous buffers written one after the other (a value
    computed a slice at a time is never whole in memory: folding a BatchNormalization into a
    convolution's weights). None where no file can be made or it is empty: the caller then makes
    the array in memory (from the start: some parts may have been taken)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0:
        return None
    try:
        with _SPILL_LOCK:
            m = _SPILL.write(parts, nbytes)
    except OSError:  # no writable temporary directory, a full disk: memory instead
        return None
    return np.frombuffer(m, dtype).reshape(shape)


class _SpillFile:
    """Unlinked temporary files that spilled arrays are written into one after the other, each
    array mapped from its own page-aligned range. Opening a temporary file took about 1 ms on an
    ext4 VM (DenseNet-121's 287 weights: 0.3 s of its compile), so one file takes arrays until it
    holds FILE_BYTES; an array at least that large gets a file of its own. A file's disk space
    goes once its descriptor is closed (when the next one opens) and its last mapping is gone.
    Arrays are only ever appended, and a forked child starts a file of its own: a range once
    mapped is never written again (the mapping is shared: a write would change the array)."""

    FILE_BYTES = 64 << 20

    def __init__(self):
        self.file, self.size, self.pid = None, 0, os.getpid()

    def write(self, parts, nbytes: int) -> mmap.mmap:
        if self.pid != os.getpid():  # the parent's file, inherited: the parent appends to it too
            self.file, self.size, self.pid = None, 0, os.getpid()
        alone = nbytes >= self.FILE_BYTES
        if alone or self.file is None or self.size + nbytes > self.FILE_BYTES:
            f = tempfile.TemporaryFile(prefix="glow-weights-")
            if not alone:
                self.close()
                self.file, self.size = f, 0
        else:
            f = self.file
        try:
            at = 0 if alone else -(-self.size // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
            f.seek(at)
            for part in parts:
                f.write(memoryview(part).cast("B"))
            f.flush()
            if f.tell() - at != nbytes:
                raise ValueError(f"spilled {f.tell() - at} bytes for a {nbytes}-byte array")
            m = mmap.mmap(f.fileno(), nbytes, access=mmap.ACCESS_READ, offset=at)
        except BaseException:
            if f is self.file:
                self.close()
            else:
                f.close()
            raise
        if alone:
            f.close()
        else:
            self.size = at + nbytes
        return m

    def close(self):
        if self.file is not None:
            self.file.close()
        self.file, self.size = None, 0


_SPILL = _SpillFile()
_SPILL_LOCK = threading.Lock()


def file_backed(a: np.ndarray) -> bool:
    """Whether `a`'s memory is a read-only file mapping (a spilled weight, an external-data one the
    ONNX importer maps): its pages can be dropped and are read from the file again when touched."""
    while isinstance(a, np.ndarray):
        a = a.base
    return read_only_map(a.obj if isinstance(a, memoryview) else a)


def read_only_map(m) -> bool:
    """Whether `m` is a memory mapping made read-only (mmap.ACCESS_READ: PROT_READ pages)."""
    if not isinstance(m, mmap.mmap):
        return False
    with memoryview(m) as v:
        return v.readonly


def drop_pages(a: np.ndarray) -> None:
    """Drop the pages of `a` from this process's memory if it is a read-only file mapping (they
    stay in the page cache, and a later read maps them again): a weight copied or packed into a
    program is then resident once, as the copy. (A neighbour sharing an edge page is merely read
    again from the cache.) Elsewhere nothing happens."""
    if _MADV_DONTNEED is None or a.nbytes == 0 or not file_backed(a) or libc() is None:
        return
    page = mmap.PAGESIZE
    start = a.__array_interface__["data"][0]
    first, end = start // page * page, -(-(start + a.nbytes) // page) * page
    libc().madvise(ctypes.c_void_p(first), ctypes.c_size_t(end - first), _MADV_DONTNEED)


_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_LIBC: list = []


def libc():
    """The C library (ctypes), or None where it cannot be loaded."""
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]
