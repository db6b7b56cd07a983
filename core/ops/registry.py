"""The op table: every op glow knows is declared once here, as an `OpDef`.

An OpDef says everything the rest of glow needs about an op:
  * its inputs and outputs, with type variables (`"X:T"`, `"axes:I?"` optional, `"inputs:T*"` variadic),
  * its attributes with defaults,
  * `infer`: the shape and dtype rule (an `InferContext` in, output types out),
  * `reference`: a NumPy implementation, `reference(*inputs, **attrs)`, written for clarity,
  * its groups (elementwise, reduce, movement, ...) and tier (high-level / kernel / primitive),
  * `lower`: its lowering rule (filled in by the lowering issue; None = not lowerable yet),
  * how ONNX spells it (`onnx_since`, and `from_onnx`, an adapter for older opset forms).

Ops imported from ONNX use the semantics of the newest ONNX opset; `from_onnx` rewrites older
forms (attributes that later became inputs, and so on) into that one.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError, UnsupportedOpError


class Tier(enum.Enum):
    HIGH = "high-level"  # what ONNX and users speak; lowers to lower tiers
    KERNEL = "kernel"  # commonly implemented natively for speed; still lowerable
    PRIMITIVE = "primitive"  # the floor every backend implements


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()

# Property groups: match on these rather than on lists of op names.
ELEMENTWISE = "elementwise"
UNARY = "unary"
BINARY = "binary"
COMPARE = "compare"
LOGICAL = "logical"
ACTIVATION = "activation"
REDUCE = "reduce"
MOVEMENT = "movement"
NN = "nn"
NORM = "normalization"
POOL = "pool"
MATMUL = "matmul"
CONTROL = "control-flow"
SEQUENCE = "sequence"
QUANT = "quantization"
RANDOM = "random"
STRING = "string"
GENERATOR = "generator"
SIGNAL = "signal"
TRAINING = "training"
ML = "ml"
#: Two-operand forms may swap their operands: f(a, b) == f(b, a), exactly (CSE matches either way).
COMMUTATIVE = "commutative"
#: The output is the input's bytes under another shape: no data moves (IR generation aliases it).
VIEW = "view"
#: Computes into an accumulator that an elementwise epilogue can finish in the same kernel
#: (`FuseActivation` fuses Relu(Conv(x)) into one node).
EPILOGUE_PRODUCER = "epilogue-producer"
#: A KV-cache op whose present outputs may be written over its past inputs (one buffer, as
#: onnxruntime-genai shares them): its kernels write only the new rows, and read past rows before
#: anything overwrites them (glow.ir.aliasable).
CACHE_UPDATE = "cache-update"
#: Each output element is a sum of many terms (products of the inputs). Its rounding error scales
#: with the size of the terms, not of the element: where the terms cancel (a DFT of a symmetric
#: signal, a matrix product of signed values) an exact 0 comes out as noise of a few units in the
#: last place of the output's large values, whichever order the sum runs in. The conformance kit
#: compares such outputs with an absolute tolerance scaled by the output's magnitude
#: (glow.testing.compare.accumulated_atol).
ACCUMULATES = "accumulates"

ATTR_KINDS = ("int", "float", "string", "ints", "floats", "strings", "tensor", "tensors", "graph",
              "graphs", "dtype", "type")


@dataclass(frozen=True, slots=True)
class Attr:
    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""

    def __post_init__(self):
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"attribute {self.name}: unknown kind {self.kind!r}")


@dataclass(frozen=True, slots=True)
class Port:
    """One input or output of an op, parsed from `"name:TypeVar"` plus `?` (optional) or `*` (variadic)."""

    name: str
    typevar: str | None
    optional: bool
    variadic: bool

    @staticmethod
    def parse(spec: str) -> Port:
        base = spec.rstrip("?*")
        suffix = spec[len(base):]
        # "x?" optional, "x*" variadic (one or more), "x*?" variadic that may be empty
        optional, variadic = "?" in suffix, "*" in suffix
        spec = base
        name, _, tv = spec.partition(":")
        return Port(name, tv or None, optional, variadic)


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    infer: Callable[[InferContext], Sequence[Any]]
    reference: Callable[..., Any]
    attrs: tuple[Attr, ...] = ()
    types: dict[str, frozenset] = field(default_factory=dict)
    groups: frozenset[str] = frozenset()
    tier: Tier = Tier.HIGH
    lower: Callable | None = None
    onnx_since: int | None = None
    onnx_name: str | None = None
    domain: str = ""
    from_onnx: Callable | None = None
    #: False for ops with hidden state or randomness: never constant-folded or merged by CSE.
    pure: bool = True
    #: For ops whose output *value* is known without input data (Shape, Size): ctx -> [array|None].
    known_value: Callable | None = None
    doc: str = ""

    def __reduce__(self):
        # Pickled by name: an op's rules are code, found again in the registry of the process
        # that unpickles (a graph sent to a remote device, glow.backends.ray).
        return get_op, (self.name, self.domain)

    def __post_init__(self):
        object.__setattr__(self, "in_ports", tuple(Port.parse(s) for s in self.inputs))
        object.__setattr__(self, "out_ports", tuple(Port.parse(s) for s in self.outputs))
        object.__setattr__(self, "attr_map", {a.name: a for a in self.attrs})
        object.__setattr__(self, "groups", frozenset(self.groups))
        for p in self.in_ports + self.out_ports:
            if p.typevar is not None and p.typevar not in self.types:
                raise ValueError(f"op {self.name}: port {p.name} uses undeclared type variable {p.typevar}")

    def in_group(self, group: str) -> bool:
        return group in self.groups

    @property
    def has_subgraphs(self) -> bool:
        return any(a.kind in ("graph", "graphs") for a in self.attrs)

    def __repr__(self):
        return f"OpDef({self.name})"


class InferContext:
    """What a shape/dtype rule sees of one node: input types, attributes, known input values."""

    def __init__(self, op: OpDef, node_name: str, inputs: Sequence, attrs: dict, num_outputs: int,
                 known: Sequence[np.ndarray | None] = ()):
        self.op = op
        self.node_name = node_name
        self.inputs = list(inputs)  # TensorType | SequenceType | OptionalType | None (absent)
        self.attrs = attrs
        self.num_outputs = num_outputs
        self._known = list(known) + [None] * (len(self.inputs) - len(known))

    def error(self, message: str) -> GraphError:
        """`raise ctx.error("...")`: a GraphError naming this node and op."""
        return GraphError(f"node '{self.node_name}' ({self.op.name}): {message}")

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def input(self, i: int):
        if not self.has(i):
            raise self.error(f"input {i} is required")
        return self.inputs[i]

    def shape(self, i: int):
        return self.input(i).shape

    def dtype(self, i: int):
        return self.input(i).dtype

    def rank(self, i: int):
        return self.input(i).rank

    def value(self, i: int) -> np.ndarray | None:
        """The input's value when known at compile time (a constant or folded from constants)."""
        return self._known[i] if i < len(self._known) else None

    def axis(self, axis: int, rank: int | None) -> int:
        """Normalise a possibly negative axis against `rank`, or raise naming the node."""
        if rank is None:
            return axis
        if not -rank <= axis < max(rank, 1):
            raise self.error(f"axis {axis} out of range for rank {rank}")
        return axis % rank if rank else 0


