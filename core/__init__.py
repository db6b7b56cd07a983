"""Glow for Python: a plugin-based multi-backend neural-network compiler for ONNX models."""

from . import dtypes
from .api import available_backends, compile
from .backend import API_VERSION, Backend, CompileOptions, Device, Executable
from .errors import (
    BackendError,
    GlowError,
    GraphError,
    InputError,
    InternalError,
    LoweringError,
    ModelLoadError,
    UnsupportedOpError,
)
from .graph import Graph, GraphBuilder, Node, Value
from .hookspecs import hookimpl
from .interpreter import run_graph
from .onnx_import import load_onnx

__version__ = "0.1.0"

__all__ = [
    "API_VERSION", "Backend", "BackendError", "CompileOptions", "Device", "Executable", "GlowError",
    "Graph", "GraphBuilder", "GraphError", "InputError", "InternalError", "LoweringError",
    "ModelLoadError", "Node", "UnsupportedOpError", "Value", "available_backends", "compile", "dtypes", "hookimpl",
    "load_onnx", "run_graph",
]
