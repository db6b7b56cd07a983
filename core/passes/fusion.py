"""Backend-requested fusions: elementwise chains into one kernel, activations into producers.

A backend asks for fusions by returning requests from `Backend.fusions()` (looked up with
`getattr`, so backends that say nothing get none):

    FuseElementwise()                  Relu(Add(Mul(a, b), c)) -> FusedElementwise{body}(a, b, c)
    FuseActivation()                   Relu(Conv(x, w, b))     -> FusedKernel{body}(x, w, b)

FuseActivation fuses into ops of the op table's EPILOGUE_PRODUCER group (Conv, ConvTranspose,
Gemm, MatMul, ...); `producers` narrows that to the op names the backend has epilogue kernels for.

Either takes `accepts(node) -> bool`: the backend's own test of whether its expression emitter
can compute an elementwise node (its op, types, attributes). A backend's `supports` says more than
that (a node it defers to run time is "supported" now but has no code yet), so a fused body holds
only nodes `accepts` lets in: a fused node never reaches an emitter that cannot emit it.

A fused node carries its members as a sub-graph (`body`), so the graph interpreter runs it as it
ran the members, and IR generation turns the body into an expression tree (a fused-elementwise
instruction, or a kernel instruction with an elementwise epilogue). Only single-reader chains of
equal shape fuse, so no intermediate is needed outside the kernel and nothing is computed twice.
Scalar constants stay inside the body as immediates; larger constants become inputs.

The two fused ops are glow-internal: they are not registered in the op table (no ONNX name, no
lowering rule) and appear only after lowering, in graphs handed to a backend that asked for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import dtypes as dt
from ..graph import Graph, GraphBuilder
from ..ops.registry import ELEMENTWISE, EPILOGUE_PRODUCER, Attr, OpDef
from ..rewrite import rebuild
from .base import Pass
from .patterns import Context, keep_output_names


@dataclass(frozen=True)
class FuseElementwise:
    """Fuse single-reader chains of same-shaped elementwise ops into one kernel."""

    max_ops: int = 64
    accepts: Callable | None = None  # node -> bool: the emitter can compute it (None: any)


@dataclass(frozen=True)
class FuseActivation:
    """Fuse an elementwise chain into the op producing its input (e.g. Conv + Relu)."""

    producers: frozenset | None = None  # op names of the EPILOGUE_PRODUCER group (None: all of them)
    accepts: Callable | None = None  # node -> bool, as FuseElementwise.accepts
    # (producer, chain nodes) -> bool: the backend's kernel runs this chain as the producer's
    # epilogue. Without it, the chain's result must have the producer's type; with it, its shape
    # (an integer convolution's int32 sum may end as uint8), and the backend says the rest.
    epilogue_ok: Callable | None = None


def _fused_infer(ctx):
    return [o.type for o in ctx.attrs["body"].outputs]


def _fused_reference(*inputs, body, **_):
    from ..interpreter import run_graph

    outs = run_graph(body, {v.name: x for v, x in zip(body.inputs, inputs)}, check=False)
    return tuple(outs[v.name] for v in body.outputs)


FUSED_ELEMENTWISE = OpDef(
    name="FusedElementwise", domain="glow", inputs=("inputs*",), outputs=("outputs*",),
    attrs=(Attr("body", "graph"),), infer=_fused_infer, reference=_fused_reference,
    groups=frozenset({ELEMENTWISE}), doc="A chain of elementwise ops run as one kernel.")
FUSED_KERNEL = OpDef(
    name="FusedKernel", domain="glow", inputs=("inputs*",), outputs=("outputs*",),
    attrs=(Attr("body", "graph"),), infer=_fused_infer, reference=_fused_reference,
    doc="An op (Conv, Gemm, ...) followed by an elementwise epilogue, run as one kernel.")
FUSED_OPS = (FUSED_ELEMENTWISE, FUSED_KERNEL)


def _produces_epilogues(op, act: FuseActivation) -> bool:
    return op.in_group(EPILOGUE_PRODUCER) and (act.producers is None or op.name in act.producers)


def _fusible(node, requests) -> bool:
    out = node.outputs[0] if len(node.outputs) == 1 else None
    return (out is not None and node.op.in_group(ELEMENTWISE) and node.op.pure
            and node.op not in FUSED_OPS and not node.op.has_subgraphs and not node.captures
            and isinstance(out.type, dt.TensorType) and out.type.is_static
            and out.type.dtype != dt.string
            and all(r.accepts is None or r.accepts(node) for r in requests))


def _groups(graph: Graph, requests) -> list[tuple]:
    """[(head producer or None, members in order)] for every fusion worth making."""
    users, outputs = graph.users(), {id(v) for v in graph.outputs}
    ew = next((r for r in requests if isinstance(r, FuseElementwise)), None)
    act = next((r for r in requests if isinstance(r, FuseActivation)), None)
    root_of: dict[int, object] = {}
    members: dict[int, list] = {}

    def sole_reader(v):
        us = users.get(id(v), [])
        if len(us) != 1 or id(v) in outputs or sum(1 for x in us[0].all_inputs if x is v) != 1:
            return None
        return us[0]

    asked = [r for r in (ew, act) if r is not None]
    for node in reversed(graph.nodes):
        if not _fusible(node, asked):
            continue
        reader = sole_reader(node.outputs[0])
        root = root_of.get(id(reader)) if reader is not None and ew is not None else None
        if root is not None and node.outputs[0].type.shape == root.outputs[0].type.shape \
                and len(members[id(root)]) < ew.max_ops:
            root_of[id(node)] = root
            members[id(root)].insert(0, node)
        else:
            root_of[id(node)] = node
            members[id(node)] = [node]
    out = []
    for ms in members.values():
        root, head = ms[-1], None
        if act is not None:
            # The producer of one of the chain's inputs, if the chain is its only reader and it
            # computes a result of the chain's shape (so the epilogue runs on its accumulator).
            head = next((v.node for m in ms for v in m.all_inputs
                         if v.node is not None and _produces_epilogues(v.node.op, act)
                         and len(v.node.outputs) == 1 and v.node.op.pure and not v.node.captures
                         and sole_reader(v) is m and _epilogue_fits(act, v, ms)), None)
        if head is not None or len(ms) > 1:
            out.append((head, ms))
    return out


def _epilogue_fits(act: FuseActivation, v, members) -> bool:
    """Whether the chain `members` can be the epilogue of v's producer (see `epilogue_ok`)."""
    out = members[-1].outputs[0].type
    if act.epilogue_ok is None:
        return v.type == out
    return v.type.shape == out.shape and bool(act.epilogue_ok(v.node, members))


