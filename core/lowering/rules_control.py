"""Lowering rules for control flow: If, Scan and Loop.

A floor backend has no control flow, so a control-flow node lowers by re-emitting its sub-graphs'
nodes in the outer graph ("inlining"); the driver then lowers those nodes by their own rules.

* If: a condition known at compile time inlines the taken branch. Otherwise both branches are
  computed and each output is selected with Where - only when that is safe (the branches are pure
  and cannot fail at run time whatever the data) and both give equal static types.
* Scan: unrolled over its (static) sequence length: one Slice + Reshape per scan input per step,
  states threaded, scan outputs stacked with Reshape + Concat.
* Loop: unrolled while the trip count and the continue condition are known at compile time (the
  iteration number becomes a constant, so conditions computed from it are known too). A loop
  whose condition turns data-dependent and that has no scan outputs runs all M iterations with
  masked updates (Where on a running "still looping" flag), under the same safety test as If.
  A scan output whose extent the node's type fixes pins the trip count (one row per iteration).

Sub-graphs read outer values through captures matched by *name* (see glow.interpreter): a
re-emitted node that has sub-graphs of its own gets them with their capture placeholders renamed
after the values it now captures. Unrolling is capped (MAX_TRIPS, MAX_UNROLLED_NODES); a rule that
gives up part-way removes the nodes it added.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from ..graph import Graph, GraphBuilder
from ._build import ints, static_shape
from .driver import _check_lowered
from .floor import is_host_op
from .registry import lowering

#: Most iterations (Loop) or steps (Scan) one node is unrolled to.
MAX_TRIPS = 1024
#: Most sub-graph nodes (nested ones counted) one node is unrolled to.
MAX_UNROLLED_NODES = 20000
#: Host ops that a speculatively computed branch may contain: pure, and they cannot fail.
_SAFE_HOST = frozenset({"SequenceConstruct", "SequenceEmpty"})
#: Ops that fail at run time on out-of-range index *data*: input position of the indices.
_INDEXING = {"Gather": 1, "GatherElements": 1, "GatherND": 1, "Scatter": 1, "ScatterElements": 1,
             "ScatterND": 1}


class _Decline(Exception):
    """This instance cannot be lowered; the rule returns None."""


# -- re-emitting sub-graphs ------------------------------------------------------------------------

def _outer_values(rb, node) -> dict:
    """The new graph's values for the node's captures, by name. `rebuild` has just made sure each
    captured value exists under its old name (sub-graphs find captures by name)."""
    want = {c.name for c in node.captures}
    found = {v.name: v for v in (*rb._inputs, *rb._captures) if v.name in want}
    for n in reversed(rb._nodes):
        if len(found) == len(want):
            break
        for o in n.outputs:
            if o.name in want:
                found.setdefault(o.name, o)
    return found


def _renamed(graph: Graph, renames: dict) -> Graph:
    """`graph` with capture placeholders renamed (old name -> new), nested sub-graphs following."""
    if not any(c.name in renames for c in graph.captures):
        return graph
    b = GraphBuilder(graph.name)
    env = {id(v): b.input(v.name, v.type) for v in graph.inputs}
    env.update((id(v), b.capture(renames.get(v.name, v.name), v.type)) for v in graph.captures)

    def get(v):
        return None if v is None else v if v.is_constant else env[id(v)]

    for n in graph.nodes:
        caps = [get(c) for c in n.captures]
        outs = b.add(n.op, [get(v) for v in n.inputs], _attrs_for(n, caps), name=n.name,
                     num_outputs=len(n.outputs), output_names=[o.name for o in n.outputs], captures=caps)
        env.update(zip(map(id, n.outputs), outs))
    return b.build([get(o) for o in graph.outputs], doc=graph.doc, meta=graph.meta)


def _attrs_for(node, new_captures) -> dict:
    """The node's attributes, its sub-graphs renamed to find `new_captures` by their names."""
    renames = {old.name: new.name for old, new in zip(node.captures, new_captures) if old.name != new.name}
    attrs = dict(node.attrs)
    if renames:
        for k, v in attrs.items():
            if isinstance(v, Graph):
                attrs[k] = _renamed(v, renames)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(g, Graph) for g in v):
                attrs[k] = type(v)(_renamed(g, renames) for g in v)
    return attrs


