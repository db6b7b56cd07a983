"""Whether a graph output may be written over a graph input's memory (a KV cache passed as both
past and present: `Executable.run(..., into=)`).

Inputs are read-only to the IR, so nothing plans for such aliasing: it is safe only when every
instruction that reads the input is one that writes the output, and each such instruction reads
an element before it writes the same element and nothing else: a copy, a pointwise instruction
whose input and output have one type (no broadcast, no view), or a kernel of an op in the
CACHE_UPDATE group (its kernels write only new rows and read the past first). A reader of the
input elsewhere in the program could run after, or beside, the write.
"""

from __future__ import annotations

from ..ops.registry import CACHE_UPDATE, ELEMENTWISE
from .instr import IRFunction


def aliasable(fn: IRFunction, input_name: str, output_name: str) -> bool:
    src = next((b for b in fn.inputs if b.name == input_name), None)
    dst = next((b for b in fn.outputs if b.name == output_name), None)
    if src is None or dst is None or src.boxed or dst.boxed or src.type != dst.type:
        return False
    writers = {k for k, i in enumerate(fn.instrs) if any(o.root is dst for o in i.writes())}
    readers = {k for k, i in enumerate(fn.instrs) if any(v.root is src for v in i.reads())}
    if not writers or not readers <= writers:
        return False
    return all(_in_place(fn.instrs[k], src, dst) for k in writers)


def _in_place(instr, src, dst) -> bool:
    if instr.kind == "kernel" and instr.op is not None and instr.op.in_group(CACHE_UPDATE):
        return _cache_pair(instr, src, dst)
    pointwise = instr.kind in ("copy", "fused") or (
        instr.kind == "kernel" and instr.op is not None and instr.op.in_group(ELEMENTWISE))
    if not pointwise:
        return False
    same = [v for v in (*instr.reads(), *instr.writes()) if v.root is src or v.root is dst]
    return all(v.offset == 0 and v.type == dst.type for v in same)


def _cache_pair(instr, src, dst) -> bool:
    """Whether src is the past input and dst the present output of one cache (ports past_X and
    present_X), and src is read at no other port."""
    ins = [p.name for p, v in zip(instr.op.in_ports, instr.inputs) if v is not None and v.root is src]
    outs = [p.name for p, v in zip(instr.op.out_ports, instr.outputs) if v is not None and v.root is dst]
    if len(ins) != 1 or len(outs) != 1 or not ins[0].startswith("past_") or not outs[0].startswith("present_"):
        return False
    return ins[0][len("past_"):] == outs[0][len("present_"):]
