"""Op generators: movement (Transpose, Reshape, Slice, Pad, ...), shape ops and generators."""

from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper

from .gen import BOOL, F32, FLOATS, I32, I64, INF, INTS, gen, onnx_type, out

ANY = FLOATS + INTS + (BOOL,)


def _keep(x, shape, **kw):
    """An output description with x's dtype and value properties, in a new shape."""
    d = dict(mag=x.mag, pos=x.pos, exact=x.exact, noisy=x.noisy)
    d.update(kw)
    return out(x.dtype, shape, **d)


@gen("Transpose")
def transpose(b, op):
    x = b.pick(ANY, min_rank=1)
    perm = [int(p) for p in b.rng.permutation(x.rank)]
    if b.chance(0.15):
        perm = None  # the default: reverse the axes
    shape = tuple(reversed(x.shape)) if perm is None else tuple(x.shape[p] for p in perm)
    b.node(op, [x], [_keep(x, shape)], perm=perm)
    return True


def _factor_shape(b, n, rank):
    """A random shape of this rank with n elements."""
    dims = [1] * rank
    if n == 0:
        dims[b.randint(0, rank - 1)] = 0
        return dims
    m = n
    for p in range(2, n + 1):
        while m % p == 0:
            dims[b.randint(0, rank - 1)] *= p
            m //= p
        if m == 1:
            break
    return dims


@gen("Reshape")
def reshape(b, op):
    x = b.pick(ANY)
    same = [v for v in b.pool if v.numel == x.numel and v.shape != x.shape and v.rank and x.numel]
    if same and b.chance(0.3):  # Reshape(x, Shape(y)): a shape computed in the graph
        y = b.choice(same)
        (s,) = b.node("Shape", [y], [out(I64, (y.rank,), max(y.shape), exact=True)], pool=False)
        b.node(op, [x, s], [_keep(x, y.shape)])
        return True
    rank = b.randint(1 if x.numel != 1 else 0, 4) if x.numel else b.randint(1, 4)
    shape = _factor_shape(b, x.numel, rank) if rank else []
    spec = list(shape)
    if spec and x.numel and b.chance(0.4):
        spec[b.randint(0, rank - 1)] = -1
    # a 0 in the target copies the input's dim, unless allowzero=1 makes it a literal 0 (the
    # only way to reshape into an empty shape with the 0 somewhere else)
    allowzero = 1 if 0 in shape else None
    for i in range(min(rank, x.rank)):
        if spec[i] == x.shape[i] and spec[i] != 0 and not allowzero and b.chance(0.3):
            spec[i] = 0
    b.node(op, [x, b.ints(spec)], [_keep(x, tuple(shape))], allowzero=allowzero)
    return True


@gen("Flatten")
def flatten(b, op):
    x = b.pick(ANY, min_rank=1)
    axis = b.randint(-x.rank, x.rank)
    a = axis + x.rank if axis < 0 else axis
    b.node(op, [x], [_keep(x, (math.prod(x.shape[:a]), math.prod(x.shape[a:])))],
           axis=axis if axis != 1 or b.chance(0.5) else None)
    return True


@gen("Squeeze", "Unsqueeze")
def squeeze(b, op):
    if op == "Squeeze":
        x = b.pick(ANY, pred=lambda v: 1 in v.shape,
                   new_shape=lambda: tuple(1 if b.chance(0.5) else b.randint(2, 4) for _ in range(b.randint(1, 4))))
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if not ones:
            return False
        axes = sorted(int(a) for a in b.rng.choice(ones, size=b.randint(1, len(ones)), replace=False))
        if b.chance(0.2):
            axes = None
        drop = set(ones if axes is None else axes)
        shape = tuple(d for i, d in enumerate(x.shape) if i not in drop)
        r = x.rank
    else:
        x = b.pick(ANY, max_rank=3)
        r = x.rank + b.randint(1, 2)
        axes = sorted(int(a) for a in b.rng.choice(r, size=r - x.rank, replace=False))
        it = iter(x.shape)
        shape = tuple(1 if i in axes else next(it) for i in range(r))
    ins = [x]
    if axes is not None:
        ins.append(b.ints([a - r if b.chance(0.3) else a for a in axes]))
    b.node(op, ins, [_keep(x, shape)])
    return True


@gen("Concat")
def concat(b, op):
    x = b.pick(ANY, min_rank=1)
    axis = b.randint(-x.rank, x.rank - 1)
    ins = [x]
    for _ in range(b.randint(0, 2)):
        if b.chance(0.3):
            ins.append(x)  # fan-out: the same value twice
            continue
        s = list(x.shape)
        s[axis] = b.randint(0 if b.empty else 1, 3)
        ins.append(b.input(x.dtype, tuple(s), "normal", pool=False))
    shape = list(x.shape)
    shape[axis] = sum(v.shape[axis] for v in ins)
    b.node(op, ins, [_keep(x, tuple(shape), mag=max(v.mag for v in ins), noisy=False,
                           pos=all(v.pos for v in ins), exact=all(v.exact for v in ins))], axis=axis)
    return True


