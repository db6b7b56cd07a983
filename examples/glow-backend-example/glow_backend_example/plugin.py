"""The plugin module named by the entry point: one hook, returning the backend."""

import glow

from .backend import ExampleBackend


@glow.hookimpl
def glow_backends():
    return [ExampleBackend()]
