"""Shape specialisation: a graph with dynamic shapes, made static for one set of concrete inputs.

Code-generating backends need every shape at compile time. When a model has symbolic dims, or
integer inputs whose values decide shapes (a Reshape's target, a Slice's bounds, a Range's
limit), the executable compiles one static version per *input signature* (glow.flow): the
inputs' shapes and dtypes, plus the values of the inputs that decide a shape, which become
constants so that the shape rules see them. Every other input is data, whatever its size: token
ids, attention masks, gather indices are never specialised on.

    deciding_inputs(graph)            the inputs whose values decide a shape
    data_shaped(graph)                the values whose shapes tensor data decides (no signature does)
    deferrable(node, has_code)        whether a code-generating backend leaves `node` to this
    specialize(graph, feeds, names)   the static graph for these feeds, `names` made constants
    signature(graph, feeds, names)    its cache key
    varying(size)                     whether `size` is one a symbolic dim takes in this compile
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from . import dtypes as dt
from .errors import GraphError, InputError
from .graph import Graph
from .ops.registry import InferContext
from .rewrite import Rebuilder, copy_node

#: An input is specialised on its values only if it has at most this many elements: shape-like
#: tensors (a target shape, slice bounds, a scalar length) are small; anything bigger is data.
VALUE_LIMIT = 64

#: Element types a specialised input may have (its values become a compile-time constant).
VALUE_TYPES = (dt.int64, dt.int32)


def specializable(t) -> bool:
    """Whether a value of type `t` can be specialised on: a small static integer tensor."""
    return (isinstance(t, dt.TensorType) and t.dtype in VALUE_TYPES and t.is_static
            and (t.numel or 0) <= VALUE_LIMIT)


def needs_specialization(graph: Graph) -> bool:
    """Whether some value's shape is unknown (symbolic dims, or shapes decided by input values)."""
    return not graph.is_static()


def specializable_inputs(graph: Graph) -> frozenset[str]:
    """The graph inputs whose values could be specialised on: integer tensors (whether a fed
    array is small enough is decided per run, see `specializable`)."""
    return frozenset(v.name for v in graph.inputs
                     if isinstance(v.type, dt.TensorType) and v.type.dtype in VALUE_TYPES)


