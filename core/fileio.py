"""Files the user names: read bounded and only if regular (models, external data, configs), written
atomically (outputs, reports), with errors that name the path."""

from __future__ import annotations

import mmap
import os
import stat
import tempfile
from typing import TYPE_CHECKING

from .errors import InputError, ModelLoadError

if TYPE_CHECKING:  # only map_regular_file needs NumPy (glow backends and --version read plugins.toml)
    import numpy as np


def umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: What `open(path, "w")` would give the file (mkstemp makes it private, 0o600).
_FILE_MODE = 0o666 & ~umask()

def write_atomic(path: str, write, suffix: str = "", what: str = "output file"):
    """`write(binary file)` into a temporary file next to `path`, then rename it onto `path`:
    no partial file is ever left at `path` or beside it. A missing or unwritable folder, or a
    folder at `path`, is an InputError naming the path (not an OSError from deep inside)."""
    fd, tmp = _temp_beside(path, suffix, what)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"{path}: cannot write the {what}: {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_writable(path: str, what: str = "output file"):
    """Fail now, before the work that produces it, if `path` cannot be written (InputError)."""
    fd, tmp = _temp_beside(path, "", what)
    os.close(fd)
    os.unlink(tmp)


def _temp_beside(path: str, suffix: str, what: str) -> tuple[int, str]:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{path}: folder {folder} does not exist")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a folder, not a file to write the {what} to")
    try:
        return tempfile.mkstemp(suffix=suffix, prefix=".glow-", dir=folder)
    except OSError as e:
        raise InputError(f"{path}: cannot write the {what} in {folder}: {e.strerror}") from None


def read_regular_file(path: str, limit: int, what: str, offset: int = 0, length: int | None = None,
                      limit_note: str = "", error: type = ModelLoadError, into=None):
    """`length` bytes (default: to the end) from `offset` of the regular file `path` (holding
    `what`, e.g. "an ONNX model"), checked before reading: a FIFO, a device (/dev/zero) or a
    folder is refused instead of hanging or reading without end, and so is a read past the end
    of the file or of more than `limit` bytes. `error` (ModelLoadError unless given) names the
    file. The file is opened non-blocking and checked through its descriptor, so a FIFO swapped
    in after a check cannot block the open either. `into(n)`, when given, makes the writable
    buffer the n bytes are read into (returned instead of bytes: e.g. an aligned array)."""
    too_many = limit_note or f"bytes {what} may have"
    fd, st = _open_regular(path, what, error)
    with open(fd, "rb", buffering=0) as f:
        if length is None:
            if offset > st.st_size:
                raise error(f"{path}: offset {offset} is past the end of the file ({st.st_size} bytes)")
            length = st.st_size - offset
            if length > limit:
                raise error(f"{path}: {length} bytes from offset {offset} to the end of the file, more "
                            f"than the {limit} {too_many}")
        elif length > limit:
            raise error(f"{path}: length {length} is more than the {limit} {too_many}")
        if offset + length > st.st_size:
            raise error(f"{path}: too short: {length} bytes at offset {offset} asked for, the file has "
                        f"{st.st_size}")
        try:
            f.seek(offset)
            if into is None:
                data = f.read(length)
                got = len(data)
            else:
                data, got = into(length), 0
                view = memoryview(data).cast("B")
                while got < length:
                    n = f.readinto(view[got:])
                    if not n:
                        break
                    got += n
        except OSError as e:
            raise error(f"{path}: cannot read: {e.strerror}") from None
    if got != length:  # the file shrank while we read it
        raise error(f"{path}: too short: {length} bytes at offset {offset} asked for, read {got}")
    return data


def _open_regular(path: str, what: str, error: type) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `path` (opened non-blocking, checked through the
    descriptor) and its stat; anything else is `error` naming the path."""
    if "\0" in path:
        raise error(f"{path!r}: the path of {what} contains a NUL character")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a file with {what}") from None
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{path}: is a folder, not a file with {what}")
        raise error(f"{path}: is {_file_kind(st.st_mode)}, not a regular file (glow reads {what} "
                    "only from one)")
    return fd, st


def map_regular_file(path: str, limit: int, what: str, error: type = ModelLoadError) -> np.ndarray:
    """The whole regular file `path` memory-mapped read-only, as a uint8 array whose pages are
    read when first touched: big files are used where they lie (a saved executable's weights).
    Checked as `read_regular_file` checks. The mapping stays valid when the file is replaced
    (glow writes files by renaming a new one into place); truncating it in place while it is
    mapped is not supported."""
    import numpy as np

    fd, st = _open_regular(path, what, error)
    try:
        if st.st_size > limit:
            raise error(f"{path}: {st.st_size} bytes, more than the {limit} bytes {what} may have")
        if st.st_size == 0:
            return np.zeros(0, np.uint8)
        try:
            m = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise error(f"{path}: cannot map: {getattr(e, 'strerror', None) or e}") from None
    finally:
        os.close(fd)
    return np.frombuffer(m, np.uint8)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def cache_dir() -> str | None:
    """glow's on-disk cache folder: $GLOW_CACHE_DIR, else ~/.cache/glow; GLOW_CACHE_DIR=off (or 0,
    none) disables every cache (the cpu backend's objects, glow.compile's executables)."""
    d = os.environ.get("GLOW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "glow")
    return None if d.lower() in ("off", "0", "none") else d