def _inline(rb, graph: Graph, formals, outer: dict) -> list:
    """Re-emit `graph`'s nodes with its inputs bound to `formals` and its captures to the outer
    values of the same names; return the values of its outputs."""
    env = {id(v): x for v, x in zip(graph.inputs, formals)}
    for c in graph.captures:
        if c.name not in outer:
            raise _Decline(f"captured value '{c.name}' not found")
        env[id(c)] = outer[c.name]

    def get(v):
        return None if v is None else v if v.is_constant else env[id(v)]

    base = rb.current.name if rb.current is not None else graph.name
    for n in graph.nodes:
        if n.op.name == "Constant":  # a weight of the sub-graph: stays a constant, not a node
            o = n.outputs[0]
            env[id(o)] = rb.constant(o.known if o.known is not None else n.op.reference(**dict(n.attrs)),
                                     name=o.name)
            continue
        caps = [get(c) for c in n.captures]
        outs = rb.add(n.op, [get(v) for v in n.inputs], _attrs_for(n, caps), name=f"{base}/{n.name}",
                      num_outputs=len(n.outputs), captures=caps)
        env.update(zip(map(id, n.outputs), outs))
    return [get(o) for o in graph.outputs]


def _attempt(rb, node, build):
    """Run `build()` (which emits nodes and returns the node's new outputs); keep its nodes only if
    it succeeds and passes the driver's checks (types, memory), else remove them and decline."""
    mark = len(rb._nodes)
    try:
        outs = build()
        _check_lowered(node, outs, rb._nodes[mark:])
    except (_Decline, GraphError):
        del rb._nodes[mark:]
        return None
    _drop_dead(rb, mark, outs)
    return outs


def _drop_dead(rb, mark, outs):
    """Remove pure nodes added since `mark` that nothing reads (the other branch's leftovers):
    only later nodes of this same rule or its outputs can read them."""
    live = {id(v) for v in outs}
    keep = []
    for n in reversed(rb._nodes[mark:]):
        if n.op.pure and not any(id(o) in live for o in n.outputs):
            continue
        keep.append(n)
        live.update(id(v) for v in n.all_inputs)
    rb._nodes[mark:] = keep[::-1]


def _known_bool(v):
    """The value of a one-element bool known at compile time, else None."""
    if v is None or v.known is None or np.size(v.known) != 1:
        return None
    return bool(np.asarray(v.known).reshape(-1)[0])


def _graph_size(graph: Graph) -> int:
    return sum(1 + sum(_graph_size(g) for g in _subgraphs(n)) for n in graph.nodes)


def _subgraphs(node):
    for v in node.attrs.values():
        if isinstance(v, Graph):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (g for g in v if isinstance(g, Graph))


# -- speculation: computing a sub-graph whose result may be discarded -------------------------------

def _speculable(graph: Graph) -> bool:
    """Whether every node of `graph` (nested sub-graphs too) is side-effect free: pure, and no
    host op other than a few that cannot fail."""
    for n in graph.nodes:
        if not n.op.pure or (is_host_op(n.op) and n.op.name not in _SAFE_HOST):
            return False
        if not all(_speculable(g) for g in _subgraphs(n)):
            return False
    return True


def _check_cannot_fail(nodes):
    """Raise _Decline unless the emitted `nodes` cannot fail at run time: static tensor outputs
    (a data-dependent shape may be invalid), indices known and in range."""
    for n in nodes:
        for o in n.outputs:
            t = o.type
            static = isinstance(t, dt.TensorType) and t.is_static
            if not static and not (n.op.name in _SAFE_HOST and isinstance(t, dt.SequenceType)):
                raise _Decline(f"speculated value '{o.name}' has no static type")
        pos = _INDEXING.get(n.op.name)
        if pos is not None:
            _check_indices(n, pos)


def _check_indices(n, pos):
    """Indices known at compile time, tried on zero data of the node's static shapes."""
    if pos >= len(n.inputs) or n.inputs[pos] is None or n.inputs[pos].known is None:
        raise _Decline(f"'{n.name}' indexes with data-dependent indices")
    args = [None if v is None else v.known if v.known is not None else np.zeros(v.type.shape, v.type.dtype.np)
            for v in n.inputs]
    try:
        n.op.reference(*args, **dict(n.attrs))
    except Exception as e:  # noqa: BLE001 - the indices are out of range
        raise _Decline(f"'{n.name}' would fail: {e}") from e


