"""Records for control flow: If (known condition, either branch; run-time condition computed both
ways and selected, 0-d / [1] / empty / int / multi-output, branch outputs that are captured values
or constants, nested If), Scan (states, several scan inputs, no state, reversed directions,
negative and non-zero axes, zero and one step, int64, captured values) and Loop (known trip count,
zero trips, condition-driven exit from the iteration number, masked run-time condition and
data-dependent exit, scan outputs, captured values, an If in the body reading a body value).

Sub-graphs read outer values by name: a `ScopedRecord` adds graph inputs named like the
sub-graph's captures and hands them to the node as its captures.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from ... import dtypes as dt
from ...graph import GraphBuilder
from ..op_records import Const, In, OpRecord, random_array


@dataclass
class ScopedRecord(OpRecord):
    """An OpRecord whose node captures outer values: `scope` maps each captured name to an In
    (a graph input of that name) or a Const."""

    scope: dict = field(default_factory=dict)

    def build(self):
        from ...ops import get_op

        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        b = GraphBuilder(self.id)
        feeds = {}

        def make(key, spec):
            if spec is None:
                return None
            if isinstance(spec, Const):
                return b.constant(spec.array(), name=key)
            t = dt.from_name(spec.dtype)
            feeds[key] = random_array(rng, spec, t)
            return b.input(key, dt.TensorType(spec.shape, t))

        values = [make(f"x{k}", s) for k, s in enumerate(self.inputs)]
        captures = [make(name, s) for name, s in self.scope.items()]
        outs = b.add(get_op(self.op, self.domain), values, self.attrs, name="node",
                     num_outputs=self.num_outputs, captures=captures)
        return b.build(outs), feeds


def tensor(shape, dtype="float32"):
    return dt.TensorType(tuple(shape), dt.from_name(dtype))


def body(name, inputs=(), captures=(), fn=None):
    """A sub-graph: `inputs` and `captures` are (name, type) pairs; `fn(b, *inputs, *captures)`
    returns its output values."""
    b = GraphBuilder(name)
    ins = [b.input(n, t) for n, t in inputs]
    caps = [b.capture(n, t) for n, t in captures]
    return b.build(fn(b, *ins, *caps))


def _c(b, value, dtype="float32"):
    return b.constant(np.asarray(value, dtype))


# -- If --------------------------------------------------------------------------------------------

X23 = ("x", tensor((2, 3)))


def _if(name, cond, then, other, scope, outputs=1):
    return ScopedRecord("If", [cond], {"then_branch": then, "else_branch": other}, name=name,
                        num_outputs=outputs, scope=scope)


ADD1 = body("then", captures=[X23], fn=lambda b, x: [b.add1("Add", [x, _c(b, 1)])])
SQUARE = body("else", captures=[X23], fn=lambda b, x: [b.add1("Mul", [x, x])])
# two outputs, one 0-d: (sum, x + 1) and (max, x * x)
PAIR_THEN = body("then", captures=[X23], fn=lambda b, x: [
    b.add1("ReduceSum", [x], {"keepdims": 0}), b.add1("Add", [x, _c(b, 1)])])
PAIR_ELSE = body("else", captures=[X23], fn=lambda b, x: [
    b.add1("ReduceMax", [x], {"keepdims": 0}), b.add1("Mul", [x, x])])
# int32: one branch returns the captured value itself, the other a constant
I_THEN = body("then", captures=[("k", tensor((4,), "int32"))], fn=lambda b, k: [k])
I_ELSE = body("else", captures=[("k", tensor((4,), "int32"))],
              fn=lambda b, k: [_c(b, [7, -1, 0, 3], "int32")])
EMPTY_THEN = body("then", captures=[("e", tensor((0, 3)))], fn=lambda b, e: [b.add1("Neg", [e])])
EMPTY_ELSE = body("else", captures=[("e", tensor((0, 3)))], fn=lambda b, e: [b.add1("Abs", [e])])
# a nested If on a second captured condition inside the then branch
NESTED_THEN = body("then", captures=[X23, ("c2", tensor((), "bool"))], fn=lambda b, x, c2: [
    b.add1("If", [c2], {"then_branch": ADD1, "else_branch": SQUARE}, captures=[x])])
NESTED_ELSE = body("else", captures=[X23], fn=lambda b, x: [b.add1("Sub", [x, _c(b, 2)])])

IF_RECORDS = [
    _if("const-true", Const(np.array(True)), ADD1, SQUARE, {"x": In((2, 3))}),
    _if("const-false", Const(np.array(False)), ADD1, SQUARE, {"x": In((2, 3))}),
    _if("const-true-shape-1", Const(np.array([True])), ADD1, SQUARE, {"x": In((2, 3))}),
    _if("runtime", In((), "bool"), ADD1, SQUARE, {"x": In((2, 3))}),
    _if("runtime-shape-1", In((1,), "bool"), ADD1, SQUARE, {"x": In((2, 3))}),
    _if("runtime-two-outputs", In((), "bool"), PAIR_THEN, PAIR_ELSE, {"x": In((2, 3))}, outputs=2),
    _if("runtime-int32-capture-and-constant", In((), "bool"), I_THEN, I_ELSE,
        {"k": In((4,), "int32", -50, 50)}),
    _if("const-int32-capture", Const(np.array(True)), I_THEN, I_ELSE, {"k": In((4,), "int32", -50, 50)}),
    _if("runtime-empty", In((), "bool"), EMPTY_THEN, EMPTY_ELSE, {"e": In((0, 3))}),
    _if("runtime-nested", In((), "bool"), NESTED_THEN, NESTED_ELSE,
        {"x": In((2, 3)), "c2": In((), "bool")}),
]


# -- Scan ------------------------------------------------------------------------------------------

def _scan(name, inputs, graph, m, outputs, scope=None, rtol=1e-5, **attrs):
    return ScopedRecord("Scan", inputs, {"body": graph, "num_scan_inputs": m, **attrs}, name=name,
                        num_outputs=outputs, scope=scope or {}, rtol=rtol)


def _cumsum(dtype="float32", width=2):
    """state + x: the running sum as the new state and as the scan output."""
    def fn(b, s, x):
        y = b.add1("Add", [s, x])
        return [y, b.add1("Identity", [y])]
    return body("cumsum", [("s", tensor((width,), dtype)), ("x", tensor((width,), dtype))], fn=fn)


def _two_inputs():
    """No state: a * b and a - b of two scan inputs of different layouts."""
    return body("mul", [("a", tensor((3,))), ("b", tensor((3,)))],
                fn=lambda b, p, q: [b.add1("Mul", [p, q]), b.add1("Sub", [p, q])])


def _scaled():
    """The state scaled by a captured weight, plus the element; outputs the state's sum (0-d)."""
    def fn(b, s, x, w):
        y = b.add1("Add", [b.add1("Mul", [s, w]), x])
        return [y, b.add1("ReduceSum", [y], {"keepdims": 0})]
    return body("scaled", [("s", tensor((2,))), ("x", tensor((2,)))], [("w", tensor((2,)))], fn)


