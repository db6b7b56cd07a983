"""The OpenCL backend: kernels rendered by the shared C-style renderer, run through PyOpenCL.

Every OpenCL device found is a device of the backend (`opencl:0`, `opencl:1`, ...); with no
platform or no device the backend is unavailable and says why. On a CPU device (PoCL in CI) the
renderer emits CPU-shaped kernels (float16 vectors, register blocking); on a GPU, tiled ones.
"""

from __future__ import annotations

import functools
import importlib.util

from glow import BackendError, Device
from glow.backend import BACKEND_API
from glow.render.backend import CStyleBackend, LazyRenderer


def _renderer():
    from .dialect import OpenCLRenderer

    return OpenCLRenderer()


@functools.lru_cache(maxsize=1)
def _discover():
    """(pyopencl module, [ClDevice]) or raises BackendError with the reason."""
    try:
        import pyopencl as cl
    except ImportError as e:
        raise BackendError(f"pyopencl is not installed ({e}); pip install 'glow-compiler[opencl]'") from None
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # noqa: BLE001 - pyopencl raises LogicError/RuntimeError variants
        raise BackendError(f"no OpenCL platform ({type(e).__name__}: {e}); on Debian/Ubuntu "
                           "`apt-get install pocl-opencl-icd` gives a CPU device") from None
    from .runtime import ClDevice

    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise BackendError(f"OpenCL platform(s) {[p.name for p in platforms]} expose no device")
    return cl, [ClDevice(cl, d, i) for i, d in enumerate(devices)]


def _figures(dev) -> dict:
    """Rough peak figures for the partitioner's cost model, from the device's properties."""
    d = dev.device
    lanes = max(d.preferred_vector_width_float, 1) if dev.is_cpu else 64
    ghz = max(d.max_clock_frequency, 1000) / 1000.0
    return {"peak_gflops": round(d.max_compute_units * lanes * 2 * ghz, 1),
            "mem_bandwidth_gbs": 20.0 if dev.is_cpu else 300.0,
            "transfer_gbs": 10.0}


class OpenCLBackend(CStyleBackend):
    name = "opencl"
    api_version = BACKEND_API
    priority = 5  # below cpu: through PoCL (most machines) a slower CPU path; name it for a GPU
    description = "OpenCL C kernels (shared C-style renderer) through PyOpenCL"
    renderer = LazyRenderer(_renderer)  # the dialect, made on first use

    def check_available(self) -> None:
        # Cheap: is pyopencl installed? The platform itself is probed by devices(), when first
        # needed (its initialisation takes most of a second).
        if importlib.util.find_spec("pyopencl") is None:
            raise BackendError("pyopencl is not installed; pip install 'glow-compiler[opencl]'")

    def _cl_devices(self):
        return _discover()[1]

    def devices(self) -> list[Device]:
        out = []
        for dev in self._cl_devices():
            d = dev.device
            out.append(Device(self.name, str(dev.index), kind="cpu" if dev.is_cpu else "gpu",
                              memory_bytes=int(d.global_mem_size), **_figures(dev),
                              extra={"device": d.name.strip(), "platform": d.platform.name.strip(),
                                     "compute_units": d.max_compute_units}))
        return out

    def _cl_device(self, device: Device):
        devs = self._cl_devices()
        try:
            return devs[int(device.name)]
        except (ValueError, IndexError):
            raise BackendError(f"no OpenCL device '{device.name}' (have {len(devs)})") from None

    def warm_up(self, device: Device | None) -> None:
        try:
            dev = self._cl_devices()[0] if device is None else self._cl_device(device)
        except BackendError:  # said by compile, with the reason
            return
        dev.warm_up()

    def device_params(self, device: Device):
        return self._cl_device(device).params()

    def make_executable(self, graph, compiled, device):
        from . import build_helper
        from .runtime import ClExecutable

        build_helper.enabled()  # a bad $GLOW_OPENCL_HELPER is a one-line error, not ignored

        return ClExecutable(graph, compiled, self._cl_device(device))

    # Transfers for the partitioner's runtime: device arrays (pyopencl.array.Array).
    def to_device(self, array, device: Device):
        import numpy as np
        import pyopencl.array as cla

        return cla.to_device(self._cl_device(device).queue, np.ascontiguousarray(array))

    def to_host(self, handle, device: Device):
        import numpy as np

        return handle.get() if hasattr(handle, "get") else np.asarray(handle)
