"""What `glow run` and its siblings read and write: --shape specs, generated inputs' shapes, .npz
inputs and outputs, one-line summaries of outputs."""

from __future__ import annotations

import os
import re
import sys

from .errors import InputError
from .fileio import write_atomic


def _stderr(line: str):
    print(f"glow: {line}", file=sys.stderr)


_SHAPE = re.compile(r"^([^=]+)=(\d+(?:[xX]\d+)*)?$")


def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """`--shape NAME=2x48` (repeatable; `NAME=` for a scalar) -> {name: (2, 48)}; InputError if malformed."""
    out = {}
    for spec in specs:
        m = _SHAPE.match(spec.strip())
        if not m:
            raise InputError(f"--shape {spec!r}: expected NAME=DxDx... with whole numbers (e.g. x=2x48)")
        name = m.group(1).strip()
        if name in out:
            raise InputError(f"--shape: input '{name}' given twice")
        out[name] = tuple(int(d) for d in m.group(2).lower().split("x")) if m.group(2) else ()
    return out


def input_shapes(graph, shapes: dict | None = None, warn=None) -> dict[str, tuple[int, ...]]:
    """The shape of each generated tensor input: --shape where given (checked against the
    graph's rank and static dims), else static dims as they are and symbolic dims 1 (one
    warning line per such input, naming it and saying how to choose)."""
    from . import dtypes as dt

    shapes = dict(shapes or {})
    warn = warn or _stderr
    names = [v.name for v in graph.inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise InputError(f"--shape: unknown input(s) {unknown}; the graph's inputs are {names}")
    out = {}
    for v in graph.inputs:
        t = v.type
        if not isinstance(t, dt.TensorType):
            continue
        graph_shape = tuple(t.shape or ())
        if v.name in shapes:
            given = shapes[v.name]
            if t.shape is not None and (len(given) != len(graph_shape) or any(
                    isinstance(g, int) and g != d for g, d in zip(graph_shape, given))):
                shown = "x".join(str(d) for d in graph_shape)
                raise InputError(f"--shape {v.name}={'x'.join(map(str, given))}: the graph's input "
                                 f"'{v.name}' has shape {shown or 'scalar'}")
            out[v.name] = given
            continue
        symbolic = [str(d) for d in graph_shape if not isinstance(d, int)]
        if symbolic:
            shown = "x".join(str(d) if isinstance(d, int) else "1" for d in graph_shape)
            warn(f"warning: input '{v.name}' has symbolic dim(s) {', '.join(symbolic)}: used 1 "
                 f"(pass --shape {v.name}={shown} with the sizes you want)")
        out[v.name] = tuple(d if isinstance(d, int) else 1 for d in graph_shape)
    return out


def load_inputs(path: str, graph) -> dict:
    import numpy as np

    if not os.path.isfile(path):
        raise InputError(f"{path}: no such inputs file")
    try:
        with np.load(path, allow_pickle=False) as z:
            feeds = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - any decode failure is bad input
        raise InputError(f"{path}: not a readable .npz file ({type(e).__name__})") from None
    missing = [v.name for v in graph.inputs if v.name not in feeds]
    if missing:
        raise InputError(f"{path}: missing input(s) {missing}; it has {sorted(feeds)}")
    return feeds


def save_npz_atomic(path: str, arrays: dict):
    """Write to a temporary file in the same folder, then rename: never a partial output file."""
    import numpy as np

    write_atomic(path, lambda f: np.savez(f, **{k: np.asarray(v) for k, v in arrays.items() if v is not None}),
                 suffix=".npz", what="outputs")


def describe(v) -> str:
    import numpy as np

    if isinstance(v, list):
        return f"sequence of {len(v)}"
    if v is None:
        return "empty optional"
    a = np.asarray(v)
    head = f"shape={list(a.shape)} dtype={a.dtype}"
    if a.size == 0 or a.dtype == object:
        return head
    f = a.astype(np.float64)
    flat = ", ".join(f"{x:.4g}" for x in f.reshape(-1)[:4])
    return (f"{head} min={np.nanmin(f):.4g} max={np.nanmax(f):.4g} mean={np.nanmean(f):.4g} "
            f"first=[{flat}{', ...' if a.size > 4 else ''}]")
