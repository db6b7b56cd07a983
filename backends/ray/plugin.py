"""Registers the ray backend (remote devices) through the same entry-point group as every plugin."""

import glow

from .backend import RayBackend


@glow.hookimpl
def glow_backends():
    return [RayBackend()]
