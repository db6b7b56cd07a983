"""The kernel table: op name -> how to render a kernel instruction of that op (JAX-style rules).

    @kernel_rule("MatMul", supports=lambda node, r: ...)
    def render_matmul(w, instr, params): ...     # fills the KernelWriter

Elementwise ops are not listed here: every op with a rule in expr.CODE_FOR_OP renders through the
shared elementwise kernel (kernels/elementwise.py). `supports(node, renderer)` is asked on graph
nodes (types and attributes known, shapes static) and decides what the backend claims natively.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelRule:
    op: str
    render: Callable  # (KernelWriter, Instr, DeviceParams) -> None
    supports: Callable  # (Node, CStyleRenderer) -> bool


KERNEL_RULES: dict[str, KernelRule] = {}


def kernel_rule(op: str, supports: Callable | None = None):
    def register(fn):
        if op in KERNEL_RULES:
            raise ValueError(f"a kernel rule for '{op}' is already registered")
        KERNEL_RULES[op] = KernelRule(op, fn, supports or (lambda node, r: True))
        return fn

    return register


def rule_for(op: str) -> KernelRule | None:
    from . import kernels  # noqa: F401 - registers the rules on first use

    return KERNEL_RULES.get(op)
