"""Shrinking a failing model to a minimal one that still fails the same way, and saving it.

Greedy, each step kept only when the verdict's category is unchanged: keep one graph output; make
an intermediate value the only output (everything downstream of it dies); cut
a node loose (its outputs become graph inputs fed with the values the reference computed there, so
everything upstream of it dies); drop unused inputs and initializers (dead-code elimination after
every step); then halve graph inputs' dims. It ends when no step applies; usually the one node that
misbehaves is left, on small inputs.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import onnx
from onnx import helper


def dce(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop nodes no output depends on, and inputs/initializers nothing reads."""
    g = model.graph
    live = {o.name for o in g.output}
    keep = []
    for n in reversed(g.node):
        if any(o in live for o in n.output):
            keep.append(n)
            live.update(i for i in n.input if i)
    m = copy.deepcopy(model)
    del m.graph.node[:]
    m.graph.node.extend(reversed(keep))
    ins = [i for i in g.input if i.name in live]
    del m.graph.input[:]
    m.graph.input.extend(ins)
    inits = [t for t in g.initializer if t.name in live]
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    return m


def _prune_feeds(model, feeds):
    names = {i.name for i in model.graph.input}
    return {k: v for k, v in feeds.items() if k in names}


def intermediates(model: onnx.ModelProto, feeds: dict, runner) -> dict:
    """Every node output's value, from the reference backend (in the worker), else onnx.reference."""
    from .runner import onnx_reference

    m = copy.deepcopy(model)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.append(helper.make_empty_tensor_value_info(o))
                have.add(o)
    data = m.SerializeToString()
    r = runner.glow.call(dict(model=data, feeds=feeds, backend="reference", native=None))
    if r["status"] == "ok":
        return r["outputs"]
    return onnx_reference(data, feeds) or {}


def _cut(model, feeds, node_index, values):
    """The node's outputs turned into graph inputs (fed with `values`); None if a value is missing."""
    n = model.graph.node[node_index]
    outs = [o for o in n.output if o]
    if any(o not in values for o in outs):
        return None
    m = copy.deepcopy(model)
    del m.graph.node[node_index]
    f = dict(feeds)
    for o in outs:
        a = np.asarray(values[o])
        if any(gi.name == o for gi in m.graph.output):
            return None  # the value is a graph output: cutting it would make output = input
        m.graph.input.append(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                           list(a.shape)))
        f[o] = a
    m = dce(m)
    return m, _prune_feeds(m, f)


def shrink(model: onnx.ModelProto, feeds: dict, fails, runner, budget: int = 80):
    """The smallest (model, feeds) found for which `fails(model_bytes, feeds)` still holds."""
    values = intermediates(model, feeds, runner)
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        outs = list(model.graph.output)
        if len(outs) > 1:
            for o in outs:
                m = copy.deepcopy(model)
                del m.graph.output[:]
                m.graph.output.append(o)
                m = dce(m)
                tries += 1
                if fails(m.SerializeToString(), _prune_feeds(m, feeds)):
                    model, feeds, changed = m, _prune_feeds(m, feeds), True
                    break
            if changed:
                continue
        for n in list(model.graph.node)[:-1]:  # an intermediate value as the only output
            o = n.output[0]
            if o not in values or tries >= budget:
                continue
            a = np.asarray(values[o])
            m = copy.deepcopy(model)
            del m.graph.output[:]
            m.graph.output.append(helper.make_tensor_value_info(
                o, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
            m = dce(m)
            tries += 1
            if len(m.graph.node) < len(model.graph.node) and fails(m.SerializeToString(), _prune_feeds(m, feeds)):
                model, feeds, changed = m, _prune_feeds(m, feeds), True
                break
        if changed:
            continue
        for i in range(len(model.graph.node)):
            if len(model.graph.node) <= 1 or tries >= budget:
                break
            cut = _cut(model, feeds, i, values)
            if cut is None:
                continue
            tries += 1
            if cut[0].graph.node and fails(cut[0].SerializeToString(), cut[1]):
                model, feeds = cut
                changed = True
                break
    return _shrink_dims(model, feeds, fails, budget - tries)


def _shrink_dims(model, feeds, fails, budget):
    """Halve graph inputs' dims while the failure stays (a change that makes the model invalid
    changes the verdict, so it is not kept). Output dims are left unknown for glow to infer."""
    changed = True
    while changed and budget > 0:
        changed = False
        for vi in model.graph.input:
            a = feeds.get(vi.name)
            for ax, d in enumerate(a.shape if a is not None else ()):
                if d <= 1 or budget <= 0:
                    continue
                m = copy.deepcopy(model)
                f = dict(feeds, **{vi.name: np.take(a, np.arange((d + 1) // 2), axis=ax)})
                dim = next(i for i in m.graph.input if i.name == vi.name).type.tensor_type.shape.dim[ax]
                dim.dim_value = (d + 1) // 2
                for o in m.graph.output:
                    for od in o.type.tensor_type.shape.dim:
                        od.ClearField("dim_value")
                budget -= 1
                if fails(m.SerializeToString(), f):
                    model, feeds, changed = m, f, True
                    break
            if changed:
                break
    return model, feeds


def save(out_dir: str, stem: str, model, feeds, verdict: dict) -> str:
    """Write <stem>.onnx, <stem>.npz (the feeds) and <stem>.txt (the verdict); returns the .onnx path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, stem)
    onnx.save(model, path + ".onnx")
    np.savez(path + ".npz", **feeds)
    with open(path + ".txt", "w") as f:
        for k, v in verdict.items():
            f.write(f"{k}: {v}\n")
        f.write("nodes: " + ", ".join(n.op_type for n in model.graph.node) + "\n")
        f.write("\n" + onnx.helper.printable_graph(model.graph) + "\n")
    return path + ".onnx"
