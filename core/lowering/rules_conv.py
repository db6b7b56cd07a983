"""Lowering rules for convolutions: Conv, ConvTranspose, DeformConv (ConvInteger is lowered in
rules_quant, to a float64 Conv).

Conv is an im2col rewrite. The input is padded once; each kernel position k reads one strided
Slice of it (a "tap", shaped like the output); the taps are stacked into a patch matrix and
contracted with the reshaped weights by one batched MatMul: (group, M/group, C/group * taps) @
(N, group, C/group * taps, P), so groups are a batch dim of the MatMul, never a loop (with one
group the taps are simply concatenated along the channel axis and the weights transposed to
match). The patch matrix is `taps` times one tap, so big kernels are split into chunks of
kernel positions whose MatMuls are summed with Add; `patch_budget` sizes the chunks. Depthwise
convs (one input channel per group) have nothing to contract: they multiply-add tap by tap.

ConvTranspose scatters instead: kernel position k adds W_k^T x at output positions i*s + k*d.
Grouped by phase (k*d mod s) those positions form a dense sub-grid, so every phase accumulates
shifted (Padded) contributions and one Concat + Reshape interleaves the phases: no zero
insertion and no multiplications by zero.

16-bit floats are computed in float32 and rounded once, as the references do. A float32 Conv
accumulates in float64, as its reference does (ops/conv.py): BLAS blocks a float32 product so
that identical output channels can round differently, which ill-conditioned models (the light
SqueezeNet, whose logits are ~1e10) turn into different results.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as dt
from ..ops.conv import out_extents, transpose_geometry, window_attrs
from ._build import ints, scalar
from .driver import MEMORY_BLOWUP_LIMIT
from .registry import lowering

HALF = frozenset({dt.float16, dt.bfloat16})
#: The type a Conv accumulates in, per input type (as the reference: see the module doc).
CONV_ACCUMULATE = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.float32: dt.float64}
#: One MatMul's patch matrix may hold this many times the conv's largest operand: a 3x3
#: stride-1 conv (patches = 9 x its input) is then a single MatMul; bigger kernels are chunked.
PATCH_FACTOR = 9


# -- small builders (also used by rules_pool and rules_resize) -------------------------------------

def op1(rb, op, *inputs, **attrs):
    return rb.emit1(op, list(inputs), attrs or None)


def reshape(rb, v, shape):
    """Reshape; 0 keeps the input's dim there (so a dynamic batch passes through)."""
    return op1(rb, "Reshape", v, ints(rb, shape))


def strided(rb, v, axes, starts, counts, steps):
    """`counts[i]` elements of axis `axes[i]` from `starts[i]` every `steps[i]`; no node if whole."""
    shape = v.type.shape
    keep = [i for i, a in enumerate(axes)
            if not (starts[i] == 0 and (steps[i] == 1 or counts[i] == 1) and counts[i] == shape[a])]
    if not keep:
        return v
    ends = [starts[i] + (counts[i] - 1) * steps[i] + 1 for i in keep]
    return op1(rb, "Slice", v, ints(rb, [starts[i] for i in keep]), ints(rb, ends),
               ints(rb, [axes[i] for i in keep]), ints(rb, [steps[i] for i in keep]))


def pad(rb, v, begin, end, value=None):
    """Constant-pad every axis of v by begin/end (non-negative); no node when nothing to do."""
    if not any(begin) and not any(end):
        return v
    fill = [] if value is None else [scalar(rb, value, v)]
    return op1(rb, "Pad", v, ints(rb, list(begin) + list(end)), *fill)


def crop(rb, v, axes, starts, counts):
    """Elements [start, start + count) of each axis, reading zeros outside the tensor."""
    shape = v.type.shape
    r = len(shape)
    begin, end = [0] * r, [0] * r
    for a, s, c in zip(axes, starts, counts):
        begin[a] = max(-s, 0)
        end[a] = max(s + c - shape[a], 0)
    v = pad(rb, v, begin, end)
    return strided(rb, v, axes, [s + begin[a] for a, s in zip(axes, starts)], counts, [1] * len(axes))