@gen("Split")
def split(b, op):
    x = b.pick(ANY, min_rank=1, pred=lambda v: max(v.shape) >= 2)
    axis = b.randint(-x.rank, x.rank - 1)
    n = x.shape[axis]
    ins, attrs = [x], dict(axis=axis if axis or b.chance(0.5) else None)
    divs = [k for k in range(1, min(n, 4) + 1) if n % k == 0]
    # from opset 18 an equal split needs num_outputs (or the split input)
    form = b.choice(["sizes", "sizes", "num"] if b.opset >= 18 else ["sizes", "equal"])
    if form == "sizes" or n == 0:
        k = b.randint(1, 3)
        cuts = sorted(int(c) for c in b.rng.integers(0, n + 1, size=k - 1))
        sizes = [e - s for s, e in zip([0] + cuts, cuts + [n])]
        ins.append(b.ints(sizes))
    else:
        k = b.choice(divs)
        sizes = [n // k] * k
        if form == "num":
            attrs["num_outputs"] = k
    outs = []
    for sz in sizes:
        s = list(x.shape)
        s[axis] = sz
        outs.append(_keep(x, tuple(s)))
    b.node(op, ins, outs, **attrs)
    return True


def _slice_len(dim, start, end, step):
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return max(0, -(-(start - end) // -step))


@gen("Slice")
def slice_(b, op):
    x = b.pick(ANY, min_rank=1)
    idx = b.choice([I64, I64, I32])
    big = np.iinfo(idx).max
    axes = sorted(int(a) for a in b.rng.choice(x.rank, size=b.randint(1, x.rank), replace=False))
    starts, ends, steps, shape = [], [], [], list(x.shape)
    for a in axes:
        d = x.shape[a]
        step = b.choice([1, 1, 1, 2, 3, -1, -2])
        lo, hi = -d - 2, d + 2
        s, e = b.randint(lo, hi), b.randint(lo, hi)
        if b.chance(0.15):
            e = big if step > 0 else -big - 1  # "to the end" as exporters write it
        starts.append(s)
        ends.append(e)
        steps.append(step)
        shape[a] = _slice_len(d, s, e, step)
    ins = [x, b.ints(starts, idx), b.ints(ends, idx)]
    with_steps = any(t != 1 for t in steps) or b.chance(0.3)
    if axes != list(range(len(axes))) or b.chance(0.6):
        ins.append(b.ints([a - x.rank if b.chance(0.3) else a for a in axes], idx))
    elif with_steps:
        ins.append("")  # axes omitted: the default 0..n-1
    if with_steps:
        ins.append(b.ints(steps, idx))
    b.node(op, ins, [_keep(x, tuple(shape))])
    return True


@gen("Pad")
def pad(b, op):
    x = b.pick(FLOATS + INTS, min_rank=1, max_rank=4)
    modes = ["constant", "reflect", "edge"] + (["wrap"] if b.opset >= 19 else [])
    mode = b.choice(modes)
    if mode != "constant" and 0 in x.shape:
        mode = "constant"
    r = x.rank
    axes = list(range(r))
    if b.opset >= 18 and b.chance(0.3):
        axes = sorted(int(a) for a in b.rng.choice(r, size=b.randint(1, r), replace=False))
    pads = []
    for _ in range(2):
        for a in axes:
            d = x.shape[a]
            hi = {"reflect": d - 1, "wrap": d}.get(mode, 2)
            p = b.randint(0, min(hi, 2))
            if mode == "constant" and d > 2 and b.chance(0.1):
                p = -1  # negative pads crop
            pads.append(p)
    n = len(axes)
    shape = list(x.shape)
    for i, a in enumerate(axes):
        shape[a] += pads[i] + pads[i + n]
    if min(shape) < 0:
        return False
    ins = [x, b.ints(pads)]
    if mode == "constant" and b.chance(0.5):
        ins.append(b.const(np.asarray(b.randint(-2, 2), x.dtype)))
    if len(axes) != r or b.chance(0.2) and b.opset >= 18:
        ins += [""] * (3 - len(ins)) + [b.ints([a - r if b.chance(0.3) else a for a in axes])]
    b.node(op, ins, [_keep(x, tuple(shape), mag=max(x.mag, 2), pos=False, noisy=False)],
           mode=mode if mode != "constant" or b.chance(0.3) else None)
    return True


@gen("Tile", "Expand")
def tile(b, op):
    x = b.pick(ANY, max_numel=256)
    if op == "Tile":
        reps = [b.randint(0 if b.empty and b.chance(0.1) else 1, 3) for _ in x.shape]
        shape = tuple(d * r for d, r in zip(x.shape, reps))
        spec = reps
    else:
        lead = [b.randint(1, 3) for _ in range(b.randint(0, 1))]
        spec = lead + [b.randint(1, 4) if d == 1 else (1 if b.chance(0.3) else d) for d in x.shape]
        shape = tuple(lead) + tuple(max(d, s) if d == 1 else d for d, s in zip(x.shape, spec[len(lead):]))
    if math.prod(shape) > 4096:
        return False
    b.node(op, [x, b.ints(spec)], [_keep(x, shape, noisy=False)])
    return True


@gen("DepthToSpace", "SpaceToDepth")
def depth_space(b, op):
    bs = b.randint(1, 3)
    if op == "DepthToSpace":
        x = b.pick(FLOATS, min_rank=4, max_rank=4, pred=lambda v: v.shape[1] % (bs * bs) == 0,
                   new_shape=lambda: (b.randint(1, 2), bs * bs * b.randint(1, 2), b.randint(1, 3), b.randint(1, 3)))
        n, c, h, w = x.shape
        shape = (n, c // (bs * bs), h * bs, w * bs)
        attrs = dict(mode=b.choice(["DCR", "CRD", None]))
    else:
        x = b.pick(FLOATS, min_rank=4, max_rank=4, pred=lambda v: v.shape[2] % bs == 0 and v.shape[3] % bs == 0,
                   new_shape=lambda: (b.randint(1, 2), b.randint(1, 3), bs * b.randint(1, 3), bs * b.randint(1, 3)))
        n, c, h, w = x.shape
        shape, attrs = (n, c * bs * bs, h // bs, w // bs), {}
    b.node(op, [x], [_keep(x, shape)], blocksize=bs, **attrs)
    return True


@gen("Shape", "Size")
def shape_op(b, op):
    x = b.pick(ANY)
    if op == "Size":
        b.node(op, [x], [out(I64, (), x.numel, exact=True)])
        return True
    attrs, r = {}, x.rank
    s, e = 0, r
    if b.opset >= 15 and b.chance(0.3):
        s, e = b.randint(-r - 1, r), b.randint(-r - 1, r + 1)
        attrs = dict(start=s, end=e if b.chance(0.7) else None)
        e = e if attrs["end"] is not None else r
        s, e = min(max(s + r if s < 0 else s, 0), r), min(max(e + r if e < 0 else e, 0), r)
    b.node(op, [x], [out(I64, (max(0, e - s),), max(x.shape, default=1), exact=True)], **attrs)
    return True


@gen("Range")
def range_op(b, op):
    dt = b.choice([I64, I32, F32])
    if dt == F32:
        start, delta = round(float(b.rng.uniform(-3, 3)), 1), b.choice([0.5, 0.7, -0.6, 1.3])
        n = b.randint(0, 6)
        limit = start + delta * (n - 0.5)  # half a step past the last element: no rounding doubt
    else:
        start, delta = b.randint(-4, 4), b.choice([1, 2, 3, -1, -2])
        limit = start + delta * b.randint(0, 5) + b.choice([0, 1 if delta > 0 else -1])
        n = max(0, -(-(limit - start) // delta))
    ins = [b.const(np.asarray(v, dt), as_input=b.chance(0.1)) for v in (start, limit, delta)]
    b.node(op, ins, [out(dt, (n,), abs(start) + abs(delta) * n + 1, exact=dt != F32)])
    return True


@gen("ConstantOfShape")
def constant_of_shape(b, op):
    shape = b.shape(max_rank=3)
    dt = b.choice([F32, I64, I32, BOOL, None])  # None: no value attribute, float32 zeros
    val = numpy_helper.from_array(np.asarray([b.randint(-3, 3)], dt), "value") if dt else None
    b.node(op, [b.ints(list(shape))], [out(dt or F32, shape, 3.0, exact=True)], value=val)
    return True


@gen("Trilu", opset=14)
def trilu(b, op):
    x = b.pick(FLOATS + INTS, min_rank=2)
    ins = [x] + ([b.ints(b.randint(-3, 3))] if b.chance(0.5) else [])
    b.node(op, ins, [_keep(x, x.shape, pos=False, noisy=False)], upper=b.choice([None, 0, 1]))
    return True


@gen("EyeLike")
def eyelike(b, op):
    x = b.pick(FLOATS + INTS, min_rank=2, max_rank=2)
    dt = b.choice([None, F32, I64])
    b.node(op, [x], [out(dt or x.dtype, x.shape, 1.0, exact=True)], k=b.randint(-2, 2) if b.chance(0.5) else None,
           dtype=onnx_type(dt) if dt is not None else None)
    return True


@gen("OneHot", opset=11)
def onehot(b, op):
    depth = b.randint(1, 5)
    ishape = b.shape(min_rank=1, max_rank=2)
    ind = b.const(b.rng.integers(-depth, depth, size=ishape).astype(b.choice([I64, I32])),
                  as_input=b.chance(0.3))
    vdt = b.choice([F32, I64])
    vals = b.const(np.asarray([b.randint(-2, 0), b.randint(1, 3)], vdt))
    r = len(ishape)
    axis = b.randint(-r - 1, r)
    a = axis % (r + 1)
    shape = ishape[:a] + (depth,) + ishape[a:]
    b.node(op, [ind, b.ints(depth if b.chance(0.5) else [depth]), vals], [out(vdt, shape, 3.0, exact=True)],
           axis=axis if axis != -1 or b.chance(0.5) else None)
    return True


__all__ = ["ANY", "INF"]
