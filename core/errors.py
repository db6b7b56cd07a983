"""The exceptions glow raises for bad input. Each message is one line naming the problem.

The CLI turns any `GlowError` into exit code 2 and that line. Anything else escaping import,
compile or run is a bug in glow and becomes `InternalError` ("glow bug", with the node it was
working on): exit code 1 and one line, `GLOW_DEBUG=1` for the traceback.
"""

from contextlib import contextmanager


class GlowError(Exception):
    """Base class: bad input (model, inputs, options) rather than a glow bug."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ModelLoadError(GlowError):
    """The model file is missing, unreadable, not ONNX, or refers to data it may not read."""


class UnsupportedOpError(GlowError):
    """The model uses ops glow does not know. `ops` maps each op name to its count."""

    def __init__(self, message: str, ops: dict | None = None):
        super().__init__(message)
        self.ops = dict(ops or {})


class GraphError(GlowError):
    """A node or graph is ill-typed or malformed (named in the message)."""


class InputError(GlowError):
    """Run-time inputs do not match the graph: unknown/missing name, wrong shape or dtype."""


class BackendError(GlowError):
    """A backend is unknown, unavailable (with its reason), or cannot compile the graph."""


class LoweringError(BackendError):
    """Ops that cannot be lowered to what a backend supports (all of them named). `ops` maps each
    such op name to its count of nodes (empty for a lowering that did not settle)."""

    def __init__(self, message: str, ops: dict | None = None):
        super().__init__(message)
        self.ops = dict(ops or {})


class KernelNotWrittenError(BackendError, NotImplementedError):
    """A backend's kernel that its author has not written yet (the stubs `glow new-backend`
    writes raise it): the backend's work in progress, not a glow bug. `op` is the op's name,
    `backend` who raises it; the conformance kit groups failures by `op` and says which kernels
    to write first."""

    def __init__(self, op: str, backend: str, where: str = ""):
        self.op, self.backend = str(op), str(backend)
        super().__init__(f"{backend}: the kernel for '{op}' is not written yet"
                         + (f" (write it in {where})" if where else ""))

    def __reduce__(self):  # the kit's worker processes send it back whole
        return type(self), (self.op, self.backend)


class GlowWarning(UserWarning):
    """Something glow did instead of what was asked or declared, and went on: a model's declared
    output shape that glow's inference (the ONNX spec) contradicts, nodes a backend cannot run
    moved to the host. One line naming the node, op or backend. `warnings.simplefilter("error",
    glow.GlowWarning)` turns them into errors; the CLI prints them as `glow: warning: ...`."""


def warn(message: str) -> None:
    """Issue a GlowWarning attributed to the caller's line outside glow (where the user called
    compile or run), so that Python's once-per-location filter and its report point there."""
    import os
    import sys
    import warnings

    ours = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (sys.modules[__package__], sys.modules.get(f"{__package__}.backends")) if m is not None)
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(ours):
        frame, level = frame.f_back, level + 1
    warnings.warn(" ".join(str(message).split()), GlowWarning, stacklevel=level)


class InternalError(Exception):
    """A bug in glow (or in a backend plugin), not in the input: an exception other than a
    GlowError escaped compile, run or import. Deliberately not a GlowError, so that callers who
    catch bad input do not swallow it. The original exception is its `__cause__`; `detail` is
    the message without the "glow bug: " prefix (the CLI prints its own)."""

    def __init__(self, detail: str):
        self.detail = " ".join(str(detail).split())
        super().__init__(f"glow bug: {self.detail}")


def as_internal_error(exc: BaseException, doing: str) -> InternalError:
    """`exc` (a non-GlowError escaping `doing`, e.g. "compiling for backend 'cpu'") as an
    InternalError naming the innermost graph node, IR instruction or ONNX node on its traceback,
    and the code line it came from, so that a bug report says where without a traceback."""
    where, line = _traceback_context(exc)
    original = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return InternalError(f"{doing} failed{' in ' + where if where else ''}: {original}"
                         f"{' [' + line + ']' if line else ''}")


@contextmanager
def internal_errors(doing: str):
    """The public boundary: GlowErrors (bad input) and InternalErrors pass through unchanged;
    any other Exception becomes an InternalError chained to it. MemoryError passes through (the
    memory budget turns run-away allocations into InputErrors before they happen; what still
    escapes is the caller's to see as such), and so does anything that is not an Exception
    (KeyboardInterrupt, SystemExit)."""
    try:
        yield
    except (GlowError, InternalError, MemoryError, BrokenPipeError):
        raise  # BrokenPipeError: `glow ... | head` closed the pipe; the CLI ends quietly
    except Exception as e:
        raise as_internal_error(e, doing) from e


def _traceback_context(exc: BaseException) -> tuple[str, str]:
    """(what the innermost frame that holds a node was working on, "file.py:line" of the raise)."""
    import os
    import traceback

    frames = list(traceback.walk_tb(exc.__traceback__))
    line = ""
    if frames:
        f, lineno = frames[-1]
        line = f"{os.path.basename(f.f_code.co_filename)}:{lineno}"
    for f, _ in reversed(frames):
        where = _describe_locals(f.f_locals)
        if where:
            return where, line
    return "", line


#: Local variable names that usually hold the node being worked on, searched first.
_NODE_LOCALS = ("node", "n", "instr", "i", "inst")


def _describe_locals(local_vars: dict) -> str:
    names = [k for k in _NODE_LOCALS if k in local_vars] + [k for k in local_vars if k not in _NODE_LOCALS]
    for k in names:
        where = _describe(local_vars[k])
        if where:
            return where
    return ""


def _describe(obj) -> str:
    """"node 'name' (op X)" for a glow Node, an IR instruction or an ONNX NodeProto; else ""."""
    try:
        from .graph import Node
        from .ir.instr import Instr

        if isinstance(obj, Node):
            return f"node '{obj.name}' (op {obj.op.name})"
        if isinstance(obj, Instr):
            return f"instruction '{obj.name}' (op {obj.opname})"
        import onnx

        if isinstance(obj, onnx.NodeProto):
            return f"ONNX node '{obj.name or obj.op_type}' (op {obj.op_type})"
    except Exception:  # noqa: BLE001 - describing a bug must never raise another one
        return ""
    return ""
