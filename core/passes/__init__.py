"""Graph passes: a pass is a small named object (`name`, `apply(graph) -> graph`).

    from glow.passes import optimize_graph, run_passes, get_pass
    g = optimize_graph(g)                          # the default pipeline (pipeline.py)
    g = run_passes(g, [get_pass("cse"), get_pass("dce")])

With GLOW_VERIFY >= 2 the verifier runs after every pass. Passes are looked up by name through
`get_pass`, which imports the pass's module only when asked.
"""

from __future__ import annotations

import importlib

from .base import FixedPoint, Pass, PassLog, run_passes

# name -> (module, attribute): loaded on first use.
_PASSES = {
    "dce": ("dce", "DCE"),
    "cse": ("cse", "CSE"),
    "constant-fold": ("fold", "CONSTANT_FOLD"),
    "simplify": ("simplify", "SIMPLIFY"),
    "fold-batchnorm": ("batchnorm", "FOLD_BATCHNORM"),
    "sink-transpose-reshape": ("sinking", "SINK"),
    "cleanup": ("pipeline", "CLEANUP"),
    "fold-patterns": ("fold_patterns", "FOLD_PATTERNS"),
    "qdq": ("qdq", "QDQ"),
}


def pass_names() -> list[str]:
    return sorted(_PASSES)


def get_pass(name: str):
    try:
        module, attr = _PASSES[name]
    except KeyError:
        raise KeyError(f"unknown pass '{name}' (known: {', '.join(pass_names())})") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


def optimize_graph(graph, log=None, supports=None):
    from .pipeline import optimize_graph as run

    return run(graph, log, supports)


def cleanup_graph(graph, log=None):
    from .pipeline import cleanup_graph as run

    return run(graph, log)


def fuse_for_backend(graph, backend, log=None):
    from .pipeline import fuse_for_backend as run

    return run(graph, backend, log)


__all__ = ["FixedPoint", "Pass", "PassLog", "cleanup_graph", "fuse_for_backend", "get_pass",
           "optimize_graph", "pass_names", "run_passes"]
