"""Op generators: every Reduce op in every attribute form, ArgMax/ArgMin, TopK, CumSum, Softmax
and friends, and the normalisations."""

from __future__ import annotations

import math

import numpy as np

from .gen import F32, FLOATS, I32, I64, INF, INTS, gen, out

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _reduce_mag(op, m, n):
    return {"ReduceSum": n * m, "ReduceMean": m, "ReduceMax": m, "ReduceMin": m, "ReduceProd": 1.0,
            "ReduceL1": n * m, "ReduceL2": math.sqrt(n) * m, "ReduceSumSquare": n * m * m,
            "ReduceLogSum": abs(math.log(max(n * m, 1e-30))) + 2, "ReduceLogSumExp": m + math.log(n + 1)}[op]


@gen(*REDUCE)
def reduce(b, op):
    dtypes = FLOATS + INTS if op in ("ReduceMax", "ReduceMin", "ReduceSum") and b.chance(0.2) else FLOATS
    if op == "ReduceLogSum":
        x = b.positive(b.pick(dtypes, nonempty=True, kind="pos"))
    elif op == "ReduceProd":
        x = b.bounded(b.pick(dtypes, nonempty=True, max_numel=64), 1.0)
    elif op == "ReduceLogSumExp":
        x = b.bounded(b.pick(dtypes, nonempty=True), 30.0)
    else:
        x = b.pick(dtypes, nonempty=True, bound=1e4 if dtypes != FLOATS else None)
    r = x.rank
    axes = None
    if r and b.chance(0.75):
        axes = sorted(int(a) for a in b.rng.choice(r, size=b.randint(1, r), replace=False))
        axes = [a - r if b.chance(0.3) else a for a in axes]
    keep = b.choice([None, 0, 1])
    as_input = b.opset >= (13 if op == "ReduceSum" else 18)
    noop = None
    if as_input and b.chance(0.3):
        noop = b.randint(0, 1)
    ins, attrs = [x], dict(keepdims=keep, noop_with_empty_axes=noop)
    if axes is not None:
        if as_input:
            ins.append(b.ints(axes))
        else:
            attrs["axes"] = axes
    elif as_input and b.chance(0.3):
        ins.append(b.const(np.zeros((0,), np.int64)))  # empty axes input: the same as absent
    if axes is None and noop == 1:
        shape, n = x.shape, 1
    else:
        red = set(range(r)) if axes is None else {a % r for a in axes}
        shape = tuple(1 if i in red else d for i, d in enumerate(x.shape) if keep != 0 or i not in red)
        n = math.prod(x.shape[i] for i in red)
    exact = op in ("ReduceMax", "ReduceMin") and x.exact or (x.dtype.kind == "i" and op == "ReduceSum")
    mag = _reduce_mag(op, x.mag, n) if x.mag < INF else INF
    b.node(op, ins, [out(x.dtype, shape, mag, exact=exact)], **attrs)
    return True


@gen("ArgMax", "ArgMin")
def argmax(b, op):
    x = b.pick(FLOATS + INTS, min_rank=1, nonempty=True, exact=True)
    axis = b.randint(-x.rank, x.rank - 1)
    keep = b.choice([None, 0, 1])
    shape = tuple(1 if i == axis % x.rank else d for i, d in enumerate(x.shape)
                  if keep != 0 or i != axis % x.rank)
    b.node(op, [x], [out(I64, shape, INF, exact=True)], axis=axis if axis or b.chance(0.5) else None,
           keepdims=keep, select_last_index=b.choice([None, 0, 1]))
    return True


@gen("TopK")
def topk(b, op):
    # distinct values (fresh random data): which of two equal values comes first is not ONNX's to say
    x = b.pick(FLOATS, min_rank=1, nonempty=True, exact=True, noisy=True)
    axis = b.randint(-x.rank, x.rank - 1)
    k = b.randint(1, x.shape[axis])
    shape = tuple(k if i == axis % x.rank else d for i, d in enumerate(x.shape))
    b.node(op, [x, b.ints([k])], [out(x.dtype, shape, x.mag, exact=True), out(I64, shape, INF, exact=True)],
           axis=axis if axis != -1 or b.chance(0.5) else None, largest=b.choice([None, 0, 1]),
           sorted=1 if b.chance(0.5) else None)
    return True


@gen("CumSum")
def cumsum(b, op):
    x = b.pick((F32,) + INTS, min_rank=1, bound=1e4)
    axis = b.randint(-x.rank, x.rank - 1)
    ax = b.const(np.asarray(axis, b.choice([I64, I32])))
    b.node(op, [x, ax], [out(x.dtype, x.shape, x.mag * max(1, x.shape[axis]), exact=x.dtype.kind == "i")],
           exclusive=b.choice([None, 0, 1]), reverse=b.choice([None, 0, 1]))
    return True


