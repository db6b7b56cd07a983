"""Control flow: If, Loop and Scan, whose bodies are sub-graphs (attributes of kind "graph").

A body reads outer values through its `captures`; the interpreter hands their run-time values to
the reference as `_scope` ({name: value}), and each body run gets them fed alongside its formal
inputs. Output types come from the bodies' output types, so they are only as precise as those.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from .registry import CONTROL, Attr, Tier, op
from .sequence import graph_attr, merged

BOOL = frozenset({dt.bool_})
I64 = frozenset({dt.int64})


def _run(body, scope, formal_values):
    """Run a body with its formal inputs bound in order; return its outputs in order."""
    from ..interpreter import run_graph

    feeds = {**(scope or {}), **{v.name: x for v, x in zip(body.inputs, formal_values)}}
    # Element types were matched when the node was built; declared body input *shapes* are often
    # stale hints in ONNX models (a loop-carried value may grow), so they are not enforced here.
    res = run_graph(body, feeds, check=False)
    return [res[v.name] for v in body.outputs]


def _scalar(x, what):
    a = np.asarray(x)
    if a.size != 1:
        raise GraphError(f"{what} must hold one value, got shape {list(a.shape)}")
    return a.reshape(())


def _empty_like_type(t, lead):
    """An array for zero iterations: `lead` extents (0 along the scan axis) plus t's element shape."""
    dims = [d if isinstance(d, int) else 0 for d in (t.shape or ())]
    return np.zeros((*lead, *dims), dtype=t.dtype.np)


def _stack_type(ctx, t, n, axis, what):
    """Type of per-iteration values of type t stacked on a new axis of extent n."""
    if not isinstance(t, dt.TensorType):
        raise ctx.error(f"{what} must be a tensor, got {t}")
    if t.shape is None:
        return dt.TensorType(None, t.dtype)
    a = ctx.axis(axis, len(t.shape) + 1)
    shape = list(t.shape)
    shape.insert(a, n)
    return dt.TensorType(tuple(shape), t.dtype)


def _final_type(ctx, initial, produced, what):
    """Type of a threaded value: its initial type merged with the body's. A value that starts as an
    optional and comes back as what the optional holds (a "no state yet" idiom) is typed as the
    held value."""
    if isinstance(initial, dt.OptionalType) and not isinstance(produced, dt.OptionalType):
        return merged(ctx, initial.elem, produced, what)
    return merged(ctx, initial, produced, what)


def _check_bool_scalar(ctx, i, name):
    t = ctx.input(i)
    if not isinstance(t, dt.TensorType):
        raise ctx.error(f"{name} must be a tensor, got {t}")
    if isinstance(t.numel, int) and t.numel != 1:
        raise ctx.error(f"{name} must be a scalar, got shape {list(t.shape)}")


def _check_formal(ctx, formal, actual, what):
    """An actual value's type must fit a body input's declared element type."""
    f = formal.type
    if isinstance(f, dt.TensorType) and isinstance(actual, dt.TensorType) and f.dtype != actual.dtype:
        raise ctx.error(f"{what} has element type {actual.dtype.name} but body input '{formal.name}' "
                        f"expects {f.dtype.name}")
    if type(f) is not type(actual):
        raise ctx.error(f"{what} is {actual} but body input '{formal.name}' expects {f}")


# -- If ------------------------------------------------------------------------------------------
def _if_infer(ctx):
    _check_bool_scalar(ctx, 0, "cond")
    then, other = graph_attr(ctx, "then_branch"), graph_attr(ctx, "else_branch")
    if len(then.outputs) != len(other.outputs):
        raise ctx.error(f"then_branch has {len(then.outputs)} outputs but else_branch has "
                        f"{len(other.outputs)}")
    if ctx.num_outputs > len(then.outputs):
        raise ctx.error(f"node has {ctx.num_outputs} outputs but the branches have {len(then.outputs)}")
    for g, name in ((then, "then_branch"), (other, "else_branch")):
        if g.inputs:
            raise ctx.error(f"{name} must take no inputs, it declares {len(g.inputs)}")
    return [merged(ctx, a.type, b.type, f"output {i} of the two branches")
            for i, (a, b) in enumerate(zip(then.outputs, other.outputs))]


def _if_ref(cond, *, then_branch, else_branch, _scope=None):
    branch = then_branch if bool(_scalar(cond, "If cond")) else else_branch
    return tuple(_run(branch, _scope, []))


op("If", inputs=("cond:B",), outputs=("outputs*",), types={"B": BOOL},
   attrs=(Attr("then_branch", "graph"), Attr("else_branch", "graph")),
   infer=_if_infer, reference=_if_ref, groups={CONTROL}, tier=Tier.HIGH, onnx_since=1,
   doc="Runs then_branch if cond is true, else else_branch; returns the branch's outputs.")


