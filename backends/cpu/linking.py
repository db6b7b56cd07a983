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
import hashlib
import re
import struct
import threading
from dataclasses import dataclass, field

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


# -- ELF object files (64-bit for the JIT; 32-bit too for bundles of 32-bit targets) -------------

_SHT_SYMTAB, _SHT_RELA, _SHT_REL = 2, 4, 9
_STT_FUNC = 2
_STB_GLOBAL, _STB_WEAK = 1, 2


def _cstr(blob: bytes, at: int) -> str:
    return blob[at:blob.index(b"\0", at)].decode("latin-1")


def _is64(obj: bytes) -> bool:
    if obj[:4] != b"\x7fELF" or obj[4] not in (1, 2) or obj[5] != 1:
        raise BackendError("the cpu backend checks only little-endian ELF object files")
    return obj[4] == 2


def _sections(obj: bytes):
    """(name, type, flags, addr, offset, size, link, info, addralign, entsize) per section."""
    if _is64(obj):
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        shentsize, shnum, _ = struct.unpack_from("<HHH", obj, 0x3A)
        fmt = "<IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from("<I", obj, 0x20)
        shentsize, shnum, _ = struct.unpack_from("<HHH", obj, 0x2E)
        fmt = "<IIIIIIIIII"
    return [struct.unpack_from(fmt, obj, shoff + k * shentsize) for k in range(shnum)]


def _symbols(obj: bytes):
    """(section table, {symbol table section index: [(name, shndx, value, size, type, binding)]})."""
    secs = _sections(obj)
    wide = _is64(obj)
    symtabs = {}
    for k, (_, typ, _, _, off, size, link, _, _, entsize) in enumerate(secs):
        if typ != _SHT_SYMTAB:
            continue
        strtab = obj[secs[link][4]:secs[link][4] + secs[link][5]]
        rows = []
        for at in range(off, off + size, entsize):
            if wide:
                name, info, _, shndx, value, sz = struct.unpack_from("<IBBHQQ", obj, at)
            else:
                name, value, sz, info, _, shndx = struct.unpack_from("<IIIBBH", obj, at)
            rows.append((_cstr(strtab, name), shndx, value, sz, info & 0xF, info >> 4))
        symtabs[k] = rows
    return secs, symtabs


def defined_symbols(obj: bytes) -> set[str]:
    """The global symbols an ELF relocatable object defines (what other objects may use)."""
    _, symtabs = _symbols(obj)
    return {name for rows in symtabs.values() for name, shndx, _, _, _, bind in rows
            if shndx != 0 and bind in (_STB_GLOBAL, _STB_WEAK) and name}


def undefined_symbols(obj: bytes) -> dict[str, set[str]]:
    """Every symbol an ELF relocatable object needs from outside -> the names of the functions
    in it that refer to the symbol (found through the relocations; '?' where none is known)."""
    secs, symtabs = _symbols(obj)
    undefined = {name: set() for rows in symtabs.values()
                 for name, shndx, *_ in rows if shndx == 0 and name}
    for _, typ, _, _, off, size, link, target, _, entsize in secs:
        if typ not in (_SHT_RELA, _SHT_REL) or link not in symtabs:
            continue
        rows = symtabs[link]
        funcs = [(v, v + sz, n) for n, shndx, v, sz, t, _ in rows if shndx == target and t == _STT_FUNC]
        wide = _is64(obj)
        for at in range(off, off + size, entsize):
            r_offset, r_info = struct.unpack_from("<QQ" if wide else "<II", obj, at)
            name = rows[r_info >> 32 if wide else r_info >> 8][0]
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




def check_objects(undefined: list[dict[str, set[str]]], defined: list[set[str]], what: str = "module") -> None:
    """`check` for the objects of one program, loaded into one engine: an object may also use
    what its sibling objects define (the entry calls the kernels; kernels use the entry's
    globals), and nothing else."""
    for k, u in enumerate(undefined):
        siblings = set().union(*(d for j, d in enumerate(defined) if j != k))
        check({s: users for s, users in u.items() if s not in siblings}, what)


# -- one module into objects that link to each other --------------------------------------------

#: The name prefix codegen gives kernel functions (`k<instruction>.<op>`): each becomes an object.
KERNEL_NAME = re.compile(r'@"?k\d+\.')
_NAME = r'@("(?:[^"\\]|\\[0-9A-Fa-f]{2})*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)'
_REF = re.compile(_NAME)
_META = re.compile(r"!(\d+)\b")
_GLOBAL = re.compile(_NAME + r" = (?:(internal|private|external|common|weak) )?(?:unnamed_addr )?"
                     r"(global|constant) ")
EXPORT_PREFIX = "glow_k_"


@dataclass
class Entity:
    """One top-level definition of a module's text: kind 'define', 'declare', 'global' or 'meta'."""

    kind: str
    name: str
    text: str
    internal: bool = False
    constant: bool = False

    def refs(self) -> list[str]:
        own = self.name
        return [n for n in dict.fromkeys(_REF.findall(self.text)) if n != own]


@dataclass
class Part:
    """One object's module: `defines` is the kernel symbol it exports ('' for the entry's),
    `sources` the functions of the whole module it stands for (`k<n>.<op>`: kernel of
    instruction n; identical kernels share a part)."""

    text: str
    defines: str = ""
    sources: list[str] = field(default_factory=list)
    glue: bool = False  # an entry whose kernels are parts of their own: compiled without optimisation


