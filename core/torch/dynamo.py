"""The `torch.compile` backend: `torch.compile(model, backend="glow", options={...})`.

    dynamo FX graph (torch-level)
      -> AOT autograd: ATen graph (functional; parameters and buffers are its first inputs)
      -> split by what glow imports (CapabilityBasedPartitioner, asking Importer.check per node)
      -> each supported piece imported and compiled by glow (the flow ONNX graphs take)
      -> the rest stays eager ATen in the same FX module

Options: `backend` (a glow backend name, default glow's default), `threads`, `devices` (a
multi-device placement, glow.partition), `strict` (raise instead of leaving unsupported ops
eager). Graph breaks are dynamo's business: each graph it hands over is compiled on its own.

Parameters and buffers are read once, at compile time, and baked into glow's graph as constants
over the tensors' own memory (inductor's `freezing`, for inference): a model whose weights change
after compiling must be compiled again (`torch._dynamo.reset()`).
"""

from __future__ import annotations

import threading

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..errors import GlowError, InputError
from .importer import Importer, import_graph_module, meta_val
from .table import ATEN, target_key

OPTIONS = ("backend", "threads", "devices", "strict")

#: Pure data movement: a partition of nothing else is left to torch (it would only add a call).
_MOVEMENT = ("view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "unsqueeze", "squeeze",
             "slice", "select", "clone", "alias", "detach", "_to_copy", "sym_size")
NON_COMPUTE = [f"torch.ops.aten.{op}.{ov}" for op in _MOVEMENT
               for ov in ("default", "int", "Tensor", "dim", "dims")] + ["_operator.getitem"]

#: Ops worth a glow call even alone between nodes torch runs (matrix products, convolution, attention).
HEAVY = [f"torch.ops.aten.{op}.default" for op in ("convolution", "mm", "bmm", "addmm", "baddbmm",
                                                   "_scaled_dot_product_flash_attention_for_cpu",
                                                   "scaled_dot_product_attention")]

#: What the last compiles did, per FX graph (glow.torch.explain reads it): a list of reports.
_reports = threading.local()
#: Counts, for tests and the curious: glow compiles run, partitions left eager after a failure.
stats = {"glow_compiles": 0, "partitions_failed": 0}


def _check_options(options) -> dict:
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise InputError(f"torch.compile(backend='glow'): unknown option '{unknown[0]}' "
                         f"(options: {', '.join(OPTIONS)})")
    return opts


class _Support(OperatorSupportBase):
    def __init__(self):
        self.why: dict = {}  # node -> reason it stays eager
        self.sizes: set = set()  # nodes computing sizes (SymInts): torch's, and no loss to glow

    def is_node_supported(self, submodules, node) -> bool:
        if not isinstance(meta_val(node), (torch.Tensor, tuple, list)):
            self.sizes.add(node.name)
            return False
        reason = Importer.check(node)
        if reason is not None:
            self.why[node] = reason
        return reason is None


def _decompositions():
    """Core ATen decompositions of the ops glow has no rule for (those with a rule stay whole:
    one LayerNormalization node beats its decomposition)."""
    from torch._decomp import core_aten_decompositions

    return {op: fn for op, fn in core_aten_decompositions().items() if target_key(op) not in ATEN}


def backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    """The dynamo backend (entry point `torch_dynamo_backends: glow`)."""
    from torch._dynamo.backends.common import aot_autograd

    opts = _check_options(options)
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    lifted = list(dict(gm.named_parameters(remove_duplicate=False)).values()) + \
        list(dict(gm.named_buffers(remove_duplicate=False)).values())
    weights = [True] * len(lifted) + [_is_weight(n, x) for n, x in zip(places, example_inputs)]
    real = lifted + list(example_inputs)

    def fw_compiler(fw_gm, fake_inputs):
        fw_places = [n for n in fw_gm.graph.nodes if n.op == "placeholder"]
        constants = {}
        if len(fw_places) == len(real):  # AOT keeps the inputs in order; otherwise fold nothing
            constants = {p.name: t for p, t, w in zip(fw_places, real, weights)
                         if w and isinstance(t, torch.Tensor) and _fits(p, t)}
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # AOT calls us inside its fake mode; weights are real
            return split_and_compile(fw_gm, constants, opts)

    # the backward graph (a model called with gradients on) stays in torch: glow compiles inference
    return aot_autograd(fw_compiler=fw_compiler, bw_compiler=_eager, decompositions=_decompositions)(gm, example_inputs)


