"""MaxUnpool: a scatter of X to the flat positions I of a zero tensor (core/ops/pool.py's reference).

One work-group: its work-items zero the output together, meet at a barrier over global memory,
then one work-item scatters in input order, so a repeated index keeps the last value written, as
NumPy's `y[I] = X` does. The scatter is serial; MaxUnpool is rare and small, and a parallel one
would make repeated indices race. Indices address the unpooled shape that kernel_shape, strides
and pads give; an output_shape larger or smaller than it pads or crops at the end of each axis
(a cropped position is dropped, as in the reference). An index outside the unpooled shape is an
error: recorded for the runtime to raise (indexing.record_bad_index) and skipped.
"""

from __future__ import annotations

import math

from ..indexing import record_bad_index, strides
from ..registry import kernel_rule


def unpooled_shape(x_shape, attrs) -> list[int]:
    k = list(attrs["kernel_shape"])
    n = len(k)
    s = list(attrs.get("strides") or [1] * n)
    p = list(attrs.get("pads") or [0] * (2 * n))
    return list(x_shape[:2]) + [(d - 1) * s[a] + k[a] - p[a] - p[n + a] for a, d in enumerate(x_shape[2:])]


@kernel_rule("MaxUnpool", supports=lambda node, r: bool(r.global_barrier))
def render_max_unpool(w, instr, params):
    x, idx = instr.inputs[:2]
    out = instr.outputs[0]
    shape, want = unpooled_shape(x.type.shape, instr.attrs), list(out.type.shape)
    local = params.flat_local
    w.grid((local,), (local,))
    y, px, pi = w.arg(out, out=True), w.arg(x), w.arg(idx)
    ll = w.r.storage(idx.type.dtype)
    w.line(f"const int t = {w.r.local_id(0)};")
    w.line(f"for (int j = t; j < {out.type.numel}; j += {local}) {y}[j] = 0;")
    w.line(w.r.global_barrier)
    w.line("if (t != 0) return;")
    w.open(f"for (int k = 0; k < {x.type.numel}; ++k)")
    w.line(f"{ll} f = {pi}[k];")
    w.open(f"if (f < 0 || f >= {math.prod(shape)})")
    record_bad_index(w, "f", math.prod(shape), negative=False)
    w.line("continue;")
    w.close()
    terms = []
    for a, (n, m, st) in reversed(list(enumerate(zip(shape, want, strides(want))))):
        if a and n == 1:
            continue  # coordinate 0
        w.line(f"const {ll} c{a} = f % {n};" if a else f"const {ll} c{a} = f;")
        if a:
            w.line(f"f /= {n};")
        if m < n:  # cropped by output_shape
            w.line(f"if (c{a} >= {m}) continue;")
        terms.append(f"c{a} * {st}" if st != 1 else f"c{a}")
    w.line(f"{y}[{' + '.join(reversed(terms))}] = {px}[k];")
    w.close()
