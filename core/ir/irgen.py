"""IR generation: a scheduled graph becomes instructions over buffers.

* graph inputs, outputs and constants get input, output and weight buffers; every other value
  an activation buffer, except values that are only a different look at existing bytes:
  Reshape/Flatten/Squeeze/Unsqueeze/Identity and contiguous Slice/Split outputs are *views*;
* Concat along a contiguous axis copies each input into a view of its result (copy elimination
  later makes the producers write there directly);
* a node whose result is a graph output writes straight into the output buffer;
* fused nodes become a `fused` instruction (an expression tree) or a kernel with an epilogue;
* lifetimes are marked crudely (every alloc first, every dealloc last): the IR passes sink the
  allocs and hoist the deallocs to where the buffers are really first and last used.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph import Graph, Node, Value
from ..ops.registry import VIEW
from .instr import ACTIVATION, INPUT, OUTPUT, WEIGHT, Buffer, Expr, Instr, IRFunction, View


def _strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def contiguous_offset(shape, region) -> int | None:
    """Element offset of `region` ([(start, stop)] per axis) if it is one contiguous run in a
    row-major tensor of `shape`, else None. Contiguous: axes of extent one, then one axis of any
    extent, then only full axes."""
    k = next((i for i, (a, b) in enumerate(region) if b - a != 1), len(region))
    if any((a, b) != (0, d) for (a, b), d in zip(region[k + 1:], shape[k + 1:])):
        return None
    return sum(a * s for (a, _), s in zip(region, _strides(shape)))


def _ints(v: Value | None):
    if v is None or v.data is None or v.data.dtype.kind not in "iu":
        return None
    return [int(x) for x in v.data.reshape(-1)]


def slice_region(node: Node, shape) -> list | None:
    """Per-axis [start, stop) of a unit-step Slice with constant bounds, else None."""
    ins = list(node.inputs) + [None] * (5 - len(node.inputs))
    starts, ends = _ints(ins[1]), _ints(ins[2])
    axes = _ints(ins[3]) if ins[3] is not None else list(range(len(starts or [])))
    steps = _ints(ins[4]) if ins[4] is not None else [1] * len(starts or [])
    if starts is None or ends is None or axes is None or steps is None or any(s != 1 for s in steps):
        return None
    region = [(0, d) for d in shape]
    for a, s, e in zip(axes, starts, ends):
        a = a + len(shape) if a < 0 else a
        d = shape[a]
        s = min(max(s + d if s < 0 else s, 0), d)
        e = min(max(e + d if e < 0 else e, 0), d)
        region[a] = (s, max(s, e))
    return region


class _Gen:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.names: set[str] = set()
        self.buffers: list[Buffer] = []
        self.instrs: list[Instr] = []
        self.operand: dict[int, object] = {}
        self.inputs = [self.buffer(v.name, v.type, INPUT) for v in graph.inputs]
        for v, b in zip(graph.inputs, self.inputs):
            self.operand[id(v)] = b
        self.outputs = [self.buffer(v.name, v.type, OUTPUT) for v in graph.outputs]
        self.out_buf = {id(v): b for v, b in zip(graph.outputs, self.outputs)}

    def unique(self, name: str) -> str:
        base, i = name, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name

    def buffer(self, name, type, kind, data=None) -> Buffer:
        b = Buffer(self.unique(name), type, kind, data)
        self.buffers.append(b)
        return b

    def get(self, v: Value | None):
        """The operand holding value `v` (weights get their buffer on first use)."""
        if v is None:
            return None
        op = self.operand.get(id(v))
        if op is None:
            if v.data is None:
                raise KeyError(f"value '{v.name}' is used before it is defined")
            # as the graph holds it: a folded Transpose stays a view, which a kernel that packs
            # the weight reads as it is (a C-order copy of VGG-19's transposed 25088 x 4096 fc
            # weight took 1.1 s); whoever needs its bytes in order makes them so
            data = v.data
            op = self.operand[id(v)] = self.buffer(v.name, v.type, WEIGHT, data)
        return op

    def dest(self, v: Value):
        """Where the node producing `v` writes it: the output buffer, or a new activation."""
        b = self.out_buf.get(id(v))
        if b is None:
            b = self.buffer(v.name, v.type, ACTIVATION)
        self.operand[id(v)] = b
        return b

    def emit(self, instr: Instr):
        self.instrs.append(instr)

    def view_of(self, v: Value, src, offset: int, name: str | None = None):
        """Bind `v` to a view of `src`'s root at byte `offset`; copy it out if `v` is a graph output."""
        view = View(self.unique(name or v.name), src.root, v.type, src.offset + offset)
        if id(v) in self.out_buf:
            self.emit(Instr("copy", v.name, (self.dest(v),), (view,)))
        else:
            self.operand[id(v)] = view

    # -- per-node translation ----------------------------------------------------------------
    def node(self, n: Node):
        src = self.get(n.inputs[0]) if n.inputs and n.inputs[0] is not None else None
        if (src is not None and not src.root.boxed and _plain(n.inputs[0])
                and all(_plain(o) for o in n.outputs) and self.try_view(n, src)):
            return
        if n.op.name == "Concat" and all(_plain(v) for v in n.inputs) and _plain(n.outputs[0]):
            if self.try_concat(n):
                return
        if n.op.name in ("FusedElementwise", "FusedKernel") and n.op.domain == "glow":
            self.fused(n)
            return
        self.kernel(n)

    def try_view(self, n: Node, src) -> bool:
        out, x = n.outputs[0], n.inputs[0]
        shape = x.type.shape
        if n.op.in_group(VIEW):
            if out.type.dtype != x.type.dtype or out.type.nbytes != x.type.nbytes:
                return False
            self.view_of(out, src, 0)
            return True
        if n.op.name == "Slice":
            region = slice_region(n, shape)
            off = None if region is None else contiguous_offset(shape, region)
            if off is None or tuple(b - a for a, b in region) != out.type.shape:
                return False
            self.view_of(out, src, off * x.type.dtype.itemsize)
            return True
        if n.op.name == "Split":
            sizes = [o.type.shape[_axis(n, len(shape))] for o in n.outputs]
            axis = _axis(n, len(shape))
            if any(d != 1 for d in shape[:axis]) or sum(sizes) != shape[axis]:
                return False
            stride = _strides(shape)[axis] * x.type.dtype.itemsize
            start = 0
            for o, s in zip(n.outputs, sizes):
                self.view_of(o, src, start * stride)
                start += s
            return True
        return False

    def try_concat(self, n: Node) -> bool:
        out = n.outputs[0]
        shape = out.type.shape
        axis = _axis(n, len(shape))
        if any(d != 1 for d in shape[:axis]):
            return False
        dst = self.dest(out)
        stride = _strides(shape)[axis] * out.type.dtype.itemsize
        start = 0
        for i, v in enumerate(n.inputs):
            part = View(self.unique(f"{out.name}[{i}]"), dst.root, v.type, dst.offset + start * stride)
            self.emit(Instr("copy", f"{n.name}[{i}]", (part,), (self.get(v),)))
            start += v.type.shape[axis]
        return True

    def kernel(self, n: Node):
        ins = [self.get(v) for v in n.inputs]
        attrs = dict(n.attrs)
        n_args = None
        if n.captures:
            n_args = len(ins)
            ins += [self.get(v) for v in n.captures]
            attrs["_capture_names"] = tuple(v.name for v in n.captures)
        outs = tuple(self.dest(o) for o in n.outputs)
        self.emit(Instr("kernel", n.name, outs, tuple(ins), op=n.op, attrs=attrs, n_args=n_args))

    def fused(self, n: Node):
        body = n.attrs["body"]
        operands = [self.get(v) for v in n.inputs]
        leaf = {id(ph): i for i, ph in enumerate(body.inputs)}
        out = self.dest(n.outputs[0])
        if n.op.name == "FusedElementwise":
            expr = body_expr(body, body.nodes, leaf)
            self.emit(Instr("fused", n.name, (out,), tuple(operands), expr=expr))
            return
        head = body.nodes[0]
        args = [None if v is None else operands[leaf[id(v)]] for v in head.inputs]
        # Epilogue leaves index the instruction's inputs: the head's arguments, then the rest.
        index = {}
        for v in head.inputs:
            if v is not None:
                index.setdefault(id(v), list(head.inputs).index(v))
        extra = []
        for ph in body.inputs:
            if id(ph) not in index:
                index[id(ph)] = len(args) + len(extra)
                extra.append(operands[leaf[id(ph)]])
        expr = body_expr(body, body.nodes[1:], index, {id(head.outputs[0]): -1})
        self.emit(Instr("kernel", n.name, (out,), tuple(args + extra), op=head.op,
                        attrs=dict(head.attrs), expr=expr, n_args=len(args)))