def zeros_from_empty(rb, v, sizes):
    """Zeros shaped like the empty tensor v but with `sizes[axis]` elements along each given axis
    (other dims, a dynamic batch included, stay as they are): each such axis is sliced empty and
    padded. What a contraction over nothing (no input channels) leaves."""
    r = len(v.type.shape)
    v = strided(rb, v, list(sizes), [0] * len(sizes), [0] * len(sizes), [1] * len(sizes))
    return pad(rb, v, [0] * r, [sizes.get(a, 0) for a in range(r)])


def concat(rb, vs, axis):
    return vs[0] if len(vs) == 1 else rb.emit1("Concat", list(vs), {"axis": axis})


def chain(rb, op, vs):
    acc = vs[0]
    for v in vs[1:]:
        acc = op1(rb, op, acc, v)
    return acc


def widen(rb, vs):
    """16-bit float values cast to float32 (others unchanged)."""
    return [v if v is None or v.type.dtype not in HALF else op1(rb, "Cast", v, to=dt.float32)
            for v in vs]


def narrow(rb, v, dtype):
    return v if v.type.dtype == dtype else op1(rb, "Cast", v, to=dtype)


def static(dims) -> bool:
    return dims is not None and all(isinstance(d, int) for d in dims)


def nbytes(v, dtype=None) -> int:
    """Bytes of v (a dynamic dim counts as 1: every size here is per batch item when N is dynamic)."""
    t = v.type
    n = math.prod(d if isinstance(d, int) else 1 for d in t.shape)
    return n * (dtype or t.dtype).itemsize


