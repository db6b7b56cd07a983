"""ATen rules: views and movement, indexing, tensor creation, casts, sizes and tuples.

Target shapes come from the shape torch recorded for the result (`node.meta["val"]`): a dim it
knows is an int; a symbolic one becomes ONNX's 0 ("as the input's dim here") or the single -1
when it can, so the shape stays a constant and glow's shape inference keeps the symbol; only
otherwise is it computed from the SymInt arguments at run time.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import dtypes as dt
from .table import Unsupported, aten

_BIG = 2**62  # "to the end" for Slice


def _same(a, b) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a.node.expr == b.node.expr


def _i64(cx, xs):
    return cx.const(np.array(list(xs), np.int64))


def reshape_to_recorded(cx, x, src_shape, size_args=None):
    """Reshape `x` to the shape torch recorded for the current node."""
    out = tuple(cx.meta(cx.node).shape)
    target, free = [], 0
    for i, d in enumerate(out):
        if isinstance(d, int):
            if d == 0:
                raise Unsupported("reshape to a size-0 dimension")
            target.append(d)
        elif i < len(src_shape) and _same(src_shape[i], d):
            target.append(0)
        else:
            target.append(-1)
            free += 1
    if free <= 1:
        return cx.add("Reshape", [x, _i64(cx, target)])
    if size_args is None:
        raise Unsupported("reshape with several run-time sizes")
    return cx.add("Reshape", [x, cx.size_value(size_args)])


@aten("view.default", "_unsafe_view.default", "reshape.default")
def _view(cx, a):
    size = a["size"] if "size" in a else a["shape"]  # view's name, reshape's
    return reshape_to_recorded(cx, cx.v(a["self"]), cx.shape(a["self"]), list(size))


@aten("flatten.using_ints", "unflatten.int")
def _flatten(cx, a):
    return reshape_to_recorded(cx, cx.v(a["self"]), cx.shape(a["self"]))


@aten("permute.default")
def _permute(cx, a):
    r = cx.rank(a["self"])
    return cx.add("Transpose", [cx.v(a["self"])], perm=tuple(d % r for d in a["dims"]))


@aten("transpose.int")
def _transpose(cx, a):
    r = cx.rank(a["self"])
    perm = list(range(r))
    if r:
        i, j = a["dim0"] % r, a["dim1"] % r
        perm[i], perm[j] = perm[j], perm[i]
    return cx.add("Transpose", [cx.v(a["self"])], perm=tuple(perm))


@aten("t.default", "numpy_T.default")
def _t(cx, a):
    r = cx.rank(a["self"])
    if r < 2:
        return cx.add("Identity", [cx.v(a["self"])])
    return cx.add("Transpose", [cx.v(a["self"])], perm=tuple(range(r))[::-1])


@aten("expand.default")
def _expand(cx, a):
    src, out = cx.shape(a["self"]), tuple(cx.meta(cx.node).shape)
    off = len(out) - len(src)
    target, dynamic = [], False
    for i, d in enumerate(out):
        if isinstance(d, int):
            target.append(d)
        elif i >= off and _same(src[i - off], d):
            target.append(1)  # as the input's: Expand broadcasts 1 to it
        else:
            target.append(None)
            dynamic = True
    if not dynamic:
        return cx.add("Expand", [cx.v(a["self"]), _i64(cx, target)])
    args = cx.sizes(a["size"])
    parts = [p if t is None else t for p, t in zip(args, target)]
    parts = [cx.const(np.array([p], np.int64)) if isinstance(p, int) else p for p in parts]
    return cx.add("Expand", [cx.v(a["self"]), cx.add("Concat", parts, axis=0)])


@aten("unsqueeze.default")
def _unsqueeze(cx, a):
    r = cx.rank(a["self"]) + 1
    return cx.add("Unsqueeze", [cx.v(a["self"]), _i64(cx, [a["dim"] % r])])


@aten("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(cx, a):
    shape, r = cx.shape(a["self"]), cx.rank(a["self"])
    dims = a.get("dim", None)
    dims = range(r) if dims is None else ([dims] if isinstance(dims, int) else dims)
    axes = []
    for d in dims:
        d = d % max(r, 1)
        if r and not isinstance(shape[d], int):
            if "default" in str(cx.node.target):
                continue
            raise Unsupported("squeeze of a dimension of symbolic size")
        if r and shape[d] == 1:
            axes.append(d)
    if not axes:
        return cx.add("Identity", [cx.v(a["self"])])
    return cx.add("Squeeze", [cx.v(a["self"]), _i64(cx, axes)])


@aten("slice.Tensor")
def _slice(cx, a):
    r = cx.rank(a["self"])
    axis = a["dim"] % r
    start = 0 if a["start"] is None else a["start"]
    end = _BIG if a["end"] is None else a["end"]
    step = a["step"]
    parts = cx.sizes([start, end])
    parts = [min(p, _BIG) if isinstance(p, int) else p for p in parts]
    if all(isinstance(p, int) for p in parts):
        if parts[0] == 0 and parts[1] >= _BIG and step == 1:
            return cx.add("Identity", [cx.v(a["self"])])
        starts, ends = _i64(cx, parts[:1]), _i64(cx, parts[1:])
    else:
        starts, ends = (p if not isinstance(p, int) else _i64(cx, [p]) for p in parts)
    return cx.add("Slice", [cx.v(a["self"]), starts, ends, _i64(cx, [axis]), _i64(cx, [step])])


@aten("select.int")
def _select(cx, a):
    axis = a["dim"] % cx.rank(a["self"])
    idx = cx.scalar_int(a["index"])
    idx = cx.const(np.array(idx, np.int64)) if isinstance(idx, int) else idx
    return cx.add("Gather", [cx.v(a["self"]), idx], axis=axis)


@aten("narrow.default")
def _narrow(cx, a):
    axis = a["dim"] % cx.rank(a["self"])
    start, length = cx.sizes([a["start"], a["length"]])
    if not (isinstance(start, int) and isinstance(length, int)):
        raise Unsupported("narrow with run-time bounds")
    return cx.add("Slice", [cx.v(a["self"]), _i64(cx, [start]), _i64(cx, [start + length]), _i64(cx, [axis])])


@aten("cat.default")
def _cat(cx, a):
    d = cx.out_dtype
    tensors = [t for t in a["tensors"] if not (tuple(cx.shape(t)) == (0,))]  # torch skips legacy empties
    r = len(cx.meta(cx.node).shape)
    return cx.add("Concat", [cx.operand(t, d) for t in tensors], axis=a["dim"] % r)


@aten("stack.default")
def _stack(cx, a):
    d = cx.out_dtype
    r = len(cx.meta(cx.node).shape)
    axis = _i64(cx, [a["dim"] % r])
    return cx.add("Concat", [cx.add("Unsqueeze", [cx.operand(t, d), axis]) for t in a["tensors"]], axis=a["dim"] % r)


@aten("split.Tensor", "split_with_sizes.default", "unbind.int", "chunk.default")
def _split(cx, a):
    r = cx.rank(a["self"])
    axis = a["dim"] % r
    outs = cx.meta(cx.node)
    sizes = [o.shape[axis] for o in outs]
    if not all(isinstance(s, int) for s in sizes):
        raise Unsupported("split into pieces of symbolic size")
    pieces = cx.add_n("Split", [cx.v(a["self"]), _i64(cx, sizes)], len(sizes), axis=axis)
    if "unbind" in str(cx.node.target):
        pieces = [cx.add("Squeeze", [p, _i64(cx, [axis])]) for p in pieces]
    return tuple(pieces)


@aten("repeat.default")
def _repeat(cx, a):
    reps = list(a["repeats"])
    x = cx.v(a["self"])
    extra = len(reps) - cx.rank(a["self"])
    if extra > 0:
        x = cx.add("Unsqueeze", [x, _i64(cx, range(extra))])
    return cx.add("Tile", [x, cx.size_value(reps)])


@aten("constant_pad_nd.default")
def _pad(cx, a):
    r, pad = cx.rank(a["self"]), list(a["pad"])
    begins, ends = [0] * r, [0] * r
    for k in range(len(pad) // 2):  # torch lists (begin, end) from the last dim backwards
        begins[r - 1 - k], ends[r - 1 - k] = pad[2 * k], pad[2 * k + 1]
    d = cx.out_dtype
    return cx.add("Pad", [cx.v(a["self"]), _i64(cx, begins + ends), cx.operand(a["value"], d)])


@aten("tril.default", "triu.default")
def _trilu(cx, a):
    upper = int("triu" in str(cx.node.target))
    return cx.add("Trilu", [cx.v(a["self"]), cx.const(np.array(a["diagonal"], np.int64))], upper=upper)


@aten("flip.default")
def _flip(cx, a):
    r = cx.rank(a["self"])
    axes = [d % r for d in a["dims"]] if r else []
    x = cx.v(a["self"])
    if not axes:
        return cx.add("Identity", [x])
    n = len(axes)
    return cx.add("Slice", [x, _i64(cx, [-1] * n), _i64(cx, [-_BIG] * n), _i64(cx, axes), _i64(cx, [-1] * n)])


# -- indexing ------------------------------------------------------------------------------------

@aten("embedding.default")
def _embedding(cx, a):
    return cx.add("Gather", [cx.v(a["weight"]), cx.operand(a["indices"], dt.int64)], axis=0)


@aten("index_select.default")
def _index_select(cx, a):
    axis = a["dim"] % max(cx.rank(a["self"]), 1)
    return cx.add("Gather", [cx.v(a["self"]), cx.operand(a["index"], dt.int64)], axis=axis)


@aten("gather.default")
def _gather(cx, a):
    axis = a["dim"] % max(cx.rank(a["self"]), 1)
    return cx.add("GatherElements", [cx.v(a["self"]), cx.v(a["index"])], axis=axis)


@aten("index.Tensor")
def _index(cx, a):
    idx = list(a["indices"])
    used = [i for i, t in enumerate(idx) if t is not None]
    if any(cx.meta(idx[k]).dtype == torch.bool for k in used):
        raise Unsupported("indexing with a boolean mask (data-dependent shape)")
    x = cx.v(a["self"])
    if len(used) == 1:
        return cx.add("Gather", [x, cx.operand(idx[used[0]], dt.int64)], axis=used[0])
    # several index tensors: broadcast them together (adding zeros of each other's shape), stack
    # them on a last axis and GatherND over the indexed dims moved to the front
    ints = [cx.operand(idx[k], dt.int64) for k in used]
    zero = cx.const(np.array(0, np.int64))
    zeros = cx.add("Mul", [ints[0], zero])
    for t in ints[1:]:
        zeros = cx.add("Add", [zeros, cx.add("Mul", [t, zero])])
    last = cx.const(np.array([-1], np.int64))
    stacked = cx.add("Concat", [cx.add("Unsqueeze", [cx.add("Add", [t, zeros]), last]) for t in ints], axis=-1)
    r = cx.rank(a["self"])
    rest = [d for d in range(r) if d not in used]
    if used != list(range(len(used))):
        x = cx.add("Transpose", [x], perm=tuple(used + rest))
    y = cx.add("GatherND", [x, stacked])
    adjacent = used == list(range(used[0], used[0] + len(used)))
    k = used[0]
    if not adjacent or k == 0:  # torch puts the index dims first unless they are adjacent
        return y
    nb = len(cx.meta(cx.node).shape) - len(rest)  # the broadcast index shape's rank
    perm = list(range(nb, nb + k)) + list(range(nb)) + list(range(nb + k, nb + len(rest)))
    return cx.add("Transpose", [y], perm=tuple(perm))


# -- creation ------------------------------------------------------------------------------------

def _filled(cx, value, size_args):
    """A tensor of the current node's recorded shape and dtype, filled with `value`."""
    d = cx.out_dtype
    shape = tuple(cx.meta(cx.node).shape)
    if all(isinstance(s, int) for s in shape):
        return cx.const(np.full(shape, value, d.np))
    return cx.add("Expand", [cx.const(np.array(value, d.np)), cx.size_value(size_args)])


