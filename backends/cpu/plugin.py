"""Registers the CPU backend (through the same entry-point group as third-party plugins)."""

import glow

from .backend import CpuBackend


@glow.hookimpl
def glow_backends():
    return [CpuBackend()]
