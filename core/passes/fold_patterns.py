"""Fold before lower: raise exporter-decomposed patterns back to the high-level op (Glow's
"fold" step, run before lowering so that a backend with a native kernel gets to use it).

    Exp(x [- ReduceMax(x)]) / ReduceSum(Exp(..))            -> Softmax(x, axis)
    x * 0.5 * (1 + Erf(x / sqrt 2))   (any association)     -> Gelu(x)
    (x - mean) / Sqrt(var + eps) [* scale] [+ bias]         -> LayerNormalization(x, scale, bias)
        mean = ReduceMean(x, axes), var = ReduceMean((x - mean)^2, axes) or
        ReduceMean(x^2, axes) - mean^2 (ONNX's own function body); / may be * Reciprocal

Constants may be wrapped in CastLike/Cast/Sqrt and 1 + erf written as a two-input Sum, as in
ONNX function bodies (`Sqrt(CastLike(2, x))`).

A pattern folds only when the op computes exactly the same function: the same single axis (or
trailing axes), keepdims=1 reductions, the constants of the formula (0.5, 1, sqrt 2 to within the
rounding of the model's element type), epsilon taken from the model, and the same output type.
The folded op may round differently (Softmax subtracts the max; LayerNormalization keeps its
statistics in float32 or wider): it is the better-conditioned form of the same function.

`fold_patterns(graph) -> graph` applies the rules to a fixed point (matching on the graph being
built, so patterns nested in other patterns fold too) and drops what they leave dead.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..graph import Graph
from .base import Pass
from .patterns import Rules, is_splat, producer

RULES = Rules("fold-patterns")


def fold_patterns(graph: Graph) -> Graph:
    """Raise decomposed Softmax, Gelu and LayerNormalization patterns to the op."""
    return RULES.apply(graph)


FOLD_PATTERNS = Pass("fold-patterns", fold_patterns,
                     "recognise exporter-decomposed Softmax/Gelu/LayerNormalization and raise them")


# -- matching helpers --------------------------------------------------------------------------------

def _rank(v):
    t = v.type
    return t.rank if isinstance(t, dt.TensorType) else None


def _reduced_axes(node, rank):
    """The sorted, normalised axes a keepdims=1 Reduce* node reduces, or None (not such a node,
    axes unknown or out of range)."""
    if node is None or rank is None or not node.attrs["keepdims"]:
        return None
    given = node.inputs[1] if len(node.inputs) > 1 else None
    if given is not None and (given.known is None or given.known.dtype.kind not in "iu"):
        return None
    axes = [] if given is None else [int(a) for a in given.known.reshape(-1)]
    if not axes:
        return None if node.attrs["noop_with_empty_axes"] else list(range(rank))
    if any(not -rank <= a < rank for a in axes):
        return None
    return sorted({a % rank for a in axes})


def _scalar_const(v, depth: int = 3):
    """The value of a one-element compile-time constant, else None. Sees through the CastLike /
    Cast / Sqrt that ONNX function bodies wrap their constants in (`CastLike(2, x)`, `Sqrt(Two)`),
    which constant folding cannot remove while the CastLike reads a run-time input."""
    if v is None or not isinstance(v.type, dt.TensorType):
        return None
    c = v.known
    if c is None:
        n = producer(v)
        if n is None or depth == 0 or n.op.name not in ("CastLike", "Cast", "Sqrt"):
            return None
        inner = _scalar_const(n.inputs[0], depth - 1)
        if inner is None:
            return None
        with np.errstate(all="ignore"):
            c = np.asarray(inner, v.type.dtype.np)
            c = np.sqrt(c) if n.op.name == "Sqrt" else c
    c = np.asarray(c)
    if c.size != 1 or c.dtype.kind not in "fiu":
        return None
    return float(c.reshape(-1)[0].astype(np.float64))


def _is_scalar(v, value) -> bool:
    return _scalar_const(v) == value


def _addends(v):
    """(a, b) when v = a + b (an Add, or a two-input Sum as ONNX function bodies write it)."""
    n = producer(v)
    if n is None or not (n.op.name == "Add" or (n.op.name == "Sum" and len(n.inputs) == 2)):
        return None
    return tuple(n.inputs)


def _near(value, target, dtype) -> bool:
    """`value` is `target` rounded to the model's float type (within two of its ulps)."""
    if value is None:
        return False
    eps = float(np.finfo(dtype.np).eps) if dtype.np.kind == "f" else 2.0 ** -7  # bfloat16
    return abs(value - target) <= 2 * eps * abs(target)