_REGISTRY: dict[tuple[str, str], OpDef] = {}
_ONNX: dict[tuple[str, str], OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    key = (opdef.domain, opdef.name)
    if key in _REGISTRY:
        raise ValueError(f"op {opdef.name} declared twice")
    _REGISTRY[key] = opdef
    if opdef.onnx_since is not None:
        okey = (opdef.domain, opdef.onnx_name or opdef.name)
        if okey in _ONNX:
            raise ValueError(f"ONNX op {okey[1]} mapped twice")
        _ONNX[okey] = opdef
    return opdef


def op(name: str, **kw) -> OpDef:
    """Declare and register an op: `op("Relu", inputs=("X:T",), outputs=("Y:T",), ...)`."""
    return register(OpDef(name=name, **kw))


_loaded = False
_load_lock = threading.RLock()


def _ensure_loaded() -> None:
    """Import the op modules (glow.ops.OP_MODULES) on the table's first use. Re-entrant: an op
    module that looks up an op while it loads finds the modules before it in place."""
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            from . import load_op_modules

            load_op_modules()
            _loaded = True


def get_op(name: str, domain: str = "") -> OpDef:
    _ensure_loaded()
    try:
        return _REGISTRY[(domain, name)]
    except KeyError:
        raise UnsupportedOpError(f"unknown op '{name}'", {name: 1}) from None


def find_onnx_op(op_type: str, domain: str = "") -> OpDef | None:
    _ensure_loaded()
    if domain == "ai.onnx":
        domain = ""
    return _ONNX.get((domain, op_type))


def all_ops() -> list[OpDef]:
    _ensure_loaded()
    return sorted(_REGISTRY.values(), key=lambda o: (o.domain, o.name))


def canonical_attr(attr: Attr, value, where: str):
    """Coerce an attribute value to its canonical Python form, or raise naming `where`."""
    try:
        k = attr.kind
        if value is None:
            return None
        if k == "int":
            if isinstance(value, (bool, np.bool_)):
                return int(value)
            if isinstance(value, (float, np.floating)) and float(value) != int(value):
                raise ValueError
            return int(value)
        if k == "float":
            return float(value)
        if k == "string":
            return value.decode() if isinstance(value, bytes) else str(value)
        if k == "ints":
            return tuple(int(v) for v in value)
        if k == "floats":
            return tuple(float(v) for v in value)
        if k == "strings":
            return tuple(v.decode() if isinstance(v, bytes) else str(v) for v in value)
        if k == "dtype":
            return value if isinstance(value, dt.DType) else (
                dt.from_onnx(value) if isinstance(value, (int, np.integer)) else dt.from_name(value))
        return value
    except (TypeError, ValueError):
        raise GraphError(f"{where}: attribute '{attr.name}' expects {attr.kind}, got {value!r}") from None
    except GraphError as e:
        raise GraphError(f"{where}: attribute '{attr.name}': {e}") from None