def _select(rb, cond, a, b):
    """Where(cond, a, b) for equal static types; sequences built element by element likewise."""
    if a is b:
        return a
    ta, tb = a.type, b.type
    if isinstance(ta, dt.TensorType) and isinstance(tb, dt.TensorType):
        if not (ta.is_static and ta.dtype == tb.dtype and ta.shape == tb.shape):
            raise _Decline(f"cannot select between {ta} and {tb}")
        return rb.emit1("Where", [cond, a, b])
    na, nb = a.node, b.node
    if (na is not None and nb is not None and na.op.name == nb.op.name == "SequenceConstruct"
            and len(na.inputs) == len(nb.inputs)):
        return rb.emit1("SequenceConstruct", [_select(rb, cond, x, y) for x, y in zip(na.inputs, nb.inputs)])
    raise _Decline(f"cannot select between {ta} and {tb}")


def _scalar_cond(rb, cond):
    """A bool condition of one element as a 0-d value (Where must not broadcast a [1] into outputs)."""
    return cond if cond.type.shape == () else rb.emit1("Reshape", [cond, ints(rb, [])])


# -- If --------------------------------------------------------------------------------------------

@lowering("If")
def lower_if(rb, node, ins):
    then, other = node.attrs["then_branch"], node.attrs["else_branch"]
    outer = _outer_values(rb, node)
    k = len(node.outputs)
    taken = _known_bool(ins[0])
    if taken is not None:
        return _attempt(rb, node, lambda: _inline(rb, then if taken else other, [], outer)[:k])
    if not (_speculable(then) and _speculable(other)):
        return None  # a branch with effects (or that may fail) must not run when not taken

    def both():
        mark = len(rb._nodes)
        a = _inline(rb, then, [], outer)[:k]
        b = _inline(rb, other, [], outer)[:k]
        _check_cannot_fail(rb._nodes[mark:])
        c = _scalar_cond(rb, ins[0])
        return [_select(rb, c, x, y) for x, y in zip(a, b)]

    return _attempt(rb, node, both)


# -- Scan ------------------------------------------------------------------------------------------

def _reshape(rb, x, shape):
    # allowzero: a 0 in a static target shape is an empty extent, not "copy the input's extent"
    return rb.emit1("Reshape", [x, ints(rb, shape)], {"allowzero": int(0 in shape)})


def _take(rb, x, axis, index):
    """x[..., index, ...] along `axis` (the axis dropped): Slice + Reshape."""
    shape = static_shape(x)
    part = rb.emit1("Slice", [x, ints(rb, [index]), ints(rb, [index + 1]), ints(rb, [axis])])
    return _reshape(rb, part, shape[:axis] + shape[axis + 1:])


def _stack(rb, values, axis):
    """Per-step values of one static shape stacked on a new axis (negative counts from the end)."""
    shape = static_shape(values[0])
    if shape is None:
        raise _Decline("a per-step scan output has no static shape")
    a = axis % (len(shape) + 1)
    parts = [_reshape(rb, v, (*shape[:a], 1, *shape[a:])) for v in values]
    return parts[0] if len(parts) == 1 else rb.emit1("Concat", parts, {"axis": a})


def _empty_stack(rb, t, axis):
    """What the reference returns for zero steps: the body output's type with unknown extents as
    0, and a 0 extent inserted at `axis`."""
    if not isinstance(t, dt.TensorType):
        raise _Decline("a scan output is not a tensor")
    dims = [d if isinstance(d, int) else 0 for d in (t.shape or ())]
    dims.insert(axis % (len(dims) + 1), 0)
    return rb.constant(np.zeros(dims, t.dtype.np), name="empty")


