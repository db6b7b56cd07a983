"""The kernel table: (domain, op name) -> how to render a kernel instruction of that op (JAX-style rules).

    @kernel_rule("MatMul", supports=lambda node, r: ...)
    def render_matmul(w, instr, params): ...     # fills the KernelWriter

Elementwise ops are not listed here: every op with a rule in expr.CODE_FOR_OP renders through the
shared elementwise kernel (kernels/elementwise.py). `supports(node, renderer)` is asked on graph
nodes (types and attributes known, shapes static) and decides what the backend claims natively.
Registering a rule for an op the op table does not declare raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelRule:
    domain: str
    op: str
    render: Callable  # (KernelWriter, Instr, DeviceParams) -> None
    supports: Callable  # (Node, CStyleRenderer) -> bool


KERNEL_RULES: dict[tuple[str, str], KernelRule] = {}


def kernel_rule(op: str, supports: Callable | None = None, domain: str = ""):
    from ..ops import get_op

    get_op(op, domain)  # a rule for an op the table does not declare is a bug: fail at import

    def register(fn):
        if (domain, op) in KERNEL_RULES:
            raise ValueError(f"a kernel rule for '{op}' is already registered")
        KERNEL_RULES[(domain, op)] = KernelRule(domain, op, fn, supports or (lambda node, r: True))
        return fn

    return register


def rule_for(op: str, domain: str = "") -> KernelRule | None:
    load_rules()
    return KERNEL_RULES.get((domain, op))


def load_rules() -> dict[tuple[str, str], KernelRule]:
    """The whole table (importing the kernel modules registers their rules on first use)."""
    from . import kernels  # noqa: F401

    return KERNEL_RULES