class _Recording(InferContext):
    """An InferContext that notes which inputs' values the shape rule asks for."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.asked: set[int] = set()

    def value(self, i: int):
        self.asked.add(i)
        return super().value(i)


def _with_sizes(t):
    """`t` with each symbolic dim given a size (1): what shape specialisation will know."""
    if isinstance(t, dt.TensorType) and t.shape is not None and not t.is_static:
        return dt.TensorType(tuple(d if isinstance(d, int) else 1 for d in t.shape), t.dtype)
    return t


def shape_operands(node) -> list:
    """The operands whose values decide `node`'s output shapes: those its shape rule asks the
    value of (a Reshape's target, Slice bounds, Range's limits, a TopK's k, axes fed as inputs)
    when, with every input shape known, the outputs' shapes still are not without them. A rule
    that only checks a value it is given (Gather's indices against the axis) decides nothing.
    For control flow: the branch conditions and trip counts."""
    ins = list(node.inputs)
    if node.op.has_subgraphs:  # which branch runs, how often a loop runs: decided by values
        return [v for v in ins if v is not None and isinstance(v.type, dt.TensorType)
                and v.type.dtype in VALUE_TYPES and v.known is None]
    ctx = _Recording(node.op, node.name, [None if v is None else _with_sizes(v.type) for v in ins],
                     dict(node.attrs), len(node.outputs), [None if v is None else v.known for v in ins])
    asked = lambda: [ins[i] for i in sorted(ctx.asked) if i < len(ins) and ins[i] is not None  # noqa: E731
                     and ins[i].known is None]
    try:
        outs = node.op.infer(ctx)
    except Exception:  # noqa: BLE001 - a rule that cannot go on without values: what it asked decides
        return asked()
    if all(isinstance(t, dt.TensorType) and t.is_static for t in outs):
        return []
    return asked()


def deferrable(node, has_code: bool, inputs_may_specialise: bool = True) -> bool:
    """The one deferral rule of the code-generating backends (cpu, and every C-style one): whether
    `node` is accepted now and compiled once the runtime specialises the graph on its inputs, i.e.
    its shapes or kernel arguments are decided by *input values* or shapes (a dynamic batch, pads
    or axes fed as small integer inputs, a window length). `has_code`: whether the backend has a
    kernel, an elementwise rule or a lowering rule for the op. A node whose shape depends on
    tensor *data* (NonZero of an activation) is not deferred: it is refused now, so the
    partitioner can place it on another device. `inputs_may_specialise=False` for a graph
    specialised already: its graph inputs are data, and only values that are constants before
    the clean-up folds them (Constant nodes a lowering made) are waited for."""
    from .lowering import is_host_op

    if not node.op.pure or is_host_op(node.op):
        return False
    values = [v for v in node.all_inputs if v is not None]
    if not all(isinstance(v.type, dt.TensorType) for v in (*values, *node.outputs)):
        return False  # sequences, optionals: never code, never deferred
    if node.op.has_subgraphs and all(v.type.is_static for v in values):
        return False  # control flow over static inputs: its lowering rule unrolls it if it can
    known = [value_determined(v, inputs_may_specialise) for v in values]
    if all(known) and (not has_code or _values_decide(node)):
        return True  # a constant once the graph is specialised: folding takes it
    if not has_code:
        return False
    if any(not v.type.is_static for v in values):
        return True
    fed = [v for v, k in zip(values, known) if k and not v.is_constant]
    return any(not v.type.is_static for v in node.outputs) and bool(fed) or any(
        v.type.dtype in VALUE_TYPES for v in fed)


def _values_decide(node) -> bool:
    """Whether input values are what settle `node`: it reads integers computed in the graph or
    makes integers (sizes, indices, shapes: a window length, ConstantOfShape's shape), or a
    result of unknown shape. Float data that only small integer inputs decide (token ids ->
    embeddings -> a whole encoder) is data, not a shape: deferring it would fold the model into
    a new program for every input value, so it is lowered now like any other node; so are its
    constant operands (a ReduceMean's axes)."""
    vals = [v for v in node.inputs if v is not None and not v.is_constant] + list(node.outputs)
    return any(not isinstance(v.type, dt.TensorType) or not v.type.is_static
               or not v.type.dtype.is_float for v in vals)


def value_determined(v, inputs_may_specialise: bool = True, limit: int = 10_000) -> bool:
    """Whether a value is known once the graph is specialised: constants, small integer graph
    inputs (which may become constants, unless `inputs_may_specialise` is off), shapes and sizes
    of anything (Shape, Size), and pure ops of these only, however deep (up to `limit` values:
    past that, not known)."""
    from .lowering import is_host_op

    seen: dict[int, bool] = {}
    stack = [v]
    while stack and len(seen) < limit:
        x = stack[-1]
        if x is None or x.is_constant:
            seen[id(x)] = True
        elif x.node is None:
            seen[id(x)] = inputs_may_specialise and specializable(x.type)
        else:
            n = x.node
            if n.op.known_value is not None and n.op.pure:  # Shape, Size: known once shapes are
                seen[id(x)] = True
            elif not n.op.pure or is_host_op(n.op) or n.captures:
                seen[id(x)] = False
            else:
                todo = [i for i in n.inputs if i is not None and id(i) not in seen]
                if todo:
                    stack.extend(todo)
                    continue
                seen[id(x)] = all(seen[id(i)] for i in n.inputs if i is not None)
        stack.pop()
        if not seen[id(x)]:
            return False
    return bool(seen.get(id(v), False))


def data_shaped(graph: Graph) -> set[int]:
    """ids of the values whose shapes tensor *data* decides: a NonZero's rows, a TopK whose k is
    a ReduceMin over them, a Reshape to a shape computed from activations, and everything whose
    shape follows from one of these. Specialising on input shapes and small integer inputs does
    not settle them: a backend that compiles per input signature would compile them again on
    nearly every run, since other data gives other shapes (glow.partition keeps them on the host
    where it can). Values whose shapes only symbolic input dims decide (a batch) are not here.

    One forward pass: a value is *determined* when it is a constant, a small integer graph input,
    the Shape or Size of a value not data-shaped, or a pure op's result over determined values;
    an output of unknown shape is data-shaped when its node reads a data-shaped value or an
    operand deciding its shape (`shape_operands`; for control flow, its condition and trip count)
    that is not determined."""
    from .lowering import is_host_op

    shaped: set[int] = set()
    determined: set[int] = set()
    for v in graph.inputs:
        if specializable(v.type):
            determined.add(id(v))

    def known(v) -> bool:
        return v is None or v.is_constant or id(v) in determined

    for n in graph.nodes:
        ins = [v for v in (*n.inputs, *n.captures) if v is not None]
        if n.op.known_value is not None and n.op.pure:  # Shape, Size
            if not any(id(v) in shaped for v in ins):
                determined.update(id(o) for o in n.outputs)
        elif n.op.pure and not is_host_op(n.op) and not n.captures and all(known(v) for v in n.inputs):
            determined.update(id(o) for o in n.outputs)
        unknown = [o for o in n.outputs if not (isinstance(o.type, dt.TensorType) and o.type.is_static)]
        if not unknown:
            continue
        if n.op.has_subgraphs:
            deciding = [v for v in n.inputs if v is not None]
        else:
            deciding = shape_operands(n)
        if any(id(v) in shaped for v in ins) or not all(known(v) for v in deciding) or (
                not n.op.pure or is_host_op(n.op)):
            shaped.update(id(o) for o in unknown)
    return shaped


def deciding_inputs(graph: Graph) -> frozenset[str]:
    """Names of the graph inputs whose values decide a shape: found by walking back from every
    operand a shape rule asks the value of, through the ops computing it, to graph inputs. The
    walk stops at ops whose value needs only their inputs' shapes (Shape, Size): a sequence length
    read with Shape is settled by shape specialisation, not by the ids' values."""
    found: set[str] = set()
    seen: set[int] = set()
    stack = [v for n in graph.nodes for v in shape_operands(n)]
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen or v.is_constant or v.known is not None:
            continue
        seen.add(id(v))
        if v.node is None:
            if any(v is g for g in graph.inputs):
                found.add(v.name)
            continue
        if v.node.op.known_value is not None:  # Shape, Size: shapes decide them
            continue
        stack.extend(x for x in (*v.node.inputs, *v.node.captures) if x is not None)
    return frozenset(found)


def signature(graph: Graph, feeds: dict, values=frozenset()) -> tuple:
    """The cache key of a specialisation: every input's shape and dtype, and the values of the
    inputs named in `values`."""
    key = []
    for v in graph.inputs:
        a = feeds[v.name]
        if isinstance(a, np.ndarray):
            value = a.tobytes() if v.name in values and a.size <= VALUE_LIMIT else None
            key.append((v.name, a.shape, a.dtype.str, value))
        else:
            key.append((v.name, type(a).__name__))
    return tuple(key)


def specialize(graph: Graph, feeds: dict, values=frozenset()) -> tuple[Graph, dict]:
    """The graph with concrete input shapes, the inputs named in `values` made constants, plus the
    feeds that remain inputs. Every node is re-added, so shape rules rerun."""
    rb = Rebuilder(graph.name)
    mapping = {}
    remaining = {}
    fed: set[int] = set()  # values computed from input values made constants
    for v in graph.inputs:
        a = feeds[v.name]
        if v.name in values and isinstance(a, np.ndarray) and specializable(dt.type_of(a)):
            mapping[id(v)] = rb.constant(a, name=v.name)
            fed.add(id(mapping[id(v)]))
        elif isinstance(a, np.ndarray):
            mapping[id(v)] = rb.input(v.name, dt.TensorType(a.shape, v.type.dtype))
            remaining[v.name] = a
        else:
            mapping[id(v)] = rb.input(v.name, v.type)
            remaining[v.name] = a
    for n in graph.nodes:
        for o in n.outputs:
            rb._names.add(o.name)
        rb._node_names.add(n.name)

    def m(v):
        return None if v is None else v if v.is_constant else mapping[id(v)]

    for n in graph.nodes:
        ins = [m(v) for v in n.inputs]
        from_feeds = any(v is not None and id(v) in fed for v in ins)
        try:
            outs = copy_node(rb, n, ins, [m(v) for v in n.captures])
        except GraphError as e:  # e.g. an index out of range: the input values' fault
            if not from_feeds:
                raise
            raise InputError(str(e)) from None
        if from_feeds:
            fed.update(id(o) for o in outs)
        for old, new in zip(n.outputs, outs):
            mapping[id(old)] = new
    outputs = []
    for v in graph.outputs:
        nv = m(v)
        if nv.name != v.name or nv.is_constant:
            rb._names.discard(v.name)
            nv = rb.add1("Identity", [nv], name=f"{v.name}/keep_name", output_names=[v.name])
        outputs.append(nv)
    return rb.build(outputs, doc=graph.doc, meta=graph.meta), remaining


#: The sizes the graph's symbolic input dims take in the specialisation being compiled, each
#: with the dims' names ({48: "sequence"}; "batch|sequence" when two dims take the same size).
_VARYING: contextvars.ContextVar[dict | None] = contextvars.ContextVar("glow_varying_sizes", default=None)


def symbolic_sizes(graph: Graph, feeds: dict) -> dict[int, str]:
    """The sizes (> 1) that `feeds` give the symbolic dims of `graph`'s inputs, each with the
    names of the dims that take it."""
    sizes: dict[int, set] = {}
    for v in graph.inputs:
        a, shape = feeds.get(v.name), getattr(v.type, "shape", None)
        if isinstance(a, np.ndarray) and shape is not None and len(shape) == a.ndim:
            for axis, (d, n) in enumerate(zip(shape, a.shape)):
                if not isinstance(d, int) and n > 1:  # an unnamed dim is named by where it is
                    sizes.setdefault(int(n), set()).add(d if isinstance(d, str) else f"{v.name}[{axis}]")
    return {n: "|".join(sorted(names)) for n, names in sizes.items()}


@contextlib.contextmanager
def sizes_varying(sizes: dict[int, str]):
    """Compile with `sizes` (size -> dim names) marked as varying from one call to the next
    (see `varying`)."""
    token = _VARYING.set(dict(sizes))
    try:
        yield
    finally:
        _VARYING.reset(token)


def varying(size: int) -> bool:
    """Whether `size` is one that a symbolic input dim (a batch, a sequence length) takes in the
    specialisation under way. A kernel generator then makes code that serves any size there (it
    reads the size at run time, picks a register tile for any width) instead of code for this
    size alone, so the next batch or sequence length finds its code compiled. A hint by value,
    not a proof: a static dim of the same size is treated alike, which costs a little speed,
    never correctness (the sizes themselves always come from the kernel's table)."""
    return size in (_VARYING.get() or ())


def varying_name(size: int) -> str | None:
    """The names of the symbolic dims that take `size` ("sequence"), or None (see `varying`)."""
    return (_VARYING.get() or {}).get(size)


def varying_sizes() -> dict[int, str]:
    """Every size marked varying, with its dims' names (see `varying`)."""
    return dict(_VARYING.get() or {})
