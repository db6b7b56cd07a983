"""IR passes: fewer copies, fewer buffers, tighter lifetimes (Glow's IROptimizer, in spirit).

    eliminate-copies    a copy whose source (or destination) can simply *be* the other side goes
                        away: producers of Concat inputs write straight into the Concat's result,
                        nodes feeding a graph output through a Reshape write the output directly
    share-buffers       an elementwise op writes its result over an input that dies there
    dead-stores         instructions whose results nobody reads are deleted
    sink-allocs         each alloc moves to just before its buffer's first use
    hoist-deallocs      each dealloc moves to just after its buffer's last use
    dead-allocs         buffers nothing touches any more are deleted

Every pass takes and returns an `IRFunction`; with GLOW_VERIFY >= 2 the IR verifier runs after each.
"""

from __future__ import annotations

from ..errors import GraphError
from ..ops.registry import ELEMENTWISE
from ..passes.base import Pass
from .instr import ACTIVATION, OUTPUT, Instr, IRFunction
from .liveness import Uses, rebase, substitute


# -- copy elimination ------------------------------------------------------------------------------
# Each rule returns (the buffer that goes away, how its operands are rebuilt) or None.
def _try_backward(uses: Uses, c: int, copy: Instr):
    """`copy D <- S` where S's buffer exists only to be copied: S's writers write D instead."""
    (dst,), (src,) = copy.outputs, copy.inputs
    r = src.root
    if r.kind != ACTIVATION or r.boxed or src.offset != 0 or src.nbytes != r.nbytes:
        return None
    if dst.root.kind not in (ACTIVATION, OUTPUT) or dst.root.boxed or dst.root is r:
        return None
    if src.type.dtype != dst.type.dtype or any(p > c for p in uses.written_at(r)):
        return None
    lo, hi = uses.first(r), uses.last(r)
    if uses.region_touched(dst, lo, hi, skip=c):
        return None
    return r, lambda o: rebase(dst, o.name, o.type, o.offset)


def _try_forward(uses: Uses, c: int, copy: Instr):
    """`copy D <- S` where D is a private buffer only this copy writes: D's readers read S."""
    (dst,), (src,) = copy.outputs, copy.inputs
    d = dst.root
    if dst is not d or d.kind != ACTIVATION or d.boxed or src.root.boxed or src.root is d:
        return None
    if src.type.dtype != dst.type.dtype or uses.written_at(d) != [c]:
        return None
    if uses.region_touched(src, c + 1, uses.last(d), writes_only=True):
        return None
    return d, lambda o: rebase(src, o.name, o.type, o.offset)


def eliminate_copies(fn: IRFunction) -> IRFunction:
    """Sweep the copies until none goes away. Positions stay fixed while it works (a removed
    instruction leaves a hole), so the use table is updated where a substitution touches it rather
    than rebuilt per copy, which made this pass quadratic: ResNet-50 lowered to the primitive
    floor has 194 copies and spent 0.4 s here."""
    instrs: list = list(fn.instrs)
    uses = Uses(fn)
    marks: dict[int, list[int]] = {}  # id(root) -> positions of its alloc / dealloc
    for p, i in enumerate(instrs):
        if i.kind in ("alloc", "dealloc"):
            marks.setdefault(id(i.outputs[0]), []).append(p)
    gone: set[int] = set()
    changed = True
    while changed:
        changed = False
        for c, copy in enumerate(instrs):
            if copy is None or copy.kind != "copy":
                continue
            hit = _try_backward(uses, c, copy) or _try_forward(uses, c, copy)
            if hit is None:
                continue
            old, make = hit
            uses.forget(c, copy)
            instrs[c] = None
            for q in marks.pop(id(old), ()):
                instrs[q] = None
            for p in uses.positions(old):
                instrs[p] = uses.retarget(p, instrs[p], old, make)
            gone.add(id(old))
            changed = True
    return fn.replace(instrs=tuple(i for i in instrs if i is not None),
                      buffers=tuple(b for b in fn.buffers if id(b) not in gone))


# -- buffer sharing --------------------------------------------------------------------------------
def _in_place_capable(i: Instr) -> bool:
    if i.kind == "fused":
        return True
    return (i.kind == "kernel" and i.expr is None and i.op.in_group(ELEMENTWISE) and i.op.pure
            and len(i.outputs) == 1)


def share_buffers(fn: IRFunction) -> IRFunction:
    changed = True
    while changed:
        changed = False
        uses = Uses(fn)
        for p, i in enumerate(fn.instrs):
            if not _in_place_capable(i):
                continue
            out = i.outputs[0]
            if out is not out.root or out.kind != ACTIVATION or out.boxed or uses.written_at(out) != [p]:
                continue
            for a in i.inputs:
                # Another operand viewing the same buffer would read bytes already overwritten by
                # a code generator's loop (NumPy would not notice): leave those alone.
                aliased = any(v is not None and v is not a and v.root is a for v in i.inputs)
                if (a is not None and a is a.root and a.kind == ACTIVATION and not a.boxed
                        and a.type == out.type and uses.last(a) == p and not aliased):
                    fn = substitute(fn, out, lambda o, a=a: rebase(a, o.name, o.type, o.offset))
                    changed = True
                    break
            if changed:
                break
    return fn


