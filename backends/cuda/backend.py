"""The CUDA backend: kernels rendered by the shared C-style renderer, run through CuPy.

Every CUDA device is a device of the backend (`cuda:0`, ...). Without CuPy, without a driver or
without a device the backend is unavailable with the reason. Rendering needs no device: the CUDA
source of any model can be produced (and compiled to PTX with nvcc) anywhere; see
`render_cuda_program` and tests/test_cuda.py.
"""

from __future__ import annotations

import functools
import importlib.util

from glow import BackendError, Device
from glow.backend import BACKEND_API
from glow.render.backend import CStyleBackend, LazyRenderer


def _renderer():
    from .dialect import CUDARenderer

    return CUDARenderer()


@functools.lru_cache(maxsize=1)
def _discover():
    try:
        import cupy as cp
    except ImportError as e:
        raise BackendError(f"cupy is not installed ({e}); pip install 'glow-compiler[cuda]' "
                           "(a cupy-cuda12x / cupy-cuda13x wheel matching the driver)") from None
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - CUDARuntimeError (no driver, insufficient driver)
        raise BackendError(f"no usable CUDA driver ({type(e).__name__}: {e})") from None
    if n == 0:
        raise BackendError("CUDA driver present, but no CUDA device")
    from .runtime import CudaDevice

    return cp, [CudaDevice(cp, i) for i in range(n)]


class CudaBackend(CStyleBackend):
    name = "cuda"
    api_version = BACKEND_API
    priority = 20  # the default wherever a GPU works: the fastest device there is (core/backend.py)
    description = "CUDA C++ kernels (shared C-style renderer) through CuPy RawModule"
    renderer = LazyRenderer(_renderer)  # the dialect, made on first use

    def check_available(self) -> None:
        # Cheap: is CuPy installed? The driver and devices are probed by devices(), when first
        # needed (importing CuPy and starting CUDA take a second or more).
        if importlib.util.find_spec("cupy") is None:
            raise BackendError("cupy is not installed; pip install 'glow-compiler[cuda]' "
                               "(a cupy-cuda12x / cupy-cuda13x wheel matching the driver)")

    def devices(self) -> list[Device]:
        out = []
        for dev in _discover()[1]:
            p = dev.props
            sms, clock = int(p["multiProcessorCount"]), int(p.get("clockRate", 1_500_000)) / 1e6
            bus = int(p.get("memoryBusWidth", 4096)) / 8 * int(p.get("memoryClockRate", 2_000_000)) * 2 / 1e6
            out.append(Device(self.name, str(dev.index), kind="gpu", memory_bytes=int(p["totalGlobalMem"]),
                              peak_gflops=round(sms * 128 * 2 * clock, 1), mem_bandwidth_gbs=round(bus, 1),
                              transfer_gbs=25.0, extra={"device": dev.name, "sms": sms,
                                                        "cc": f"{p['major']}.{p['minor']}"}))
        return out

    def _dev(self, device: Device):
        devs = _discover()[1]
        try:
            return devs[int(device.name)]
        except (ValueError, IndexError):
            raise BackendError(f"no CUDA device '{device.name}' (have {len(devs)})") from None

    def device_params(self, device: Device):
        return self._dev(device).params()

    def make_executable(self, graph, compiled, device):
        from .runtime import CudaExecutable

        return CudaExecutable(graph, compiled, self._dev(device))

    def to_device(self, array, device: Device):
        cp = _discover()[0]
        with cp.cuda.Device(self._dev(device).index):
            return cp.asarray(array)

    def to_host(self, handle, device: Device):
        import numpy as np

        return handle.get() if hasattr(handle, "get") else np.asarray(handle)


def render_cuda_program(graph, native: str | None = None, params=None):
    """The CUDA program (glow.render.Program) of a static graph, without any device: the graph
    is optimised, lowered and fused for this backend, then rendered for `params` (default: a
    generic GPU)."""
    from glow.flow import optimize_for_backend
    from glow.render import GPU

    be = CudaBackend()
    g = optimize_for_backend(graph, be, native)
    return be.compile_graph(g, params or GPU).program
