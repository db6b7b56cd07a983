"""The graph IR: values, nodes, graphs, and the builder that makes them.

Ownership: a `Graph` is immutable once built (tuples all the way down); passes build new graphs
with a `GraphBuilder`. `Value`s are compared by identity. Constants (weights) are values carrying
`data`; graph inputs (placeholders) are values with neither a producer nor data.

Every node is type-checked when it is added: input count, element types against the op's type
variables, attributes against the op's declaration, then the op's shape/dtype rule. A mismatch is
a `GraphError` naming the node and the op.
"""

from __future__ import annotations

import itertools
import types as _pytypes
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as dt
from .aligned import aligned
from .errors import GraphError
from .limits import check_type
from .ops.registry import REQUIRED, InferContext, OpDef, canonical_attr, get_op

#: Values up to this many elements computed from constants are remembered (`Value.known`), so that
#: shape rules can see through Shape -> Gather -> Concat -> Reshape chains.
KNOWN_VALUE_LIMIT = 4096


class Value:
    """An SSA value: a graph input, a constant, or the output of a node."""

    __slots__ = ("name", "type", "node", "index", "data", "known")

    def __init__(self, name: str, type, node: Node | None = None, index: int = 0,
                 data: np.ndarray | None = None, known: np.ndarray | None = None):
        self.name = name
        self.type = type
        self.node = node
        self.index = index
        self.data = _read_only(data)
        self.known = self.data if data is not None else _read_only(known)

    @property
    def kind(self) -> str:
        if self.node is not None:
            return "node"
        return "constant" if self.data is not None else "input"

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self):
        return f"%{self.name}: {self.type}"

    # Pickling (a graph sent to a remote device): the arrays come back read-only, as built.
    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, _read_only(v) if k in ("data", "known") else v)


def _read_only(a):
    """A read-only view of a constant's (or known value's) array: graphs share constants (rebuild
    keeps them), so a write into one would change every compile that holds it. Writing raises.
    A large one is made aligned first (glow.aligned)."""
    a = aligned(a)
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False, slots=True)
class Node:
    op: OpDef
    name: str
    inputs: tuple  # Value | None (absent optional input)
    attrs: Mapping
    outputs: tuple = ()
    #: Outer-scope values read by this node's sub-graphs (ONNX implicit inputs).
    captures: tuple = ()

    @property
    def all_inputs(self) -> tuple:
        return tuple(v for v in self.inputs if v is not None) + self.captures

    # Pickling: the attributes are a read-only mapping, which pickle cannot store as such.
    def __getstate__(self):
        return (self.op, self.name, self.inputs, dict(self.attrs), self.outputs, self.captures)

    def __setstate__(self, state):
        op, name, inputs, attrs, outputs, captures = state
        for k, v in zip(("op", "name", "inputs", "attrs", "outputs", "captures"),
                        (op, name, inputs, _freeze(attrs), outputs, captures)):
            object.__setattr__(self, k, v)

    def __repr__(self):
        return f"Node({self.name}: {self.op.name})"


@dataclass(frozen=True, eq=False)
class Graph:
    name: str
    inputs: tuple  # placeholder Values
    nodes: tuple  # Nodes, in topological order
    outputs: tuple  # Values (their names are the output names)
    #: Inner placeholders standing for outer-scope values (sub-graphs of control-flow ops only).
    captures: tuple = ()
    doc: str = ""
    meta: Mapping = field(default_factory=dict)

    @property
    def constants(self) -> list[Value]:
        seen, out = set(), []
        for v in itertools.chain((i for n in self.nodes for i in n.all_inputs), self.outputs):
            if v.is_constant and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.outputs]

    def users(self) -> dict[int, list[Node]]:
        """id(value) -> nodes reading it."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.all_inputs:
                out.setdefault(id(v), []).append(n)
        return out

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op.name] = counts.get(n.op.name, 0) + 1
        return counts

    def is_static(self) -> bool:
        vals = itertools.chain(self.inputs, (o for n in self.nodes for o in n.outputs))
        return all(isinstance(v.type, dt.TensorType) and v.type.is_static for v in vals)

    def __str__(self):
        from .printer import format_graph

        return format_graph(self)


def _freeze(attrs: dict) -> Mapping:
    return _pytypes.MappingProxyType(dict(attrs))


def check_node_inputs(op: OpDef, where: str, inputs: Sequence, attrs: dict | None = None) -> dict:
    """Check input count and element types against the op's ports; return the completed attrs."""
    ports = op.in_ports
    if ports and ports[-1].variadic:
        # trailing absent inputs are dropped, so only ports up to the last required one must exist
        required = max((i + 1 for i, p in enumerate(ports[:-1]) if not p.optional), default=0)
        if len(inputs) < required:
            raise GraphError(f"{where}: expects at least {required} inputs, got {len(inputs)}")
    elif len(inputs) > len(ports):
        raise GraphError(f"{where}: expects at most {len(ports)} inputs, got {len(inputs)}")
    bound: dict[str, object] = {}
    for i, port in enumerate(ports):
        if port.variadic:
            vals = inputs[i:]
            if not vals and not port.optional:
                raise GraphError(f"{where}: expects at least one '{port.name}' input")
        else:
            vals = [inputs[i] if i < len(inputs) else None]
            if vals[0] is None:
                if not port.optional:
                    raise GraphError(f"{where}: required input '{port.name}' is missing")
                continue
        for v in vals:
            if v is None or port.typevar is None:
                continue
            t = v.type
            elem = t.dtype if isinstance(t, dt.TensorType) else t
            key = elem.base if isinstance(elem, dt.QuantizedDType) else elem
            allowed = op.types[port.typevar]
            if allowed and key not in allowed:
                raise GraphError(f"{where}: input '{port.name}' has type {t}, "
                                 f"which {op.name} does not accept")
            prev = bound.setdefault(port.typevar, elem)
            if prev != elem:
                raise GraphError(f"{where}: input '{port.name}' has element type {_tname(elem)} but "
                                 f"another input bound to the same type has {_tname(prev)}")
    return complete_attrs(op, where, attrs or {})


