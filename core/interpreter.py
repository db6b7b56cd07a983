"""The reference interpreter: runs a graph node by node with each op's NumPy reference.

This is the oracle every backend is compared against, so it is written for clarity. With
verification on (`GLOW_VERIFY` >= 1, set in tests) it also checks every computed value against the
type the op's shape rule promised, which keeps the shape rules honest.
"""

from __future__ import annotations

import os
import time

import numpy as np

from . import dtypes as dt
from .errors import GraphError, InputError
from .graph import Graph, Value
from .limits import check_alloc, memory_budget


def verify_level() -> int:
    try:
        return int(os.environ.get("GLOW_VERIFY", "0"))
    except ValueError:
        return 0


def check_inputs(graph: Graph, feeds: dict) -> dict[str, np.ndarray]:
    """Validate run-time feeds against the graph's inputs; return them as arrays. Raises InputError."""
    if not isinstance(feeds, dict):
        raise InputError(f"inputs must be a dict of name -> array, got {type(feeds).__name__}")
    expected = {v.name: v for v in graph.inputs}
    unknown = sorted(set(feeds) - set(expected))
    if unknown:
        raise InputError(f"unknown input name(s) {unknown}; the graph's inputs are {sorted(expected)}")
    missing = [n for n in expected if n not in feeds]
    if missing:
        raise InputError(f"missing input(s) {missing}")
    out = {}
    for name, v in expected.items():
        out[name] = _check_one(name, v.type, feeds[name])
    return out