@gen("Softmax", "LogSoftmax", "Hardmax")
def softmax(b, op):
    x = b.pick(FLOATS, min_rank=1, exact=op == "Hardmax")
    if op != "Hardmax":
        x = b.bounded(x, 50.0)
    axis = b.randint(-x.rank, x.rank - 1)
    mag = 1.0 if op != "LogSoftmax" else 2 * x.mag + math.log(max(2, x.numel))
    b.node(op, [x], [out(x.dtype, x.shape, mag, exact=op == "Hardmax")],
           axis=axis if axis != -1 or b.chance(0.5) else None)
    return True


def _noisy_x(b, min_rank, max_rank, nd_lo=2):
    return b.pick((F32,), min_rank=min_rank, max_rank=max_rank, nonempty=True, noisy=True,
                  pred=lambda v: math.prod(v.shape[2:]) >= 4,
                  new_shape=lambda: (b.randint(1, 2), b.randint(1, 4))
                  + tuple(b.randint(nd_lo, 5) for _ in range(b.randint(min_rank - 2, max_rank - 2))))


def _param(b, shape, kind="small"):
    return b.const(b.data(F32, shape, kind), as_input=b.chance(0.15))


@gen("BatchNormalization")
def batchnorm(b, op):
    x = b.pick((F32,), min_rank=2, max_rank=5, nonempty=True)
    c = (x.shape[1],)
    ins = [x, _param(b, c), _param(b, c), _param(b, c), _param(b, c, "pos")]
    b.node(op, ins, [out(F32, x.shape, (x.mag + 1) * 2 + 1)],
           epsilon=float(np.float32(b.rng.uniform(1e-5, 1e-3))) if b.chance(0.5) else None)
    return True


@gen("InstanceNormalization")
def instnorm(b, op):
    x = _noisy_x(b, 3, 5)
    c = (x.shape[1],)
    b.node(op, [x, _param(b, c), _param(b, c)], [out(F32, x.shape, 10.0)],
           epsilon=1e-4 if b.chance(0.3) else None)
    return True


@gen("LayerNormalization", opset=17)
def layernorm(b, op):
    x = b.pick((F32,), min_rank=1, max_rank=4, nonempty=True, noisy=True,
               pred=lambda v: v.shape[-1] >= 4, new_shape=lambda: b.shape(min_rank=1, lo=2) + (b.randint(4, 6),))
    axis = b.randint(-x.rank, x.rank - 1)
    if axis % x.rank == x.rank - 1 or b.chance(0.5):
        axis = -1
    norm = x.shape[axis:]
    ins = [x, _param(b, norm)] + ([_param(b, norm)] if b.chance(0.7) else [])
    b.node(op, ins, [out(F32, x.shape, 10.0)], axis=axis if axis != -1 or b.chance(0.5) else None,
           epsilon=1e-4 if b.chance(0.3) else None)
    return True


@gen("GroupNormalization", opset=21)  # onnx deprecated the opset-18 form (per-group scale)
def groupnorm(b, op):
    g = b.randint(1, 3)
    x = b.pick((F32,), min_rank=3, max_rank=4, nonempty=True, noisy=True,
               pred=lambda v: v.shape[1] % g == 0 and math.prod(v.shape[2:]) >= 4,
               new_shape=lambda: (b.randint(1, 2), g * b.randint(1, 2), b.randint(2, 4), b.randint(2, 4)))
    c = x.shape[1]
    b.node(op, [x, _param(b, (c,)), _param(b, (c,))], [out(F32, x.shape, 10.0)], num_groups=g,
           epsilon=1e-4 if b.chance(0.3) else None)
    return True


@gen("LpNormalization")
def lpnorm(b, op):
    x = b.pick((F32,), min_rank=1, max_rank=4, nonempty=True, noisy=True,
               pred=lambda v: max(v.shape) >= 2)
    axis = b.randint(-x.rank, x.rank - 1)
    b.node(op, [x], [out(F32, x.shape, 1.0)], axis=axis, p=b.choice([1, 2, None]))
    return True


@gen("MeanVarianceNormalization")
def mvn(b, op):
    x = _noisy_x(b, 4, 4)
    axes = b.choice([[0, 2, 3], [2, 3], [1, 2, 3]])  # onnx's function body needs the attribute
    b.node(op, [x], [out(F32, x.shape, 10.0)], axes=axes)
    return True


@gen("LRN")
def lrn(b, op):
    x = b.pick((F32,), min_rank=4, max_rank=4, nonempty=True)
    b.node(op, [x], [out(F32, x.shape, x.mag)], size=b.choice([1, 3, 5]),
           alpha=float(np.float32(b.rng.uniform(1e-4, 1e-2))) if b.chance(0.5) else None,
           beta=float(np.float32(b.rng.uniform(0.5, 1))) if b.chance(0.5) else None,
           bias=float(np.float32(b.rng.uniform(1, 2))) if b.chance(0.5) else None)
    return True


@gen("Dropout")
def dropout(b, op):
    x = b.pick(FLOATS)
    outs = [out(x.dtype, x.shape, x.mag, exact=x.exact)]
    b.node(op, [x], outs, seed=None)
    return True


__all__ = ["REDUCE", "I32"]
