"""Kernel templates, one module per family; importing this package registers their rules."""

from . import conv, elementwise, matmul, movement, pool, reduce, softmax, unpool  # noqa: F401
