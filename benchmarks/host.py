"""The machine a benchmark ran on, as every report names it: the CPU's model name and LLVM's."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else what platform knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_results(name: str, data: dict) -> str:
    """Write `data` to benchmarks/results-NAME.json (next to this file); returns the path."""
    import json
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"results-{name}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return path