def parse_module(text: str) -> tuple[list[str], dict[str, Entity]]:
    """The header lines (target triple, data layout) and the top-level entities of llvmlite's
    printed IR, by name (metadata as '!N'); ValueError on anything it does not know."""
    header, entities = [], {}
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if not line.strip() or line.startswith(";"):
            k += 1
        elif line.startswith(("target ", "source_filename")):
            header.append(line)
            k += 1
        elif line.startswith("define "):
            end = lines.index("}", k)
            name = _REF.search(line).group(1)
            entities[name] = Entity("define", name, "\n".join(lines[k:end + 1]),
                                    internal=" internal " in line.split("@", 1)[0] + " ")
            k = end + 1
        elif line.startswith("declare "):
            name = _REF.search(line).group(1)
            entities[name] = Entity("declare", name, line)
            k += 1
        elif line.startswith("@"):
            m = _GLOBAL.match(line)
            if m is None:
                raise ValueError(f"unknown global: {line[:80]}")
            entities[m.group(1)] = Entity("global", m.group(1), line, internal=m.group(2) in ("internal", "private"),
                                          constant=m.group(3) == "constant")
            k += 1
        elif _META.match(line):
            name = "!" + _META.match(line).group(1)
            entities[name] = Entity("meta", name, line)
            k += 1
        else:
            raise ValueError(f"unknown line: {line[:80]}")
    return header, entities


def _global_type(line: str) -> str:
    """The value type of a global's definition line (a balanced `[..]`, `<..>`, `{..}` or a word)."""
    rest = line[_GLOBAL.match(line).end():]
    depth = 0
    for i, ch in enumerate(rest):
        if ch in "[<{":
            depth += 1
        elif ch in "]>}":
            depth -= 1
        elif ch == " " and depth == 0:
            return rest[:i]
    return rest


def _declaration(e: Entity, name: str) -> str:
    """`declare` for a defined function (its first line, without linkage or body)."""
    first = e.text.split("\n", 1)[0].replace("define internal ", "define ", 1)
    return "declare " + first[len("define "):].replace(e.name, name, 1)


def _rename(text: str, names: dict[str, str]) -> str:
    if not names:
        return text
    return _REF.sub(lambda m: "@" + names.get(m.group(1), m.group(1)), text)


def _renumber_meta(text: str, order: dict[str, str]) -> str:
    return _META.sub(lambda m: order.get("!" + m.group(1), m.group(0)), text)


def split_module(text: str) -> list[Part]:
    """Cut a whole-program module into one module per kernel and one for the entry (first).

    A kernel (a function named `k<n>.<op>`) gets a module of its own with every internal helper
    and constant it uses copied in, each renamed in order of use, and metadata renumbered: so the
    text, and the exported name `glow_k_<hash of the text>`, depend only on the kernel's code.
    Identical kernels become one part. Writable globals are defined in the entry's module and
    declared where kernels use them. The entry module declares the kernels it calls."""
    header, ents = parse_module(text)
    kernels = [n for n, e in ents.items() if e.kind == "define" and e.internal and KERNEL_NAME.match("@" + n)]
    is_kernel = set(kernels)
    exported: dict[str, str] = {}
    parts: dict[str, Part] = {}

    def module(roots: list[str], names: dict[str, str], entry: bool) -> str:
        """Text of a module defining `roots` and what they use (renamed by `names`): the entry's,
        or a kernel's, where internal helpers and constants are copied in as "f.<n>"."""
        body, seen, meta, todo, declared = [], set(roots), {}, list(roots), set()
        while todo:
            n = todo.pop(0)
            e = ents[n]
            if e.kind == "global" and not e.constant:  # writable: defined by the entry, exported
                body.append(_GLOBAL.sub(lambda m: f"@{m.group(1)} = {m.group(3)} ", e.text, 1) if entry
                            else f"@{n} = external global {_global_type(e.text)}")
            elif entry and n in is_kernel:  # identical kernels: one declaration
                if exported[n] not in declared:
                    declared.add(exported[n])
                    body.append(_declaration(e, exported[n]))
            else:
                body.append(e.text.replace("define internal ", "define ", 1) if n in roots and not entry
                            else e.text)
                for r in e.refs():
                    if r in ents and r not in seen:
                        seen.add(r)
                        todo.append(r)
                        if not entry and ents[r].internal and (ents[r].kind == "define" or ents[r].constant):
                            names.setdefault(r, f'"f.{len(names)}"')
                meta.update(dict.fromkeys("!" + m for m in _META.findall(e.text)))
        # metadata: the nodes used and those they use, renumbered from 0 in order of use
        order, todo = {}, list(meta)
        while todo:
            m = todo.pop(0)
            if m not in order and m in ents:
                order[m] = f"!{len(order)}"
                todo += ["!" + x for x in _META.findall(ents[m].text)]
        out = "\n".join([*header, "", *(_rename(t, names) for t in body), *(ents[m].text for m in order), ""])
        return out if entry else _renumber_meta(out, order)

    for n in kernels:
        canon = module([n], {n: '"glow.kernel"'}, entry=False)
        name = EXPORT_PREFIX + hashlib.sha256(canon.encode()).hexdigest()[:24]
        exported[n] = name
        part = parts.setdefault(name, Part(canon.replace('@"glow.kernel"', f"@{name}"), name))
        part.sources.append(n.strip('"'))
    roots = [n for n, e in ents.items() if e.kind == "define" and not e.internal]
    roots += [n for n, e in ents.items() if e.kind == "global" and not e.constant and n not in roots]
    entry = module(roots, {n: exported[n] for n in kernels}, entry=True)
    return [Part(entry, glue=bool(parts)), *parts.values()]


__all__ = ["LIBC", "LIBM", "Part", "bind", "check", "provide", "split_module", "undefined_symbols"]