def _plain(v: Value) -> bool:
    """A statically sized tensor of plain bytes (can live in the arena or be viewed)."""
    t = v.type
    return isinstance(t, dt.TensorType) and t.is_static and t.dtype != dt.string and t.numel > 0


def _axis(n: Node, rank: int) -> int:
    a = n.attrs.get("axis", 0) or 0
    return a + rank if a < 0 else a


def body_expr(body: Graph, nodes, leaf_index: dict, special: dict | None = None) -> Expr:
    """The expression tree computing `body`'s output from `nodes` (elementwise, in order)."""
    env: dict[int, Expr] = {}
    for ph in body.inputs:
        if id(ph) in leaf_index:
            env[id(ph)] = Expr(ph.type, arg=leaf_index[id(ph)])
    for k, i in (special or {}).items():
        env[k] = Expr(None, arg=i)

    def get(v):
        if v is None:
            return None
        if id(v) in env:
            return env[id(v)]
        return Expr(v.type, value=v.data)  # an immediate

    for n in nodes:
        o = n.outputs[0]
        env[id(o)] = Expr(o.type, op=n.op, args=tuple(get(v) for v in n.inputs), attrs=dict(n.attrs))
    return env[id(body.outputs[0])]


def generate_ir(graph: Graph, order: list[Node] | None = None) -> IRFunction:
    """Instructions for `graph`'s nodes in `order` (default: the graph's order)."""
    gen = _Gen(graph)
    for n in order if order is not None else graph.nodes:
        gen.node(n)
    written = {id(o.root) for i in gen.instrs for o in i.outputs if o is not None}
    for v, b in zip(graph.outputs, gen.outputs):  # outputs that are inputs or constants
        if id(b) not in written:
            gen.emit(Instr("copy", v.name, (b,), (gen.get(v),)))
    acts = [b for b in gen.buffers if b.kind == ACTIVATION]
    instrs = ([Instr("alloc", b.name, (b,)) for b in acts] + gen.instrs +
              [Instr("dealloc", b.name, (b,)) for b in acts])
    return IRFunction(graph.name, tuple(gen.buffers), tuple(instrs), tuple(gen.inputs),
                      tuple(gen.outputs))
