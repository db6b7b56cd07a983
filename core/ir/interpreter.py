"""The IR interpreter: runs an `IRFunction` with NumPy, with every activation placed in one arena
exactly as the memory plan says, so a wrong plan or a wrong IR pass shows up as wrong numbers.

Kernels run the op's NumPy reference (the same code as the graph interpreter) on views of the
arena and copy the result into their output operands; `fused` instructions evaluate their
expression tree with the same references. Boxed buffers (dynamic shapes, strings, sequences) are
held by reference outside the arena.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError, InputError
from ..interpreter import check_outputs
from .instr import ACTIVATION, ALIGNMENT, INPUT, OUTPUT, WEIGHT, Expr, Instr, IRFunction


def _np_dtype(t) -> np.dtype:
    d = t.dtype
    return np.dtype(d.base.np if isinstance(d, dt.QuantizedDType) else d.np)


def window(root_array: np.ndarray, offset: int, type) -> np.ndarray:
    """The `type`-shaped array `offset` bytes into a contiguous array (no copy)."""
    raw = root_array.reshape(-1).view(np.uint8)
    n = type.nbytes
    return raw[offset:offset + n].view(_np_dtype(type)).reshape(type.shape)


def evaluate(e: Expr, args: list, acc=None):
    if e.op is None:
        if e.arg is None:
            return e.value
        return acc if e.arg == -1 else args[e.arg]
    vals = [None if a is None else evaluate(a, args, acc) for a in e.args]
    return e.op.reference(*vals, **e.attrs)


class IRProgram:
    """An IR function and its memory plan, ready to run: `run({name: array}) -> {name: value}`."""

    def __init__(self, fn: IRFunction, plan):
        self.fn, self.plan = fn, plan
        raw = np.zeros(plan.arena_bytes + ALIGNMENT, np.uint8)
        shift = (-raw.ctypes.data) % ALIGNMENT
        self.arena = raw[shift:shift + plan.arena_bytes]
        self._lock = threading.Lock()
        self.static: dict[int, np.ndarray] = {}  # id(root) -> array, for arena and weight buffers
        for b in fn.buffers:
            if b.kind == WEIGHT:
                self.static[id(b)] = b.data if b.data.dtype == object else np.asarray(b.data, order="C")
            elif b.kind == ACTIVATION and not b.boxed:
                self.static[id(b)] = window(self.arena, plan.offsets[id(b)], b.type)

    # -- operands ------------------------------------------------------------------------------
    def _array(self, o, env):
        r = o.root
        base = self.static.get(id(r))
        if base is None:
            base = env[id(r)]
        if o is r:
            return base
        return window(base, o.offset, o.type)

    def _read(self, o, env):
        if o is None:
            return None
        if o.root.boxed:
            r = o.root
            return self.static[id(r)] if id(r) in self.static else env[id(r)]
        return self._array(o, env)

    def _write(self, i: Instr, o, value, env):
        if o is None:
            return
        if o.root.boxed:
            env[id(o.root)] = _detached(value)
            return
        dst = self._array(o, env)
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        if value.shape != dst.shape or value.dtype != dst.dtype:
            raise GraphError(f"instruction '{i.name}' ({i.opname}) produced {value.dtype}"
                             f"{list(value.shape)} for %{o.name}, which holds {dst.dtype}{list(dst.shape)}")
        np.copyto(dst, value)

    # -- running -------------------------------------------------------------------------------
    def run(self, feeds: dict) -> dict:
        with self._lock:
            return self._run(feeds)

    def _run(self, feeds: dict) -> dict:
        env: dict[int, object] = {}
        for b in self.fn.inputs:
            v = feeds[b.name]
            env[id(b)] = v if b.boxed else np.asarray(v, order="C")
        for b in self.fn.outputs:
            if not b.boxed:
                env[id(b)] = np.empty(b.type.shape, _np_dtype(b.type))
        for i in self.fn.instrs:
            self._step(i, env)
        return {b.name: env[id(b)] for b in self.fn.outputs}

    def _step(self, i: Instr, env):
        kind = i.kind
        if kind == "alloc":
            return
        if kind == "dealloc":
            if i.outputs[0].boxed:
                env.pop(id(i.outputs[0]), None)
            return
        args = [self._read(o, env) for o in i.inputs]
        if kind not in ("copy", "fused"):  # before NumPy allocates a boxed (run-time shaped) result
            check_outputs(i, args if i.n_args is None else args[:i.n_args])
        try:
            if kind == "copy":
                results = [args[0]]
            elif kind == "fused":
                results = [evaluate(i.expr, args)]
            else:
                results = self._kernel(i, args)
        except GraphError:
            raise
        except InputError as e:  # bad data met inside an op (an out-of-range index): name it
            raise InputError(f"node '{i.name}' ({i.opname}): {e}") from None
        except Exception as e:  # name the instruction: a bare NumPy error is useless to a user
            raise GraphError(f"instruction '{i.name}' ({i.opname}) failed in the IR interpreter: "
                             f"{type(e).__name__}: {e}") from e
        for o, r in zip(i.outputs, results):
            self._write(i, o, r, env)

    def _kernel(self, i: Instr, args):
        attrs = {k: v for k, v in i.attrs.items() if not k.startswith("_")}
        n = len(args) if i.n_args is None else i.n_args
        if "_capture_names" in i.attrs:
            attrs["_scope"] = dict(zip(i.attrs["_capture_names"], args[n:]))
        res = i.op.reference(*args[:n], **attrs)
        results = list(res) if isinstance(res, tuple) else [res]
        if i.expr is not None:
            results = [evaluate(i.expr, args, results[0])]
        return results


def _detached(value):
    """A copy of `value` that no later write to the arena can change."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_detached(v) for v in value]
    return value


__all__ = ["IRProgram", "evaluate", "window", "INPUT", "OUTPUT"]
