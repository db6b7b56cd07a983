"""Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial.

All are impure (never folded or merged). A `seed` makes one node's draws repeat from run to run;
without one each run draws fresh values. Like ONNX, no particular stream is promised, so results
match other implementations only in distribution.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from .registry import RANDOM, Attr, Tier, op

FLT = frozenset({dt.bfloat16, dt.float16, dt.float32, dt.float64})
ANY = frozenset({dt.uint8, dt.uint16, dt.uint32, dt.uint64, dt.int8, dt.int16, dt.int32, dt.int64,
                 dt.bfloat16, dt.float16, dt.float32, dt.float64, dt.string, dt.bool_,
                 dt.complex64, dt.complex128})
BERNOULLI_OUT = frozenset({dt.uint8, dt.uint16, dt.uint32, dt.uint64, dt.int8, dt.int16, dt.int32,
                           dt.int64, dt.bfloat16, dt.float16, dt.float32, dt.float64, dt.bool_})


def _rng(seed) -> np.random.Generator:
    # Every distinct float seed (1.0 vs 1.5) gets its own stream: seed with the float's bits.
    return np.random.default_rng(None if seed is None else int(np.float64(seed).view(np.uint64)))


def _out_dtype(ctx, allowed):
    """The `dtype` attribute, else the input's element type; checked against `allowed`."""
    d = ctx.attrs["dtype"]
    names = sorted(t.name for t in allowed)
    if d is None:
        d = ctx.dtype(0)
        if d not in allowed:
            raise ctx.error(f"the input's type {d.name} is not a valid output type ({names}); "
                            "set the dtype attribute")
    elif d not in allowed:
        raise ctx.error(f"dtype {d.name} is not one of {names}")
    return d


def _gen(name, sample, params, doc):
    """RandomX (shape attribute) and RandomXLike (shape of the input) for one distribution."""

    def infer(ctx):
        if any(d < 0 for d in ctx.attrs["shape"]):
            raise ctx.error(f"shape {list(ctx.attrs['shape'])} has a negative dimension")
        return [dt.TensorType(ctx.attrs["shape"], _out_dtype(ctx, FLT))]

    def ref(shape, dtype, seed, **p):
        return sample(_rng(seed), tuple(shape), **p).astype(dtype.np)

    def infer_like(ctx):
        return [dt.TensorType(ctx.shape(0), _out_dtype(ctx, FLT))]

    def ref_like(x, dtype, seed, **p):
        return sample(_rng(seed), x.shape, **p).astype((dtype or dt.from_numpy(x.dtype)).np)

    common = dict(groups={RANDOM}, tier=Tier.HIGH, pure=False, onnx_since=1)
    op(name, inputs=(), outputs=("output:T",), types={"T": FLT},
       attrs=(Attr("shape", "ints"), Attr("dtype", "dtype", dt.float32), Attr("seed", "float", None),
              *params),
       infer=infer, reference=ref, doc=doc + " Shape and type come from the attributes.", **common)
    op(name + "Like", inputs=("input:T1",), outputs=("output:T2",), types={"T1": ANY, "T2": FLT},
       attrs=(Attr("dtype", "dtype", None), Attr("seed", "float", None), *params),
       infer=infer_like, reference=ref_like,
       doc=doc + " Shape (and, without `dtype`, type) of the input.", **common)


_gen("RandomUniform", lambda g, shape, low, high: g.uniform(low, high, shape),
     (Attr("low", "float", 0.0), Attr("high", "float", 1.0)),
     "Uniform random values in [low, high).")
_gen("RandomNormal", lambda g, shape, mean, scale: g.normal(mean, scale, shape),
     (Attr("mean", "float", 0.0), Attr("scale", "float", 1.0)),
     "Normal random values with the given mean and standard deviation (scale).")


def _bernoulli_ref(x, dtype, seed):
    p = x.astype(np.float64)
    if np.any((p < 0) | (p > 1)):
        raise GraphError("Bernoulli: probabilities must lie in [0, 1]")
    # u < p with u in [0, 1): p = 0 never fires and p = 1 always does.
    draws = _rng(seed).random(p.shape) < p
    return draws.astype((dtype or dt.from_numpy(x.dtype)).np)


op("Bernoulli", inputs=("input:T1",), outputs=("output:T2",), types={"T1": FLT, "T2": BERNOULLI_OUT},
   attrs=(Attr("dtype", "dtype", None), Attr("seed", "float", None)),
   infer=lambda ctx: [dt.TensorType(ctx.shape(0), _out_dtype(ctx, BERNOULLI_OUT))],
   reference=_bernoulli_ref, groups={RANDOM}, tier=Tier.HIGH, pure=False, onnx_since=15,
   doc="Draws 1 with probability p (the input) and 0 otherwise, elementwise.")


def _multinomial_infer(ctx):
    shape = ctx.shape(0)
    if shape is not None and len(shape) != 2:
        raise ctx.error(f"input must be [batch, classes] log-probabilities, got shape {list(shape)}")
    if ctx.attrs["sample_size"] < 1:
        raise ctx.error(f"sample_size must be positive, got {ctx.attrs['sample_size']}")
    d = _out_dtype(ctx, frozenset({dt.int32, dt.int64}))
    return [dt.TensorType((None if shape is None else shape[0], ctx.attrs["sample_size"]), d)]


def _multinomial_ref(x, dtype, sample_size, seed):
    if x.ndim != 2 or x.shape[1] == 0:
        raise GraphError(f"Multinomial: input must be [batch, classes > 0], got {list(x.shape)}")
    logits = x.astype(np.float64)
    # The input holds unnormalised log-probabilities: softmax each row, then invert its CDF.
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(prob, axis=1)
    u = _rng(seed).random((x.shape[0], sample_size)) * cdf[:, -1:]
    out = (u[:, :, None] >= cdf[:, None, :]).sum(axis=-1)  # the first class whose CDF exceeds u
    return np.minimum(out, x.shape[1] - 1).astype(dtype.np)


op("Multinomial", inputs=("input:T1",), outputs=("output:T2",),
   types={"T1": FLT, "T2": frozenset({dt.int32, dt.int64})},
   attrs=(Attr("dtype", "dtype", dt.int32), Attr("sample_size", "int", 1), Attr("seed", "float", None)),
   infer=_multinomial_infer, reference=_multinomial_ref, groups={RANDOM}, tier=Tier.HIGH,
   pure=False, onnx_since=7,
   doc="Draws sample_size class indices per row from the softmax of the input's log-probabilities.")
