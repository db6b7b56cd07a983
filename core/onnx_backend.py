"""An `onnx.backend.base.Backend`, so ONNX's own backend-test machinery can drive glow.

    import glow.onnx_backend as gb
    rep = gb.prepare(model, backend="reference")
    outputs = rep.run([x])           # a list, in graph-output order
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from . import api
from .errors import InputError


class GlowRep(BackendRep):
    def __init__(self, exe, model: onnx.ModelProto):
        self.exe = exe
        init = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in init]
        self.output_names = [o.name for o in model.graph.output]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            if len(inputs) > len(self.input_names):
                raise InputError(f"{len(inputs)} inputs given, the model takes {len(self.input_names)}")
            feeds = dict(zip(self.input_names, inputs))
        feeds = {k: (np.asarray(v) if not isinstance(v, (list, type(None))) else v) for k, v in feeds.items()}
        outs = self.exe.run(feeds)
        return namedtupledict("Outputs", self.output_names)(*[outs[n] for n in self.output_names])


class GlowBackend(Backend):
    @classmethod
    def prepare(cls, model, device: str = "CPU", backend: str | None = None, **kwargs) -> GlowRep:
        return GlowRep(api.compile(model, backend=backend or "reference"), model)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run a single NodeProto on `inputs` (a list of arrays, in the node's input order)."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info)
        from onnx import helper

        names = [n for n in node.input if n]
        arrays = [np.asarray(x) for x in inputs]
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(names, arrays)]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        opset = kwargs.pop("opset_version", None)
        graph = helper.make_graph([node], "node", vis, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] if opset else None)
        return cls.prepare(model, device, **kwargs).run(dict(zip(names, arrays)))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


prepare = GlowBackend.prepare
run_model = GlowBackend.run_model
run_node = GlowBackend.run_node
supports_device = GlowBackend.supports_device
