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
    return (isinstance(t, dt.TensorType) and t.is_static and t.numel > 0
            and renderer.supports_dtype(t.dtype))


def is_dynamic(node) -> bool:
    """A tensor op with values of unknown shape: decided once inputs are seen (shape
    specialisation, which may also fold control flow away). Non-tensor values (sequences,
    optionals) are never renderable, so never deferred."""
    values = [v for v in (*node.all_inputs, *node.outputs) if v is not None]
    if not all(isinstance(v.type, dt.TensorType) for v in values):
        return False
    return any(not v.type.is_static for v in values)


def renders(node, renderer) -> bool:
    if node.op.domain not in ("", "ai.onnx") or node.captures or node.op.has_subgraphs:
        return False
    # Empty constants are fine (an empty shape or axes list); empty data is not rendered.
    values = [v for v in (*node.inputs, *node.outputs)
              if v is not None and not (v.data is not None and getattr(v.type, "numel", 1) == 0)]
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