def _same_type(a, b) -> bool:
    return a.type == b.type


# -- Softmax -----------------------------------------------------------------------------------------

@RULES.rule("Div")
def fold_softmax(ctx, rb, node, ins):
    e, s = ins
    exp, total = producer(e, "Exp"), producer(s, "ReduceSum")
    rank = _rank(e)
    if exp is None or total is None or total.inputs[0] is not e or not rank:
        return None
    axes = _reduced_axes(total, rank)
    if axes is None or len(axes) != 1:
        return None
    axis = axes[0]
    x = exp.inputs[0]
    shifted = producer(x, "Sub")
    if shifted is not None:  # the max-subtracting form: softmax(x - max x) = softmax(x)
        top = producer(shifted.inputs[1], "ReduceMax")
        if top is not None and top.inputs[0] is shifted.inputs[0] and \
                _reduced_axes(top, rank) == axes:
            x = shifted.inputs[0]
    y = rb.emit1("Softmax", [x], {"axis": axis})
    return [y] if _same_type(y, node.outputs[0]) else None


# -- Gelu --------------------------------------------------------------------------------------------

def _factorings(ins):
    """(a, b, c) with node = a * b * c, from one Mul inside either operand."""
    for i in (0, 1):
        inner = producer(ins[i], "Mul")
        if inner is not None:
            yield (inner.inputs[0], inner.inputs[1], ins[1 - i])


def _erf_argument(phi):
    """x when phi = 1 + Erf(x / sqrt 2) (or x * (1/sqrt 2)), any operand order."""
    terms = _addends(phi)
    if terms is None:
        return None
    for one, erf_v in (terms, tuple(reversed(terms))):
        erf = producer(erf_v, "Erf")
        if erf is None or not _is_scalar(one, 1.0):
            continue
        z = producer(erf.inputs[0])
        if z is None:
            continue
        t = erf.inputs[0].type.dtype
        if z.op.name == "Div" and _near(_scalar_const(z.inputs[1]), math.sqrt(2), t):
            return z.inputs[0]
        if z.op.name == "Mul":
            for x, c in (z.inputs, reversed(z.inputs)):
                if _near(_scalar_const(c), math.sqrt(0.5), t):
                    return x
    return None


@RULES.rule("Mul")
def fold_gelu(ctx, rb, node, ins):
    for leaves in _factorings(ins):
        for i, half in enumerate(leaves):
            if _scalar_const(half) != 0.5:
                continue
            a, b = (leaves[j] for j in range(3) if j != i)
            for x, phi in ((a, b), (b, a)):
                if _erf_argument(phi) is x:
                    y = rb.emit1("Gelu", [x])
                    return [y] if _same_type(y, node.outputs[0]) else None
    return None


# -- LayerNormalization ------------------------------------------------------------------------------

def _squared(v, d):
    """v is d * d or d ^ 2."""
    n = producer(v)
    if n is None:
        return False
    if n.op.name == "Mul":
        return n.inputs[0] is d and n.inputs[1] is d
    return n.op.name == "Pow" and n.inputs[0] is d and _is_scalar(n.inputs[1], 2.0)


def _inverse_std(v):
    """(var, eps) when v = Sqrt(var + eps) (eps a one-element constant >= 0)."""
    root = producer(v, "Sqrt")
    terms = _addends(root.inputs[0]) if root is not None else None
    if terms is None:
        return None
    for var, eps in (terms, tuple(reversed(terms))):
        e = _scalar_const(eps)
        if e is not None and e >= 0:
            return var, e
    return None


def _variance_axes(var_v, x, d, mean_v, rank):
    """The axes of var when it is the variance of x: mean((x - mean)^2), or, as ONNX's own
    function body writes it, mean(x^2) - mean^2, each a keepdims=1 ReduceMean."""
    var = producer(var_v, "ReduceMean")
    if var is not None:
        return _reduced_axes(var, rank) if _squared(var.inputs[0], d) else None
    diff = producer(var_v, "Sub")
    if diff is None or not _squared(diff.inputs[1], mean_v):
        return None
    sq_mean = producer(diff.inputs[0], "ReduceMean")
    if sq_mean is None or not _squared(sq_mean.inputs[0], x):
        return None
    return _reduced_axes(sq_mean, rank)


