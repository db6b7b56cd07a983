"""Optimizer update ops of ONNX's training domain (ai.onnx.preview.training): Adagrad, Adam, Momentum.

Each takes a learning rate R, a step count T and n tensors to optimize followed by their
gradients and accumulators (grouped by kind: X1..Xn, G1..Gn, H1..Hn, ...), and returns the new
tensors then the new accumulators, grouped the same way.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .registry import REQUIRED, TRAINING, Attr, Tier, op

DOMAIN = "ai.onnx.preview.training"
_TYPES = {"T1": frozenset({dt.float32, dt.float64}), "T2": frozenset({dt.int64}),
          "T3": frozenset({dt.float32, dt.float64})}


def _emit_own_opdef(ic):
    # the importer's default emit looks the op up by name in the default domain; pass the OpDef itself
    return ic.emit(ic.opdef, ic.inputs, ic.attrs)


def _optimizer_infer(groups_in: int, groups_out: int):
    """groups_in tensors per optimized tensor come in (X, G, accumulators); groups_out go out."""

    def infer(ctx):
        for i, name in ((0, "R"), (1, "T")):
            shape = ctx.shape(i)
            if shape is not None and len(shape) != 0 and shape not in ((1,),):
                raise ctx.error(f"{name} must be a scalar, got shape {list(shape)}")
        rest = len(ctx.inputs) - 2
        if rest == 0 or rest % groups_in:
            raise ctx.error(f"expects 2 + {groups_in}*n inputs (R, T, then X, G and accumulator tensors "
                            f"grouped by kind), got {len(ctx.inputs)}")
        n = rest // groups_in
        for i in range(n):
            shapes = [ctx.shape(2 + g * n + i) for g in range(groups_in)]
            known = [s for s in shapes if s is not None]
            for s in known[1:]:
                if len(s) != len(known[0]) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                                   for a, b in zip(s, known[0])):
                    raise ctx.error(f"tensor {i}: the optimized tensor, its gradient and accumulators must "
                                    f"have the same shape, got {[list(s) for s in known]}")
        if ctx.num_outputs > groups_out * n:
            raise ctx.error(f"produces {groups_out * n} outputs, {ctx.num_outputs} requested")
        xs = [ctx.input(2 + i) for i in range(n)]
        accs = [ctx.input(2 + g * n + i) for g in range(2, groups_in) for i in range(n)]
        return xs + accs

    return infer


def _split(inputs, groups):
    n = len(inputs) // groups
    return [inputs[g * n:(g + 1) * n] for g in range(groups)]


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _scalar(a) -> float:
    return float(np.asarray(a, dtype=np.float64).reshape(-1)[0])


def _adagrad_ref(R, T, *inputs, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    xs, gs, hs = _split(inputs, 3)
    r = _scalar(R) / (1 + _scalar(T) * decay_factor)  # decayed learning rate
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g_reg = norm_coefficient * _f64(x) + _f64(g)  # gradient of the L2 regularization term added
        h2 = _f64(h) + g_reg * g_reg
        new_x.append((_f64(x) - r * g_reg / (np.sqrt(h2) + epsilon)).astype(x.dtype))
        new_h.append(h2.astype(h.dtype))
    return tuple(new_x + new_h)


op("Adagrad", inputs=("R:T1", "T:T2", "inputs:T3*"), outputs=("outputs:T3*",), types=_TYPES,
   attrs=(Attr("decay_factor", "float", 0.0), Attr("epsilon", "float", 1e-6),
          Attr("norm_coefficient", "float", 0.0)),
   infer=_optimizer_infer(3, 2), reference=_adagrad_ref, groups={TRAINING}, tier=Tier.HIGH,
   domain=DOMAIN, onnx_since=1, from_onnx=_emit_own_opdef,
   doc="One Adagrad step: inputs R, T, X..., G..., H...; outputs X_new..., H_new....")


def _adam_ref(R, T, *inputs, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
              norm_coefficient_post=0.0):
    xs, gs, vs, hs = _split(inputs, 4)
    t, r = _scalar(T), _scalar(R)
    if t > 0:  # bias correction of both moments
        r = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g_reg = norm_coefficient * _f64(x) + _f64(g)
        v2 = alpha * _f64(v) + (1 - alpha) * g_reg
        h2 = beta * _f64(h) + (1 - beta) * g_reg * g_reg
        x2 = _f64(x) - r * v2 / (np.sqrt(h2) + epsilon)
        new_x.append(((1 - norm_coefficient_post) * x2).astype(x.dtype))
        new_v.append(v2.astype(v.dtype))
        new_h.append(h2.astype(h.dtype))
    return tuple(new_x + new_v + new_h)


op("Adam", inputs=("R:T1", "T:T2", "inputs:T3*"), outputs=("outputs:T3*",), types=_TYPES,
   attrs=(Attr("alpha", "float", 0.9), Attr("beta", "float", 0.999), Attr("epsilon", "float", 1e-6),
          Attr("norm_coefficient", "float", 0.0), Attr("norm_coefficient_post", "float", 0.0)),
   infer=_optimizer_infer(4, 3), reference=_adam_ref, groups={TRAINING}, tier=Tier.HIGH,
   domain=DOMAIN, onnx_since=1, from_onnx=_emit_own_opdef,
   doc="One Adam step: inputs R, T, X..., G..., V..., H...; outputs X_new..., V_new..., H_new....")


def _momentum_infer(ctx):
    if ctx.attrs["mode"] not in ("standard", "nesterov"):
        raise ctx.error(f"mode must be 'standard' or 'nesterov', got '{ctx.attrs['mode']}'")
    return _optimizer_infer(3, 2)(ctx)


def _momentum_ref(R, T, *inputs, alpha, beta, mode, norm_coefficient):
    xs, gs, vs = _split(inputs, 3)
    r = _scalar(R)
    b = beta if _scalar(T) > 0 else 1.0  # the first step takes the whole gradient
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g_reg = norm_coefficient * _f64(x) + _f64(g)
        v2 = alpha * _f64(v) + b * g_reg
        step = g_reg + alpha * v2 if mode == "nesterov" else v2
        new_x.append((_f64(x) - r * step).astype(x.dtype))
        new_v.append(v2.astype(v.dtype))
    return tuple(new_x + new_v)


op("Momentum", inputs=("R:T1", "T:T2", "inputs:T3*"), outputs=("outputs:T3*",), types=_TYPES,
   attrs=(Attr("alpha", "float", REQUIRED), Attr("beta", "float", REQUIRED),
          Attr("mode", "string", REQUIRED), Attr("norm_coefficient", "float", REQUIRED)),
   infer=_momentum_infer, reference=_momentum_ref, groups={TRAINING}, tier=Tier.HIGH,
   domain=DOMAIN, onnx_since=1, from_onnx=_emit_own_opdef,
   doc="One SGD-with-momentum step (standard or Nesterov): inputs R, T, X..., G..., V...; "
       "outputs X_new..., V_new....")
