"""What the C-style renderer can run natively: the support predicate backends build on.

A node is renderable when every value it touches is a static, non-empty tensor of an element
type the dialect stores, and its op has an elementwise rule (expr.py) or a kernel rule
(registry.py) whose own predicate accepts the node. Everything else is lowered by the core.
"""

from __future__ import annotations

from .. import dtypes as dt
from .expr import renderable
from .registry import rule_for


def _tensor_ok(t, renderer) -> bool:
    # Empty tensors are fine: instructions writing nothing launch nothing, and kernels never
    # dereference an empty operand (their loops over it run zero times).
    return isinstance(t, dt.TensorType) and t.is_static and renderer.supports_dtype(t.dtype)


def is_dynamic(node) -> bool:
    """A tensor op with values of unknown shape: decided once inputs are seen (shape
    specialisation, which may also fold control flow away). Non-tensor values (sequences,
    optionals) are never renderable, so never deferred."""
    values = [v for v in (*node.all_inputs, *node.outputs) if v is not None]
    if not all(isinstance(v.type, dt.TensorType) for v in values):
        return False
    if node.op.has_subgraphs and all(v.type.is_static for v in node.all_inputs if v is not None):
        return False  # control flow over static inputs: its lowering rule unrolls it if it can
    return any(not v.type.is_static for v in values)


def needs_values(node) -> bool:
    """A kernel op whose index operands (Slice bounds, Pad widths, axes, shapes) are computed at
    run time: renderable once specialised on those (small integer) values."""
    from ..specialize import VALUE_LIMIT

    if rule_for(node.op.name) is None:
        return False
    return any(v is not None and v.data is None and isinstance(v.type, dt.TensorType) and v.type.is_static
               and v.type.dtype in (dt.int32, dt.int64) and v.type.numel <= VALUE_LIMIT
               for v in node.inputs[1:])


def renders(node, renderer) -> bool:
    if node.op.domain not in ("", "ai.onnx") or node.captures or node.op.has_subgraphs:
        return False
    values = [v for v in (*node.inputs, *node.outputs) if v is not None]
    if not all(_tensor_ok(v.type, renderer) for v in values):
        return False
    rule = rule_for(node.op.name)
    if rule is not None:
        return bool(rule.supports(node, renderer))
    ins = [v.type.dtype for v in node.inputs if v is not None]
    return len(node.outputs) == 1 and renderable(node.op.name, ins, node.outputs[0].type.dtype)


def native_ops() -> list[str]:
    from .expr import CODE_FOR_OP
    from .registry import KERNEL_RULES

    rule_for("")  # registers the kernel rules
    return sorted(set(CODE_FOR_OP) | set(KERNEL_RULES))