def _normalization(op_name, inputs):
    """(x, axis, epsilon) when op_name(inputs) = (x - mean) / sqrt(var + eps) over the trailing
    axes [axis, rank), with mean and var ReduceMean(keepdims=1) over those same axes."""
    if op_name == "Div":
        d, den = inputs
    elif op_name == "Mul":  # (x - mean) * Reciprocal(Sqrt(var + eps)), either order
        recs = [i for i in (0, 1) if producer(inputs[i], "Reciprocal") is not None]
        if not recs:
            return None
        d, den = inputs[1 - recs[0]], inputs[recs[0]].node.inputs[0]
    else:
        return None
    centred, stats = producer(d, "Sub"), _inverse_std(den)
    if centred is None or stats is None:
        return None
    x, mean_v = centred.inputs
    mean, rank = producer(mean_v, "ReduceMean"), _rank(x)
    if mean is None or mean.inputs[0] is not x or not rank:
        return None
    axes = _reduced_axes(mean, rank)
    if not axes or axes != list(range(axes[0], rank)) or \
            axes != _variance_axes(stats[0], x, d, mean_v, rank):
        return None
    return x, axes[0], stats[1]


def _broadcasts_into(v, x, axis) -> bool:
    """v is a per-position tensor of the normalised shape x.shape[axis:] (right-aligned, size-1
    dims allowed, only 1s over the leading axes): LayerNormalization's Scale and B."""
    s, shape = v.type.shape, x.type.shape
    if s is None or shape is None or v.type.dtype != x.type.dtype or len(s) > len(shape):
        return False
    inner = len(shape) - axis  # the normalised dims, counted from the right
    return all(d == 1 or (k < inner and d == t)
               for k, (d, t) in enumerate(zip(reversed(s), reversed(shape))))


def _layer_norm(rb, node, x, axis, eps, scale, bias=None):
    shape = x.type.shape
    if scale is None:
        if shape is None or any(not isinstance(d, int) for d in shape[axis:]):
            return None
        scale = rb.constant(np.ones(shape[axis:], x.type.dtype.np), name="ones")
    stash = dt.float64 if x.type.dtype == dt.float64 else dt.float32
    y = rb.emit1("LayerNormalization", [x, scale, bias],
                 {"axis": axis, "epsilon": eps, "stash_type": stash})
    return [y] if _same_type(y, node.outputs[0]) else None


@RULES.rule("Div", "Mul")
def fold_layer_norm(ctx, rb, node, ins):
    """The normalisation itself, with a scale of ones (a following Mul and Add fold into it)."""
    found = _normalization(node.op.name, ins)
    return None if found is None else _layer_norm(rb, node, *found, None)


def _plain_layer_norm(v):
    """The LayerNormalization node making `v`, when it has one output, no bias and scale 1."""
    ln = producer(v, "LayerNormalization")
    if ln is None or len(ln.outputs) != 1 or (len(ln.inputs) > 2 and ln.inputs[2] is not None):
        return None
    return ln if is_splat(ln.inputs[1], 1.0) else None


@RULES.rule("Mul")
def fold_layer_norm_scale(ctx, rb, node, ins):
    """LayerNormalization(x, 1) * S -> LayerNormalization(x, S): the same products, rounded once."""
    for i, (y, scale) in enumerate((ins, tuple(reversed(ins)))):
        ln = _plain_layer_norm(y)
        if ln is not None and ctx.single_use(node.inputs[i]):  # else both forms would be computed
            x = ln.inputs[0]
            if _broadcasts_into(scale, x, ln.attrs["axis"] % _rank(x)):
                out = rb.emit1("LayerNormalization", [x, scale], dict(ln.attrs))
                return [out] if _same_type(out, node.outputs[0]) else None
    return None


@RULES.rule("Add")
def fold_layer_norm_bias(ctx, rb, node, ins):
    """LayerNormalization(x, scale) + B -> LayerNormalization(x, scale, B)."""
    for i, (y, bias) in enumerate((ins, tuple(reversed(ins)))):
        ln = producer(y, "LayerNormalization")
        if ln is None or len(ln.outputs) != 1 or (len(ln.inputs) > 2 and ln.inputs[2] is not None) \
                or not ctx.single_use(node.inputs[i]):
            continue
        x = ln.inputs[0]
        axis = ln.attrs["axis"] % _rank(x)
        if _broadcasts_into(bias, x, axis):
            out = rb.emit1("LayerNormalization", [x, ln.inputs[1], bias], dict(ln.attrs))
            return [out] if _same_type(out, node.outputs[0]) else None
    return None
