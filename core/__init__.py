"""Glow for Python: a plugin-based multi-backend neural-network compiler for ONNX models.

The names below are loaded on first use (PEP 562), so `import glow` costs almost nothing: the CLI's
`--version` and `glow backends`, and a plugin that only subclasses `glow.Backend`, do not pay for
NumPy, the op table or ONNX until something needs them.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> the module that defines it (relative to this package)
_WHERE = {
    "dtypes": None,  # the submodule itself
    "torch": None,  # the PyTorch frontend (docs/pytorch.md); torch itself loads when it is used
    "available_backends": "api", "compile": "api", "load": "api",
    "API_VERSION": "backend", "BACKEND_API": "backend", "Backend": "backend", "CompileOptions": "backend",
    "Device": "backend", "Executable": "backend", "Profile": "backend", "ProfileRecord": "backend",
    "TensorInfo": "backend",
    "BackendError": "errors", "GlowError": "errors", "GlowWarning": "errors", "GraphError": "errors",
    "InputError": "errors", "InternalError": "errors", "KernelNotWrittenError": "errors",
    "LoweringError": "errors", "ModelLoadError": "errors", "UnsupportedOpError": "errors",
    "Graph": "graph", "GraphBuilder": "graph", "Node": "graph", "Value": "graph",
    "hookimpl": "hookspecs",
    "run_graph": "interpreter",
    "quantize": "quantizer",
    "quantize_weights": "weight_quant",
    "load_onnx": "onnx_import",  # needs onnx: over a second to import
    "Generator": "generation", "generate": "generation",
}


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'glow' has no attribute '{name}'")
    module = _WHERE[name]
    value = importlib.import_module(f".{name if module is None else module}", __name__)
    if module is not None:
        value = getattr(value, name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "API_VERSION", "BACKEND_API", "Backend", "BackendError", "CompileOptions", "Device", "Executable",
    "GlowError", "GlowWarning", "Graph", "GraphBuilder", "GraphError", "InputError", "InternalError",
    "KernelNotWrittenError", "LoweringError", "ModelLoadError", "Node", "Profile", "ProfileRecord", "TensorInfo",
    "UnsupportedOpError", "Value", "Generator", "available_backends", "compile", "dtypes", "generate", "hookimpl",
    "load", "load_onnx", "quantize", "quantize_weights", "run_graph",
]