# -- dead stores and lifetimes ---------------------------------------------------------------------
def eliminate_dead_stores(fn: IRFunction) -> IRFunction:
    while True:
        uses = Uses(fn)
        dead = [p for p, i in enumerate(fn.instrs)
                if i.kind in ("copy", "fused", "kernel") and (i.op is None or i.op.pure)
                and i.writes() and all(o.kind == ACTIVATION and not uses.read_at(o.root)
                                       for o in i.writes())]
        if not dead:
            return fn
        drop = set(dead)
        fn = fn.replace(instrs=tuple(i for p, i in enumerate(fn.instrs) if p not in drop))


def _replace_marks(fn: IRFunction, kind: str) -> IRFunction:
    """Remove every `kind` mark and put it back at the buffer's first (alloc) or last (dealloc) use."""
    uses = Uses(fn)
    marked = [i.outputs[0] for i in fn.instrs if i.kind == kind]
    body = [i for i in fn.instrs if i.kind != kind]
    # Positions in `uses` count the marks being removed; map them to the new list.
    old_pos = [p for p, i in enumerate(fn.instrs) if i.kind != kind]
    new_index = {p: k for k, p in enumerate(old_pos)}
    before: dict[int, list] = {}
    after: dict[int, list] = {}
    for b in marked:
        ps = uses.positions(b)
        if not ps:  # untouched (dead-allocs deletes it): keep an empty lifetime next to its twin mark
            twin = "dealloc" if kind == "alloc" else "alloc"
            k = next((k for k, i in enumerate(body) if i.kind == twin and i.outputs[0] is b), 0)
            (before if kind == "alloc" else after).setdefault(k, []).append(b)
            continue
        if kind == "alloc":
            before.setdefault(new_index[ps[0]], []).append(b)
        else:
            after.setdefault(new_index[ps[-1]], []).append(b)
    out = []
    for k, i in enumerate(body):
        out += [Instr("alloc", b.name, (b,)) for b in before.get(k, [])]
        out.append(i)
        out += [Instr("dealloc", b.name, (b,)) for b in after.get(k, [])]
    return fn.replace(instrs=tuple(out))


def sink_allocs(fn: IRFunction) -> IRFunction:
    return _replace_marks(fn, "alloc")


def hoist_deallocs(fn: IRFunction) -> IRFunction:
    return _replace_marks(fn, "dealloc")


def delete_dead_allocs(fn: IRFunction) -> IRFunction:
    uses = Uses(fn)
    dead = {id(b) for b in fn.buffers if b.kind == ACTIVATION and not uses.positions(b)}
    if not dead:
        return fn
    return fn.replace(instrs=tuple(i for i in fn.instrs if not (i.kind in ("alloc", "dealloc")
                                                                and id(i.outputs[0]) in dead)),
                      buffers=tuple(b for b in fn.buffers if id(b) not in dead))


ELIMINATE_COPIES = Pass("eliminate-copies", eliminate_copies)
SHARE_BUFFERS = Pass("share-buffers", share_buffers)
DEAD_STORES = Pass("dead-stores", eliminate_dead_stores)
SINK_ALLOCS = Pass("sink-allocs", sink_allocs)
HOIST_DEALLOCS = Pass("hoist-deallocs", hoist_deallocs)
DEAD_ALLOCS = Pass("dead-allocs", delete_dead_allocs)


def ir_pipeline() -> list[Pass]:
    return [
        ELIMINATE_COPIES,   # first: writing in place into a Concat's result is the biggest win
        SHARE_BUFFERS,      # elementwise ops overwrite inputs that die with them
        DEAD_STORES,        # results nobody reads (an unused second output's kernel, ...)
        DEAD_ALLOCS,        # buffers the passes above made unused
        SINK_ALLOCS,        # lifetimes from first to last use: what the planner packs
        HOIST_DEALLOCS,
    ]


def run_ir_passes(fn: IRFunction, passes, log: list | None = None) -> IRFunction:
    from ..interpreter import verify_level
    from .verify import verify_ir

    check = verify_level() >= 2
    for p in passes:
        before = fn
        fn = p.apply(fn)
        if log is not None:
            log.append((p.name, len(before.instrs), len(fn.instrs)))
        if check:
            try:
                verify_ir(fn)
            except GraphError as e:
                raise GraphError(f"after IR pass '{p.name}': {e}") from None
    return fn