# -- Loop ----------------------------------------------------------------------------------------
def _loop_infer(ctx):
    body = graph_attr(ctx, "body")
    carried = ctx.inputs[2:]
    n = len(carried)
    if len(body.inputs) != 2 + n:
        raise ctx.error(f"body must take 2 + {n} inputs (iteration, condition, carried values), "
                        f"it takes {len(body.inputs)}")
    k = len(body.outputs) - 1 - n
    if k < 0:
        raise ctx.error(f"body must return the condition and {n} carried values, it returns "
                        f"{len(body.outputs)} values")
    if ctx.num_outputs > n + k:
        raise ctx.error(f"node has {ctx.num_outputs} outputs but the loop produces {n + k}")
    if ctx.has(0):
        t = ctx.input(0)
        if not isinstance(t, dt.TensorType) or (t.shape is not None and t.numel not in (1, None)):
            raise ctx.error(f"M (trip count) must be an int64 scalar, got {t}")
    if ctx.has(1):
        _check_bool_scalar(ctx, 1, "cond")
    for j, t in enumerate(carried):
        if t is None:
            raise ctx.error(f"loop-carried input {j} is missing")
        _check_formal(ctx, body.inputs[2 + j], t, f"loop-carried input {j}")
    outs = [_final_type(ctx, t, body.outputs[1 + j].type, f"loop-carried value {j} (initial vs. body output)")
            for j, t in enumerate(carried)]
    trips = None
    m, c = ctx.value(0), ctx.value(1)
    cond_free = not ctx.has(1) or (c is not None and bool(np.all(c)))
    if m is not None and cond_free and np.size(m) == 1:
        # M alone bounds the loop only when the body cannot end it early either
        trips = max(0, int(np.asarray(m).reshape(-1)[0])) if _cond_is_passthrough(body) else None
    for i in range(k):
        outs.append(_stack_type(ctx, body.outputs[1 + n + i].type, trips, 0, f"scan output {i}"))
    return outs


def _cond_is_passthrough(body):
    """Whether the body's condition output is just its condition input (so M alone bounds the loop)."""
    out = body.outputs[0]
    while out.node is not None and out.node.op.name == "Identity":
        out = out.node.inputs[0]
    return out is body.inputs[1]


# The body's condition output ends the loop even when the cond input is absent (the spec's table
# says it is then ignored, but ONNX's reference and runtimes honour it, and exporters rely on it).
def _loop_ref(M=None, cond=None, *initial, body, _scope=None):
    trips = None if M is None else int(_scalar(M, "Loop M"))
    keep = True if cond is None else bool(_scalar(cond, "Loop cond"))
    state = list(initial)
    n = len(state)
    scans: list[list] = [[] for _ in range(len(body.outputs) - 1 - n)]
    i = 0
    while keep and (trips is None or i < trips):
        outs = _run(body, _scope, [np.asarray(i, np.int64), np.asarray(keep), *state])
        keep = bool(_scalar(outs[0], "Loop body condition"))
        state = outs[1:1 + n]
        for acc, v in zip(scans, outs[1 + n:]):
            if acc and np.shape(v) != np.shape(acc[0]):
                raise GraphError(f"Loop: scan output changed shape from {list(np.shape(acc[0]))} to "
                                 f"{list(np.shape(v))} between iterations")
            acc.append(v)
        i += 1
    stacked = [np.stack(acc) if acc else _empty_like_type(body.outputs[1 + n + j].type, (0,))
               for j, acc in enumerate(scans)]
    return (*state, *stacked)


def _loop_from_onnx(ic):
    inputs = list(ic.inputs)
    if len(inputs) <= 2 and (len(inputs) < 2 or inputs[1] is None):
        # No carried values and no cond: the graph builder would drop the absent cond and then
        # miss a fixed input. An explicit true cond means the same.
        inputs = [inputs[0] if inputs else None, ic.const(np.asarray(True))]
    return ic.emit("Loop", inputs, ic.attrs)


op(
    "Loop", inputs=("M:I?", "cond:B?", "v_initial*?"), outputs=("v_final_and_scan_outputs*",),
    types={"I": I64, "B": BOOL}, attrs=(Attr("body", "graph"),),
    infer=_loop_infer, reference=_loop_ref, groups={CONTROL}, tier=Tier.HIGH, onnx_since=1,
    from_onnx=_loop_from_onnx,
    doc="Runs `body` while the trip count M and the condition allow, threading loop-carried values; "
        "returns their final values and the per-iteration scan outputs stacked on a new axis 0.")


