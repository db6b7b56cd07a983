"""The IR verifier: well-formed operands and lifetimes. Run after every IR pass when GLOW_VERIFY >= 2."""

from __future__ import annotations

from ..errors import GraphError
from .instr import ACTIVATION, INPUT, OUTPUT, WEIGHT, IRFunction, View


def verify_ir(fn: IRFunction) -> None:
    declared = {id(b) for b in fn.buffers}
    allocs: dict[int, int] = {}
    deallocs: dict[int, int] = {}
    written: set[int] = set()

    def fail(p, msg):
        from .printer import format_instr

        near = ""
        if p is not None:
            near = " | at: " + format_instr(fn.instrs[p])
        raise GraphError(f"IR of '{fn.name}': {msg}{near}")

    for p, i in enumerate(fn.instrs):
        if i.kind in ("alloc", "dealloc"):
            b = i.outputs[0]
            if b.kind != ACTIVATION:
                fail(p, f"{i.kind} of {b.kind} buffer %{b.name}")
            table = allocs if i.kind == "alloc" else deallocs
            if id(b) in table:
                fail(p, f"second {i.kind} of %{b.name}")
            if i.kind == "dealloc" and id(b) not in allocs:
                fail(p, f"dealloc of %{b.name} before its alloc")
            table[id(b)] = p
            continue
        for o in i.touches():
            r = o.root
            if id(r) not in declared:
                fail(p, f"operand %{o.name} is rooted at undeclared buffer %{r.name}")
            if isinstance(o, View):
                if r.boxed or o.offset < 0 or o.offset + o.nbytes > r.nbytes:
                    fail(p, f"view %{o.name} ({o.offset}+{o.nbytes} bytes) outside %{r.name} "
                            f"({r.nbytes} bytes)")
            if r.kind == ACTIVATION and (id(r) not in allocs or id(r) in deallocs):
                fail(p, f"%{o.name} used outside the lifetime of %{r.name}")
        for o in i.reads():  # before this instruction's own writes: in-place reads old bytes
            if o.root.kind in (ACTIVATION, OUTPUT) and id(o.root) not in written:
                fail(p, f"reads %{o.name} before anything writes %{o.root.name}")
        for o in i.writes():
            if o.root.kind in (WEIGHT, INPUT):
                fail(p, f"writes to {o.root.kind} buffer %{o.root.name}")
            written.add(id(o.root))
    for b in fn.buffers:
        if b.kind == ACTIVATION and (id(b) in allocs) != (id(b) in deallocs):
            fail(None, f"activation %{b.name} has an alloc without a dealloc or the reverse")
    for b in fn.outputs:
        if id(b) not in written:
            fail(None, f"output %{b.name} is never written")
