"""glow's conversion rule for the narrow formats (glow.narrow) against an oracle that knows only
the grid: the nearest representable value, ties to the even code, past the largest finite value
overflow (or saturation). It must not depend on the installed ml_dtypes (0.5 and 0.7 differ)."""

import math

import numpy as np
import pytest
from glow import dtypes as dt
from glow.narrow import FLOAT_FORMATS, SATURATING, code_value
from glow.ops.cast import cast_array


def _grid(f):
    """Magnitudes of codes 0 .. max_code + 1 (one step past the top, where rounding overflows)."""
    vals = [code_value(f, c) for c in range(f.max_code + 1)]
    return vals + [2 * vals[-1] - vals[-2]] if f.m_bits else vals + [2 * vals[-1]]


def _oracle(v: float, to, saturate: bool) -> int:
    f = FLOAT_FORMATS[to]
    grid = _grid(f)
    a = abs(v)
    if math.isinf(a):
        code = f.max_code if (saturate and to in SATURATING) or f.overflow == f.max_code else f.overflow
    else:
        best = min(range(len(grid)), key=lambda c: (abs(grid[c] - a), c % 2))  # ties: the even code
        if a > grid[-1]:
            best = len(grid) - 1
        code = best if best <= f.max_code else (f.max_code if saturate and to in SATURATING else f.overflow)
    if math.copysign(1, v) < 0 and (code != 0 or f.signed_zero) and not (f.overflow & 0x80 and code == f.overflow):
        code |= f.sign_bit
    return code


@pytest.mark.parametrize("fmt", [d.name for d in FLOAT_FORMATS])
@pytest.mark.parametrize("saturate", [0, 1])
def test_float_formats_round_once_to_nearest_even(fmt, saturate):
    to = dt.from_name(fmt)
    grid = _grid(FLOAT_FORMATS[to])
    mids = [(x + y) / 2 for x, y in zip(grid, grid[1:])]
    probe = grid + mids + [m + 2.0 ** -40 * max(m, 1e-3) for m in mids] + [m - 2.0 ** -40 * max(m, 1e-3) for m in mids]
    probe += [1.0625 + 2.0 ** -40, 3e5, 1e30, math.inf, 0.0]
    x = np.array(probe + [-p for p in probe], np.float64)
    want = np.array([_oracle(float(v), to, bool(saturate)) for v in x], np.uint8)
    got = cast_array(x, to, bool(saturate)).view(np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(x[i], int(got[i]), int(want[i])) for i in bad[:5]]
    # float32 inputs take the same rule (every probe value but the +-2^-40 ones is a float32)
    x32 = x.astype(np.float32)
    want32 = np.array([_oracle(float(v), to, bool(saturate)) for v in x32], np.uint8)
    np.testing.assert_array_equal(cast_array(x32, to, bool(saturate)).view(np.uint8), want32)


def test_a_float64_just_above_a_halfway_point_rounds_up():
    """1.0625 + 2^-40 is above the e4m3fn halfway point 1.0625 (between 1.0 and 1.125): rounding
    through float32 first would make it the tie and round to even (down)."""
    x = np.array([1.0625 + 2.0 ** -40], np.float64)
    assert cast_array(x, dt.float8e4m3fn).view(np.uint8)[0] == 57  # 1.125
