"""The exceptions glow raises for bad input. Each message is one line naming the problem.

The CLI turns any `GlowError` into exit code 2 and that line; anything else is a bug in glow.
"""


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
    """Ops that cannot be lowered to what a backend supports (all of them named)."""
