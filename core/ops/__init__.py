"""The op table: one module per group of ops, each registering its ops when imported.

They are imported on first use of the table (any lookup in glow.ops.registry: get_op,
find_onnx_op, all_ops), not by importing this package: the Graph types, glow.load and `glow run`
of a cached model need no op definitions, and the modules take a third of a second to import.
"""

import importlib

from .registry import (  # noqa: F401
    REQUIRED,
    Attr,
    InferContext,
    OpDef,
    Tier,
    all_ops,
    find_onnx_op,
    get_op,
    op,
    register,
)

#: The modules that declare ops, imported in this order by `load_op_modules`.
OP_MODULES = ("activation", "attention", "cast", "control", "conv", "detection", "elementwise", "genai",
              "generator", "index", "logical", "loss", "matmul", "ml", "movement", "nbits", "normalization",
              "pool", "qlinear", "quant", "random", "recurrent", "reduce", "resize", "sequence", "signal",
              "softmax", "string", "tensor", "training")


def load_op_modules() -> None:
    for name in OP_MODULES:
        importlib.import_module(f".{name}", __name__)
