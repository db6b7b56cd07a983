"""Saved executables: `exe.save(path)` writes a compiled executable to one file, and
`glow.load(path)` opens it again in another process without compiling anything.

A backend that can save implements `Executable._saved_state()` and `Backend.load_saved()`
(the cpu backend: its objects of machine code, the weights blob and the memory plan's sizes).
The file says which glow wrote it, down to its code: a file from another glow version or build
is refused, as is one whose code the backend cannot run here (the cpu backend: a file compiled
for another CPU or instruction-set level). Every refusal is one line naming the file.

The file is this module's own simple container, read with bounds checks and no unpickling:

    b"GLOWEXE1"  u64 header length  header (JSON, UTF-8)  sections, each 64-byte aligned

The header holds the format, glow's version and code fingerprint, the backend, the graph's
name, inputs and outputs, the backend's own state (JSON) and each section's offset, size and
CRC-32 (checked on load: a damaged file is refused, never loaded).

Loading a file runs the machine code in it: load only files you trust, as with pickle.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import zlib

import numpy as np

from . import dtypes as dt
from .errors import BackendError, GraphError, ModelLoadError

MAGIC = b"GLOWEXE1"
FORMAT = "glow-executable/1"
ALIGN = 64
#: The largest file `load` reads (weights of the biggest models plus their code).
MAX_BYTES = 16 << 30


@functools.cache
def code_fingerprint() -> str:
    """A hash of glow's own source files (the core and the bundled backends): a saved program's
    code and the runtime that calls it must come from the same glow, and a development install
    keeps one version number across every change."""
    import glow
    import glow.backends

    roots = sorted({os.path.dirname(os.path.abspath(glow.__file__)),
                    *(os.path.abspath(p) for p in glow.backends.__path__)})
    h = hashlib.sha256()
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    h.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()[:32]


def _glow_version() -> str:
    import glow

    return glow.__version__


def _interface(values) -> list:
    out = []
    for v in values:
        t = v.type
        if not isinstance(t, dt.TensorType) or t.shape is None:
            raise BackendError(f"value '{v.name}' of type {t} cannot be saved: only tensors of known rank")
        out.append([v.name, t.dtype.name, [d if isinstance(d, int) else str(d) for d in t.shape]])
    return out


def save(exe, path: str) -> None:
    """Write `exe` to `path` (see the module docstring); atomically: no partial file is left."""
    from .fileio import write_atomic

    backend, state, sections = exe._saved_state()
    layout, offset = {}, 0
    for name, data in sections.items():
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        sections[name] = data
        layout[name] = [offset, int(data.nbytes), zlib.crc32(memoryview(data))]
        offset += -(-data.nbytes // ALIGN) * ALIGN
    header = json.dumps({
        "format": FORMAT, "glow": _glow_version(), "code": code_fingerprint(), "backend": backend,
        "graph": exe.graph.name, "inputs": _interface(exe.graph.inputs),
        "outputs": _interface(exe.graph.outputs), "state": state, "sections": layout,
    }).encode()
    start = -(-(len(MAGIC) + 8 + len(header)) // ALIGN) * ALIGN

    def write(f):
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        f.write(b"\0" * (start - len(MAGIC) - 8 - len(header)))
        for data in sections.values():
            f.write(memoryview(data))
            f.write(b"\0" * (-data.nbytes % ALIGN))

    write_atomic(path, write, suffix=".glowx", what="saved executable")


def read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, {section name: read-only uint8 array, 64-byte aligned}) of a saved executable,
    checked to be one that this glow wrote: any other file is a ModelLoadError naming it."""
    from .fileio import map_regular_file

    # mapped, not read: the weights are used where they lie (sections are 64-byte aligned in the
    # file, and the mapping starts on a page), and only the pages a run touches are ever read
    raw = map_regular_file(os.fspath(path), MAX_BYTES, "a saved glow executable")
    what = f"{path}: not a saved glow executable"
    if bytes(raw[:len(MAGIC)]) != MAGIC or len(raw) < len(MAGIC) + 8:
        raise ModelLoadError(f"{what} (it does not start with {MAGIC.decode()})")
    (n,) = struct.unpack_from("<Q", raw, len(MAGIC))
    if len(MAGIC) + 8 + n > len(raw):
        raise ModelLoadError(f"{what} (truncated header)")
    try:
        header = json.loads(raw[len(MAGIC) + 8:len(MAGIC) + 8 + n].tobytes().decode())
        fmt, sections = header["format"], header["sections"]
    except (ValueError, KeyError, TypeError):
        raise ModelLoadError(f"{what} (its header cannot be read)") from None
    if fmt != FORMAT:
        raise ModelLoadError(f"{path}: saved in format {fmt!r}; this glow reads {FORMAT!r}")
    if header.get("glow") != _glow_version() or header.get("code") != code_fingerprint():
        raise ModelLoadError(f"{path}: saved by glow {header.get('glow')} (code {header.get('code')}); this is "
                             f"glow {_glow_version()} (code {code_fingerprint()}): compile the model again")
    start = -(-(len(MAGIC) + 8 + n) // ALIGN) * ALIGN
    out = {}
    for name, entry in sections.items():
        off, size, crc = entry if isinstance(entry, list) and len(entry) == 3 else (None, None, None)
        if not (isinstance(off, int) and isinstance(size, int) and 0 <= off and 0 <= size
                and start + off + size <= len(raw)):
            raise ModelLoadError(f"{path}: section '{name}' lies outside the file (truncated?)")
        out[name] = raw[start + off:start + off + size]
        # machine code from a damaged file must never reach the loader (a crash), nor damaged
        # weights a run (wrong answers): CRC-32 of every section, ~0.03 s for 100 MB
        if zlib.crc32(memoryview(out[name])) != crc:
            raise ModelLoadError(f"{path}: section '{name}' is damaged (its checksum does not match)")
    return header, out


def load(path: str, *, threads: int | None = None):
    """The executable saved at `path`, ready to run (`glow.load`)."""
    from .backend import CompileOptions
    from .graph import Graph, Value
    from .plugins import backend

    header, sections = read(path)
    try:
        be = backend(header["backend"])
        inputs = tuple(_value(Value, x) for x in header["inputs"])
        outputs = tuple(_value(Value, x) for x in header["outputs"])
    except (KeyError, TypeError, ValueError, GraphError) as e:
        raise ModelLoadError(f"{path}: a damaged saved executable ({type(e).__name__}: {e})") from None
    # The interface only: the optimised graph the code came from is not kept in the file.
    graph = Graph(header.get("graph") or "saved", inputs, (), outputs, meta={"loaded_from": os.fspath(path),
                                                                                 "backend": be.name})
    return be.load_saved(graph, header["state"], sections, CompileOptions(threads=threads), where=os.fspath(path))


def _value(Value, x):
    name, dtype, shape = x
    return Value(str(name), dt.TensorType(tuple(d if isinstance(d, int) else str(d) for d in shape),
                                          dt.from_name(dtype)))


__all__ = ["FORMAT", "code_fingerprint", "load", "read", "save"]
