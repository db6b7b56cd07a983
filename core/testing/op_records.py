"""Op records: small, concrete instances of ops (inputs, attributes) used to test every backend
and every lowering rule against the reference interpreter.

A record is one node: `OpRecord("Relu", [In((2, 3))])`. Inputs are `In(shape, dtype)` (a graph
input filled with seeded random data), or `Const(array)` (a constant, e.g. a shape or axes input).
Records live in `glow/testing/records/<group>.py` as module-level `RECORDS` lists.
"""

from __future__ import annotations

import importlib
import pkgutil
import zlib
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as dt
from ..graph import Graph, GraphBuilder


@dataclass(frozen=True)
class In:
    shape: tuple
    dtype: str = "float32"
    low: float = -3.0
    high: float = 3.0


@dataclass(frozen=True)
class Const:
    value: object
    dtype: str | None = None

    def array(self) -> np.ndarray:
        return np.asarray(self.value, dtype=self.dtype)


@dataclass
class OpRecord:
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    name: str = ""
    num_outputs: int | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    domain: str = ""

    @property
    def id(self) -> str:
        if self.name:
            return f"{self.op}-{self.name}"
        shapes = "_".join("x".join(map(str, i.shape)) or "s" for i in self.inputs if isinstance(i, In))
        return f"{self.op}-{shapes}"

    def build(self) -> tuple[Graph, dict]:
        """The one-node graph and seeded random feeds for it."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        b = GraphBuilder(self.id)
        values, feeds = [], {}
        for k, spec in enumerate(self.inputs):
            if spec is None:
                values.append(None)
            elif isinstance(spec, Const):
                values.append(b.constant(spec.array(), name=f"c{k}"))
            else:
                t = dt.from_name(spec.dtype)
                values.append(b.input(f"x{k}", dt.TensorType(spec.shape, t)))
                feeds[f"x{k}"] = random_array(rng, spec, t)
        from ..ops import get_op

        outs = b.add(get_op(self.op, self.domain), values, self.attrs, name="node",
                     num_outputs=self.num_outputs)
        return b.build(outs), feeds


def random_array(rng, spec: In, t: dt.DType) -> np.ndarray:
    if t == dt.bool_:
        return rng.integers(0, 2, spec.shape).astype(bool)
    if t.is_int:
        lo, hi = (int(spec.low), int(spec.high)) if t.is_signed else (0, int(max(spec.high, 1)))
        return rng.integers(lo, hi + 1, spec.shape).astype(t.np)
    return rng.uniform(spec.low, spec.high, spec.shape).astype(t.np)


def all_records() -> list[OpRecord]:
    from . import records

    out = []
    for m in sorted(pkgutil.iter_modules(records.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{records.__name__}.{m.name}")
        out.extend(getattr(mod, "RECORDS", []))
    return out