SCAN_RECORDS = [
    _scan("cumsum", [In((2,)), In((3, 2))], _cumsum(), 1, 2),
    _scan("cumsum-one-step", [In((2,)), In((1, 2))], _cumsum(), 1, 2),
    _scan("cumsum-zero-steps", [In((2,)), In((0, 2))], _cumsum(), 1, 2),
    _scan("cumsum-int64", [In((2,), "int64", -9, 9), In((4, 2), "int64", -9, 9)], _cumsum("int64"), 1, 2),
    _scan("reversed-axis1", [In((2,)), In((2, 5))], _cumsum(), 1, 2, scan_input_axes=[1],
          scan_input_directions=[1], scan_output_axes=[1], scan_output_directions=[1]),
    _scan("negative-axes", [In((2,)), In((2, 4))], _cumsum(), 1, 2, scan_input_axes=[-1],
          scan_output_axes=[-1]),
    _scan("empty-elements", [In((0,)), In((3, 0))], _cumsum(width=0), 1, 2),
    _scan("two-inputs-no-state", [In((4, 3)), In((3, 4))], _two_inputs(), 2, 2,
          scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[0, -2],
          scan_output_directions=[1, 0]),
    _scan("captured-weight", [In((2,)), In((5, 2))], _scaled(), 1, 2, scope={"w": In((2,), low=-1, high=1)}),
]


# -- Loop ------------------------------------------------------------------------------------------

I64, B1 = ("i", tensor((), "int64")), ("c", tensor((), "bool"))


def _loop(name, m, cond, carried, graph, outputs, scope=None, rtol=1e-5):
    return ScopedRecord("Loop", [m, cond, *carried], {"body": graph}, name=name, num_outputs=outputs,
                        scope=scope or {}, rtol=rtol)


def _count_up(dtype="float32"):
    """y + i (the iteration number as y's type); the condition passes through; scans y."""
    def fn(b, i, c, y):
        y = b.add1("Add", [y, b.add1("Cast", [i], {"to": dt.from_name(dtype)})])
        return [b.add1("Identity", [c]), y, b.add1("Identity", [y])]
    return body("count", [I64, B1, ("y", tensor((2,), dtype))], fn=fn)