@lowering("Scan")
def lower_scan(rb, node, ins):
    a, body = node.attrs, node.attrs["body"]
    m = a["num_scan_inputs"]
    n = len(ins) - m
    k = len(body.outputs) - n
    xs = ins[n:]
    in_axes = list(a["scan_input_axes"] or [0] * m)
    in_dirs = list(a["scan_input_directions"] or [0] * m)
    out_axes = list(a["scan_output_axes"] or [0] * k)
    out_dirs = list(a["scan_output_directions"] or [0] * k)
    if any(static_shape(x) is None for x in xs):
        return None
    in_axes = [ax % len(static_shape(x)) for ax, x in zip(in_axes, xs)]
    steps = static_shape(xs[0])[in_axes[0]]
    if steps > MAX_TRIPS or steps * _graph_size(body) > MAX_UNROLLED_NODES:
        return None
    outer = _outer_values(rb, node)

    def unroll():
        state, scans = list(ins[:n]), [[] for _ in range(k)]
        for t in range(steps):
            elems = [_take(rb, x, ax, steps - 1 - t if d else t) for x, ax, d in zip(xs, in_axes, in_dirs)]
            outs = _inline(rb, body, [*state, *elems], outer)
            state = outs[:n]
            for acc, v in zip(scans, outs[n:]):
                acc.append(v)
        stacked = [_stack(rb, acc[::-1] if d else acc, ax) if acc else _empty_stack(rb, body.outputs[n + j].type, ax)
                   for j, (acc, ax, d) in enumerate(zip(scans, out_axes, out_dirs))]
        return [*state, *stacked][:len(node.outputs)]

    return _attempt(rb, node, unroll)


# -- Loop ------------------------------------------------------------------------------------------

def _known_trips(m):
    """The trip count M when known at compile time (negative means none), else None."""
    if m is None or m.known is None or np.size(m.known) != 1:
        return None
    return max(0, int(np.asarray(m.known).reshape(-1)[0]))


def _pinned_trips(node, n):
    """The trip count the node's own type fixes: every iteration adds one row to each scan
    output, so a static leading extent of a scan output is the number of iterations run."""
    extents = {o.type.shape[0] for o in node.outputs[n:]
               if isinstance(o.type, dt.TensorType) and o.type.shape and isinstance(o.type.shape[0], int)}
    return extents.pop() if len(extents) == 1 else None


@lowering("Loop")
def lower_loop(rb, node, ins):
    body = node.attrs["body"]
    ins = list(ins) + [None] * (2 - len(ins))
    m, cond, carried = ins[0], ins[1], ins[2:]
    n = len(carried)
    k = len(body.outputs) - 1 - n
    trips = _known_trips(m)
    keep = True if cond is None else _known_bool(cond)
    pinned = _pinned_trips(node, n)
    if pinned is not None:  # exactly `pinned` iterations ran: M and the conditions need not be known
        if (trips is not None and pinned > trips) or (keep is False and pinned):
            return None
        trips, keep = pinned, True
    elif m is not None and trips is None:
        return None  # M may end the loop at any iteration
    elif trips is None and keep is None:
        return None  # no bound at all
    if keep is False:
        trips = 0
    size = max(1, _graph_size(body))
    if trips is not None and (trips > MAX_TRIPS or trips * size > MAX_UNROLLED_NODES):
        return None
    outer = _outer_values(rb, node)

    def unroll():
        state, scans = list(carried), [[] for _ in range(k)]
        live = None if keep else _scalar_cond(rb, cond)  # masked mode: the running condition
        i = 0
        true = rb.constant(np.asarray(True), name="true")
        while trips is None or i < trips:
            if i >= MAX_TRIPS or i * size > MAX_UNROLLED_NODES:
                raise _Decline("the loop does not end within the unrolling budget")
            mark = len(rb._nodes)
            # an iteration only runs while the condition holds, so the body sees cond = true
            outs = _inline(rb, body, [rb.constant(np.asarray(i, np.int64), name="iter"), true, *state], outer)
            i += 1
            go = True if pinned is not None else _known_bool(outs[0])
            if live is None and go is not None:
                state = outs[1:1 + n]
                for acc, v in zip(scans, outs[1 + n:]):
                    acc.append(v)
                if not go:
                    break
                continue
            # the condition depends on data: keep iterating to M, masking the updates
            if k or trips is None or not _speculable(body):
                raise _Decline("data-dependent loop condition")
            _check_cannot_fail(rb._nodes[mark:])
            if live is None:
                state, live = outs[1:1 + n], _scalar_cond(rb, outs[0])
            else:
                state = [_select(rb, live, new, old) for new, old in zip(outs[1:1 + n], state)]
                if go is False:
                    break  # no later iteration can run
                if go is None:
                    live = rb.emit1("And", [live, _scalar_cond(rb, outs[0])])
        stacked = [_stack(rb, acc, 0) if acc else _empty_stack(rb, body.outputs[1 + n + j].type, 0)
                   for j, acc in enumerate(scans)]
        return [*state, *stacked][:len(node.outputs)]

    return _attempt(rb, node, unroll)
