"""Op generators: Gather*, Scatter*, Resize. Indices are always in range (out-of-range ones are an
error by ONNX's rule, tested elsewhere); valid negative ones are used often."""

from __future__ import annotations

import math

import numpy as np

from .gen import F32, FLOATS, I32, I64, INTS, gen, out
from .ops_shape import ANY, _keep


def _indices(b, n, shape, dtype=None, as_input_p=0.3):
    """Random in-range indices in [-n, n-1] (n > 0)."""
    a = b.rng.integers(-n, n, size=shape).astype(dtype or b.choice([I64, I64, I32]))
    return b.const(a, as_input=b.chance(as_input_p))


@gen("Gather")
def gather(b, op):
    x = b.pick(ANY, min_rank=1, nonempty=True)
    axis = b.randint(-x.rank, x.rank - 1)
    ishape = b.shape(max_rank=2, hi=4)
    ind = _indices(b, x.shape[axis], ishape)
    a = axis % x.rank
    shape = x.shape[:a] + ishape + x.shape[a + 1:]
    b.node(op, [x, ind], [_keep(x, shape, noisy=False)], axis=axis if axis or b.chance(0.5) else None)
    return True


@gen("GatherElements")
def gather_elements(b, op):
    x = b.pick(ANY, min_rank=1, nonempty=True)
    axis = b.randint(-x.rank, x.rank - 1)
    a = axis % x.rank
    # other dims equal to data's: onnx.reference refuses smaller ones (onnxruntime takes them)
    ishape = tuple(b.randint(1, 4) if i == a else d for i, d in enumerate(x.shape))
    b.node(op, [x, _indices(b, x.shape[a], ishape)], [_keep(x, ishape, noisy=False)],
           axis=axis if axis or b.chance(0.5) else None)
    return True


@gen("GatherND")
def gather_nd(b, op):
    x = b.pick(ANY, min_rank=1, nonempty=True)
    bd = 1 if x.rank >= 2 and b.chance(0.3) else 0
    q = b.randint(1, x.rank - bd)
    mid = b.shape(max_rank=2, hi=3, empty_ok=False)
    ishape = x.shape[:bd] + mid + (q,)
    dims = x.shape[bd:bd + q]
    cols = [b.rng.integers(-d, d, size=ishape[:-1]) for d in dims]
    ind = b.const(np.stack(cols, axis=-1).astype(I64), as_input=b.chance(0.3))
    shape = x.shape[:bd] + mid + x.shape[bd + q:]
    b.node(op, [x, ind], [_keep(x, shape, noisy=False)], batch_dims=bd if bd or b.chance(0.3) else None)
    return True


def _reduction(b):
    opts = [None, "none"] + (["add", "mul"] if b.opset >= 16 else []) + (["max", "min"] if b.opset >= 18 else [])
    return b.choice(opts)


def _exact(red, x):
    """Scattering copies or selects exact values; add/mul round in an unspecified order."""
    return x.exact and (red in (None, "none", "max", "min") or x.dtype.kind == "i")


@gen("ScatterElements")
def scatter_elements(b, op):
    x = b.pick(FLOATS + INTS, min_rank=1, nonempty=True)
    axis = b.randint(-x.rank, x.rank - 1)
    a = axis % x.rank
    n = x.shape[a]
    red = _reduction(b)
    k = b.randint(1, n) if red in (None, "none") else b.randint(1, 4)
    ishape = tuple(k if i == a else b.randint(1, d) for i, d in enumerate(x.shape))
    if red in (None, "none"):  # unique targets per line: the order of duplicate writes is undefined
        ind = np.argsort(b.rng.random(ishape[:a] + (n,) + ishape[a + 1:]), axis=a)
        ind = np.take(ind, np.arange(k), axis=a)
        ind = np.where(b.rng.random(ind.shape) < 0.3, ind - n, ind)
    else:
        ind = b.rng.integers(-n, n, size=ishape)
    upd = b.input(x.dtype, ishape, "small", pool=False)
    ind = b.const(ind.astype(b.choice([I64, I32])), as_input=b.chance(0.3))
    mag = x.mag * (upd.mag + 1) ** k if red == "mul" else x.mag + k * upd.mag
    b.node(op, [x, ind, upd], [_keep(x, x.shape, mag=mag, pos=False, noisy=False, exact=_exact(red, x))],
           axis=axis if axis or b.chance(0.5) else None, reduction=red)
    return True


