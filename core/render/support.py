"""What the C-style renderer can run natively: the support predicate backends build on.

A node is renderable when every value it touches is a static, non-empty tensor of an element
type the dialect stores, and its op has an elementwise rule (expr.py) or a kernel rule
(registry.py) whose own predicate accepts the node. Everything else is lowered by the core.
"""

from __future__ import annotations

from .. import dtypes as dt
from .cstyle import NARROW_TYPES
from .expr import renderable
from .registry import rule_for


def _tensor_ok(t, renderer) -> bool:
    # Empty tensors are fine: instructions writing nothing launch nothing, and kernels never
    # dereference an empty operand (their loops over it run zero times).
    return isinstance(t, dt.TensorType) and t.is_static and renderer.supports_dtype(t.dtype)


#: The ops that take or make the narrow formats (float8, float4, int4, int2): Cast converts, the
#: movement kernels move their bytes. No arithmetic is defined on them.
NARROW_OPS = frozenset({"Cast", "Identity", "Reshape", "Transpose", "Expand", "Slice", "Pad", "Concat",
                        "Gather", "Constant"})


def deferred(node, inputs_may_specialise: bool = True) -> bool:
    """glow.specialize's deferral rule (the cpu backend's too), with the renderer's code: a
    kernel rule, an elementwise rule, a lowering rule, or control flow (unrolled once its
    conditions and trip counts are known)."""
    from ..lowering import rule_for as lowering_rule
    from ..specialize import deferrable
    from .expr import CODE_FOR_OP

    name, domain = node.op.name, node.op.domain
    has_code = (node.op.has_subgraphs or rule_for(name, domain) is not None or (domain, name) in CODE_FOR_OP
                or lowering_rule(name, domain) is not None)
    return deferrable(node, has_code, inputs_may_specialise)


def renders(node, renderer) -> bool:
    if node.op.domain not in ("", "ai.onnx") or node.captures or node.op.has_subgraphs:
        return False
    values = [v for v in (*node.inputs, *node.outputs) if v is not None]
    if not all(_tensor_ok(v.type, renderer) for v in values):
        return False
    if node.op.name not in NARROW_OPS and any(v.type.dtype in NARROW_TYPES for v in values):
        return False
    rule = rule_for(node.op.name, node.op.domain)
    if rule is not None:
        return bool(rule.supports(node, renderer))
    ins = [v.type.dtype for v in node.inputs if v is not None]
    return len(node.outputs) == 1 and renderable(node.op, ins, node.outputs[0].type.dtype)


def native_ops() -> list[str]:
    from .expr import CODE_FOR_OP
    from .registry import KERNEL_RULES

    rule_for("")  # registers the kernel rules
    return sorted({name for _, name in (*CODE_FOR_OP, *KERNEL_RULES)})
