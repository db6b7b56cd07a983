"""Who touches which buffer, where: the facts every IR pass and the planner work from.

Positions are instruction indices. A buffer is touched through itself or through any view of it,
so all questions are asked about *root* buffers; `alloc`/`dealloc` marks are not touches.
"""

from __future__ import annotations

from .instr import Buffer, IRFunction, View, overlaps


class Uses:
    """Per root buffer: the (position, mode, operand) of every read and write, in program order."""

    def __init__(self, fn: IRFunction):
        self.fn = fn
        self.reads: dict[int, list] = {}
        self.writes: dict[int, list] = {}
        for p, i in enumerate(fn.instrs):
            if i.kind not in ("alloc", "dealloc"):
                self.record(p, i)

    def forget(self, p: int, instr) -> None:
        """Drop instruction `p`'s touches (it is being removed or rewritten)."""
        for table, ops in ((self.writes, instr.writes()), (self.reads, instr.reads())):
            for key in {id(o.root) for o in ops}:
                kept = [e for e in table[key] if e[0] != p]
                if kept:
                    table[key] = kept
                else:
                    del table[key]

    def record(self, p: int, instr) -> None:
        """Add instruction `p`'s touches (positions are not kept in order: every query sorts)."""
        for o in instr.writes():
            self.writes.setdefault(id(o.root), []).append((p, o))
        for o in instr.reads():
            self.reads.setdefault(id(o.root), []).append((p, o))

    def retarget(self, p: int, instr, old: Buffer, make):
        """Instruction `p` with every operand rooted at `old` replaced by `make(operand)`, the
        table updated to match (`substitute`, for one instruction, in place)."""
        def sub(o):
            return o if o is None or o.root is not old else make(o)

        new = instr.replace(outputs=tuple(sub(o) for o in instr.outputs), inputs=tuple(sub(o) for o in instr.inputs))
        self.forget(p, instr)
        self.record(p, new)
        return new

    def positions(self, root: Buffer) -> list[int]:
        return sorted({p for p, _ in self.reads.get(id(root), []) + self.writes.get(id(root), [])})

    def first(self, root: Buffer) -> int | None:
        ps = self.positions(root)
        return ps[0] if ps else None

    def last(self, root: Buffer) -> int | None:
        ps = self.positions(root)
        return ps[-1] if ps else None

    def written_at(self, root: Buffer) -> list[int]:
        return sorted({p for p, _ in self.writes.get(id(root), [])})

    def read_at(self, root: Buffer) -> list[int]:
        return sorted({p for p, _ in self.reads.get(id(root), [])})

    def region_touched(self, region, lo: int, hi: int, skip: int | None = None, writes_only=False) -> bool:
        """Whether any instruction in positions [lo, hi] (except `skip`) touches bytes of `region`."""
        root = region.root
        table = self.writes.get(id(root), []) if writes_only else \
            self.writes.get(id(root), []) + self.reads.get(id(root), [])
        return any(lo <= p <= hi and p != skip and overlaps(o, region) for p, o in table)


def substitute(fn: IRFunction, old: Buffer, make) -> IRFunction:
    """Replace every operand rooted at `old` by `make(operand)`; drop `old` and its lifetime marks."""

    def sub(o):
        if o is None or o.root is not old:
            return o
        return make(o)

    instrs = []
    for i in fn.instrs:
        if i.kind in ("alloc", "dealloc") and i.outputs[0] is old:
            continue
        if any(o is not None and o.root is old for o in i.outputs + i.inputs):
            i = i.replace(outputs=tuple(sub(o) for o in i.outputs), inputs=tuple(sub(o) for o in i.inputs))
        instrs.append(i)
    return fn.replace(instrs=tuple(instrs), buffers=tuple(b for b in fn.buffers if b is not old))


def rebase(target, name: str, type, offset: int = 0):
    """An operand for (`type`, `offset` bytes into `target`'s region): `target`'s root itself when
    that is exactly it, else a view of the root."""
    root = target.root
    off = target.offset + offset
    if off == 0 and type == root.type:
        return root
    return View(name, root, type, off)
