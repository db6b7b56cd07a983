"""Large weights held once per process, not once per compiled program.

A model compiled for several input signatures (a decoder's prefill bucket and its decoding step,
a new batch size) is several programs over one graph whose constants are the same arrays. Each
program's weights blob used to hold its own copy of every weight, packed or not: two programs of
a 2 GB decoder held 4 GB of weights besides the graph's 2 GB. Now a weight of at least
SHARE_BYTES is not put in the blob: the program points at

* the graph's own array, where its bytes can be used as they lie (contiguous, the element type
  the kernel reads, WEIGHT_ALIGN-aligned), or
* one copy of it per source array and per way of making it (a packing, a conversion), made by the
  first program that asks and reused by every later one (`get`).

A copy lives as long as some program holds it (`Shared` objects, held by the programs; the store
only keeps weak references), and it holds its source array, so the source's address, the store's
key, is never reused for other data while the copy lives. Only sources whose memory nothing can
write are shared (`immutable`: every array down to the memory read-only, as the ONNX importer
leaves its arrays), so an address, shape, strides and element type name one content; a constant
over a caller's writable array is copied into the blob, as before, and a later write to that array
changes no compiled program.

The pointer is an absolute address in the program's value table (codegen.Codegen.value), so the
entry's text does not depend on it; a saved program carries the shared arrays as sections of its
own and has the addresses written again when it is loaded (runtime.NativeProgram.restore).
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from collections.abc import Callable

import numpy as np
from glow.aligned import drop_pages, file_backed, libc, read_only_map

from .abi import WEIGHT_ALIGN

#: Weights below this many bytes are copied into each program's blob (sharing buys nothing there).
SHARE_BYTES = 1 << 20


class Shared:
    """One shared array: `array` (aligned, read by the generated code) and the `source` it was
    made from, with any `partners` read with it (kept alive: their addresses are the key)."""

    __slots__ = ("array", "source", "partners", "__weakref__")

    def __init__(self, array: np.ndarray, source: np.ndarray, partners: tuple = ()):
        self.array, self.source, self.partners = array, source, partners

    @property
    def address(self) -> int:
        return self.array.__array_interface__["data"][0]


_STORE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def _key(source: np.ndarray, how: tuple) -> tuple:
    return (source.__array_interface__["data"][0], source.shape, source.strides, source.dtype.str, how)


def immutable(a) -> bool:
    """Whether nothing can write the memory of array `a`: it and every array it is a view of are
    read-only, down to memory that is itself read-only (an array's, or a bytes object's)."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return True
        a = a.base
    if isinstance(a, memoryview):  # np.frombuffer's base: what it views
        a = a.obj
    return isinstance(a, bytes) or read_only_map(a)


def get(source: np.ndarray, how: tuple, shape, dtype, fill: Callable[[np.ndarray], object],
        partners: tuple = ()) -> Shared:
    """The shared array made from `source` by `how` (a hashable description of the making): found,
    or made now, zeroed then written by `fill(array)`, of this shape and element type. `partners`:
    other (immutable) arrays the making reads (a gated product's second matrix)."""
    key = (_key(source, how), *(_key(p, ()) for p in partners))
    with _LOCK:  # one maker per key: two compiles at once (a background one) share the result
        found = _STORE.get(key)
        if found is None:
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            array = _zeros(n).view(dtype).reshape(shape)
            fill(array)
            array.flags.writeable = False
            collapse_later(array)
            for a in (source, *partners):
                drop_pages(a)  # packed: a spilled source's pages are not read again
            found = _STORE[key] = Shared(array, source, tuple(partners))
        return found


# -- memory on huge pages ---------------------------------------------------------------------------
#
# A decoder's weights are streamed once per token, matrix after matrix; on 4 KB pages every 4 KB is
# a TLB miss, and a layer's matrices (1-3 MB each in a small Llama) are too small for the kernel's
# huge pages, which need 2 MB-aligned 2 MB runs, while its khugepaged collapses 16 MB per 10 s
# (minutes for a decoder, whose speed drifted up meanwhile). So the shared copies are cut from
# slabs of SLAB_BYTES, 2 MB-aligned, and once a copy is written its huge pages are collapsed
# (MADV_COLLAPSE, Linux 6.1+) by a background thread: the compile neither waits for it nor faults
# huge pages in itself (a fragmented machine compacts memory first: docs/compile-time.md, "Small
# pages while compiling"), and the kernel swaps the pages under running readers. A Llama-shaped fp32
# decoder (8 layers of 1-3 MB matrices, a 65 MB LM head) on an AMD EPYC Zen 3: 51.0 -> 62.2
# tokens/s at one thread (interleaved, medians of 5). A slab is freed when the last array cut from
# it is (each array's base holds it).

HUGE_PAGE = 2 << 20
SLAB_BYTES = 64 << 20
_MADV_COLLAPSE = 25
_slab: list = [None, 0]  # the current slab (a uint8 view of its mapping) and its next free offset
_collapsing: list = []  # arrays whose pages the collapser thread has yet to collapse
_collapse_wake = threading.Condition()


