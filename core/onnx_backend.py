"""An `onnx.backend.base.Backend`, so ONNX's own backend-test machinery can drive glow.

    import glow.onnx_backend as gb
    rep = gb.prepare(model)                  # the default backend (glow.plugins.registry().default())
    rep = gb.prepare(model, "CUDA")          # an ONNX device: "CPU" -> cpu, "CUDA" -> cuda ("CUDA:1")
    rep = gb.prepare(model, backend="reference")   # or a glow backend by name
    outputs = rep.run([x])                   # a list, in graph-output order
"""

from __future__ import annotations

import re

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

from . import api
from .errors import BackendError, InputError
from .plugins import registry

#: ONNX's device types (onnx.backend.base.DeviceType) and the glow backend that runs each.
DEVICE_BACKENDS = {"CPU": "cpu", "CUDA": "cuda"}
#: The Device.kind a backend named with `backend=` must have to run on an ONNX device type.
DEVICE_KINDS = {"CPU": "cpu", "CUDA": "gpu"}


def parse_device(device: str) -> tuple[str, int]:
    """ "CPU", "cuda", "CUDA:1" -> (type in upper case, index); BackendError for anything else."""
    m = re.fullmatch(r"\s*([A-Za-z]+)\s*(?::\s*(\d+)\s*)?", device) if isinstance(device, str) else None
    if m is None or m.group(1).upper() not in DEVICE_BACKENDS:
        known = ", ".join(DEVICE_BACKENDS)
        raise BackendError(f"unknown ONNX device {device!r} (expected one of {known}, optionally "
                           "with ':index', e.g. 'CUDA:1')")
    return m.group(1).upper(), int(m.group(2) or 0)


def resolve(device: str | None = None, backend: str | None = None):
    """The glow backend and the Device of it that `device` / `backend` name (Device None: the
    backend's first). No device and no backend: the registry's default backend. Raises
    BackendError for an unknown device, an unavailable backend, a missing device index, or a
    backend whose devices are not of the device's kind."""
    reg = registry()
    if device is None:
        return (reg.get(backend) if backend else reg.default()), None
    kind, index = parse_device(device)
    be = reg.get(backend or DEVICE_BACKENDS[kind])  # unknown/unavailable: BackendError with the reason
    devs = reg.records[be.name].devices
    if backend and not any(d.kind == DEVICE_KINDS[kind] for d in devs):
        raise BackendError(f"backend '{be.name}' has no {kind} device (its devices: "
                           f"{', '.join(f'{d.id} ({d.kind})' for d in devs)})")
    if index >= len(devs):
        raise BackendError(f"device {kind}:{index}: backend '{be.name}' has {len(devs)} device(s) "
                           f"({', '.join(d.id for d in devs)})")
    return be, (None if index == 0 else devs[index])


class GlowRep(BackendRep):
    def __init__(self, exe, model=None):
        self.exe = exe
        # The compiled graph's names (initializers are not inputs): right for a ModelProto, a
        # path or a glow Graph alike.
        self.input_names = list(exe.input_names)
        self.output_names = list(exe.output_names)

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
    def prepare(cls, model, device: str | None = None, backend: str | None = None, **kwargs) -> GlowRep:
        """Compile `model` for an ONNX `device` ("CPU", "CUDA", "CUDA:1"; case-insensitive) or a
        glow `backend` by name; neither: the default backend. Other kwargs go to glow.compile."""
        be, dev = resolve(device, backend)
        if dev is None:
            exe = api.compile(model, backend=be.name, **kwargs)
        else:  # a device other than the backend's first: a one-device placement pins it
            exe = api.compile(model, devices=[dev], **kwargs)
        return GlowRep(exe)

    @classmethod
    def run_model(cls, model, inputs, device: str | None = None, **kwargs):
        """`prepare(model, device, **kwargs).run(inputs)`: the outputs, in graph-output order."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str | None = None, outputs_info=None, **kwargs):
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
        """Whether `device` names an available backend's device here (what prepare would accept)."""
        try:
            resolve(device)
        except BackendError:
            return False
        return True


prepare = GlowBackend.prepare
run_model = GlowBackend.run_model
run_node = GlowBackend.run_node
supports_device = GlowBackend.supports_device
