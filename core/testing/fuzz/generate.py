"""`generate(seed, index)`: one random model and its feeds, deterministic for the pair."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from . import ops_elem, ops_index, ops_nn, ops_reduce, ops_shape  # noqa: F401  (they fill OPS)
from .gen import OPS, OPSETS, Builder, validate


@dataclass
class Case:
    seed: int
    index: int
    model: onnx.ModelProto
    feeds: dict
    ops: list = field(default_factory=list)  # op of every node, in order
    opset: int = 0
    rejected: list = field(default_factory=list)  # generator attempts onnx refused (generator bugs)


def op_names() -> list[str]:
    return sorted(OPS)


def b_chance(rng, p):
    return bool(rng.random() < p)


def generate(seed: int, index: int, ops=None, max_nodes: int = 8) -> Case:
    """A valid model (onnx.checker and strict shape inference accept it, shapes as generated)."""
    ops = sorted(ops or OPS)
    rejected = []
    for attempt in range(20):
        rng = np.random.default_rng([seed, index, attempt])
        try:
            built = build(rng, ops, max_nodes)
        except Exception as e:  # a generator bug: recorded (the tests require none), next attempt
            rejected.append(([], f"generator raised {type(e).__name__}: {e}"))
            continue
        if built is None:
            continue
        b, outs, sym = built
        concrete = b.model(outs)
        why = validate(concrete, {n: (v.dtype, v.shape) for n, v in b.values.items()})
        model = b.model(outs, sym) if why is None and sym else concrete
        if why is None and sym:
            why = validate(model, {})
        if why is None:
            return Case(seed, index, model, b.feeds, list(b.ops_used), b.opset, rejected)
        rejected.append((b.ops_used[:], why))
    why = rejected[-1] if rejected else "no op of the selection exists at the opsets drawn"
    raise RuntimeError(f"no valid graph for seed {seed} index {index}: {why}")


def build(rng, ops, max_nodes):
    """The random DAG: op generators applied until the node target is reached."""
    opset = int(rng.choice(OPSETS))
    b = Builder(rng, opset, fp16=b_chance(rng, 0.3), sym=b_chance(rng, 0.25), empty=b_chance(rng, 0.2))
    names = [n for n in ops if OPS[n][1] <= opset]
    if not names:
        return None
    target = b.randint(1, max_nodes)
    for _ in range(4 * target):
        if len(b.nodes) >= target:
            break
        op = b.choice(names)
        OPS[op][0](b, op)
    if not b.nodes:
        return None
    consumed = {i for n in b.nodes for i in n.input}
    outs = [v for v in b.values.values() if v.name not in consumed]
    extra = [v for v in b.values.values() if v.name in consumed]
    if extra and b.chance(0.3):
        outs.append(b.choice(extra))  # an intermediate that later nodes read too: fan-out to an output
    sym = {}
    if b.sym:
        for name, _, shape in b.inputs:
            for i, d in enumerate(shape):
                if b.chance(0.3):
                    sym[(name, i)] = f"s{d}"  # equal sizes share a symbol: the model stays consistent
    return b, outs, sym