def _mapping(nbytes: int) -> np.ndarray:
    """`nbytes` zero bytes at a huge-page boundary of a new anonymous mapping."""
    m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = np.frombuffer(m, np.uint8)
    start = (-view.__array_interface__["data"][0]) % HUGE_PAGE
    return view[start:start + nbytes]


def _zeros(n: int) -> np.ndarray:
    """n zero bytes, WEIGHT_ALIGN-aligned, for a shared copy: cut from the current slab, or a
    mapping of their own when they would fill more than half of one."""
    if n > SLAB_BYTES // 2:
        return _mapping(-(-n // HUGE_PAGE) * HUGE_PAGE)[:n]
    slab, at = _slab
    at = -(-at // WEIGHT_ALIGN) * WEIGHT_ALIGN
    if slab is None or at + n > slab.size:
        slab, at = _mapping(SLAB_BYTES), 0
    _slab[:] = [slab, at + n]
    return slab[at:at + n]


def collapse_later(a: np.ndarray, whole_pages_only: bool = False) -> None:
    """Have the huge pages over written array `a` collapsed in the background: every huge page it
    touches (its memory is one of `_zeros`: the neighbours are ours too), or with
    `whole_pages_only` those inside it (a program's weights blob, whose mapping is not aligned)."""
    if a.nbytes < HUGE_PAGE // 4 or libc() is None:
        return
    start = a.__array_interface__["data"][0]
    if whole_pages_only:
        first, end = -(-start // HUGE_PAGE) * HUGE_PAGE, (start + a.nbytes) // HUGE_PAGE * HUGE_PAGE
    else:
        first, end = start // HUGE_PAGE * HUGE_PAGE, -(-(start + a.nbytes) // HUGE_PAGE) * HUGE_PAGE
    if end <= first:
        return
    with _collapse_wake:
        if not _collapsing and not any(t.name == "glow-huge-pages" for t in threading.enumerate()):
            threading.Thread(target=_collapser, name="glow-huge-pages", daemon=True).start()
        _collapsing.append((a, first, end))  # `a` holds the memory until it is collapsed
        _collapse_wake.notify()


def _collapser():
    while True:
        with _collapse_wake:
            while not _collapsing:
                if not _collapse_wake.wait(timeout=5.0):
                    return  # idle: the thread ends; the next copy starts another
            a, first, end = _collapsing.pop(0)
        for advice in (_MADV_HUGEPAGE, _MADV_COLLAPSE):  # an old kernel refuses: the pages stay small
            if advice is not None:
                libc().madvise(ctypes.c_void_p(first), ctypes.c_size_t(end - first), advice)
        del a


def as_it_lies(source: np.ndarray, dtype) -> Shared:
    """The source's own bytes as the shared array where the kernel can read them there; else one
    aligned contiguous copy in `dtype`."""
    a = np.asarray(source)
    if (a.dtype == np.dtype(dtype) and a.flags.c_contiguous
            and a.__array_interface__["data"][0] % WEIGHT_ALIGN == 0):
        with _LOCK:
            key = _key(a, ("as-is",))
            found = _STORE.get(key)
            if found is None:
                advise_huge_pages(a)
                found = _STORE[key] = Shared(a, a)
            return found
    return get(a, ("contiguous", np.dtype(dtype).str), a.shape, dtype,
               lambda out: np.copyto(out, a, casting="unsafe"))


_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)


def advise_huge_pages(a: np.ndarray) -> None:
    """Ask the kernel to back the whole pages of `a`'s memory with huge pages (collapsed in the
    background, after it is written, as the weights blob is: codegen._Blob): weights streamed
    once per token miss the TLB less. Where that is not possible, nothing happens."""
    if _MADV_HUGEPAGE is None or a.nbytes < (4 << 20) or file_backed(a) or libc() is None:
        return
    page = mmap.PAGESIZE
    start = a.__array_interface__["data"][0]
    first, end = -(-start // page) * page, (start + a.nbytes) // page * page
    if end > first:
        libc().madvise(ctypes.c_void_p(first), ctypes.c_size_t(end - first), _MADV_HUGEPAGE)


def trim_heap() -> None:
    """Give the C heap's free memory back to the OS (glibc's malloc_trim): compiling leaves LLVM's
    freed modules and IR text there, which the allocator would otherwise keep resident for the
    process's life (ResNet-50: 158 MiB of heap after its compile). Elsewhere nothing happens."""
    if libc() is not None and hasattr(libc(), "malloc_trim"):
        libc().malloc_trim(ctypes.c_size_t(0))


def held_bytes() -> int:
    """Bytes of the shared copies alive now (arrays that are the graph's own are not counted)."""
    with _LOCK:
        return sum(s.array.nbytes for s in list(_STORE.values()) if s.array is not s.source)
