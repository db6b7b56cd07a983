"""A whole IR function rendered: one program text and the ordered list of kernel launches.

    program = render_program(fn, renderer, params)
    program.source        # prelude (pragmas, helpers) + every distinct kernel once
    program.launches      # [Kernel] in instruction order; each names its operands

Instructions with identical kernel text share one kernel (names are content hashes), so a model
with many same-shaped layers builds fewer kernels. Instructions that write nothing (zero-size
outputs) launch nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BackendError
from .helpers import render_helpers
from .kernel import Kernel, KernelWriter
from .kernels.elementwise import render_copy, render_elementwise
from .params import GPU, DeviceParams
from .registry import rule_for
from .sizes import rendering


@dataclass
class Program:
    source: str
    launches: list  # [Kernel], in execution order
    kernels: dict  # name -> Kernel (the first instruction that rendered it)


def render_instr(instr, renderer, params: DeviceParams, derived: dict | None = None) -> Kernel | None:
    """The kernel of one instruction (None for alloc/dealloc and empty outputs). `derived`
    collects compile-time weights kernels make (packed layouts), shared across a program."""
    if instr.kind in ("alloc", "dealloc"):
        return None
    if all(o is None or o.type.numel == 0 for o in instr.outputs):
        return None
    w = KernelWriter(renderer, _base_name(instr), instr, derived, params)
    rule = None
    if instr.kind != "copy" and not (instr.kind == "fused" or (instr.expr is None and _elementwise(instr))):
        rule = rule_for(instr.op.name, instr.op.domain)
        if rule is None:
            raise BackendError(f"no {renderer.name} kernel for instruction '{instr.name}' ({instr.opname})")
    with rendering():  # sizes that vary between calls are written as markers (see .sizes)
        if instr.kind == "copy":
            render_copy(w, instr, params)
        elif rule is None:
            render_elementwise(w, instr, params)
        else:
            rule.render(w, instr, params)
    return w.finish()


def _elementwise(instr) -> bool:
    from .expr import CODE_FOR_OP

    op = instr.op
    return (op.domain, op.name) in CODE_FOR_OP and rule_for(op.name, op.domain) is None


def _base_name(instr) -> str:
    name = instr.kind if instr.kind != "kernel" else instr.op.name.lower()
    return name + ("_ep" if instr.kind == "kernel" and instr.expr is not None else "")


def render_program(fn, renderer, params: DeviceParams = GPU) -> Program:
    launches, kernels, derived = [], {}, {}
    for instr in fn.instrs:
        k = render_instr(instr, renderer, params, derived)
        if k is None:
            continue
        launches.append(k)
        kernels.setdefault(k.name, k)
    return Program(program_source(renderer, kernels.values()), launches, kernels)


def program_source(renderer, kernels) -> str:
    # By name (a hash of the text), not by first use: a graph whose instructions come in
    # another order for another sequence length builds the same program.
    kernels = sorted(kernels, key=lambda k: k.name)
    helpers = set().union(*(k.helpers for k in kernels)) if kernels else set()
    features = set().union(*(k.features for k in kernels)) if kernels else set()
    parts = renderer.preamble(features) + render_helpers(renderer, helpers)
    parts += [k.source for k in kernels]
    return "\n".join(parts) + "\n"


def kernel_records(fn, timed) -> list:
    """ProfileRecords of one timed run: `timed` holds (what, seconds) for every launch and copy,
    `what` an IR instruction (summed per instruction: one record each, in program order, zero
    for those that launched nothing) or the (op, name) of a copy in or out (a record each)."""
    from ..backend import ProfileRecord

    per_instr, records = {}, []
    for what, took in timed:
        if isinstance(what, tuple):
            records.append(ProfileRecord(what[1], what[0], took))
        else:
            per_instr[id(what)] = per_instr.get(id(what), 0.0) + took
    return records + [ProfileRecord(i.name, i.opname, per_instr.get(id(i), 0.0))
                      for i in fn.instrs if i.kind not in ("alloc", "dealloc")]
