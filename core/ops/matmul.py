"""The matmul family: MatMul (NumPy-style batched), Gemm, Einsum, Det.

Half-precision inputs are multiplied in float32 and rounded back once, the way accelerators
accumulate; integer inputs use exact integer arithmetic (wrapping on overflow).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ._shape import broadcast_shapes
from .reduce import FLT, wide
from .registry import ACCUMULATES, EPILOGUE_PRODUCER, MATMUL, Attr, Tier, op

MM = FLT | {dt.int32, dt.int64, dt.uint32, dt.uint64}


def _same_dim(ctx, a, b, what):
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise ctx.error(f"{what}: {a} != {b}")


# -- MatMul ----------------------------------------------------------------------------------------
def _matmul_infer(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if (a is not None and len(a) == 0) or (b is not None and len(b) == 0):
        raise ctx.error("inputs must have rank >= 1 (scalars cannot be multiplied as matrices)")
    if a is None or b is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    a2 = (1,) + a if len(a) == 1 else a  # NumPy rules: a 1-D operand gains a unit dim, dropped later
    b2 = b + (1,) if len(b) == 1 else b
    _same_dim(ctx, a2[-1], b2[-2], f"inner dimensions differ ({list(a)} x {list(b)})")
    out = broadcast_shapes(ctx, a2[:-2], b2[:-2])
    out += (a2[-2],) if len(a) > 1 else ()
    out += (b2[-1],) if len(b) > 1 else ()
    return [dt.TensorType(out, ctx.dtype(0))]


def _matmul(a, b):
    return np.asarray(np.matmul(wide(a), wide(b))).astype(a.dtype)


op("MatMul", inputs=("A:T", "B:T"), outputs=("Y:T",), types={"T": MM}, infer=_matmul_infer,
   reference=_matmul, groups={MATMUL, EPILOGUE_PRODUCER, ACCUMULATES}, tier=Tier.PRIMITIVE, onnx_since=13,
   doc="Matrix product with NumPy semantics: batch dims broadcast, 1-D operands are vectors.")


# -- Gemm ------------------------------------------------------------------------------------------
def _gemm_infer(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    for i, s in ((0, a), (1, b)):
        if s is not None and len(s) != 2:
            raise ctx.error(f"input {'AB'[i]} must be 2-D, got shape {list(s)}")
    m = k1 = k2 = n = None
    if a is not None:
        m, k1 = (a[1], a[0]) if ctx.attrs["transA"] else a
    if b is not None:
        k2, n = (b[1], b[0]) if ctx.attrs["transB"] else b
    _same_dim(ctx, k1, k2, "inner dimensions differ")
    if ctx.has(2):
        c = ctx.shape(2)
        if c is not None:
            if len(c) > 2:
                raise ctx.error(f"C must have rank <= 2, got shape {list(c)}")
            for cd, d in zip(reversed(c), (n, m)):
                if isinstance(cd, int) and cd != 1 and isinstance(d, int) and cd != d:
                    raise ctx.error(f"C of shape {list(c)} does not broadcast to [{m}, {n}]")
    return [dt.TensorType((m, n), ctx.dtype(0))]


def _gemm(a, b, c=None, *, alpha, beta, transA, transB):
    a2 = wide(a.T if transA else a)
    b2 = wide(b.T if transB else b)
    y = a2 @ b2
    if a.dtype.kind in "iu":
        # Integer Gemm stays exact unless alpha/beta really scale it.
        if alpha != 1.0:
            y = np.trunc(y * alpha).astype(a.dtype)
        if c is not None:
            y = y + (c if beta == 1.0 else np.trunc(c * beta).astype(a.dtype))
        return np.asarray(y).astype(a.dtype)
    y = y * alpha
    if c is not None:
        y = y + wide(c) * beta
    return y.astype(a.dtype)


op("Gemm", inputs=("A:T", "B:T", "C:T?"), outputs=("Y:T",), types={"T": MM},
   attrs=(Attr("alpha", "float", 1.0), Attr("beta", "float", 1.0), Attr("transA", "int", 0),
          Attr("transB", "int", 0)),
   infer=_gemm_infer, reference=_gemm, groups={MATMUL, EPILOGUE_PRODUCER, ACCUMULATES}, tier=Tier.KERNEL,
   onnx_since=11,
   doc="alpha * A' @ B' + beta * C for 2-D A and B (optionally transposed); C broadcasts to the result.")


# -- Einsum ----------------------------------------------------------------------------------------
class _Equation:
    """A parsed einsum equation, with each input's ellipsis spelled out as spare letters."""

    def __init__(self, terms: list[str], output: str):
        self.terms, self.output = terms, output

    @property
    def explicit(self) -> str:
        return ",".join(self.terms) + "->" + self.output


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def parse_einsum(equation: str, ranks: list[int], fail) -> _Equation:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise fail(f"equation '{equation}' has {len(terms)} operand(s), but {len(ranks)} inputs given")
    used = set()
    for t in terms + ([rhs] if arrow else []):
        body = t.replace("...", "", 1)
        bad = [ch for ch in body if ch not in _LETTERS]
        if bad:
            raise fail(f"equation '{equation}': unexpected character(s) {''.join(sorted(set(bad)))!r}")
        used.update(body)
    spare = [ch for ch in _LETTERS if ch not in used]
    ell_ranks = set()
    for t, r in zip(terms, ranks):
        letters = len(t.replace("...", ""))
        if r < letters or ("..." not in t and r != letters):
            raise fail(f"operand '{t}' names {letters} dims, but its input has rank {r}")
        if "..." in t:
            ell_ranks.add(r - letters)
    if len(ell_ranks) > 1:  # ONNX: every '...' stands for the same number of dims
        raise fail(f"equation '{equation}': '...' stands for {sorted(ell_ranks)} dims in different "
                   "operands")
    n_ell = ell_ranks.pop() if ell_ranks else 0
    if n_ell > len(spare):
        raise fail("too many dimensions for einsum")
    ell = "".join(spare[:n_ell])
    full = [t.replace("...", ell) for t in terms]
    if arrow:
        if rhs.count("...") and not n_ell:
            rhs = rhs.replace("...", "")
        if n_ell and "..." not in rhs:
            raise fail(f"equation '{equation}': the inputs have '...' dims, so the output needs '...'")
        out = rhs.replace("...", ell)
        for ch in out:
            if out.count(ch) > 1:
                raise fail(f"equation '{equation}': output letter '{ch}' repeats")
            if ch not in ell and not any(ch in t for t in full):
                raise fail(f"equation '{equation}': output letter '{ch}' is not in any operand")
    else:  # implicit: letters used exactly once, in ASCII order, after the ellipsis dims
        counts = {}
        for t in terms:
            for ch in t.replace("...", ""):
                counts[ch] = counts.get(ch, 0) + 1
        out = ell + "".join(sorted(ch for ch, k in counts.items() if k == 1))
    return _Equation(full, out)


