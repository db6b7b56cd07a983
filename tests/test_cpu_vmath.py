"""vmath: the vectorised exp/log/tanh/erf/sigmoid polynomials against float64 NumPy, edge cases
included, on vectors of 16 lanes, 8 lanes and scalars."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

pytest.importorskip("llvmlite")
ir = pytest.importorskip("llvmlite.ir")

from glow.backends.cpu.irutil import F32, I64, PTR, KernelBuilder, vec  # noqa: E402
from glow.backends.cpu.jit import CompiledModule  # noqa: E402
from glow.backends.cpu.kernels import vmath  # noqa: E402

_erf = np.vectorize(math.erf)
REFERENCE = {
    "Exp": np.exp, "Log": lambda x: np.log(x), "Tanh": np.tanh, "Erf": _erf,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 88.7, 88.8, -87.3, -87.4,
                    -104.0, 1e30, -1e30, 0.5, 1.0, 2.0, 0.625, -0.625, 4.0, 4.5, -3.9, 1e-6], np.float32)


def _compile(op: str, width: int | None):
    mod = ir.Module("vmath_test")
    kb = KernelBuilder(mod, "f", [PTR, PTR, I64])
    src, dst, n = kb.args
    step = width or 1
    with kb.loop(0, n, step=step) as i:
        t = vec(F32, width) if width else F32
        x = kb.b.load(kb.ptr(src, i), typ=t, align=4)
        kb.b.store(vmath.emit_unary(kb, op, x), kb.ptr(dst, i), align=4)
    kb.finish()
    cm = CompiledModule(str(mod), use_cache=False)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(cm.address("f"))
    return cm, fn


def _run(op, x, width=16):
    cm, fn = _compile(op, width)
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    fn(x.ctypes.data, y.ctypes.data, x.size)
    return y


def _inputs(op):
    rng = np.random.default_rng(0)
    parts = [rng.uniform(-10, 10, 20000), rng.standard_normal(20000) * 1e-3, np.linspace(-5, 5, 8000)]
    if op == "Log":
        parts = [rng.uniform(0, 100, 20000), np.exp(rng.uniform(-80, 80, 20000)), np.linspace(0.5, 2, 8000)]
    elif op == "Exp":
        parts.append(rng.uniform(-87, 88, 20000))
    x = np.concatenate(parts + [SPECIAL] * 2).astype(np.float32)
    return x[: x.size // 16 * 16]


@pytest.mark.parametrize("op", sorted(vmath.SUPPORTED))
def test_accuracy(op):
    x = _inputs(op)
    with np.errstate(all="ignore"):
        ref = REFERENCE[op](x.astype(np.float64)).astype(np.float32)  # overflow to inf as float32 does
    y = _run(op, x)
    tiny = np.abs(ref) < 1e-37  # subnormal results may flush to zero
    ok = np.isclose(y, ref, rtol=4e-7, atol=0, equal_nan=True) | (tiny & (np.abs(y) < 1e-37))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(float(x[i]), float(y[i]), float(ref[i])) for i in bad[:8]]


@pytest.mark.parametrize("width", [8, None])
def test_other_widths(width):
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    np.testing.assert_allclose(_run("Tanh", x, width), np.tanh(x.astype(np.float64)), rtol=4e-7, atol=1e-30)


def test_rejects_unknown_and_double():
    mod = ir.Module("m")
    kb = KernelBuilder(mod, "g", [PTR])
    with pytest.raises(KeyError):
        vmath.emit_unary(kb, "Sin", ir.Constant(F32, 1.0))
    with pytest.raises(KeyError):
        vmath.emit_unary(kb, "Exp", ir.Constant(ir.DoubleType(), 1.0))