def _size_of_like(cx, x):
    return [d for d in cx.shape(x)]


@aten("full.default", "zeros.default", "ones.default", "empty.memory_format", "new_zeros.default",
      "new_ones.default", "new_full.default", "new_empty.default")
def _full(cx, a):
    name = str(cx.node.target)
    value = 0 if ("zeros" in name or "empty" in name) else 1 if "ones" in name else a["fill_value"]
    if not isinstance(value, (int, float, bool)):
        raise Unsupported("fill value known only at run time")
    return _filled(cx, value, list(a["size"]))


@aten("zeros_like.default", "ones_like.default", "full_like.default", "empty_like.default")
def _full_like(cx, a):
    name = str(cx.node.target)
    value = 0 if ("zeros" in name or "empty" in name) else 1 if "ones" in name else a["fill_value"]
    if not isinstance(value, (int, float, bool)):
        raise Unsupported("fill value known only at run time")
    return _filled(cx, value, _size_of_like(cx, a["self"]))


@aten("scalar_tensor.default")
def _scalar_tensor(cx, a):
    return cx.operand(a["s"], cx.out_dtype)


@aten("arange.default", "arange.start", "arange.start_step")
def _arange(cx, a):
    d = cx.out_dtype
    start = a.get("start", 0)
    step = a.get("step", 1)
    n = len(cx.meta(cx.node).shape) and cx.meta(cx.node).shape[0]
    if isinstance(n, int) and all(isinstance(v, (int, float)) for v in (start, a["end"], step)):
        return cx.const(np.arange(start, a["end"], step).astype(d.np))
    vals = []
    for v in (start, a["end"], step):
        if isinstance(v, (int, float)):
            vals.append(cx.const(v, d))
        else:
            got = cx.scalar_int(v)
            vals.append(cx.add("Cast", [got], to=d) if not isinstance(got, int) else cx.const(got, d))
    return cx.add("Range", vals)


