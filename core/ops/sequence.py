"""ONNX sequence and optional values (reference backend only).

At run time a sequence is a Python list of ndarrays and an empty optional is None. Their types are
`SequenceType(elem)` and `OptionalType(elem)`; ports carrying them have no type variable (type
variables constrain tensor element types), so each shape rule checks what it was given.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from ._shape import ints
from .registry import MOVEMENT, SEQUENCE, Attr, Tier, op

#: Element types a sequence or optional may hold.
ELEMS = frozenset(dt.ALL)
INDEX = frozenset({dt.int32, dt.int64})


# -- type merging (shared with control flow) -----------------------------------------------------
def merge_shapes(a, b):
    """The most precise shape both a and b fit (unknown where they differ)."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def merge_types(a, b, what="values"):
    """One type describing both a and b; raises GraphError when their kinds or element types differ."""
    if a == b:
        return a
    if isinstance(a, dt.TensorType) and isinstance(b, dt.TensorType):
        if a.dtype != b.dtype:
            raise GraphError(f"{what} have different element types {a.dtype.name} and {b.dtype.name}")
        return dt.TensorType(merge_shapes(a.shape, b.shape), a.dtype)
    if isinstance(a, dt.SequenceType) and isinstance(b, dt.SequenceType):
        return dt.SequenceType(merge_types(a.elem, b.elem, what))
    if isinstance(a, dt.OptionalType) and isinstance(b, dt.OptionalType):
        return dt.OptionalType(merge_types(a.elem, b.elem, what))
    raise GraphError(f"{what} have different kinds of type: {a} and {b}")


def merged(ctx, a, b, what):
    try:
        return merge_types(a, b, what)
    except GraphError as e:
        raise ctx.error(str(e)) from None


def graph_attr(ctx, name):
    from ..graph import Graph  # not at module level: graph.py imports the op table

    g = ctx.attrs[name]
    if not isinstance(g, Graph):
        raise ctx.error(f"attribute '{name}' must be a graph, got {type(g).__name__}")
    return g


def seq_input(ctx, i, name="input_sequence") -> dt.SequenceType:
    t = ctx.input(i)
    if not isinstance(t, dt.SequenceType):
        raise ctx.error(f"{name} must be a sequence, got {t}")
    return t


def tensor_input(ctx, i, name) -> dt.TensorType:
    t = ctx.input(i)
    if not isinstance(t, dt.TensorType):
        raise ctx.error(f"{name} must be a tensor, got {t}")
    return t


def _position(ctx, i, what="position"):
    """Check an optional scalar-like integer input; return its known value or None."""
    if not ctx.has(i):
        return None
    t = tensor_input(ctx, i, what)
    if t.shape is not None and not (len(t.shape) == 0 or t.shape in ((1,), (None,))):
        raise ctx.error(f"{what} must be a scalar, got shape {list(t.shape)}")
    v = ints(ctx.value(i))
    return None if v is None else v[0]


def _index(seq, pos, upper, what):
    """Normalise position `pos` against a sequence, accepting [-n, n - 1 + upper]."""
    n = len(seq)
    p = int(np.asarray(pos).reshape(-1)[0])
    if not -n <= p <= n - 1 + upper:
        raise GraphError(f"{what}: position {p} out of range for a sequence of {n} tensors")
    return p + n if p < 0 else p


# -- construction and access ---------------------------------------------------------------------
op("SequenceEmpty", inputs=(), outputs=("output",),
   attrs=(Attr("dtype", "dtype", dt.float32, "element type of the (future) tensors"),),
   infer=lambda ctx: [dt.SequenceType(dt.TensorType(None, ctx.attrs["dtype"]))],
   reference=lambda dtype: [], groups={SEQUENCE}, tier=Tier.HIGH, onnx_since=11,
   doc="An empty sequence of tensors of element type `dtype`.")


def _construct_infer(ctx):
    t = tensor_input(ctx, 0, "inputs")
    for i in range(1, len(ctx.inputs)):
        t = merged(ctx, t, tensor_input(ctx, i, "inputs"), "sequence elements")
    return [dt.SequenceType(t)]


op("SequenceConstruct", inputs=("inputs:T*",), outputs=("output_sequence",), types={"T": ELEMS},
   infer=_construct_infer, reference=lambda *xs: list(xs), groups={SEQUENCE}, tier=Tier.HIGH,
   onnx_since=11, doc="A sequence holding the input tensors, in order.")


def _insert_infer(ctx):
    s = seq_input(ctx, 0)
    t = tensor_input(ctx, 1, "tensor")
    _position(ctx, 2)
    if s.elem.dtype != t.dtype:
        raise ctx.error(f"tensor of type {t.dtype.name} cannot join a sequence of {s.elem.dtype.name}")
    return [dt.SequenceType(merged(ctx, s.elem, t, "sequence elements"))]


def _insert_ref(seq, tensor, position=None):
    out = list(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_index(out, position, 1, "SequenceInsert"), tensor)
    return out


