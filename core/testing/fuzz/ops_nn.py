"""Op generators: MatMul, Gemm, Einsum, Conv, ConvTranspose and the pooling ops."""

from __future__ import annotations

import math

import numpy as np

from .gen import F32, FLOATS, INF, broadcast, gen, out


def _weights(b, shape, dtype=F32):
    """A weight tensor: a constant (mostly) or a graph input, values in [-1, 1]."""
    a = b.data(dtype, shape, "small")
    return b.const(a, as_input=b.chance(0.2))


def _mul(*m):
    r = 1.0
    for x in m:
        r *= x
    return r if r < 1e30 else INF


@gen("MatMul")
def matmul(b, op):
    a = b.pick(FLOATS, min_rank=1, max_rank=4)
    k = a.shape[-1]
    if a.rank == 1:
        bshape = tuple([b.randint(1, 3)] * b.randint(0, 1)) + (k, b.randint(1, 5))
    elif b.chance(0.15):
        bshape = b.choice([(k,), (k, b.randint(1, 5))])
    else:
        batch = [1 if b.chance(0.3) else d for d in a.shape[:-2]][b.randint(0, a.rank - 2):]
        bshape = tuple(batch) + (k, b.randint(1, 5))

    def fits(v):
        if v.shape != bshape:
            return False
        return True
    w = b.pick((a.dtype,), pred=fits, new_shape=lambda: bshape, fresh_p=0.5, kind="small")
    sa, sb = list(a.shape), list(w.shape)
    if len(sa) == 1:
        shape = tuple(sb[:-2] + sb[-1:])
    elif len(sb) == 1:
        shape = tuple(sa[:-1])
    else:
        shape = broadcast(tuple(sa[:-2]), tuple(sb[:-2])) + (sa[-2], sb[-1])
    b.node(op, [a, w], [out(a.dtype, shape, _mul(k, a.mag, w.mag))])
    return True


@gen("Gemm")
def gemm(b, op):
    a = b.pick(FLOATS, min_rank=2, max_rank=2)
    ta, tb = b.chance(0.3), b.chance(0.4)
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = b.randint(1, 6)
    w = _weights(b, (n, k) if tb else (k, n), a.dtype)
    ins, attrs = [a, w], dict(transA=int(ta) if ta or b.chance(0.5) else None, transB=int(tb) if tb else None)
    alpha = float(np.float32(b.rng.uniform(0.5, 2))) if b.chance(0.3) else None
    beta = float(np.float32(b.rng.uniform(0.5, 2))) if b.chance(0.3) else None
    mag = _mul(k, a.mag, w.mag, alpha or 1)
    if b.chance(0.7):
        cshape = b.choice([(), (n,), (1, n), (m, 1), (m, n)])
        ins.append(_weights(b, cshape, a.dtype))
        mag += beta or 1
    b.node(op, ins, [out(a.dtype, (m, n), mag)], alpha=alpha, beta=beta, **attrs)
    return True


EINSUM = [  # (equation, operand letter strings); ellipses get a batch dim
    ("ij,jk->ik", ["ij", "jk"]), ("bij,bjk->bik", ["bij", "bjk"]), ("ij->ji", ["ij"]),
    ("ij->", ["ij"]), ("i,i->", ["i", "i"]), ("ij,j->i", ["ij", "j"]), ("i,j->ij", ["i", "j"]),
    ("bhid,bhjd->bhij", ["bhid", "bhjd"]), ("ij,kj->ik", ["ij", "kj"]), ("ii->i", ["ii"]),
    ("...ij,...jk->...ik", ["zij", "zjk"]), ("ijk->kj", ["ijk"]), ("ij,ij->ij", ["ij", "ij"]),
]


@gen("Einsum", opset=12)
def einsum(b, op):
    eq, operands = b.choice(EINSUM)
    size = {c: b.randint(1, 4) for c in "bhijkdz"}
    size["i"] = size["j"] if eq == "ii->i" else size["i"]
    ins = [b.input(F32, tuple(size[c] for c in s), "small") for s in operands]
    lhs, rhs = eq.split("->")
    letters = set(lhs.replace(",", "").replace(".", ""))
    contracted = 1
    for c in letters - set(rhs) - {"z"}:
        contracted *= size[c]
    shape = tuple(size["z" if c == "." else c] for c in rhs.replace("...", "."))
    b.node(op, ins, [out(F32, shape, float(contracted))], equation=eq)
    return True