@gen("ScatterND")
def scatter_nd(b, op):
    x = b.pick(FLOATS + INTS, min_rank=1, nonempty=True)
    q = b.randint(1, x.rank)
    dims = x.shape[:q]
    total = math.prod(dims)
    red = _reduction(b)
    m = b.randint(1, min(total, 4))
    flat = b.rng.permutation(total)[:m] if red in (None, "none") else b.rng.integers(0, total, size=m)
    rows = np.stack(np.unravel_index(flat, dims), axis=-1)
    rows = np.where(b.rng.random(rows.shape) < 0.3, rows - np.asarray(dims), rows)
    lead = (m,) if b.chance(0.7) or m == 1 else (1, m)
    ind = b.const(rows.reshape(lead + (q,)).astype(I64), as_input=b.chance(0.3))
    upd = b.input(x.dtype, lead + x.shape[q:], "small", pool=False)
    mag = x.mag * (upd.mag + 1) ** m if red == "mul" else x.mag + m * upd.mag
    b.node(op, [x, ind, upd], [_keep(x, x.shape, mag=mag, pos=False, noisy=False, exact=_exact(red, x))],
           reduction=red)
    return True


COORD = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]


@gen("Resize")
def resize(b, op):
    mode = b.choice(["nearest", "linear", "cubic", None])
    nearest = mode in ("nearest", None)
    # nearest picks by rounding a computed coordinate: only power-of-two scales keep it exact
    x = b.pick((F32,), min_rank=4, max_rank=4, nonempty=True, exact=nearest,
               new_shape=lambda: (b.randint(1, 2), b.randint(1, 2), b.randint(2, 5), b.randint(2, 5)))
    scale_set = [0.5, 1.0, 2.0, 4.0] if nearest else [0.5, 0.75, 1.5, 2.0, 2.5, 3.0]
    sp = x.shape[2:]
    sc = [b.choice(scale_set) for _ in sp]
    sc = [s if L * s >= 1 and float(L * s).is_integer() else 2.0 for L, s in zip(sp, sc)]
    lens = [int(L * s) for L, s in zip(sp, sc)]
    attrs = dict(mode=mode)
    coords = COORD[:3] if nearest else COORD + (["half_pixel_symmetric"] if b.opset >= 19 else [])
    attrs["coordinate_transformation_mode"] = b.choice(coords + [None])
    if nearest:
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", None])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = b.choice([-0.5, -0.75, None])
        attrs["exclude_outside"] = b.choice([0, 1, None])
    if not nearest and b.opset >= 18 and min(sc) < 1 and b.chance(0.3):
        attrs["antialias"] = 1
    use_axes = b.opset >= 18 and b.chance(0.3)
    if use_axes:
        attrs["axes"] = [2, 3] if b.chance(0.5) else [-2, -1]
    full = ([] if use_axes else [1.0, 1.0])
    if b.chance(0.5):
        ins = [x, "", b.const(np.asarray(full + sc, np.float32))]
    else:
        ins = [x, "", "", b.ints(([] if use_axes else list(x.shape[:2])) + lens,
                                     runtime_p=0)]  # onnx's inference rejects a run-time sizes input
    mag = x.mag * (2.0 if mode == "cubic" else 1.0)
    b.node(op, ins, [out(F32, x.shape[:2] + tuple(lens), mag, exact=nearest and x.exact)], **attrs)
    return True


__all__ = ["INTS"]
