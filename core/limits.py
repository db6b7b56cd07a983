"""Hard limits on shapes and the memory budget: the one place that defines them.

Element and byte counts are exact Python integers everywhere in the core (`TensorType.numel`,
`_shape.numel`). Two limits keep the native backends' index arithmetic exact:

* **Shape limit**: the product of a tensor's non-zero dims is at most `MAX_ELEMENTS` (2**50,
  ~1.1e15 elements, 4 PiB of float32: more than any machine holds). Every partial product of
  its dims (a stride, a row count, an offset in elements) is then at most that, and a byte offset
  at most 2**54 (itemsize <= 16), so the int64 index math of the CPU backend's generated code and
  of the kernels' `np.prod(..., dtype=np.int64)` can never wrap. `GraphBuilder` checks it for
  every graph input and node output (`check_type`): past it is a `GraphError` naming the node.
  Counting non-zero dims only means an empty tensor `[0, 2**62]` is refused too: its strides
  would wrap just the same.
* **Memory budget** (`memory_budget()`): the most bytes one compiled graph may ask to allocate
  at once (its arena plus its outputs), and the most one tensor of the reference interpreter may
  take. `GLOW_MEMORY_LIMIT` sets it (`8GiB`, `512MiB`, `2000000000`, a bare number is bytes);
  by default it is 3/4 of physical memory. Allocations past it are refused *before* they happen
  with an `InputError` naming the node (`check_alloc`), never a MemoryError or an OOM kill.

The C-style GPU dialects index with 32-bit ints; they refuse bigger tensors themselves
(core/render/kernel.py, `INT32_LIMIT`).
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction

from .errors import GlowError, GraphError, InputError

#: Largest product of a tensor's non-zero dims (see the module docstring).
MAX_ELEMENTS = 1 << 50
#: A memory size (budget, device cap) above this is refused as absurd (1 EiB).
MAX_MEMORY_BYTES = 1 << 60
#: The environment variable that sets the memory budget.
ENV = "GLOW_MEMORY_LIMIT"
#: The default budget when physical memory cannot be read.
FALLBACK_BUDGET = 16 << 30

_SIZE = re.compile(r"^\s*([0-9]+\.?[0-9]*|\.[0-9]+)\s*([KMGTP]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "p": 1000**5}


def parse_bytes(text, default_unit: str = "B", what: str = "memory size") -> int:
    """'40MiB' -> bytes (exact, no float rounding or overflow); a bare number is `default_unit`.
    Units: B, K/KB (1000), KiB (1024), and so on up to P/PiB. Raises GlowError on anything else
    (negative, non-numeric, NaN, over `MAX_MEMORY_BYTES`)."""
    m = _SIZE.match(str(text)) if isinstance(text, (str, int)) and not isinstance(text, bool) else None
    if not m:
        raise GlowError(f"bad {what} '{_show(text)}' (expected e.g. 40MiB, 512KiB, 2GiB)")
    unit = (m.group(2) or default_unit).lower()
    base = 1024 if "i" in unit else 1000
    scale = 1 if unit[0] == "b" else base ** ("kmgtp".index(unit[0]) + 1)
    n = math.floor(Fraction(m.group(1)) * scale)
    if n > MAX_MEMORY_BYTES:
        raise GlowError(f"{what} '{_show(text)}' is absurdly large (at most {format_bytes(MAX_MEMORY_BYTES)})")
    return n


def _show(text) -> str:
    text = str(text)
    return text if len(text) <= 40 else text[:37] + "..."


def format_bytes(n: int) -> str:
    for unit, size in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30),
                       ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


_cache: dict = {}


def memory_budget() -> int:
    """The memory budget in bytes: `$GLOW_MEMORY_LIMIT`, else 3/4 of physical memory."""
    text = os.environ.get(ENV)
    if text is None or not text.strip():
        phys = physical_memory()
        return FALLBACK_BUDGET if not phys else phys // 4 * 3
    if text not in _cache:
        _cache[text] = parse_bytes(text, what=f"{ENV} value")
    return _cache[text]


def nonzero_product(shape) -> int:
    """Product of the static non-zero dims (the bound on every partial product of the shape)."""
    return math.prod(d for d in shape if isinstance(d, int) and d > 0)


def check_type(t, where: str) -> None:
    """GraphError (prefixed by `where`, e.g. "node 'r' (Reshape)") if a tensor type's dims are
    past the shape limit. Types that are not tensors, or of unknown rank, pass."""
    shape = getattr(t, "shape", None)
    if shape is None or not isinstance(shape, tuple):
        return
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise GraphError(f"{where}: shape {_dims(shape)} is too large (more than {MAX_ELEMENTS} "
                         f"= 2**50 elements)")


def check_alloc(where: str, what: str, shape, itemsize: int, budget: int | None = None) -> None:
    """InputError naming `where` (the node) and `what` (the tensor) if allocating a tensor of
    `shape` would take more than the memory budget (or past the shape limit)."""
    n = math.prod(shape)
    if nonzero_product(shape) > MAX_ELEMENTS:
        raise InputError(f"{where}: {what} of shape {_dims(shape)} is too large "
                         f"(more than {MAX_ELEMENTS} = 2**50 elements)")
    check_bytes(where, what, n * itemsize, shape, budget)


def check_bytes(where: str, what: str, nbytes: int, shape=None, budget: int | None = None) -> None:
    budget = memory_budget() if budget is None else budget
    if nbytes > budget:
        shape_text = "" if shape is None else f" (shape {_dims(shape)})"
        raise InputError(f"{where}: {what}{shape_text} needs {format_bytes(nbytes)}, over the memory "
                         f"budget of {format_bytes(budget)} (set {ENV} to change it)")


def _dims(shape) -> str:
    return "[" + ", ".join("?" if not isinstance(d, int) else str(d) for d in shape) + "]"


__all__ = ["ENV", "MAX_ELEMENTS", "MAX_MEMORY_BYTES", "check_alloc", "check_bytes", "check_type",
           "format_bytes", "memory_budget", "nonzero_product", "parse_bytes"]