op("SequenceInsert", inputs=("input_sequence", "tensor:T", "position:I?"),
   outputs=("output_sequence",), types={"T": ELEMS, "I": INDEX},
   infer=_insert_infer, reference=_insert_ref, groups={SEQUENCE}, tier=Tier.HIGH, onnx_since=11,
   doc="The sequence with `tensor` inserted before `position` (default: at the back).")


def _at_infer(ctx):
    s = seq_input(ctx, 0)
    _position(ctx, 1)
    return [s.elem]


op("SequenceAt", inputs=("input_sequence", "position:I"), outputs=("tensor",), types={"I": INDEX},
   infer=_at_infer,
   reference=lambda seq, pos: seq[_index(seq, pos, 0, "SequenceAt")],
   groups={SEQUENCE}, tier=Tier.HIGH, onnx_since=11,
   doc="The tensor at `position` (negative counts from the back).")


def _erase_infer(ctx):
    s = seq_input(ctx, 0)
    _position(ctx, 1)
    return [s]


def _erase_ref(seq, position=None):
    if not seq:
        raise GraphError("SequenceErase: cannot erase from an empty sequence")
    out = list(seq)
    del out[-1 if position is None else _index(out, position, 0, "SequenceErase")]
    return out


op("SequenceErase", inputs=("input_sequence", "position:I?"), outputs=("output_sequence",),
   types={"I": INDEX}, infer=_erase_infer, reference=_erase_ref, groups={SEQUENCE}, tier=Tier.HIGH,
   onnx_since=11, doc="The sequence without the tensor at `position` (default: the last one).")


def _length_infer(ctx):
    seq_input(ctx, 0)
    return [dt.TensorType((), dt.int64)]


op("SequenceLength", inputs=("input_sequence",), outputs=("length",), infer=_length_infer,
   reference=lambda seq: np.asarray(len(seq), dtype=np.int64), groups={SEQUENCE}, tier=Tier.HIGH,
   onnx_since=11, doc="The number of tensors in the sequence, as an int64 scalar.")


# -- tensor <-> sequence -------------------------------------------------------------------------
def _concat_infer(ctx):
    e = seq_input(ctx, 0).elem
    axis, new = ctx.attrs["axis"], ctx.attrs["new_axis"]
    if new not in (0, 1):
        raise ctx.error(f"new_axis must be 0 or 1, got {new}")
    if e.shape is None:
        return [dt.TensorType(None, e.dtype)]
    r = len(e.shape) + new
    if r == 0:
        raise ctx.error("cannot concatenate scalars without new_axis=1")
    a = ctx.axis(axis, r)
    shape = list(e.shape)
    if new:
        shape.insert(a, None)
    else:
        shape[a] = None  # the sequence's length (and its tensors' extents) are run-time facts
    return [dt.TensorType(tuple(shape), e.dtype)]


def _concat_ref(seq, axis, new_axis):
    if not seq:
        raise GraphError("ConcatFromSequence: the sequence is empty")
    return np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)


op("ConcatFromSequence", inputs=("input_sequence",), outputs=("concat_result",),
   attrs=(Attr("axis", "int"), Attr("new_axis", "int", 0)), infer=_concat_infer,
   reference=_concat_ref, groups={SEQUENCE, MOVEMENT}, tier=Tier.HIGH, onnx_since=11,
   doc="Concatenates the sequence's tensors along `axis` (stacks them on a new axis if new_axis=1).")


def _split_infer(ctx):
    t = ctx.input(0)
    axis, keep = ctx.attrs["axis"], ctx.attrs["keepdims"]
    if t.shape is None:
        return [dt.SequenceType(dt.TensorType(None, t.dtype))]
    if len(t.shape) == 0:
        raise ctx.error("cannot split a scalar")
    a = ctx.axis(axis, len(t.shape))
    shape = list(t.shape)
    if ctx.has(1):
        st = tensor_input(ctx, 1, "split")
        if st.shape is not None and len(st.shape) > 1:
            raise ctx.error(f"split must be a scalar or 1-D, got shape {list(st.shape)}")
        split, d = ints(ctx.value(1)), shape[a]
        shape[a] = None
        if split is not None:
            if any(s < 0 for s in split) or (np.ndim(ctx.value(1)) == 0 and split[0] == 0):
                raise ctx.error(f"split sizes must be positive, got {split}")
            if np.ndim(ctx.value(1)) == 1:
                if isinstance(d, int) and sum(split) != d:
                    raise ctx.error(f"split sizes {split} do not add up to dimension {d} of axis {axis}")
                if len(set(split)) == 1:
                    shape[a] = split[0]
            elif isinstance(d, int) and d % split[0] == 0:
                shape[a] = split[0]
    elif keep:
        shape[a] = 1
    else:
        del shape[a]
    return [dt.SequenceType(dt.TensorType(tuple(shape), t.dtype))]


