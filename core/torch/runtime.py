"""Running a glow executable on torch tensors: tensors in, tensors out, no copies where NumPy can
view the memory (CPU tensors of NumPy's dtypes, bfloat16 through ml_dtypes)."""

from __future__ import annotations

import numpy as np
import torch

from .. import dtypes as dt
from ..errors import GlowError, warn
from .importer import to_numpy


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """A torch tensor over `a`'s memory (a read-only array is copied: torch tensors are writable)."""
    if not a.flags.writeable:
        a = a.copy()
    if a.dtype == dt.bfloat16.np:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def feeds_for(plan, args) -> dict:
    """The executable's inputs from a call's arguments, as the importer's plan says."""
    feeds = {}
    for how, arg in zip(plan, args):
        if how[0] == "input":
            feeds[how[1]] = to_numpy(arg)
        elif how[0] == "sym":
            feeds[how[1]] = np.array([int(arg)], np.int64)
    return feeds


class GlowCall(torch.nn.Module):
    """A compiled partition in place of the FX submodule it was imported from. If glow refuses a
    call at run time (an input signature it cannot compile), that call and every later one run
    the submodule eagerly, with one GlowWarning: the model never fails for glow's sake."""

    def __init__(self, exe, plan, eager: torch.fx.GraphModule, tuple_out: bool, name: str):
        super().__init__()
        self.exe, self.plan, self.eager, self.tuple_out, self.label = exe, plan, eager, tuple_out, name
        self.failed: str | None = None

    def forward(self, *args):
        if self.failed is None:
            try:
                got = self.exe.run(feeds_for(self.plan, args))
            except GlowError as e:
                self.failed = str(e)
                warn(f"glow partition '{self.label}' runs eagerly from now on: {e}")
            else:
                outs = tuple(from_numpy(got[n]) for n in self.exe.output_names)
                return outs if self.tuple_out else outs[0]
        return self.eager(*args)