# -- Scan ----------------------------------------------------------------------------------------
def _scan_attrs(attrs, m, k):
    def get(name, n):
        v = attrs[name]
        return [0] * n if v is None else list(v)

    return (get("scan_input_axes", m), get("scan_input_directions", m),
            get("scan_output_axes", k), get("scan_output_directions", k))


def _scan_infer(ctx):
    body, m = graph_attr(ctx, "body"), ctx.attrs["num_scan_inputs"]
    total = len(ctx.inputs)
    if not 1 <= m <= total:
        raise ctx.error(f"num_scan_inputs must be between 1 and the number of inputs ({total}), got {m}")
    n = total - m
    if len(body.inputs) != total:
        raise ctx.error(f"body must take {total} inputs ({n} states + {m} scan inputs), "
                        f"it takes {len(body.inputs)}")
    k = len(body.outputs) - n
    if k < 0:
        raise ctx.error(f"body must return at least the {n} state values, it returns {len(body.outputs)}")
    if ctx.num_outputs > n + k:
        raise ctx.error(f"node has {ctx.num_outputs} outputs but the scan produces {n + k}")
    in_axes, in_dirs, out_axes, out_dirs = _scan_attrs(ctx.attrs, m, k)
    for name, vals, want in (("scan_input_axes", in_axes, m), ("scan_input_directions", in_dirs, m),
                             ("scan_output_axes", out_axes, k), ("scan_output_directions", out_dirs, k)):
        if len(vals) != want:
            raise ctx.error(f"{name} needs {want} entries, got {len(vals)}")
    for name, vals in (("scan_input_directions", in_dirs), ("scan_output_directions", out_dirs)):
        if any(v not in (0, 1) for v in vals):
            raise ctx.error(f"{name} entries must be 0 or 1, got {vals}")
    length = None
    for i in range(m):
        t = ctx.input(n + i)
        if not isinstance(t, dt.TensorType):
            raise ctx.error(f"scan input {i} must be a tensor, got {t}")
        _check_formal(ctx, body.inputs[n + i], t, f"scan input {i}")
        if t.shape is None:
            continue
        if not t.shape:
            raise ctx.error(f"scan input {i} is a scalar: there is no axis to scan")
        a = ctx.axis(in_axes[i], len(t.shape))
        d = t.shape[a]
        if isinstance(d, int) and isinstance(length, int) and d != length:
            raise ctx.error(f"scan inputs have different lengths {length} and {d} along their scan axes")
        length = d if length is None else length
    for j in range(n):
        _check_formal(ctx, body.inputs[j], ctx.input(j), f"state input {j}")
    outs = [_final_type(ctx, ctx.input(j), body.outputs[j].type, f"state {j} (initial vs. body output)")
            for j in range(n)]
    for i in range(k):
        outs.append(_stack_type(ctx, body.outputs[n + i].type, length, out_axes[i], f"scan output {i}"))
    return outs


