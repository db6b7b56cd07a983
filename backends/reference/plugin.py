"""Registers the reference backends (through the same entry-point group as third-party plugins)."""

import glow

from .backend import ReferenceBackend, ReferenceIRBackend


@glow.hookimpl
def glow_backends():
    return [ReferenceBackend(), ReferenceIRBackend()]
