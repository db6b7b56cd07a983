"""Device parameters: what the renderer needs to know about the device to shape its kernels.

A backend fills these from its device's properties (OpenCL device info, CUDA device attributes);
kernel templates read them to pick a variant and its block sizes. The defaults describe a
generic GPU, so rendering without a device (golden tests, nvcc compile checks) is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceParams:
    kind: str = "gpu"  # "cpu" | "gpu": CPU devices get vectorised, register-blocked kernels
    compute_units: int = 132
    max_local: int = 1024  # largest work-group
    local_mem: int = 48 * 1024  # bytes of work-group shared memory
    simd: int = 32  # warp / wavefront / preferred float vector width
    #: work-group size of flat elementwise-style kernels
    flat_local: int = 256

    @property
    def cpu(self) -> bool:
        return self.kind == "cpu"


#: A generic GPU (what the CUDA compile checks and golden tests render for).
GPU = DeviceParams()
#: A generic CPU OpenCL device (what PoCL reports on the CI machine).
CPU = DeviceParams(kind="cpu", compute_units=2, max_local=4096, local_mem=4 << 20, simd=16,
                   flat_local=64)