def _body(head, members) -> tuple[Graph, list]:
    """The members as a sub-graph over fresh inputs; returns it and the outer values it reads."""
    b = GraphBuilder(f"{members[-1].name}/body")
    ext, mapping = [], {}

    def m(v, inline=True):
        if v is None:
            return None
        if id(v) in mapping:
            return mapping[id(v)]
        if inline and v.data is not None and v.data.size <= 1 and v.data.dtype != object:
            return v  # a scalar constant: an immediate in the elementwise expression
        ph = b.input(f"in{len(ext)}", v.type)
        ext.append(v)
        mapping[id(v)] = ph
        return ph

    for n in ([head] if head is not None else []) + list(members):
        # The head's arguments are always inputs: its kernel takes operands, not immediates.
        ins = [m(v, inline=n is not head) for v in n.inputs]
        out = b.add(n.op, ins, dict(n.attrs), name=n.name, num_outputs=1)[0]
        mapping[id(n.outputs[0])] = out
    return b.build([mapping[id(members[-1].outputs[0])]]), ext


def fuse(graph: Graph, requests) -> Graph:
    requests = tuple(requests or ())
    if not requests:
        return graph
    plans = {id(ms[-1]): (head, ms) for head, ms in _groups(graph, requests)}
    if not plans:
        return graph
    new_of: dict[int, object] = {}
    ctx = Context(graph)

    def visit(rb, node, ins):
        for old, new in zip(node.inputs, ins):
            if old is not None:
                new_of[id(old)] = new
        plan = plans.get(id(node))
        if plan is None:
            return None
        head, ms = plan
        body, ext = _body(head, ms)
        if not ext:
            return None  # only immediates: constant folding's business, not a kernel's
        op = FUSED_KERNEL if head is not None else FUSED_ELEMENTWISE
        inputs = [v if v.data is not None else new_of[id(v)] for v in ext]
        out = rb.add(op, inputs, {"body": body}, name=f"{node.name}/fused", num_outputs=1)
        keep_output_names(ctx, rb, node, out)
        return out

    new, _ = rebuild(graph, visit)
    from .dce import eliminate_dead_code

    return eliminate_dead_code(new)


def fusion_pass(requests) -> Pass:
    return Pass("fuse", lambda g: fuse(g, requests), "fusions the backend asked for")


def unfuse(graph: Graph) -> Graph:
    """The graph with every fused node replaced by its members again, so that specialising it
    folds shapes and constants that went into a fused body (constant folding does not look
    inside one); the specialised graph is fused again afterwards."""
    from ..rewrite import rebuild

    def visit(rb, node, inputs):
        if node.op not in FUSED_OPS:
            return None
        body = node.attrs["body"]
        env = {id(ph): x for ph, x in zip(body.inputs, inputs)}
        for n in body.nodes:
            ins = [None if v is None else v if v.is_constant else env[id(v)] for v in n.inputs]
            outs = rb.add(n.op, ins, dict(n.attrs), name=f"{node.name}/{n.name}", num_outputs=len(n.outputs))
            env.update((id(o), nv) for o, nv in zip(n.outputs, outs))
        return [v if v.is_constant else env[id(v)] for v in body.outputs]

    return rebuild(graph, visit)[0]