def _unify(ctx, label, a, b):
    """The size of a label seen with sizes a and b (a size of 1 broadcasts, as in NumPy)."""
    if a == 1 or a == b:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ctx.error(f"equation '{ctx.attrs['equation']}': dimension '{label}' is {a} in one "
                        f"operand and {b} in another")
    return a if isinstance(a, int) else (b if isinstance(b, int) else None)


def _einsum_infer(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.inputs))]
    if any(s is None for s in shapes):
        return [dt.TensorType(None, ctx.dtype(0))]
    eq = parse_einsum(ctx.attrs["equation"], [len(s) for s in shapes], ctx.error)
    dims: dict[str, object] = {}
    for term, shape in zip(eq.terms, shapes):
        for ch, d in zip(term, shape):
            dims[ch] = _unify(ctx, ch, dims[ch], d) if ch in dims else d
    return [dt.TensorType(tuple(dims[ch] for ch in eq.output), ctx.dtype(0))]


def _einsum(*inputs, equation):
    eq = parse_einsum(equation, [x.ndim for x in inputs], ValueError)
    return np.asarray(np.einsum(eq.explicit, *[wide(x) for x in inputs])).astype(inputs[0].dtype)


op("Einsum", inputs=("Inputs:T*",), outputs=("Output:T",), types={"T": dt.NUMERIC},
   attrs=(Attr("equation", "string"),), infer=_einsum_infer, reference=_einsum,
   groups={MATMUL, ACCUMULATES}, tier=Tier.HIGH, onnx_since=12,
   doc="Einstein summation over the inputs as the equation says (explicit '->' or implicit form, "
       "'...' broadcasting).")


# -- Det -------------------------------------------------------------------------------------------
def _det_infer(ctx):
    s = ctx.shape(0)
    if s is None:
        return [dt.TensorType(None, ctx.dtype(0))]
    if len(s) < 2:
        raise ctx.error(f"input must have rank >= 2 ([*, M, M]), got shape {list(s)}")
    _same_dim(ctx, s[-2], s[-1], "matrices must be square")
    return [dt.TensorType(s[:-2], ctx.dtype(0))]


def _det(x):
    w = x.astype(np.float32) if x.dtype != np.float64 else x
    return np.asarray(np.linalg.det(w)).astype(x.dtype)


op("Det", inputs=("X:T",), outputs=("Y:T",), types={"T": FLT}, infer=_det_infer, reference=_det,
   tier=Tier.HIGH, onnx_since=11, doc="Determinant of each square matrix in the last two dims.")