def patch_budget(node, compute_dtype, *values) -> int:
    """Bytes one patch matrix may take: PATCH_FACTOR x the largest of `values` in the compute type,
    and always under the driver's limit (MEMORY_BLOWUP_LIMIT x the node's largest operand)."""
    operands = [v for v in (*node.all_inputs, *node.outputs) if v is not None]
    limit = MEMORY_BLOWUP_LIMIT * max(nbytes(v) for v in operands)
    own = PATCH_FACTOR * max(nbytes(v, compute_dtype) for v in values)
    return min(own, limit - limit // 8)


def chunks(count, per_item, budget):
    """Split range(count) into near-equal consecutive chunks of at most budget / per_item items."""
    most = max(1, budget // max(per_item, 1))
    n = -(-count // most)
    size = -(-count // n)
    return [range(k, min(k + size, count)) for k in range(0, count, size)]


# -- sliding windows (also used by rules_pool) ----------------------------------------------------

def pad_windows(rb, x, kernel, strides, dilations, out, pb, value=None):
    """Pad the spatial axes of x so that all windows fit. Returns (padded x, origin): origin[i] is
    where input position -pb[i] (the first window's start) lies in the padded axis."""
    in_sp = x.type.shape[2:]
    nsp = len(kernel)
    begin, end, origin = [0, 0], [0, 0], []
    for i in range(nsp):
        need = (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
        b = max(pb[i], 0)
        begin.append(b)
        end.append(max(need - pb[i] - in_sp[i], 0))
        origin.append(b - pb[i])
    return pad(rb, x, begin, end, value), origin


def window_tap(rb, xp, origin, kidx, strides, dilations, out):
    """The input value under kernel position kidx of every window: shaped (N, C, *out)."""
    nsp = len(kidx)
    return strided(rb, xp, [2 + i for i in range(nsp)],
                   [origin[i] + kidx[i] * dilations[i] for i in range(nsp)], out, strides)


def kernel_positions(kernel):
    return list(itertools.product(*(range(k) for k in kernel)))


# -- Conv core ------------------------------------------------------------------------------------

def correlate(rb, x, w, group, out, strides, dilations, pb, budget):
    """Grouped cross-correlation of x (N, C, *in) with w (M, C/group, *kernel) into (N, M, *out):
    output o reads input o * stride + k * dilation - pb (zero outside the input). w is cast to
    x's type last, after its reshapes and transposes: a constant w then folds to one cast copy of
    each chunk, not a cast of the whole then a strided copy in the wider type."""
    c = x.type.shape[1]
    m, cg = w.type.shape[:2]
    kernel = list(w.type.shape[2:])
    xp, origin = pad_windows(rb, x, kernel, strides, dilations, out, pb)

    def tap(k):
        return window_tap(rb, xp, origin, k, strides, dilations, out)

    if cg == 1 and group > 1:
        y = _multiply_add(rb, tap, w, group, m, kernel, out, x.type.dtype)
    else:
        per_tap = nbytes(x, x.type.dtype) // max(math.prod(x.type.shape[2:]), 1) * math.prod(out)
        y = _im2col(rb, tap, w, group, c, m, kernel, out, chunks(math.prod(kernel), per_tap, budget), x.type.dtype)
    return reshape(rb, y, [0, m, *out])


def _im2col(rb, tap, w, g, c, m, kernel, out, parts, ct):
    cg, mg, kk, p = c // g, m // g, math.prod(kernel), math.prod(out)
    positions = kernel_positions(kernel)
    if g == 1:
        # Taps stacked along the channel axis (one copy, no per-tap reshape): patch rows are
        # kernel-position-major, so the weights are transposed to (M, taps, C) to match.
        w2 = reshape(rb, w, [m, c, kk])
        w2 = w2 if kk == 1 else op1(rb, "Transpose", w2, perm=[0, 2, 1])
    else:
        # Rows channel-major, kernel-position-minor (w's own layout), so that groups stay a
        # leading batch dim of the MatMul.
        w2 = reshape(rb, w, [g, mg, cg, kk])
    acc = None
    for part in parts:
        kc = len(part)
        if g == 1:
            cols = reshape(rb, concat(rb, [tap(positions[j]) for j in part], 1), [0, kc * c, p])
            wk = w2 if kc == kk else strided(rb, w2, [1], [part[0]], [kc], [1])
            y = op1(rb, "MatMul", narrow(rb, reshape(rb, wk, [m, kc * c]), ct), cols)  # (N, M, P)
        else:
            cols = [reshape(rb, tap(positions[j]), [0, c, 1, p]) for j in part]
            cols = reshape(rb, concat(rb, cols, 2), [0, g, cg * kc, p])
            wk = w2 if kc == kk else strided(rb, w2, [3], [part[0]], [kc], [1])
            y = op1(rb, "MatMul", narrow(rb, reshape(rb, wk, [g, mg, cg * kc]), ct), cols)  # (N, g, mg, P)
        acc = y if acc is None else op1(rb, "Add", acc, y)
    return acc


def _multiply_add(rb, tap, w, g, m, kernel, out, ct):
    # Depthwise: y[n, g, j] = sum_k x_k[n, g] * w[g, j, k]; per-position weights are (1, g, j, 1..).
    mg, kk, nsp = m // g, math.prod(kernel), len(kernel)
    wt = op1(rb, "Transpose", reshape(rb, w, [g, mg, kk]), perm=[2, 0, 1])
    wt = reshape(rb, wt, [kk, g] + ([mg] if mg > 1 else []) + [1] * nsp)
    acc = None
    for j, k in enumerate(kernel_positions(kernel)):
        xk = tap(k)
        if mg > 1:
            xk = reshape(rb, xk, [0, g, 1, *out])
        term = op1(rb, "Mul", xk, narrow(rb, strided(rb, wt, [0], [j], [1], [1]), ct))
        acc = term if acc is None else op1(rb, "Add", acc, term)
    return acc


def _conv_geometry(node, x, w):
    """(out dims, strides, dilations, begin pads), or None when shapes are not known enough."""
    xs, ws = x.type.shape, w.type.shape
    if xs is None or ws is None or not static(xs[1:]) or not static(ws):
        return None
    a = node.attrs
    kernel, s, d, p = window_attrs(ValueError, len(ws) - 2, ws[2:], a["strides"], a["dilations"],
                                   a["pads"])
    out, pb, _ = out_extents(ValueError, list(xs[2:]), kernel, s, d, p, a.get("auto_pad", "NOTSET"))
    return out, s, d, pb


def add_bias(rb, y, b):
    if b is None:
        return y
    return op1(rb, "Add", y, reshape(rb, b, [1, -1] + [1] * (len(y.type.shape) - 2)))


@lowering("Conv")
def lower_conv(rb, node, ins):
    x, w, b = (list(ins) + [None])[:3]
    geo = _conv_geometry(node, x, w)
    if geo is None:
        return None
    planes = _volume_as_planes(rb, node, x, w, b)
    if planes is not None:
        return [planes]
    ct = CONV_ACCUMULATE.get(x.type.dtype, x.type.dtype)
    x, b = (v if v is None else narrow(rb, v, ct) for v in (x, b))
    if w.type.shape[1] == 0:  # no input channels: every output is the bias alone
        y = zeros_from_empty(rb, x, {1: w.type.shape[0], **{2 + i: o for i, o in enumerate(geo[0])}})
        return [narrow(rb, add_bias(rb, y, b), node.outputs[0].type.dtype)]
    y = correlate(rb, x, w, node.attrs["group"], *geo, patch_budget(node, ct, x, w, node.outputs[0]))
    return [narrow(rb, add_bias(rb, y, b), node.outputs[0].type.dtype)]



def _volume_as_planes(rb, node, x, w, b):
    """A 3-D Conv as one 2-D Conv, or None (not 3-D, shapes not static, or X' over the budget).

    Tap t of the depth kernel reads input depth o * sd + t * dd - pad for output depth o, so the
    taps go into the channels and depth next to the batch:

        X'[n * Do + o, (g, t, c), h, w] = Xpadded[n, g * Cg + c, o * sd + t * dd, h, w]
        W'[m, (t, c), i, j]             = W[m, c, t, i, j]

    and the 2-D Conv of X' with W' (same groups, the height and width window) is the output with
    depth beside the batch. A backend with a native 2-D Conv then runs 3-D ones on it (the cpu
    backend's NHWC kernels: a video model's 3 x 3 x 3 layer went from 165 times onnxruntime's time
    on the im2col below to its own); X' is kd times the input at most, the im2col of one axis."""
    xs, ws = x.type.shape, w.type.shape
    if len(ws) != 5 or not static(xs) or not static(ws) or not static(node.outputs[0].type.shape):
        return None
    n, c, depth, h, wd = xs
    m, cg, kd, kh, kw = ws
    group = node.attrs["group"]
    if 0 in xs or 0 in ws or kd * nbytes(x) > patch_budget(node, x.type.dtype, x, w, node.outputs[0]):
        return None
    a = node.attrs
    k, s, d, p = window_attrs(ValueError, 3, ws[2:], a["strides"], a["dilations"], a["pads"])
    out, pb, pe = out_extents(ValueError, list(xs[2:]), k, s, d, p, a.get("auto_pad", "NOTSET"))
    # channels last first: the 2-D Conv's [N * Do, H, W, C'] is then a Reshape of the Concat (a
    # backend running NHWC, as the cpu one does, moves the data once, not twice)
    xt = op1(rb, "Transpose", x, perm=[0, 2, 3, 4, 1])
    xt = xt if group == 1 else reshape(rb, xt, [n, depth, h, wd, group, cg])
    rank = len(xt.type.shape)
    need = (out[0] - 1) * s[0] + (kd - 1) * d[0] + 1  # depth only: height and width are the 2-D Conv's
    front = max(pb[0], 0)
    xp = pad(rb, xt, [0, front] + [0] * (rank - 2), [0, max(need - pb[0] - depth, 0)] + [0] * (rank - 2))
    taps = [strided(rb, xp, [1], [front - pb[0] + t * d[0]], [out[0]], [s[0]]) for t in range(kd)]
    xs2 = reshape(rb, concat(rb, taps, rank - 1), [n * out[0], h, wd, group * kd * cg])
    xs2 = op1(rb, "Transpose", xs2, perm=[0, 3, 1, 2])  # [N * Do, (G, kd, Cg), H, W]
    if w.is_constant:
        w2 = rb.constant(np.ascontiguousarray(np.asarray(w.data).transpose(0, 2, 1, 3, 4).reshape(m, kd * cg, kh, kw)),
                         w.name)
    else:
        w2 = reshape(rb, op1(rb, "Transpose", w, perm=[0, 2, 1, 3, 4]), [m, kd * cg, kh, kw])
    attrs = {"kernel_shape": [kh, kw], "strides": s[1:], "dilations": d[1:], "pads": [pb[1], pb[2], pe[1], pe[2]],
             "group": group}
    y = rb.emit1("Conv", [xs2, w2] + ([] if b is None else [b]), attrs)  # [N * Do, M, Ho, Wo]
    y = reshape(rb, y, [n, out[0], m, out[1], out[2]])
    return op1(rb, "Transpose", y, perm=[0, 2, 1, 3, 4])


def _phases_as_conv(rb, node, x, w):
    """A float32 ConvTranspose with constant weights and no dilation as one Conv, or None.

    Output position f = o + pad_begin of the full (uncropped) output is q * s + r: phase r of
    stride s gets z_r[q] = sum_t x[q - t] W[r + t * s], a correlation of x (padded by T - 1, T =
    ceil(k / s) taps) with the phase's taps reversed. All s^nsp phases are the output channels of
    one Conv (a phase with fewer taps reads zeros), interleaved into the full output by a Reshape
    and a Transpose and then cropped: a backend with a native Conv runs it there (the cpu NHWC
    kernels), with the multiply-adds of the transposed convolution itself (none on zeros when s
    divides k)."""
    xs, ws = x.type.shape, w.type.shape
    a = node.attrs
    nsp = len(ws) - 2
    if not static(xs) or not w.is_constant or x.type.dtype != dt.float32 or 0 in xs or 0 in ws or nsp < 1:
        return None
    kernel, s, d, _ = window_attrs(ValueError, nsp, ws[2:], a["strides"], a["dilations"], a["pads"])
    out, pb = transpose_geometry(ValueError, list(xs[2:]), kernel, a)
    if any(v != 1 for v in d) or any(v is None for v in out + pb):
        return None
    g, n, c, mg = a["group"], xs[0], xs[1], ws[1]
    cg, taps = c // g, [-(-k // st) for k, st in zip(kernel, s)]
    src = np.asarray(w.data).reshape(g, cg, mg, *kernel)
    wc = np.zeros((g, *s, mg, cg, *taps), src.dtype)  # [group, phase..., M/group, C/group, tap...]
    every = (slice(None),) * 3
    for r in itertools.product(*(range(v) for v in s)):
        for u in itertools.product(*(range(t) for t in taps)):
            i = tuple(r[k] + (taps[k] - 1 - u[k]) * s[k] for k in range(nsp))
            if all(i[k] < kernel[k] for k in range(nsp)):
                wc[(slice(None), *r, slice(None), slice(None), *u)] = src[every + i].transpose(0, 2, 1)
    wc = rb.constant(np.ascontiguousarray(wc.reshape(g * math.prod(s) * mg, cg, *taps)), w.name)
    z = rb.emit1("Conv", [x, wc], {"kernel_shape": taps, "pads": [t - 1 for t in taps] * 2, "group": g})
    q = list(z.type.shape[2:])
    z = reshape(rb, z, [n, g, *s, mg, *q])
    perm = [0, 1, 2 + nsp] + [ax for k in range(nsp) for ax in (3 + nsp + k, 2 + k)]
    full = reshape(rb, op1(rb, "Transpose", z, perm=perm), [n, g * mg] + [q[k] * s[k] for k in range(nsp)])
    return crop(rb, full, [2 + k for k in range(nsp)], pb, out)

# -- ConvTranspose --------------------------------------------------------------------------------

@lowering("ConvTranspose")
def lower_conv_transpose(rb, node, ins):
    x, w, b = (list(ins) + [None])[:3]
    xs, ws = x.type.shape, w.type.shape
    if xs is None or ws is None or not static(xs[1:]) or not static(ws):
        return None
    phases = _phases_as_conv(rb, node, x, w)
    if phases is not None:
        return [add_bias(rb, phases, b)]
    a = node.attrs
    kernel, in_sp = list(ws[2:]), list(xs[2:])
    nsp = len(kernel)
    _, s, d, _ = window_attrs(ValueError, nsp, kernel, a["strides"], a["dilations"], a["pads"])
    out, pb = transpose_geometry(ValueError, in_sp, kernel, a)
    g, c, mg = a["group"], xs[1], ws[1]
    m, cg, kk, p_in = g * mg, c // g, math.prod(kernel), math.prod(in_sp)
    x, w, b = widen(rb, [x, w, b])
    if c == 0:  # no input channels: every output is the bias alone
        y = zeros_from_empty(rb, x, {1: m, **{2 + i: o for i, o in enumerate(out)}})
        return [narrow(rb, add_bias(rb, y, b), node.outputs[0].type.dtype)]
    budget = patch_budget(node, x.type.dtype, x, w, node.outputs[0])
    # Every phase's canvas spans the input plus the largest shift of a kernel position.
    shift = [(kernel[i] - 1) * d[i] // s[i] for i in range(nsp)]
    canvas = {}
    wt = op1(rb, "Transpose", reshape(rb, w, [g, cg, mg, kk]), perm=[0, 3, 2, 1])  # (g, kk, mg, cg)
    xr = reshape(rb, x, [0, g, cg, p_in])
    positions = kernel_positions(kernel)
    per_pos = nbytes(x, x.type.dtype) // max(c, 1) * m
    for part in chunks(kk, per_pos, budget):
        wk = strided(rb, wt, [1], [part[0]], [len(part)], [1])
        ys = op1(rb, "MatMul", reshape(rb, wk, [g, len(part) * mg, cg]), xr)  # (N, g, kc*mg, P_in)
        ys = reshape(rb, ys, [0, g, len(part), mg, p_in])
        for j, kpos in enumerate(positions[part[0]:part[-1] + 1]):
            yk = reshape(rb, strided(rb, ys, [2], [j], [1], [1]), [0, m, *in_sp])
            phase = tuple(kpos[i] * d[i] % s[i] for i in range(nsp))
            q = [kpos[i] * d[i] // s[i] for i in range(nsp)]
            yk = pad(rb, yk, [0, 0, *q], [0, 0, *(shift[i] - q[i] for i in range(nsp))])
            canvas[phase] = op1(rb, "Add", canvas[phase], yk) if phase in canvas else yk
    full = _interleave(rb, canvas, s, [in_sp[i] + shift[i] for i in range(nsp)], m)
    y = crop(rb, full, list(range(2, 2 + nsp)), pb, out)
    return [narrow(rb, add_bias(rb, y, b), node.outputs[0].type.dtype)]


def _interleave(rb, canvas, s, length, m):
    """full[..., q * s + r, ...] = canvas[r][..., q, ...] over all phases r (zeros where none)."""
    nsp = len(s)
    if all(si == 1 for si in s):
        return canvas[(0,) * nsp]
    any_canvas = next(iter(canvas.values()))
    expanded = [0, m] + [v for i in range(nsp) for v in (length[i], 1)]

    def zeros():
        # An empty slice padded back to full size: zeros of the canvas's shape, batch included.
        empty = strided(rb, any_canvas, [2], [0], [0], [1])
        return pad(rb, empty, [0] * (nsp + 2), [0, 0, length[0]] + [0] * (nsp - 1))

    def build(prefix):
        i = len(prefix)
        if i == nsp:
            return reshape(rb, canvas[prefix] if prefix in canvas else zeros(), expanded)
        return concat(rb, [build(prefix + (r,)) for r in range(s[i])], 3 + 2 * i)

    return reshape(rb, build(()), [0, m] + [length[i] * s[i] for i in range(nsp)])


# -- DeformConv -----------------------------------------------------------------------------------

@lowering("DeformConv")
def lower_deform_conv(rb, node, ins):
    # Each tap samples the input N-linearly at its offset position: per interpolation corner, one
    # Gather of input rows (N * offset_group * spatial, C / offset_group) at the corner's flat
    # position, weighted (0 outside the input, times the mask). The sampled taps form the patch
    # matrix of an im2col MatMul, built in chunks of kernel positions like Conv's.
    x, w, offset, b, mask = (list(ins) + [None] * 2)[:5]
    if not all(v is None or static(v.type.shape) for v in (x, w, offset, mask)):
        return None
    a = node.attrs
    xs, ws = x.type.shape, w.type.shape
    kernel, in_sp = list(ws[2:]), list(xs[2:])
    nsp = len(kernel)
    kernel, s, d, p = window_attrs(ValueError, nsp, kernel, a["strides"], a["dilations"], a["pads"])
    out, pb, _ = out_extents(ValueError, in_sp, kernel, s, d, p, "NOTSET")
    n, c, m, og, grp = xs[0], xs[1], ws[0], a["offset_group"], a["group"]
    kk, pp, hw = math.prod(kernel), math.prod(out), math.prod(in_sp)
    cog, cg, mg = c // og, c // grp, m // grp
    x, w, offset, b, mask = widen(rb, [x, w, offset, b, mask])
    if c == 0:  # no input channels: every output is the bias alone
        y = zeros_from_empty(rb, x, {1: m, **{2 + i: o for i, o in enumerate(out)}})
        return [narrow(rb, add_bias(rb, y, b), node.outputs[0].type.dtype)]
    budget = patch_budget(node, x.type.dtype, x, w, offset, node.outputs[0])
    off = reshape(rb, offset, [n, og, kk, nsp, pp])
    # Undeformed positions o * s - pb + k * d per axis, (kk, pp), plus the offsets.
    kpos = np.stack(np.meshgrid(*(np.arange(k) for k in kernel), indexing="ij"), 0).reshape(nsp, kk)
    opos = np.stack(np.meshgrid(*(np.arange(o) for o in out), indexing="ij"), 0).reshape(nsp, pp)
    floor, frac = [], []
    for i in range(nsp):
        start = (opos[i] * s[i] - pb[i])[None, :] + (kpos[i] * d[i])[:, None]
        pos = op1(rb, "Add", reshape(rb, strided(rb, off, [3], [i], [1], [1]), [n, og, kk, pp]),
                  rb.constant(start.astype(x.type.dtype.np), name="taps"))
        floor.append(op1(rb, "Floor", pos))
        frac.append(op1(rb, "Sub", pos, floor[i]))
    msk = None if mask is None else reshape(rb, mask, [n, og, kk, pp])
    rows = op1(rb, "Transpose", reshape(rb, x, [n, og, cog, hw]), perm=[0, 1, 3, 2])
    rows = reshape(rb, rows, [n * og * hw, cog])
    first_row = rb.constant((np.arange(n * og, dtype=np.int64) * hw).reshape(n, og, 1, 1), name="rows")
    w2 = reshape(rb, w, [grp, mg, cg, kk])
    acc = None
    for part in chunks(kk, nbytes(x) // hw * pp, budget):
        def cut(v, part=part):
            return strided(rb, v, [2], [part[0]], [len(part)], [1])

        fl, fr = [cut(v) for v in floor], [cut(v) for v in frac]
        terms = [_deform_corner(rb, corner, fl, fr, None if msk is None else cut(msk), in_sp, rows,
                                first_row) for corner in itertools.product((0, 1), repeat=nsp)]
        cols = chain(rb, "Add", terms)  # (N, og, kc, P, C/og)
        cols = op1(rb, "Transpose", cols, perm=[0, 1, 4, 2, 3])
        cols = reshape(rb, cols, [n, grp, cg * len(part), pp])
        wk = w2 if len(part) == kk else strided(rb, w2, [3], [part[0]], [len(part)], [1])
        y = op1(rb, "MatMul", reshape(rb, wk, [grp, mg, cg * len(part)]), cols)
        acc = y if acc is None else op1(rb, "Add", acc, y)
    y = add_bias(rb, reshape(rb, acc, [n, m, *out]), b)
    return [narrow(rb, y, node.outputs[0].type.dtype)]


def _deform_corner(rb, corner, floor, frac, mask, in_sp, rows, first_row):
    """One interpolation corner's weighted samples: (N, og, kc, P, C/og)."""
    weight, valid, flat = mask, None, None
    for i, (f, t, size) in enumerate(zip(floor, frac, in_sp)):
        one = scalar(rb, 1, f)
        idx = op1(rb, "Add", f, one) if corner[i] else f
        wi = t if corner[i] else op1(rb, "Sub", one, t)  # 1 - |pos - idx|
        weight = wi if weight is None else op1(rb, "Mul", weight, wi)
        inside = op1(rb, "And", op1(rb, "Not", op1(rb, "Less", idx, scalar(rb, 0, f))),
                     op1(rb, "Less", idx, scalar(rb, size, f)))
        valid = inside if valid is None else op1(rb, "And", valid, inside)
        clipped = op1(rb, "Min", op1(rb, "Max", idx, scalar(rb, 0, f)), scalar(rb, size - 1, f))
        clipped = op1(rb, "Cast", clipped, to=dt.int64)
        flat = clipped if flat is None else op1(rb, "Add", op1(rb, "Mul", flat, ints(rb, [size])), clipped)
    weight = op1(rb, "Where", valid, weight, scalar(rb, 0, weight))
    sample = op1(rb, "Gather", rows, op1(rb, "Add", flat, first_row), axis=0)
    shape = weight.type.shape
    return op1(rb, "Mul", sample, reshape(rb, weight, [*shape, 1]))