def _tname(t):
    return getattr(t, "name", str(t))


def complete_attrs(op: OpDef, where: str, attrs: dict) -> dict:
    out = {}
    for name, value in attrs.items():
        decl = op.attr_map.get(name)
        if decl is None:
            raise GraphError(f"{where}: unknown attribute '{name}'")
        out[name] = canonical_attr(decl, value, where)
    for a in op.attrs:
        if a.name not in out:
            if a.default is REQUIRED:
                raise GraphError(f"{where}: required attribute '{a.name}' is missing")
            out[a.name] = a.default
    return out


class GraphBuilder:
    """Builds a `Graph`, type-checking each node as it is added.

    >>> b = GraphBuilder("tiny")
    >>> x = b.input("x", dt.tensor((2, 3), "float32"))
    >>> y = b.add1("Relu", [x])
    >>> g = b.build([y])
    """

    def __init__(self, name: str = "main"):
        self.name = name
        self._inputs: list[Value] = []
        self._captures: list[Value] = []
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._node_names: set[str] = set()
        self._counter = itertools.count()

    def unique_name(self, base: str, pool: set | None = None) -> str:
        """A fresh value name (or node name, with `pool=self._node_names`) starting with `base`."""
        pool = self._names if pool is None else pool
        name = base
        while name in pool:
            name = f"{base}_{next(self._counter)}"
        pool.add(name)
        return name

    def input(self, name: str, type) -> Value:
        if name in self._names:
            raise GraphError(f"graph '{self.name}': duplicate value name '{name}'")
        check_type(type, f"graph '{self.name}': input '{name}'")
        self._names.add(name)
        v = Value(name, type)
        self._inputs.append(v)
        return v

    def capture(self, name: str, type) -> Value:
        """A placeholder for an outer-scope value (sub-graphs only)."""
        self._names.add(name)
        v = Value(name, type)
        self._captures.append(v)
        return v

    def constant(self, data, name: str | None = None, dtype: dt.DType | None = None) -> Value:
        arr = np.asarray(data, dtype=None if dtype is None else dtype.np)
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        name = self.unique_name(name or "const")
        return Value(name, dt.type_of(arr), data=arr)

    def add(self, op: str | OpDef, inputs: Sequence[Value | None], attrs: dict | None = None, *,
            name: str | None = None, num_outputs: int | None = None,
            output_names: Sequence[str] | None = None, captures: Sequence[Value] = ()) -> list[Value]:
        """Add a node and return its output values."""
        opdef = op if isinstance(op, OpDef) else get_op(op)
        inputs = list(inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        node_name = self.unique_name(name or opdef.name.lower(), self._node_names)
        where = f"node '{node_name}' ({opdef.name})"
        full_attrs = check_node_inputs(opdef, where, inputs, attrs)
        if num_outputs is None:
            num_outputs = len(output_names) if output_names else sum(
                1 for p in opdef.out_ports if not p.optional and not p.variadic) or 1
        known = [v.known if v is not None else None for v in inputs]
        ctx = InferContext(opdef, node_name, [v.type if v is not None else None for v in inputs],
                           full_attrs, num_outputs, known)
        out_types = list(opdef.infer(ctx))
        if len(out_types) < num_outputs:
            raise GraphError(f"{where}: op produces {len(out_types)} outputs, {num_outputs} requested")
        for t in out_types[:num_outputs]:  # no shape whose element count wraps int64 index math
            check_type(t, where)
        out_known = self._known_outputs(opdef, ctx, inputs, full_attrs, num_outputs, out_types)
        node = Node(opdef, node_name, tuple(inputs), _freeze(full_attrs), (), tuple(captures))
        outs = []
        for i in range(num_outputs):
            oname = output_names[i] if output_names and output_names[i] else None
            if oname is not None:
                if oname in self._names:
                    raise GraphError(f"{where}: output name '{oname}' is already defined")
                self._names.add(oname)
            else:
                oname = self.unique_name(node_name if num_outputs == 1 else f"{node_name}:{i}")
            outs.append(Value(oname, out_types[i], node, i, known=out_known[i]))
        object.__setattr__(node, "outputs", tuple(outs))
        self._nodes.append(node)
        return outs

    def add_unchanged(self, node: Node, inputs: Sequence[Value | None]) -> list[Value]:
        """Re-add `node` (from another graph, capturing no values) with `inputs` of the same types and
        known values as its own, keeping its names, attributes and output types. Its checks and
        shape rules would give what they gave when it was built, so they do not run again: a graph
        pass copies every node it leaves alone, and rerunning them was most of a pass's time
        (DenseNet-121 lowered to the primitive floor: 15,000 copies in 9 passes)."""
        name = self.unique_name(node.name, self._node_names)
        new = Node(node.op, name, tuple(inputs), node.attrs, (), ())
        outs = []
        for o in node.outputs:
            if o.name in self._names:
                raise GraphError(f"node '{name}' ({node.op.name}): output name '{o.name}' is already defined")
            self._names.add(o.name)
            outs.append(Value(o.name, o.type, new, o.index, known=o.known))
        object.__setattr__(new, "outputs", tuple(outs))
        self._nodes.append(new)
        return outs

    def add1(self, op, inputs, attrs=None, **kw) -> Value:
        return self.add(op, inputs, attrs, num_outputs=1, **kw)[0]

    def _known_outputs(self, opdef, ctx, inputs, attrs, n, out_types=()):
        if not opdef.pure or opdef.has_subgraphs:
            return [None] * n
        if opdef.known_value is not None:
            vals = list(opdef.known_value(ctx)) + [None] * n
            return vals[:n]
        if any(v is not None and v.known is None for v in inputs):
            return [None] * n
        if sum(v.known.size for v in inputs if v is not None) > KNOWN_VALUE_LIMIT:
            return [None] * n
        if any((getattr(t, "numel", None) or 0) > KNOWN_VALUE_LIMIT for t in out_types[:n]):
            return [None] * n  # never materialise a big result (ConstantOfShape of 10**12) here
        try:
            res = opdef.reference(*[v.known if v is not None else None for v in inputs], **attrs)
        except Exception:  # folding is an optimisation; the real run reports real errors
            return [None] * n
        res = list(res) if isinstance(res, tuple) else [res]
        out = []
        for r in (res + [None] * n)[:n]:
            keep = isinstance(r, np.ndarray) or np.isscalar(r)
            r = np.asarray(r) if keep else None
            out.append(r if r is not None and r.size <= KNOWN_VALUE_LIMIT else None)
        return out

    def add_node_like(self, node: Node, inputs, captures=()) -> list[Value]:
        """Re-add `node` (from another graph) with new inputs, keeping names and attributes."""
        return self.add(node.op, inputs, dict(node.attrs), name=node.name,
                        num_outputs=len(node.outputs), captures=captures)

    def build(self, outputs: Iterable[Value], doc: str = "", meta: Mapping | None = None) -> Graph:
        outputs = tuple(outputs)
        names = [v.name for v in outputs]
        if len(set(names)) != len(names):
            raise GraphError(f"graph '{self.name}': duplicate output names {names}")
        return Graph(self.name, tuple(self._inputs), tuple(self._nodes), outputs,
                     tuple(self._captures), doc, dict(meta or {}))


def topological_order(nodes: Iterable[Node], outputs: Iterable[Value] = ()) -> list[Node]:
    """Nodes in an order where every node follows its producers; stable for an already-ordered list."""
    nodes = list(nodes)
    produced = {id(o): n for n in nodes for o in n.outputs}
    state: dict[int, int] = {}
    order: list[Node] = []
    for root in nodes:
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                state[id(n)] = 2
                order.append(n)
                continue
            if state.get(id(n)) == 2:
                continue
            if state.get(id(n)) == 1:
                raise GraphError(f"graph has a cycle through node '{n.name}'")
            state[id(n)] = 1
            stack.append((n, True))
            for v in reversed(n.all_inputs):
                p = produced.get(id(v))
                if p is not None and state.get(id(p)) != 2:
                    if state.get(id(p)) == 1:
                        raise GraphError(f"graph has a cycle through node '{p.name}'")
                    stack.append((p, False))
    return order
