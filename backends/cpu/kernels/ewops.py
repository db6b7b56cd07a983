"""The elementwise op table: (domain, op name) -> a value-level emitter and its type predicate.

An emitter computes one op at a loop position, over scalars or vectors (`Lanes`, lanes.py):
`emit(L, args, in_types, out_type, attrs)` returns the result in the compute type of `out_type`.
The emitters register themselves with `@op(name, types, check=)`: ewarith.py (arithmetic,
comparisons, logic, Where), ewmath.py (math and activations), cast.py (Cast) and ewquant.py
(Requantize). The table is filled on first use, when `table()` imports them; registering an op
that glow.ops does not declare raises.
"""

from __future__ import annotations

from glow import dtypes as dt

from .lanes import NUMERIC, Lanes

#: (domain, op name) -> (emit(L, args, in_types, out_type, attrs), supports(in, out, attrs))
OPS: dict[tuple[str, str], tuple] = {}
#: Ops that pick one of their inputs: a bfloat16 result needs no rounding.
_SELECTS = frozenset({("", "Identity"), ("", "Where")})
EMITTER_MODULES = ("ewarith", "ewmath", "cast", "ewquant")
_loaded = False


def op(name, types=NUMERIC, check=None, domain=""):
    """Register `emit` for the op (domain, name) on element types `types` (and `check(ins, out,
    attrs)` when given)."""
    from glow.ops import get_op

    get_op(name, domain)  # an emitter for an op the table does not declare is a bug: fail at import

    def register(fn):
        def supports(ins, out, attrs):
            ok = all(t is None or t in types for t in ins) and (out in types or out == dt.bool_)
            return ok and (check is None or check(ins, out, attrs))

        if (domain, name) in OPS:
            raise ValueError(f"an elementwise emitter for '{name}' is already registered")
        OPS[(domain, name)] = (fn, supports)
        return fn

    return register


def table() -> dict[tuple[str, str], tuple]:
    """The whole table (the emitter modules register into it on first use)."""
    global _loaded
    if not _loaded:
        import importlib

        for m in EMITTER_MODULES:
            importlib.import_module(f"{__package__}.{m}")
        _loaded = True
    return OPS


def emitter(name: str, domain: str = ""):
    """The raw emitter of an op (no bfloat16 rounding), e.g. a reduction's combine step."""
    return table()[(domain, name)][0]


def supports(op, in_types, out_type, attrs) -> bool:
    """Whether the table computes `op` (an OpDef) for these element types and attributes."""
    entry = table().get((op.domain, op.name))
    return entry is not None and entry[1](in_types, out_type, attrs)


def apply(L: Lanes, op, args, in_types, out_type, attrs):
    """`op` (an OpDef) at the current position; a bfloat16 result rounded as NumPy rounds it."""
    key = (op.domain, op.name)
    v = table()[key][0](L, args, in_types, out_type, attrs)
    if out_type == dt.bfloat16 and key not in _SELECTS:
        v = L.round_bf16(v)
    return v


__all__ = ["OPS", "apply", "emitter", "op", "supports", "table"]