def _check_one(name, t, value):
    if isinstance(t, dt.TensorType):
        arr = np.asarray(value)
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        want = t.dtype.base if isinstance(t.dtype, dt.QuantizedDType) else t.dtype
        try:
            got = dt.from_numpy(arr.dtype)
        except GraphError:
            got = arr.dtype
        if got != want:
            raise InputError(f"input '{name}': expected element type {want.name}, got {arr.dtype}")
        if not dt.shape_fits(t.shape, arr.shape):
            raise InputError(f"input '{name}': expected shape {_shape_str(t.shape)}, got {list(arr.shape)}")
        return arr
    if isinstance(t, dt.SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input '{name}': expected a sequence (list of arrays)")
        return [_check_one(name, t.elem, x) for x in value]
    if isinstance(t, dt.OptionalType):
        return None if value is None else _check_one(name, t.elem, value)
    return value


def _shape_str(shape):
    return "[*]" if shape is None else "[" + ", ".join("?" if not isinstance(d, int) else str(d)
                                                       for d in shape) + "]"


def run_graph(graph: Graph, feeds: dict, *, check: bool = True, timings: list | None = None,
              observe=None) -> dict[str, object]:
    """Run `graph` on `feeds` (name -> array; captures by name too) and return its outputs by name.
    With `timings` (a list), each node's (node, seconds) is appended to it (Executable.profile).
    `observe(value, array)` sees every input and every node output as it is computed (the
    quantization profiler)."""
    if check:
        captured = {c.name for c in graph.captures}
        plain = {k: v for k, v in feeds.items() if k not in captured}
        feeds = {**feeds, **check_inputs(graph, plain)}
    env: dict[int, object] = {}
    for v in graph.inputs + graph.captures:
        if v.name not in feeds:
            raise InputError(f"graph '{graph.name}': no value for '{v.name}'")
        env[id(v)] = feeds[v.name]
        if observe is not None:
            observe(v, env[id(v)])
    verify = verify_level()
    budget = memory_budget()

    def get(v: Value | None):
        if v is None:
            return None
        if v.data is not None:
            return v.data
        return env[id(v)]

    for node in graph.nodes:
        args = [get(v) for v in node.inputs]
        attrs = dict(node.attrs)
        if node.captures:
            attrs["_scope"] = {v.name: get(v) for v in node.captures}
        check_outputs(node, args, budget)
        t0 = time.perf_counter() if timings is not None else 0.0
        try:
            result = node.op.reference(*args, **attrs)
        except GraphError:
            raise
        except InputError as e:  # bad data met inside a node (an out-of-range index): name the node
            raise InputError(f"node '{node.name}' ({node.op.name}): {e}") from None
        except MemoryError as e:  # an allocation inside the op (its outputs were checked above)
            raise InputError(f"node '{node.name}' ({node.op.name}) ran out of memory in the reference "
                             f"interpreter: {e}") from None
        except Exception as e:  # name the node: a bare NumPy error is useless to a user
            raise GraphError(f"node '{node.name}' ({node.op.name}) failed in the reference "
                             f"interpreter: {type(e).__name__}: {e}") from e
        # A tuple means several outputs; anything else (array, list for a sequence) is one output.
        if timings is not None:
            timings.append((node, time.perf_counter() - t0))
        results = list(result) if isinstance(result, tuple) else [result]
        # NumPy ufuncs turn 0-d arrays into scalars; values in glow are always arrays.
        results = [np.asarray(r) if isinstance(r, np.generic) else r for r in results]
        for out, r in zip(node.outputs, results):
            if verify and isinstance(out.type, dt.TensorType):
                _verify_result(node, out, r)
            env[id(out)] = r
            if observe is not None:
                observe(out, r)
    return {v.name: get(v) for v in graph.outputs}



def run_detached(graph: Graph, feeds: dict, timings: list | None = None) -> dict[str, object]:
    """`run_graph` (inputs already checked) whose outputs the caller owns: an output that is a
    graph constant (read-only) or a view of a feed is copied, so that writing into a result
    changes neither the next run's answer nor the caller's input. What an executable hands out."""
    outs = run_graph(graph, feeds, check=False, timings=timings)
    return {k: np.array(v) if isinstance(v, np.ndarray) and (not v.flags.writeable or any(
        isinstance(f, np.ndarray) and np.may_share_memory(v, f) for f in feeds.values())) else v
        for k, v in outs.items()}

def check_outputs(node, args, budget: int | None = None) -> None:
    """InputError naming the node if one of its outputs, for these argument values, would be
    past the memory budget: checked before NumPy allocates (no MemoryError, no OOM kill). A
    dynamic output type is re-inferred from the arguments' shapes and small values (a run-time
    ConstantOfShape / Expand / Tile / Range shape). `node` may be an IR instruction too (its
    name, op, attrs, inputs and outputs are all this reads)."""
    types = [None if o is None else o.type for o in node.outputs]
    if not all(getattr(t, "is_static", False) for t in types if t is not None):
        types = _concrete_types(node, args) or types
    where = f"node '{node.name}' ({node.op.name})"
    for o, t in zip(node.outputs, types):
        if o is not None and isinstance(t, dt.TensorType) and t.is_static:
            check_alloc(where, f"output '{o.name}'", t.shape, t.dtype.itemsize, budget)


def _concrete_types(node, args):
    """The node's output types for concrete arguments (None when the rule cannot say)."""
    from .graph import KNOWN_VALUE_LIMIT
    from .ops.registry import InferContext

    if node.op.has_subgraphs or not all(a is None or isinstance(a, np.ndarray) for a in args):
        return None  # a body's own nodes are checked as it runs (re-inferring it would rebuild it)
    types = [None if a is None else dt.TensorType(a.shape, v.type.dtype)
             if isinstance(getattr(v, "type", None), dt.TensorType) else None
             for a, v in zip(args, node.inputs)]
    known = [a if a is not None and a.size <= KNOWN_VALUE_LIMIT else None for a in args]
    try:
        ctx = InferContext(node.op, node.name, types, dict(node.attrs), len(node.outputs), known)
        return list(node.op.infer(ctx))
    except Exception:  # noqa: BLE001 - the reference itself reports what is wrong with the inputs
        return None


def _verify_result(node, out, r):
    if not isinstance(r, np.ndarray):
        raise GraphError(f"node '{node.name}' ({node.op.name}): reference returned {type(r).__name__} "
                         f"for output '{out.name}', not an ndarray")
    want = out.type.dtype.base if isinstance(out.type.dtype, dt.QuantizedDType) else out.type.dtype
    if dt.from_numpy(r.dtype) != want:
        raise GraphError(f"node '{node.name}' ({node.op.name}): output '{out.name}' computed as "
                         f"{r.dtype} but its type says {want.name}")
    if not dt.shape_fits(out.type.shape, r.shape):
        raise GraphError(f"node '{node.name}' ({node.op.name}): output '{out.name}' computed with shape "
                         f"{list(r.shape)} but its type says {_shape_str(out.type.shape)}")
