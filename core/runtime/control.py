"""`IfExecutable`: an If whose branches are compiled for a device, its condition read at run time.

The partition holding it is the If node alone (glow.partition.control): its inputs are the
condition and the values the branches capture, by name. A run reads the condition on the host
and runs the compiled branch it picks; the other branch's code waits for the runs that pick it.
"""

from __future__ import annotations

import numpy as np

from ..backend import Executable, ProfileRecord
from ..errors import InputError
from ..graph import Graph


class IfExecutable(Executable):
    def __init__(self, graph: Graph, then_exe: Executable, else_exe: Executable):
        super().__init__(graph)
        (self.node,) = graph.nodes
        self.branches = {True: then_exe, False: else_exe}
        self._cond = self.node.inputs[0].name

    def _pick(self, feeds: dict):
        cond = np.asarray(feeds[self._cond])
        if cond.size != 1:
            raise InputError(f"node '{self.node.name}' (If): the condition has {cond.size} elements, not one")
        exe = self.branches[bool(cond.reshape(-1)[0])]
        return exe, {k: feeds[k] for k in exe.input_names}

    def _outputs(self, exe: Executable, outs: dict) -> dict:
        # the branch's outputs in order are the If node's, under the node's names
        mine = {o.name for o in self.graph.outputs}
        return {o.name: outs[b] for o, b in zip(self.node.outputs, exe.output_names) if o.name in mine}

    def _run(self, feeds: dict) -> dict:
        exe, inputs = self._pick(feeds)
        return self._outputs(exe, exe.run(inputs))

    def _profile(self, feeds: dict):
        exe, inputs = self._pick(feeds)
        p = exe.profile(inputs)
        return p.records or [ProfileRecord(self.node.name, "If", p.total_seconds)], p.granularity, \
            self._outputs(exe, p.outputs), p.total_seconds

    def close(self):
        for exe in self.branches.values():
            close = getattr(exe, "close", None)
            if close is not None:
                close()