def _eager(gm, example_inputs):
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm)


def _is_weight(node, x) -> bool:
    """A parameter or buffer of the model (dynamo marks those of inlined modules as static)."""
    if isinstance(x, torch.nn.Parameter):
        return True
    return bool(node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type"))


def _fits(place, t) -> bool:
    val = meta_val(place)
    return isinstance(val, torch.Tensor) and tuple(val.shape) == tuple(t.shape) and val.dtype == t.dtype


def split_and_compile(gm: torch.fx.GraphModule, constants: dict, opts: dict) -> torch.fx.GraphModule:
    """`gm` with every piece glow imports replaced by a glow executable; the rest eager."""
    import glow

    from .runtime import GlowCall

    support = _Support()
    parter = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=False,
                                        non_compute_ops=NON_COMPUTE, allowed_single_node_partition_ops=HEAVY)
    parts = parter.propose_partitions()
    report = {"nodes": [(n.name, _op_label(n)) for n in gm.graph.nodes if n.op == "call_function"],
              "eager": {n.name: why for n, why in support.why.items()}, "sizes": support.sizes,
              "glow": {}, "failed": {}}
    fused = parter.fuse_partitions(parts) if parts else gm
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        names = [n.name for n in sub.graph.nodes if n.op == "call_function"]
        sub_consts = _constants_of(sub, node, constants)
        try:
            graph, plan = import_graph_module(sub, node.target, sub_consts)
            stats["glow_compiles"] += 1
            exe = glow.compile(graph, opts.get("backend"), threads=opts.get("threads"),
                               devices=opts.get("devices"), strict=bool(opts.get("strict")))
        except Exception as e:  # glow's refusal or a glow bug: this piece stays eager either way
            if opts.get("strict"):
                raise
            stats["partitions_failed"] += 1
            why = str(e) if isinstance(e, GlowError) else f"glow bug: {type(e).__name__}: {e}"
            report["failed"].update({n: why for n in names})
            continue
        out = next(n for n in sub.graph.nodes if n.op == "output")
        setattr(fused, node.target, GlowCall(exe, plan, sub, isinstance(out.args[0], (tuple, list)), node.target))
        report["glow"].update({n: node.target for n in names})
    if opts.get("strict") and report["eager"]:
        name, why = next(iter(report["eager"].items()))
        raise GlowError(f"torch.compile(backend='glow', strict): node '{name}' stays eager: {why}")
    _record(report)
    fused.recompile()
    return fused


def _op_label(n) -> str:
    from .importer import _op_name

    return _op_name(target_key(n.target))


def _constants_of(sub, call, constants: dict) -> dict:
    """The submodule's placeholders that stand for weights, by the parent argument they receive."""
    out = {}
    sub_places = [n for n in sub.graph.nodes if n.op == "placeholder"]
    for p, arg in zip(sub_places, call.args):
        if isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and arg.name in constants:
            out[p.name] = constants[arg.name]
    return out


def _record(report):
    if getattr(_reports, "list", None) is not None:
        _reports.list.append(report)


class recording:
    """`with recording() as reports:` collects the report of every graph compiled inside."""

    def __enter__(self):
        self.prev = getattr(_reports, "list", None)
        _reports.list = []
        return _reports.list

    def __exit__(self, *exc):
        _reports.list = self.prev
