"""Glow for Python: a plugin-based multi-backend neural-network compiler for ONNX models."""

from . import dtypes
from .api import available_backends, compile, load
from .backend import (
    API_VERSION,
    BACKEND_API,
    Backend,
    CompileOptions,
    Device,
    Executable,
    Profile,
    ProfileRecord,
    TensorInfo,
)
from .errors import (
    BackendError,
    GlowError,
    GlowWarning,
    GraphError,
    InputError,
    InternalError,
    KernelNotWrittenError,
    LoweringError,
    ModelLoadError,
    UnsupportedOpError,
)
from .graph import Graph, GraphBuilder, Node, Value
from .hookspecs import hookimpl
from .interpreter import run_graph
from .quantizer import quantize
from .weight_quant import quantize_weights

__version__ = "0.1.0"


def __getattr__(name):
    # load_onnx lives with the importer, which needs onnx: over a second to import, so `import glow`
    # (the CLI's help, `glow backends`) does not pay for it until a model is read.
    if name == "load_onnx":
        from .onnx_import import load_onnx

        return load_onnx
    if name in ("Generator", "generate"):
        from . import generation as gen

        return getattr(gen, name)
    raise AttributeError(f"module 'glow' has no attribute '{name}'")


__all__ = [
    "API_VERSION", "BACKEND_API", "Backend", "BackendError", "CompileOptions", "Device", "Executable", "GlowError",
    "GlowWarning", "Graph", "GraphBuilder", "GraphError", "InputError", "InternalError", "KernelNotWrittenError",
    "LoweringError",
    "ModelLoadError", "Node", "Profile", "ProfileRecord", "TensorInfo", "UnsupportedOpError", "Value",
    "Generator", "available_backends", "compile", "dtypes", "generate", "hookimpl", "load",
    "load_onnx", "quantize", "quantize_weights", "run_graph",
]
