"""The executable cache: `glow.compile(model, cache=True)` (and `glow run`) opens the executable
an earlier compile of the same model saved, instead of compiling again.

The cpu backend already caches machine code per kernel; a compile still runs the graph passes
and code generation to find it (ResNet-50: about 2 s). This cache keeps whole executables
(glow.saved's file format: code, weights, memory plan) keyed by

    the model file's bytes, the backend and every compile setting (native, threads, optimize,
    options), glow's own code (glow.saved.code_fingerprint), and every GLOW_* variable that
    could change what a compile makes,

so a hit is as if the same compile ran again, in the time of reading the file. Only what can be
saved is cached (the cpu backend's executables of static graphs); a model given as a Graph, or
one whose tensors lie in external files, is compiled as usual. A file that no longer loads (made
for another CPU or instruction-set level, damaged) is a miss and is replaced.

A loaded executable keeps the model's interface, not its optimised graph: `exe.graph` has the
inputs and outputs only, and `exe.profile()` times whole runs. That is why it is asked for
(`cache=True`), as OpenVINO's CACHE_DIR is, and not the default of `glow.compile`.

The folder is `<glow cache>/exe` (glow.fileio.cache_dir; GLOW_CACHE_DIR=off disables it),
bounded by $GLOW_EXE_CACHE_MB (default 2048): the least recently used files go first.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from .errors import GlowError

#: Bump when what a key covers changes.
VERSION = "glow-exe-cache/1"
DEFAULT_MB = 2048
#: GLOW_* variables that do not change what a compile makes (where caches are, what is shown).
UNRELATED = frozenset({"GLOW_CACHE_DIR", "GLOW_EXE_CACHE_MB", "GLOW_NO_PROGRESS", "GLOW_VERBOSE", "GLOW_DEBUG"})


def _model_bytes(model) -> bytes | None:
    """The serialised model, or None when it cannot key a cache (a Graph; tensors in files of
    their own, whose bytes the model file does not hold)."""
    onnx = sys.modules.get("onnx")
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                data = f.read()
        except OSError:
            return None  # the importer says what is wrong with the path
    elif isinstance(model, bytes):
        data = model
    elif onnx is not None and isinstance(model, onnx.ModelProto):
        data = model.SerializeToString()
    else:
        return None
    # External data is named by a "location" entry: a model without that string has none.
    return None if b"location" in data else data


def key(model, backend: str, settings: dict) -> str | None:
    """The cache key of compiling `model` for `backend` with `settings`, or None (not cached)."""
    from .saved import code_fingerprint

    data = _model_bytes(model)
    if data is None:
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("GLOW_") and k not in UNRELATED)
    h = hashlib.sha256(json.dumps([VERSION, code_fingerprint(), backend, settings, env], sort_keys=True,
                                  default=repr).encode())
    h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def _path(k: str) -> str | None:
    from .fileio import cache_dir

    d = cache_dir()
    return None if d is None else os.path.join(d, "exe", k + ".glowx")


def lookup(k: str, threads: int | None):
    """The executable cached under `k`, or None (absent, or no longer loadable here)."""
    from .saved import load

    path = _path(k)
    if path is None or not os.path.exists(path):
        return None
    try:
        exe = load(path, threads=threads)
    except GlowError:  # another CPU, a damaged file: compile again, and replace it
        return None
    os.utime(path)  # recently used
    return exe


def store(k: str, exe) -> None:
    """Save `exe` under `k` if it can be saved; then keep the folder within its bound. The cache
    is best-effort: an executable that cannot be saved, or a folder that cannot be written, only
    means the next compile compiles."""
    from .saved import save

    path = _path(k)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save(exe, path)
    except (GlowError, OSError):
        return
    _trim(os.path.dirname(path), limit_bytes())


def limit_bytes() -> int:
    """$GLOW_EXE_CACHE_MB in bytes (default 2048 MB); a bad value is a one-line InputError."""
    from .errors import InputError

    raw = os.environ.get("GLOW_EXE_CACHE_MB", "").strip()
    if not raw:
        return DEFAULT_MB << 20
    if not raw.isdigit():
        raise InputError(f"GLOW_EXE_CACHE_MB must be a whole number of megabytes, got {raw!r}")
    return int(raw) << 20


def _trim(folder: str, limit: int) -> None:
    """Delete the least recently used files until the folder holds at most `limit` bytes."""
    try:
        entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(folder)
                   if e.is_file() and e.name.endswith(".glowx")]
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