# -- casts, copies, no-ops -----------------------------------------------------------------------

@aten("_to_copy.default", "to.dtype", "to.dtype_layout", "to.device", "clone.default", "contiguous.default",
      "alias.default", "detach.default", "detach_.default", "lift_fresh_copy.default",
      "_assert_tensor_metadata.default", "type_as.default", "dropout.default", "native_dropout.default",
      "view_as.default", "expand_as.default")
def _copy(cx, a):
    name = str(cx.node.target)
    if name.startswith("aten._assert"):
        return None
    if "dropout" in name and a.get("train"):
        raise Unsupported("dropout in training mode (random)")
    if "expand_as" in name or "view_as" in name:
        return reshape_to_recorded(cx, cx.v(a["self"]), cx.shape(a["self"])) if "view_as" in name else \
            cx.add("Expand", [cx.v(a["self"]), cx.size_value(cx.shape(a["other"]))])
    src = a.get("self", a.get("input"))
    meta = cx.meta(cx.node)
    if isinstance(meta, (tuple, list)):  # native_dropout in eval: (input, all-true mask)
        return cx.add("Identity", [cx.v(src)]), None
    if getattr(meta, "device", None) is not None and meta.device.type != "cpu":
        raise Unsupported(f"a copy to device {meta.device}")
    from .importer import glow_dtype

    want = glow_dtype(meta.dtype)
    x = cx.v(src)
    return cx.add("Cast", [x], to=want) if x.type.dtype != want else cx.add("Identity", [x])


@aten("_assert_scalar.default", "sym_constrain_range_for_size.default", "_assert_async.msg",
      "sym_constrain_range.default")
def _no_op(cx, a):
    return None  # export's run-time checks of sizes; glow's own input checks cover the shapes


@aten("sym_size.int")
def _sym_size(cx, a):
    axis = a["dim"] % cx.rank(a["self"])
    return cx.add("Shape", [cx.v(a["self"])], start=axis, end=axis + 1)


@aten("operator.getitem")
def _getitem(cx, a):
    got = cx.env[a[0]]
    if not isinstance(got, (tuple, list)):
        raise Unsupported("getitem of a tensor (index it with aten ops)")
    v = got[a[1]]
    if v is None:
        raise Unsupported(f"output {a[1]} of '{a[0].name}' is not imported (training-only statistics)")
    return v

