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
    """An op whose index operands (Slice bounds, Pad widths, axes, shapes) are computed at run
    time: renderable once specialised on those (small integer) values. A kernel op takes them
    from anywhere; an op the core lowers only when they are graph inputs, the values that
    specialisation makes constants (Col2Im's image and block shapes, STFT's frame length)."""
    from ..lowering import rule_for as lowering_rule
    from ..specialize import specializable

    small = [v for v in node.inputs[1:] if v is not None and v.data is None and specializable(v.type)]
    if rule_for(node.op.name, node.op.domain) is not None:
        return bool(small)
    return lowering_rule(node.op.name, node.op.domain) is not None and any(v.node is None for v in small)


#: The ops that take or make the narrow formats (float8, float4, int4, int2): Cast converts, the
#: movement kernels move their bytes. No arithmetic is defined on them.
NARROW_OPS = frozenset({"Cast", "Identity", "Reshape", "Transpose", "Expand", "Slice", "Pad", "Concat",
                        "Gather", "Constant"})


def deferred(node) -> bool:
    """Accepted now and decided once inputs are seen (shape specialisation): a node of unknown
    shapes or run-time index operands whose op specialisation can make renderable, i.e. not a
    host op (strings, sequences, data-dependent output shapes) and with a kernel, an elementwise
    rule or a lowering rule. Anything else is refused now, so the partitioner can place it on
    another device."""
    from ..lowering import is_host_op
    from ..lowering import rule_for as lowering_rule
    from .expr import CODE_FOR_OP

    if not (is_dynamic(node) or needs_values(node)) or is_host_op(node.op) or not node.op.pure:
        return False
    name, domain = node.op.name, node.op.domain
    return (node.op.has_subgraphs or rule_for(name, domain) is not None or (domain, name) in CODE_FOR_OP
            or lowering_rule(name, domain) is not None)


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
