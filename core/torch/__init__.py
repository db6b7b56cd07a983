"""The PyTorch frontend: FX / ATen graphs -> glow `Graph`, with no ONNX in between.

    torch.compile(model, backend="glow", options={"backend": "cpu", "threads": 2})
    glow.compile(torch.export.export(model, args))      # ahead of time; `glow run model.pt2`
    glow.torch.explain(model, *args)                    # what ran on glow, what stayed eager, why

The `glow` backend reaches torch through the `torch_dynamo_backends` entry point, so it works
without importing glow first. Nothing here imports torch until it is used: `import glow` and
`import glow.torch` stay torch-free (torch takes seconds to import). docs/pytorch.md.
"""

from __future__ import annotations

__all__ = ["backend", "compile_exported", "explain", "import_exported", "load_pt2"]


def __getattr__(name):
    # each public name loads its module (and torch) on first use
    if name == "backend":
        from .dynamo import backend

        return backend
    if name == "explain":
        from .report import explain

        return explain
    if name in ("compile_exported", "import_exported", "load_pt2"):
        from . import export

        return getattr(export, name)
    raise AttributeError(f"module 'glow.torch' has no attribute '{name}'")
