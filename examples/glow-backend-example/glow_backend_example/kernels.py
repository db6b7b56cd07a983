"""The device's kernels, in NumPy: one function per op, called with the node's inputs and attributes.

Each returns its output in the input's element type; the support predicate (backend.py) only lets
through the element types, ranks and attributes written here. Products of float32 accumulate in
float64, as glow's reference does: BLAS blocks sums differently per output channel, and light
models (logits near 1e10 feeding a Softmax) make that rounding visible.
"""

import numpy as np


def wide(x):
    return x.astype(np.float64) if x.dtype == np.float32 else x


def matmul(a, b):
    return np.matmul(wide(a), wide(b)).astype(a.dtype)


def add(a, b):
    return np.add(a, b)


def relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def identity(x):
    return x


def conv(x, w, b=None, *, strides=None, dilations=None, pads=None, group=1, **_):
    """2-D grouped convolution as im2col + one batched matmul; explicit pads only (no auto_pad)."""
    n, c, _, _ = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = strides or (1, 1)
    dh, dw = dilations or (1, 1)
    top, left, bottom, right = pads or (0, 0, 0, 0)
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (x.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, c, kh, kw, oh, ow), wide(x).dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
    cols = cols.reshape(n, group, cg * kh * kw, oh * ow)
    y = np.matmul(wide(w).reshape(group, m // group, cg * kh * kw), cols).reshape(n, m, oh, ow)
    if b is not None:
        y += b.reshape(1, m, 1, 1)
    return y.astype(x.dtype)


#: op name -> kernel. The keys are the ops this device runs natively; glow lowers or places the rest.
KERNELS = {"MatMul": matmul, "Add": add, "Relu": relu, "Conv": conv, "Identity": identity}
