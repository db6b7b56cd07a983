"""The ATen op table: each FX call target mapped to glow nodes in exactly one place.

A rule is `fn(cx, a) -> Value | tuple`, where `a` holds the call's arguments bound to the ATen
schema's names (defaults filled in) and `cx` is the importer (glow.torch.importer.Importer).
Keys are the overload's name without the `aten.` namespace ("add.Tensor", "relu.default"), or
"operator.<name>" for the Python operators FX records (getitem, SymInt arithmetic). A rule raises
`Unsupported(reason)` for a form it does not map (that node then runs eager, or the strict import
names it); the importer's support check runs the rule itself, so "supported" means "imports".
"""

from __future__ import annotations

import operator

#: key -> rule
ATEN: dict = {}


class Unsupported(Exception):
    """A rule's reason for not importing this call (a form, dtype or argument it does not map)."""


def aten(*keys):
    """Register a rule under one or more keys; a key registered twice is a bug, so it raises."""

    def deco(fn):
        for k in keys:
            if k in ATEN:
                raise ValueError(f"ATen rule '{k}' registered twice")
            ATEN[k] = fn
        return fn

    return deco


def target_key(target) -> str:
    """The table key of an FX call target."""
    if getattr(target, "namespace", None) is not None and hasattr(target, "_overloadname"):
        name = str(target)  # "aten.add.Tensor"
        return name[5:] if name.startswith("aten.") else name
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    return getattr(target, "__qualname__", None) or str(target)


def bind(target, args, kwargs) -> dict:
    """The call's arguments by schema name, with the schema's defaults filled in."""
    schema = getattr(target, "_schema", None)
    if schema is None:  # a Python operator: positional only
        return {i: v for i, v in enumerate(args)}
    out = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
        else:
            out[arg.name] = None
    return out


#: The Python operators FX records on SymInts (sizes computed in the graph) and tuples.
SYM_BINARY = {operator.add: "Add", operator.sub: "Sub", operator.mul: "Mul", operator.floordiv: "Div"}
