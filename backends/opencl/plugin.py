"""Registers the OpenCL backend (through the `glow.backends` entry-point group)."""

import glow

from .backend import OpenCLBackend


@glow.hookimpl
def glow_backends():
    return [OpenCLBackend()]
