"""Registers the CUDA backend (through the `glow.backends` entry-point group)."""

import glow

from .backend import CudaBackend


@glow.hookimpl
def glow_backends():
    return [CudaBackend()]
