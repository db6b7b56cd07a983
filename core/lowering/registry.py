"""The table of lowering rules, keyed by (domain, op name): one rule per op."""

from __future__ import annotations

from collections.abc import Callable

LOWERINGS: dict[tuple[str, str], Callable] = {}


def lowering(op_name: str, domain: str = ""):
    """Register `fn(rb, node, inputs) -> [Value] | None` as the lowering rule of `op_name`.

    The rule builds replacement nodes with `rb` (a `glow.rewrite.Rebuilder`; `rb.emit1(op, ins,
    attrs)`) from `inputs` (the node's inputs in the new graph) and returns one value per output
    of the node, with the same types. It returns None when it cannot lower this instance (for
    example when a shape it needs is unknown): the driver then reports the op.
    """

    def deco(fn):
        from ..ops import get_op

        get_op(op_name, domain)  # registering a rule for an unknown op is a bug: fail at import
        if (domain, op_name) in LOWERINGS:
            raise ValueError(f"lowering rule for {op_name} registered twice")
        LOWERINGS[(domain, op_name)] = fn
        return fn

    return deco


def rule_for(op_name: str, domain: str = ""):
    _load_rules()
    return LOWERINGS.get((domain, op_name))


_loaded = False


def _load_rules():
    global _loaded
    if not _loaded:
        _loaded = True
        from . import rules  # noqa: F401  (registration side effects)
