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

import contextlib
import hashlib
import json
import os
import stat
import sys
import time

from .errors import GlowError

#: onnx_import.MAX_MODEL_BYTES (not imported from there: that module imports onnx, over a second).
MAX_MODEL_BYTES = 2**31 - 1
#: Bump when what a key covers changes.
VERSION = "glow-exe-cache/1"
DEFAULT_MB = 2048
RACY_NS = 2_000_000_000
#: GLOW_* variables that do not change what a compile makes (where caches are, what is shown).
UNRELATED = frozenset({"GLOW_CACHE_DIR", "GLOW_EXE_CACHE_MB", "GLOW_NO_PROGRESS", "GLOW_VERBOSE", "GLOW_DEBUG"})


def _digest(data: bytes) -> str | None:
    """sha256 of a serialised model, or None when its bytes cannot key a cache: tensors in files
    of their own are named by a "location" entry, so a model without that string has none."""
    return None if b"location" in data else hashlib.sha256(data).hexdigest()


def _model_digest(model) -> str | None:
    """The digest of the model, or None when it cannot key a cache (a Graph, external data)."""
    onnx = sys.modules.get("onnx")
    if isinstance(model, (str, os.PathLike)):
        return _file_digest(os.fspath(model))
    if isinstance(model, bytes):
        return _digest(model)
    if onnx is not None and isinstance(model, onnx.ModelProto):
        return _digest(model.SerializeToString())
    return None


def _file_digest(path: str) -> str | None:
    """A model file's digest, remembered beside the cache by the file's size, mtime and inode as
    git's index does: a hit then reads no byte of the model (hashing ResNet-50's 100 MB took
    0.1 s of a 0.3 s hit); any change to the file changes its mtime, and it is hashed again."""
    try:
        st = os.stat(path)
        real = os.path.realpath(path)
    except OSError:
        return None  # the importer says what is wrong with the path
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MODEL_BYTES:
        return None  # a FIFO or device could block; a file too big to import is refused unread
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    memo = _memo_path(real)
    if memo is not None:
        try:
            with open(memo) as f:
                entry = json.load(f)
            if entry.get("path") == real and entry.get("stamp") == stamp:
                return entry.get("digest")
        except (OSError, ValueError, AttributeError):
            pass
    try:
        with open(path, "rb") as f:
            digest = _digest(f.read())
    except OSError:
        return None
    # A file changed within the clock's granularity of its last change could keep its mtime
    # ("racy git"): only digests of files left alone for a while are remembered.
    if memo is not None and time.time_ns() - st.st_mtime_ns > RACY_NS:
        from .fileio import write_atomic

        text = json.dumps({"path": real, "stamp": stamp, "digest": digest}).encode()
        with contextlib.suppress(GlowError, OSError):  # best-effort: next time it hashes again
            os.makedirs(os.path.dirname(memo), exist_ok=True)
            write_atomic(memo, lambda f: f.write(text), what="model digest")
    return digest


def _folder() -> str | None:
    from .fileio import cache_dir

    d = cache_dir()
    return None if d is None else os.path.join(d, "exe")


def _memo_path(real: str) -> str | None:
    d = _folder()
    return None if d is None else os.path.join(d, "files", hashlib.sha256(real.encode()).hexdigest()[:32] + ".json")


def key(model, backend: str, settings: dict) -> str | None:
    """The cache key of compiling `model` for `backend` with `settings`, or None (not cached)."""
    from .saved import code_fingerprint

    digest = _model_digest(model)
    if digest is None:
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("GLOW_") and k not in UNRELATED)
    return hashlib.sha256(json.dumps([VERSION, code_fingerprint(), backend, settings, env, digest], sort_keys=True,
                                     default=repr).encode()).hexdigest()


def _path(k: str) -> str | None:
    d = _folder()
    return None if d is None else os.path.join(d, k + ".glowx")


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
    with contextlib.suppress(OSError):  # a read-only cache still serves
        os.utime(path)  # recently used: the last to be trimmed
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
        stats = [(e.stat(), e.path) for e in os.scandir(folder) if e.is_file() and e.name.endswith(".glowx")]
    except OSError:
        return
    entries = [(st.st_mtime, st.st_size, path) for st, path in stats]
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