def _while_i_below(limit):
    """Continues while i < limit (known per iteration once unrolled); scans i * y."""
    def fn(b, i, c, y):
        more = b.add1("Less", [i, b.constant(np.asarray(limit, np.int64))])
        y2 = b.add1("Mul", [y, _c(b, 1.5)])
        return [more, y2, b.add1("Mul", [y2, b.add1("Cast", [i], {"to": dt.float32})])]
    return body("while", [I64, B1, ("y", tensor((3,)))], fn=fn)


def _halve():
    """y / 2 + w (w captured); the condition passes through."""
    def fn(b, i, c, y, w):
        return [b.add1("Identity", [c]), b.add1("Add", [b.add1("Mul", [y, _c(b, 0.5)]), w])]
    return body("halve", [I64, B1, ("y", tensor((2, 2)))], [("w", tensor((2, 2)))], fn)


def _grow_until():
    """Doubles y while its sum stays below 20: an exit that depends on the data."""
    def fn(b, i, c, y):
        y2 = b.add1("Mul", [y, _c(b, 2)])
        return [b.add1("Less", [b.add1("ReduceSum", [y2], {"keepdims": 0}), _c(b, 20)]), y2]
    return body("grow", [I64, B1, ("y", tensor((3,)))], fn=fn)


def _branchy():
    """An If inside the body, on the iteration number, reading the body's own carried value."""
    y_t = ("y", tensor((2,)))
    add = body("then", captures=[y_t], fn=lambda b, y: [b.add1("Add", [y, _c(b, 1)])])
    sub = body("else", captures=[y_t], fn=lambda b, y: [b.add1("Sub", [y, _c(b, 3)])])

    def fn(b, i, c, y):
        odd = b.add1("Equal", [b.add1("Mod", [i, b.constant(np.asarray(2, np.int64))]),
                               b.constant(np.asarray(1, np.int64))])
        y2 = b.add1("If", [odd], {"then_branch": add, "else_branch": sub}, captures=[y])
        return [b.add1("Identity", [c]), y2, b.add1("Identity", [y2])]
    return body("branchy", [I64, B1, y_t], fn=fn)


def _scan_in_body():
    """A Scan (cumulative sum over a captured (3, 2) input, starting from y) inside the body; the
    scan output is the 0-d sum of the new y."""
    def fn(b, i, c, y, xs):
        y2, _ = b.add("Scan", [y, xs], {"body": _cumsum(), "num_scan_inputs": 1}, num_outputs=2)
        return [b.add1("Identity", [c]), y2, b.add1("ReduceSum", [y2], {"keepdims": 0})]
    return body("nested", [I64, B1, ("y", tensor((2,)))], [("xs", tensor((3, 2)))], fn)


M = lambda v: Const(np.array(v, np.int64))  # noqa: E731
TRUE = Const(np.array(True))

LOOP_RECORDS = [
    _loop("count-3", M(3), TRUE, [In((2,))], _count_up(), 2),
    _loop("count-1-no-cond", M(1), None, [In((2,))], _count_up(), 2),
    _loop("count-zero-trips", M(0), TRUE, [In((2,))], _count_up(), 2),
    _loop("count-negative-trips", M(-2), TRUE, [In((2,))], _count_up(), 2),
    _loop("count-int32", M(4), TRUE, [In((2,), "int32", -9, 9)], _count_up("int32"), 2),
    _loop("const-false-cond", M(5), Const(np.array(False)), [In((2,))], _count_up(), 2),
    _loop("while-no-trip-count", None, TRUE, [In((3,))], _while_i_below(3), 2),
    _loop("while-trip-count-first", M(2), TRUE, [In((3,))], _while_i_below(5), 2),
    _loop("runtime-cond-masked", M(4), In((), "bool"), [In((2, 2))], _halve(), 1,
          scope={"w": In((2, 2))}),
    _loop("data-dependent-exit", M(6), TRUE, [In((3,), low=0.1, high=1)], _grow_until(), 1),
    _loop("captured-weight", M(3), TRUE, [In((2, 2))], _halve(), 1, scope={"w": In((2, 2))}),
    _loop("scan-in-body-0d-scan-output", M(2), TRUE, [In((2,))], _scan_in_body(), 2,
          scope={"xs": In((3, 2))}),
    _loop("if-in-body", M(4), TRUE, [In((2,))], _branchy(), 2),
]

RECORDS = IF_RECORDS + SCAN_RECORDS + LOOP_RECORDS