def _split_ref(x, split=None, *, axis, keepdims):
    n = x.shape[axis]
    if split is None:
        parts = np.split(x, n, axis=axis)
        return parts if keepdims else [np.squeeze(p, axis=axis) for p in parts]
    split = np.asarray(split)
    if split.ndim == 0:
        size = int(split)
        if size <= 0:
            raise GraphError(f"SplitToSequence: split must be positive, got {size}")
        bounds = list(range(size, n, size))
    else:
        sizes = [int(s) for s in split]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise GraphError(f"SplitToSequence: split sizes {sizes} do not add up to {n}")
        bounds = list(np.cumsum(sizes)[:-1])
    return np.split(x, bounds, axis=axis)


op("SplitToSequence", inputs=("input:T", "split:I?"), outputs=("output_sequence",),
   types={"T": ELEMS, "I": INDEX}, attrs=(Attr("axis", "int", 0), Attr("keepdims", "int", 1)),
   infer=_split_infer, reference=_split_ref, groups={SEQUENCE, MOVEMENT}, tier=Tier.HIGH,
   onnx_since=11,
   doc="Splits a tensor along `axis` into a sequence: in chunks of a scalar `split`, in the 1-D "
       "`split`'s sizes, or (default) into slices of 1, dropped from the shape if keepdims=0.")


# -- SequenceMap ---------------------------------------------------------------------------------
def _map_infer(ctx):
    body = graph_attr(ctx, "body")
    seq_input(ctx, 0)
    if len(body.inputs) != len(ctx.inputs):
        raise ctx.error(f"body takes {len(body.inputs)} inputs but the node gives {len(ctx.inputs)}")
    for i, (t, formal) in enumerate(zip(ctx.inputs, body.inputs)):
        sample = t.elem if isinstance(t, dt.SequenceType) else t
        if isinstance(sample, dt.TensorType) and isinstance(formal.type, dt.TensorType) and \
                sample.dtype != formal.type.dtype:
            raise ctx.error(f"input {i} ({sample.dtype.name}) does not match body input "
                            f"'{formal.name}' ({formal.type.dtype.name})")
    if ctx.num_outputs > len(body.outputs):
        raise ctx.error(f"node has {ctx.num_outputs} outputs but the body only {len(body.outputs)}")
    return [dt.SequenceType(v.type) for v in body.outputs]


def _map_ref(seq, *extra, body, _scope=None):
    from ..interpreter import run_graph

    n = len(seq)
    for i, e in enumerate(extra):
        if isinstance(e, list) and len(e) != n:
            raise GraphError(f"SequenceMap: input {i + 1} has {len(e)} samples, the first {n}")
    names = [v.name for v in body.inputs]
    outs = [[] for _ in body.outputs]
    for i in range(n):
        args = [seq[i]] + [e[i] if isinstance(e, list) else e for e in extra]
        res = run_graph(body, {**(_scope or {}), **dict(zip(names, args))}, check=False)
        for k, v in enumerate(body.outputs):
            outs[k].append(res[v.name])
    return tuple(outs)


op(
    "SequenceMap", inputs=("input_sequence", "additional_inputs*?"), outputs=("out_sequence*",),
    attrs=(Attr("body", "graph"),), infer=_map_infer, reference=_map_ref, groups={SEQUENCE},
    tier=Tier.HIGH, onnx_since=17,
    doc="Runs `body` on each sample of the input sequence(s) (tensor inputs are passed whole) and "
        "collects each output into a sequence.")


# -- optionals -----------------------------------------------------------------------------------
def _optional_infer(ctx):
    if ctx.has(0):
        t = ctx.input(0)
        if isinstance(t, dt.OptionalType):
            raise ctx.error("an optional cannot hold an optional")
        return [dt.OptionalType(t)]
    t = ctx.attrs["type"]
    if t is None:
        raise ctx.error("an empty optional needs the 'type' attribute")
    if not isinstance(t, (dt.TensorType, dt.SequenceType)):
        raise ctx.error(f"an optional holds a tensor or a sequence, not {t}")
    return [dt.OptionalType(t)]


op("Optional", inputs=("input?",), outputs=("output",), attrs=(Attr("type", "type", None),),
   infer=_optional_infer, reference=lambda x=None, *, type: x, groups={SEQUENCE}, tier=Tier.HIGH,
   onnx_since=15, doc="An optional holding the input, or an empty one of type `type` without input.")

op("OptionalHasElement", inputs=("input?",), outputs=("output",),
   infer=lambda ctx: [dt.TensorType((), dt.bool_)],
   reference=lambda x=None: np.asarray(x is not None),
   groups={SEQUENCE}, tier=Tier.HIGH, onnx_since=15,
   doc="Whether the input is present: false for an empty optional or no input, true otherwise.")


def _get_infer(ctx):
    t = ctx.input(0)
    return [t.elem if isinstance(t, dt.OptionalType) else t]


def _get_ref(x):
    if x is None:
        raise GraphError("OptionalGetElement: the optional is empty")
    return x


op("OptionalGetElement", inputs=("input",), outputs=("output",), infer=_get_infer,
   reference=_get_ref, groups={SEQUENCE}, tier=Tier.HIGH, onnx_since=15,
   doc="The value inside an optional (an error if it is empty); a tensor or sequence passes through.")