def _spatial_x(b, nd, groups_of=1):
    """An N, C, spatial... input (from the pool when one fits)."""
    def ok(v):
        return v.rank == nd + 2 and v.shape[1] % groups_of == 0 and min(v.shape[2:]) >= 2
    return b.pick((F32,), min_rank=nd + 2, max_rank=nd + 2, nonempty=True, pred=ok,
                  new_shape=lambda: (b.randint(1, 2), groups_of * b.randint(1, 3))
                  + tuple(b.randint(3, 7) for _ in range(nd)))


def _window(b, lengths, max_k=3, dilations=True, pad_lt_k=True):
    """Random kernel/strides/dilations/pads legal for these spatial lengths (None: no fit)."""
    nd = len(lengths)
    k = [b.randint(1, min(max_k, L)) for L in lengths]
    s = [b.randint(1, 2) for _ in range(nd)]
    d = [b.randint(1, 2) if dilations and b.chance(0.3) else 1 for _ in range(nd)]
    p = [b.randint(0, k[i] - 1) if b.chance(0.4) else 0 for i in range(2 * nd) for i in [i % nd]]
    if not pad_lt_k:
        p = [b.randint(0, 2) if b.chance(0.4) else 0 for _ in range(2 * nd)]
    for i, L in enumerate(lengths):
        if L + p[i] + p[i + nd] - d[i] * (k[i] - 1) - 1 < 0:
            return None
    return k, s, d, p


