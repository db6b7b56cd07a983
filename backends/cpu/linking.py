"""What generated code may call outside itself, bound by address; and the check that it calls
nothing else.

MCJIT resolves a symbol an object file leaves undefined by asking the symbols registered with
`llvm.add_symbol` first and then *every library the process has loaded*. So a kernel that calls a
helper glow does not provide (compiler-rt's `__truncdfhf2`, say) links to whatever some other
import happened to load, or to address 0 (a SIGSEGV at run time) in a process that imports only
glow. Two rules prevent that:

* `bind()` registers, by address, each external function generated code may use: the libm
  functions that LLVM's math intrinsics and `Lanes.libm` lower to, and the memory functions LLVM
  emits for copies, all from libraries glow opens itself (ctypes) — so the process's other
  libraries are never consulted for them; `provide()` adds glow's own compiled helpers
  (halfrt.py: the float16 conversions LLVM calls on CPUs without F16C).
* `check(undefined_symbols(obj))` reads the object file's symbol table before it is loaded: every
  undefined symbol must be one `bind()` or `provide()` registered, or compiling fails with
  glow.InternalError naming the symbol and the functions that reference it. A missing helper is
  a compile-time error, never a crash.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import threading

import llvmlite.binding as llvm
from glow import errors
from glow.errors import BackendError

# A missing helper is glow's bug, not the model's (BackendError until InternalError exists).
_BugError = getattr(errors, "InternalError", BackendError)

# libm: what LLVM's math intrinsics on float/double (and vectors of them: one call per lane)
# lower to on x86-64, and what Lanes.libm calls by name.
_LIBM_BASE = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
              "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "pow",
              "fmod", "erf", "erfc", "cbrt", "hypot", "ldexp", "frexp", "modf", "remainder", "fma",
              "sqrt", "floor", "ceil", "trunc", "round", "roundeven", "rint", "nearbyint", "fmin",
              "fmax", "copysign", "fabs", "lround", "llround", "lrint", "llrint", "sincos")
LIBM = tuple(n for base in _LIBM_BASE for n in (base, base + "f"))
LIBC = ("memcpy", "memmove", "memset", "syscall")  # syscall: the futex waits of sync.py

_lock = threading.Lock()
_bound: dict[str, int] | None = None


def _open(soname: str, name: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(soname)  # glibc's (the cpu backend is x86-64 Linux only)
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library(name))


def bind() -> dict[str, int]:
    """Register every allowed external symbol with LLVM by address (once); name -> address."""
    global _bound
    with _lock:
        if _bound is None:
            table = {}
            for lib, names in ((_open("libm.so.6", "m"), LIBM), (_open("libc.so.6", "c"), LIBC)):
                for name in names:
                    try:
                        fn = getattr(lib, name)
                    except AttributeError:  # this libm lacks it (e.g. roundeven before glibc 2.25)
                        continue
                    table[name] = ctypes.cast(fn, ctypes.c_void_p).value
            for name, addr in table.items():
                llvm.add_symbol(name, addr)
            _bound = table
        return _bound


# -- ELF64 object files -------------------------------------------------------------------------

_SHT_SYMTAB, _SHT_RELA, _SHT_REL = 2, 4, 9
_STT_FUNC = 2


def _cstr(blob: bytes, at: int) -> str:
    return blob[at:blob.index(b"\0", at)].decode("latin-1")


def _sections(obj: bytes):
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise BackendError("the cpu backend checks only little-endian ELF64 object files")
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", obj, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]


def undefined_symbols(obj: bytes) -> dict[str, set[str]]:
    """Every symbol an ELF64 relocatable object needs from outside -> the names of the functions
    in it that refer to the symbol (found through the relocations; '?' where none is known)."""
    secs = _sections(obj)
    symtabs = {}  # section index -> [(name, shndx, value, size, type)]
    for k, (_, typ, _, _, off, size, link, _, _, entsize) in enumerate(secs):
        if typ != _SHT_SYMTAB:
            continue
        strtab = obj[secs[link][4]:secs[link][4] + secs[link][5]]
        rows = []
        for at in range(off, off + size, entsize):
            name, info, _, shndx, value, sz = struct.unpack_from("<IBBHQQ", obj, at)
            rows.append((_cstr(strtab, name), shndx, value, sz, info & 0xF))
        symtabs[k] = rows
    undefined = {name: set() for rows in symtabs.values()
                 for name, shndx, *_ in rows if shndx == 0 and name}
    for _, typ, _, _, off, size, link, target, _, entsize in secs:
        if typ not in (_SHT_RELA, _SHT_REL) or link not in symtabs:
            continue
        rows = symtabs[link]
        funcs = [(v, v + sz, n) for n, shndx, v, sz, t in rows if shndx == target and t == _STT_FUNC]
        for at in range(off, off + size, entsize):
            r_offset, r_info = struct.unpack_from("<QQ", obj, at)
            name = rows[r_info >> 32][0]
            if name in undefined:
                undefined[name].add(next((n for lo, hi, n in funcs if lo <= r_offset < hi), "?"))
    return undefined


def provide(table: dict[str, int]) -> None:
    """Allow (and bind) functions glow compiled itself, such as halfrt.py's helpers."""
    bind()
    with _lock:
        for name, addr in table.items():
            llvm.add_symbol(name, addr)
            _bound[name] = addr


def check(undefined: dict[str, set[str]], what: str = "module") -> None:
    """InternalError unless every symbol an object leaves undefined (`undefined_symbols`) is one
    glow binds itself."""
    allowed = bind()
    bad = {s: users for s, users in undefined.items() if s not in allowed}
    if bad:
        detail = "; ".join(f"'{s}' (called by {', '.join(sorted(u or {'?'}))})" for s, u in sorted(bad.items()))
        raise _BugError(f"the cpu backend's code for {what} calls functions glow does not provide "
                        f"(it would link to whatever the process has loaded): {detail}")


__all__ = ["LIBC", "LIBM", "bind", "check", "provide", "undefined_symbols"]
