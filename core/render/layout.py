"""Device memory layout: every buffer of an IR function in one device allocation.

    [ weights | activation arena (the static plan) | inputs | outputs ]

Each region starts 64-byte aligned; a kernel operand is the byte offset of its root buffer plus
the view's own offset. Weights are uploaded once per executable; inputs are written and outputs
read at their offsets on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.instr import ACTIVATION, INPUT, OUTPUT, WEIGHT, aligned


@dataclass
class DeviceLayout:
    total: int
    offsets: dict  # id(root buffer) -> byte offset
    weights: list = field(default_factory=list)  # [(offset, ndarray)]
    inputs: list = field(default_factory=list)  # [(name, offset, Buffer)]
    outputs: list = field(default_factory=list)  # [(name, offset, Buffer)]

    def operand_offset(self, operand) -> int:
        # Empty buffers have no bytes (and no place): kernels never dereference them.
        return self.offsets.get(id(operand.root), 0) + operand.offset

    @property
    def weights_end(self) -> int:
        """Bytes from the start to the end of the last weight (what the upload writes)."""
        return max((off + a.nbytes for off, a in self.weights), default=0)

    def weight_blob(self, size: int | None = None) -> np.ndarray:
        """All weights as one host array, laid out as on the device (one upload). `size` (at
        least weights_end): an array that long, page-aligned, zero after the weights: the whole
        device memory, for a device that works in host memory (an OpenCL CPU device)."""
        if size is None:
            blob = np.zeros(self.weights_end, np.uint8)
        else:
            raw = np.zeros(size + 4096, np.uint8)
            start = -raw.ctypes.data % 4096
            blob = raw[start:start + size]
        for off, a in self.weights:
            blob[off:off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        return blob


def layout_memory(fn, plan, launches=None) -> DeviceLayout:
    """Place every buffer. With `launches` (the program's kernels), only weights some kernel
    reads are placed: a weight replaced by a packed copy (KernelWriter.weight) is not uploaded,
    and the packed copies are."""
    offsets: dict[int, int] = {}
    weights, inputs, outputs = [], [], []
    at = 0
    candidates = fn.buffers_of(WEIGHT)
    if launches is not None:
        used = {id(o.root): o.root for k in launches for o in k.operands}
        candidates = [b for b in used.values() if b.kind == WEIGHT]
    for b in candidates:
        if b.boxed:
            continue
        offsets[id(b)] = at
        weights.append((at, np.asarray(b.data)))
        at = aligned(at + b.nbytes)
    arena = at
    for b in fn.buffers:
        if b.kind == ACTIVATION and not b.boxed:
            offsets[id(b)] = arena + plan.offsets[id(b)]
    at = aligned(arena + plan.arena_bytes)
    for kind, dest in ((INPUT, inputs), (OUTPUT, outputs)):
        for b in (fn.inputs if kind == INPUT else fn.outputs):
            if b.boxed:
                dest.append((b.name, None, b))
                continue
            offsets[id(b)] = at
            dest.append((b.name, at, b))
            at = aligned(at + b.nbytes)
    return DeviceLayout(max(at, 64), offsets, weights, inputs, outputs)


def launch_args(kernel, layout: DeviceLayout) -> list:
    """A launch's arguments after `mem`: its operands' byte offsets (uint64), then the values of
    its int parameters (int32), in the order of the kernel's signature."""
    return ([np.uint64(layout.operand_offset(o)) for o in kernel.operands]
            + [np.int32(v) for v in kernel.scalars])
