"""Measuring a ray device's link: what its `latency_us` and `transfer_gbs` should say.

    from glow.backends.ray.link import measure_link
    print(measure_link("ray:cpu/node_a"))      # {'latency_us': 410.0, 'transfer_gbs': 1.9, ...}

A bare actor on the device's node echoes tensors of two sizes; a round trip takes two legs of
latency and bytes / bandwidth each, so the two medians give both figures. Put them in the
device's plugins.toml entry, or set `measure_link = true` there to measure it each time the
device is resolved (an actor starts on the node for it: a second or two).
"""

from __future__ import annotations

import time

import numpy as np


def measure_link(device, *, small: int = 1 << 10, large: int = 8 << 20, rounds: int = 7) -> dict:
    """Median round trips of `small` and `large` bytes to an actor of `device` (a spec such as
    "ray:cpu/node_a" or a logical device's name), as one leg's latency and bandwidth."""
    from glow.errors import GlowError
    from glow.partition.devices import resolve_devices

    target = resolve_devices([device])[0]
    if not target.backend.compiles_remotely:
        raise GlowError(f"'{device}' is not a ray device")
    return measure(target.device, target.name, small=small, large=large, rounds=rounds)


def measure(device, label: str, *, small: int = 1 << 10, large: int = 8 << 20, rounds: int = 7) -> dict:
    """`measure_link` of a ray Device (what `measure_link = true` in its plugins.toml entry runs)."""
    from .server import START_TIMEOUT_S, RemoteDeviceError, actor_class, ensure_ray, unplaceable

    ray = ensure_ray()
    ex = device.extra
    need = {**(ex.get("resources") or {}), "CPU": ex.get("num_cpus", 1)}
    why = unplaceable(need)
    if why:
        raise RemoteDeviceError(f"ray device '{label}': cannot measure its link: {why}")
    actor = actor_class().options(num_cpus=need["CPU"], resources=ex.get("resources") or None,
                                  max_restarts=0).remote(label, ex["remote_backend"], 1, True)
    try:
        try:
            ray.get(actor.echo.remote(np.zeros(1, np.uint8)), timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise RemoteDeviceError(f"ray device '{label}': cannot measure its link: its actor did not start "
                                    f"within {START_TIMEOUT_S:g} s (the nodes that offer it are busy?)") from None

        def trip(nbytes: int) -> float:
            times = []
            for _ in range(rounds):
                x = np.random.default_rng().integers(0, 255, nbytes, dtype=np.uint8)  # fresh values each time
                t0 = time.perf_counter()
                ray.get(actor.echo.remote(x), timeout=60)
                times.append(time.perf_counter() - t0)
            return float(np.median(times))

        t_small, t_large = trip(small), trip(large)
    finally:
        ray.kill(actor)
    per_byte = max(t_large - t_small, 1e-9) / (2 * (large - small))
    latency = max(t_small / 2 - small * per_byte, 0.0)
    return {"device": label, "latency_us": latency * 1e6, "transfer_gbs": 1e-9 / per_byte,
            "round_trip_small_ms": t_small * 1e3, "round_trip_large_ms": t_large * 1e3}
