"""The hooks a glow plugin implements. This module is the whole plugin contract.

A plugin is a module (or object) registered under the entry-point group ``glow.backends``::

    [project.entry-points."glow.backends"]
    mydevice = "glow_backend_mydevice.plugin"

and the module implements hooks with ``glow.hookimpl``::

    import glow

    @glow.hookimpl
    def glow_backends():
        return [MyBackend()]

Built-in backends (reference, cpu, opencl, cuda, ray) register through exactly the same group.
glow calls every hook through pluggy (`pm.hook.<name>`), so whatever pluggy accepts counts: an
implementation under another name (`@glow.hookimpl(specname="glow_backends")`), several per plugin.
"""

from __future__ import annotations

import pluggy

PROJECT = "glow"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -- discovery ---------------------------------------------------------------------------------
@hookspec
def glow_backends() -> list:
    """Return the `glow.Backend` instances this plugin provides.

    Called once when glow builds its backend registry (every `glow` command). Keep it cheap:
    import heavy device libraries inside `Backend.devices()` or later, and let
    `Backend.check_available()` only look for them (`importlib.util.find_spec`), so a missing
    library makes the backend *unavailable with a reason* instead of breaking discovery, and
    listing backends costs no device library's import.
    """


# -- configuration -----------------------------------------------------------------------------
@hookspec
def glow_configure(config: dict) -> None:
    """Receive the parsed plugins.toml (``[plugins]``, ``[[devices]]``, ...) after discovery."""
