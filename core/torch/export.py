"""Ahead of time: `torch.export` programs (ExportedProgram, saved `.pt2`) -> glow `Graph`.

    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    exe = glow.compile(ep)                       # an Executable: run({"x": array}) -> {name: array}
    fn = glow.torch.compile_exported(ep)         # the same, called with torch tensors
    glow run model.pt2                            # after torch.export.save(ep, "model.pt2")

This path is strict: an op glow has no rule for is a GlowError naming every such op and a node
of each (`torch.compile(backend="glow")` is the path that leaves such ops to torch). Parameters,
buffers and lifted constants become constants over the tensors' memory; user inputs keep their
names; a dim declared dynamic becomes a symbolic dim, so one compile serves every size.
"""

from __future__ import annotations

import os
from collections import Counter

import torch

from ..errors import GraphError, ModelLoadError, UnsupportedOpError
from ..graph import Graph
from .importer import _op_name, import_graph_module
from .table import ATEN, target_key


def _constants(ep) -> dict:
    from torch.export.graph_signature import InputKind

    out = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            t = ep.state_dict.get(spec.target)
            if t is None:
                t = ep.constants.get(spec.target)
            if not isinstance(t, torch.Tensor):
                raise GraphError(f"exported program: {spec.kind.name.lower()} '{spec.target}' is not a tensor")
            out[spec.arg.name] = t
        elif spec.kind != InputKind.USER_INPUT:
            raise GraphError(f"exported program: input '{spec.arg.name}' is a {spec.kind.name.lower()}, "
                             "which glow does not import")
    return out


def _check_outputs(ep):
    from torch.export.graph_signature import OutputKind

    for spec in ep.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise GraphError(f"exported program writes {spec.kind.name.lower()} '{spec.target}': a stateful "
                             "program (glow imports inference programs)")


def _check_ops(gm, where: str):
    """Every op without a rule, named at once (as the ONNX importer names every unsupported op)."""
    missing: Counter = Counter()
    first: dict = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and target_key(n.target) not in ATEN:
            name = _op_name(target_key(n.target))
            missing[name] += 1
            first.setdefault(name, n.name)
    if missing:
        listing = ", ".join(f"{op} (x{c}, e.g. node '{first[op]}')" for op, c in sorted(missing.items()))
        raise UnsupportedOpError(f"{where}: {len(missing)} ATen op(s) glow has no rule for: {listing}", dict(missing))


def _functional(ep):
    """`ep` lowered to functional ATen (no in-place ops), decomposing only the ops glow has no
    rule for. A program torch cannot decompose is imported as it is."""
    from torch.export import default_decompositions

    table = default_decompositions()
    for op in list(table):
        if target_key(op) in ATEN:
            del table[op]
    try:
        return ep.run_decompositions(table)
    except Exception:  # torch's own failure (seen on GPT-2's views in torch 2.13): import as exported
        return ep


def import_exported(ep, name: str = "torch_export") -> Graph:
    """An ExportedProgram as a glow Graph (inputs: the user inputs, by their names)."""
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TypeError(f"expected a torch.export.ExportedProgram, got {type(ep).__name__}")
    ep = _functional(ep)
    _check_outputs(ep)
    _check_ops(ep.graph_module, name)
    graph, plan = import_graph_module(ep.graph_module, name, _constants(ep))
    if any(how[0] == "sym" for how in plan):
        raise GraphError(f"{name}: a size input that is not a dimension of any tensor input")
    return graph


def load_pt2(path) -> Graph:
    """A `.pt2` file saved by `torch.export.save`, imported. The file is unpickled in part by
    torch: load only files you trust."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelLoadError(f"{path}: no such file")
    import zipfile

    if not zipfile.is_zipfile(path):  # checked first: torch logs a traceback before it raises
        raise ModelLoadError(f"{path}: not a torch.export program (a .pt2 is a zip archive)")
    try:
        ep = torch.export.load(path)
    except Exception as e:
        first = (str(e).splitlines() or [""])[0][:200]
        raise ModelLoadError(f"{path}: not a torch.export program ({type(e).__name__}: {first})") from None
    return import_exported(ep, os.path.splitext(os.path.basename(path))[0] or "torch_export")


class ExportedCall:
    """A compiled ExportedProgram called like the module: torch tensors in (positional, the
    program's user inputs in order), a tuple of torch tensors out (one tensor if one output)."""

    def __init__(self, exe, graph: Graph):
        self.exe = exe
        self.plan = [("input", n) for n in graph.input_names]

    def __call__(self, *args):
        from .runtime import feeds_for, from_numpy

        if len(args) != len(self.plan):
            from ..errors import InputError

            raise InputError(f"expected {len(self.plan)} tensor inputs, got {len(args)}")
        got = self.exe.run(feeds_for(self.plan, args))
        outs = tuple(from_numpy(got[n]) for n in self.exe.output_names)
        return outs[0] if len(outs) == 1 else outs


def compile_exported(ep, backend: str | None = None, **kw) -> ExportedCall:
    """`glow.compile(ep, backend, **kw)`, wrapped to take and return torch tensors."""
    import glow

    graph = import_exported(ep)
    return ExportedCall(glow.compile(graph, backend, **kw), graph)

