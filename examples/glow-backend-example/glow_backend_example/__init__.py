"""glow-backend-example: a pure-Python "accelerator" for glow, written only against `import glow`."""

from .backend import ExampleBackend

__all__ = ["ExampleBackend"]