def _scan_ref(*inputs, body, num_scan_inputs, scan_input_axes, scan_input_directions,
              scan_output_axes, scan_output_directions, _scope=None):
    m = num_scan_inputs
    n = len(inputs) - m
    state, xs = list(inputs[:n]), inputs[n:]
    k = len(body.outputs) - n
    in_axes, in_dirs, out_axes, out_dirs = _scan_attrs(
        {"scan_input_axes": scan_input_axes, "scan_input_directions": scan_input_directions,
         "scan_output_axes": scan_output_axes, "scan_output_directions": scan_output_directions}, m, k)
    in_axes = [a % x.ndim for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for a, x in zip(in_axes, xs)}
    if len(lengths) != 1:
        raise GraphError(f"Scan: scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    scans: list[list] = [[] for _ in range(k)]
    for t in range(steps):
        elems = [np.take(x, steps - 1 - t if d else t, axis=a) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = _run(body, _scope, [*state, *elems])
        state = outs[:n]
        for acc, v in zip(scans, outs[n:]):
            acc.append(v)
    results = []
    for j, acc in enumerate(scans):
        t = body.outputs[n + j].type
        if not acc:
            empty = _empty_like_type(t, ())
            results.append(np.expand_dims(empty, out_axes[j] % (empty.ndim + 1)).repeat(0, out_axes[j]))
            continue
        if out_dirs[j]:
            acc = acc[::-1]
        results.append(np.stack(acc, axis=out_axes[j] % (acc[0].ndim + 1)))
    return (*state, *results)


def _scan_from_onnx(ic):
    if ic.opset >= 9:
        return ic.emit("Scan", ic.inputs, ic.attrs)
    return _scan8(ic)


op("Scan", inputs=("initial_state_and_scan_inputs*",), outputs=("final_state_and_scan_outputs*",),
   attrs=(Attr("body", "graph"), Attr("num_scan_inputs", "int"), Attr("scan_input_axes", "ints", None),
          Attr("scan_input_directions", "ints", None), Attr("scan_output_axes", "ints", None),
          Attr("scan_output_directions", "ints", None)),
   infer=_scan_infer, reference=_scan_ref, groups={CONTROL}, tier=Tier.HIGH, onnx_since=8,
   from_onnx=_scan_from_onnx,
   doc="Runs `body` once per slice of the scan inputs along their scan axes, threading state "
       "values; returns the final states and the per-step scan outputs stacked along an axis.")


def _scan8(ic):
    """Scan-8 has a leading batch axis on every state and scan input and an optional
    sequence_lens input. It becomes a Loop over the batch whose body runs the newer Scan on one
    batch entry; the batch entries reach the body as sequences (SplitToSequence/SequenceAt)."""
    from ..graph import GraphBuilder

    if ic.inputs and ic.inputs[0] is not None:
        raise ic.error("Scan-8's sequence_lens input is not supported (sequences of unequal length)")
    values = ic.inputs[1:]
    m = ic.attrs.get("num_scan_inputs")
    if m is None or not 1 <= m <= len(values):
        raise ic.error(f"num_scan_inputs must be between 1 and {len(values)}, got {m}")
    body = ic.attrs["body"]
    seqs = [ic.add("SplitToSequence", [v], {"axis": 0, "keepdims": 0})[0] for v in values]
    trips = ic.add("SequenceLength", [seqs[0]])[0]
    lb = GraphBuilder(f"{ic.name}_batch")
    i = lb.input(f"{ic.name}_b", dt.TensorType((), dt.int64))
    cond = lb.input(f"{ic.name}_cond", dt.TensorType((), dt.bool_))
    inner_caps = [lb.capture(c.name, c.type) for c in ic.captures]
    seq_caps = [lb.capture(s.name, s.type) for s in seqs]
    items = [lb.add1("SequenceAt", [s, i]) for s in seq_caps]
    attrs = {"body": body, "num_scan_inputs": m}
    if ic.attrs.get("directions") is not None:
        attrs["scan_input_directions"] = ic.attrs["directions"]
    outs = lb.add("Scan", items, attrs, num_outputs=len(body.outputs), captures=inner_caps)
    cond_out = lb.add1("Identity", [cond])
    loop_body = lb.build([cond_out, *outs])
    ic.captures = [*ic.captures, *seqs]
    # an explicit true cond: the builder drops a trailing absent input, leaving Loop one short
    keep = ic.const(np.asarray(True))
    return ic.emit("Loop", [trips, keep], {"body": loop_body})


def _relaxed(t):
    """t with its extents forgotten (the rank of a tensor kept; a sequence's tensors may differ)."""
    if isinstance(t, dt.TensorType):
        return dt.TensorType(None if t.shape is None else (None,) * len(t.shape), t.dtype)
    if isinstance(t, dt.SequenceType):
        return dt.SequenceType(dt.TensorType(None, t.elem.dtype))
    if isinstance(t, dt.OptionalType):
        return dt.OptionalType(_relaxed(t.elem))
    return t


# -- body input types for the importer -----------------------------------------------------------
def body_input_types(op_name: str, input_types: list, attrs: dict, opset: int = 99) -> list | None:
    """Types of a body's formal inputs as the node's inputs fix them, for ONNX bodies that leave
    them undeclared (allowed by ONNX, common in function expansions); None for other ops.

    `input_types` are the node's input types (None for absent inputs), `attrs` its raw attributes.
    """
    def without_axis(t, axis):
        if not isinstance(t, dt.TensorType) or t.shape is None:
            return None if t is None else dt.TensorType(None, t.dtype)
        a = axis % len(t.shape) if t.shape else 0
        return dt.TensorType(t.shape[:a] + t.shape[a + 1:], t.dtype)

    if op_name == "Loop":
        # carried values may change shape between iterations: keep only what cannot change
        return [dt.TensorType((), dt.int64), dt.TensorType((), dt.bool_),
                *(_relaxed(t) for t in input_types[2:])]
    if op_name == "Scan":
        m = attrs.get("num_scan_inputs") or 0
        if opset < 9:  # a leading batch axis on everything, then the scan axis on scan inputs
            values = input_types[1:]
            n = len(values) - m
            return [without_axis(t, 0) for t in values[:n]] + \
                [without_axis(without_axis(t, 0), 0) for t in values[n:]]
        n = len(input_types) - m
        axes = list(attrs.get("scan_input_axes") or [0] * m)
        return list(input_types[:n]) + [without_axis(t, a) for t, a in zip(input_types[n:], axes)]
    if op_name == "SequenceMap":
        return [t.elem if isinstance(t, dt.SequenceType) else t for t in input_types]
    return None