def _out_len(L, k, s, d, pb, pe, ceil=False):
    num = L + pb + pe - d * (k - 1) - 1
    return (-(-num // s) if ceil else num // s) + 1


def _auto_pad(b, attrs, lengths, k, s, d, allow=True):
    """Sometimes replace explicit pads by auto_pad; returns the output lengths."""
    nd = len(lengths)
    mode = b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]) if allow and b.chance(0.2) else None
    if mode is None:
        p = attrs["pads"]
        return [_out_len(L, k[i], s[i], d[i], p[i], p[i + nd], attrs.get("ceil_mode") == 1)
                for i, L in enumerate(lengths)]
    attrs["pads"] = None
    attrs["auto_pad"] = mode
    if mode == "VALID":
        return [_out_len(L, k[i], s[i], d[i], 0, 0) for i, L in enumerate(lengths)]
    return [-(-L // s[i]) for i, L in enumerate(lengths)]


@gen("Conv")
def conv(b, op):
    nd = b.choice([1, 2, 2, 2, 3]) if b.chance(0.9) else 2
    group = b.choice([1, 1, 1, 2, 3])
    x = _spatial_x(b, nd, group)
    c = x.shape[1]
    win = _window(b, x.shape[2:])
    if win is None:
        return False
    k, s, d, p = win
    m = group * b.randint(1, 3)
    w = _weights(b, (m, c // group) + tuple(k))
    attrs = dict(kernel_shape=k if b.chance(0.6) else None, strides=s, dilations=d, pads=p,
                 group=group if group > 1 or b.chance(0.3) else None)
    lens = _auto_pad(b, attrs, x.shape[2:], k, s, d, allow=max(d) == 1)
    if min(lens) < 1:
        return False
    ins = [x, w] + ([_weights(b, (m,))] if b.chance(0.6) else [])
    mag = _mul(c // group * math.prod(k), x.mag) + 1
    b.node(op, ins, [out(F32, (x.shape[0], m) + tuple(lens), mag)], **attrs)
    return True


@gen("ConvTranspose")
def conv_transpose(b, op):
    nd = b.choice([1, 2, 2])
    group = b.choice([1, 1, 2])
    x = _spatial_x(b, nd, group)
    c = x.shape[1]
    k = [b.randint(1, 3) for _ in range(nd)]
    s = [b.randint(1, 2) for _ in range(nd)]
    d = [b.randint(1, 2) if b.chance(0.2) else 1 for _ in range(nd)]
    p = [b.randint(0, (k[i % nd] - 1) * d[i % nd]) if b.chance(0.3) else 0 for i in range(2 * nd)]
    op_ = [b.randint(0, s[i] - 1) if b.chance(0.3) else 0 for i in range(nd)]
    mg = b.randint(1, 2)
    w = _weights(b, (c, mg) + tuple(k))
    lens = [s[i] * (L - 1) + op_[i] + (k[i] - 1) * d[i] + 1 - p[i] - p[i + nd]
            for i, L in enumerate(x.shape[2:])]
    if min(lens) < 1:
        return False
    ins = [x, w] + ([_weights(b, (mg * group,))] if b.chance(0.5) else [])
    attrs = dict(strides=s, dilations=d, pads=p, output_padding=op_ if any(op_) else None,
                 group=group if group > 1 else None, kernel_shape=k if b.chance(0.5) else None)
    mag = _mul(c * math.prod(k), x.mag) + 1
    b.node(op, ins, [out(F32, (x.shape[0], mg * group) + tuple(lens), mag)], **attrs)
    return True


@gen("MaxPool", "AveragePool", "LpPool")
def pool(b, op):
    nd = b.choice([1, 2, 2, 3]) if b.chance(0.9) else 2
    indices = op == "MaxPool" and b.chance(0.25)
    # ties make MaxPool's Indices ambiguous: then distinct (fresh random) inputs only
    x = b.pick((F32,), min_rank=nd + 2, max_rank=nd + 2, nonempty=True, noisy=indices,
               pred=lambda v: min(v.shape[2:]) >= 2,
               new_shape=lambda: (b.randint(1, 2), b.randint(1, 3)) + tuple(b.randint(3, 7) for _ in range(nd)))
    dil = op == "MaxPool" or (op == "AveragePool" and b.opset >= 19) or (op == "LpPool" and b.opset >= 18)
    win = _window(b, x.shape[2:], dilations=dil)
    if win is None:
        return False
    k, s, d, p = win
    attrs = dict(kernel_shape=k, strides=s if b.chance(0.8) else None, pads=p if any(p) else None,
                 dilations=d if any(v > 1 for v in d) else None)
    if attrs["strides"] is None:
        s = [1] * nd
    if attrs["pads"] is None:
        p = [0] * (2 * nd)
    attrs["pads"] = p
    # ceil_mode only without padding: a last window starting inside the padding is treated
    # differently by implementations; AveragePool's partial-window divisor is too
    # and only when the extra window starts inside the input (k < stride can start it past the end:
    # onnx's shape inference keeps that window, onnxruntime drops it)
    if op == "MaxPool" and not any(p) and b.chance(0.3) and all(
            (_out_len(L, k[i], s[i], d[i], 0, 0, True) - 1) * s[i] < L for i, L in enumerate(x.shape[2:])):
        attrs["ceil_mode"] = 1
    if op == "AveragePool" and b.chance(0.5):
        attrs["count_include_pad"] = b.randint(0, 1)
    if op == "LpPool":
        attrs["p"] = b.choice([1, 2, None])
    lens = _auto_pad(b, attrs, x.shape[2:], k, s, d, allow=max(d) == 1 and "ceil_mode" not in attrs
                     and op != "LpPool")
    if min(lens) < 1:
        return False
    if attrs.get("pads") is not None and not any(attrs["pads"]):
        attrs["pads"] = None if b.chance(0.5) else attrs["pads"]
    shape = x.shape[:2] + tuple(lens)
    outs = [out(F32, shape, x.mag * (math.prod(k) if op == "LpPool" else 1), exact=op == "MaxPool" and x.exact)]
    if indices:
        outs.append(out(np.int64, shape, INF, exact=True))
    b.node(op, [x], outs, **attrs)
    return True


@gen("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(b, op):
    x = b.pick((F32,), min_rank=3, max_rank=5, nonempty=True)
    n = math.prod(x.shape[2:])
    mag = x.mag * (n if op == "GlobalLpPool" else 1)
    b.node(op, [x], [out(F32, x.shape[:2] + (1,) * (x.rank - 2), mag, exact=op == "GlobalMaxPool" and x.exact)],
           p=b.choice([1, 2]) if op == "GlobalLpPool" and b.chance(0.5) else None)
    return True
