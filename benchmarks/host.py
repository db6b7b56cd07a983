"""What the benchmarks share: the machine they ran on (as every report names it), onnxruntime on a
set number of threads, and glow and onnxruntime timed in turns on the same fresh inputs."""

from __future__ import annotations

import platform
import statistics
import time


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


def ort_session(model, threads: int = 1):
    """onnxruntime's CPU provider on `threads` threads, for a model (a path or its bytes)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), so,
                                providers=["CPUExecutionProvider"])


def interleaved(exe, sess, make_feeds, rounds: int, calls: int):
    """(glow seconds, onnxruntime seconds): medians over `rounds` of each round's median call.
    Every call gets `make_feeds()`, drawn before the timer and fed to both, which alternate which
    runs first. Also the last outputs of each, (glow's dict, onnxruntime's list)."""
    glow_r, ort_r, last = [], [], [None, None]
    for r in range(rounds):
        g, o = [], []
        for c in range(calls):
            feeds = make_feeds()
            for first in ((0, 1) if (r + c) % 2 == 0 else (1, 0)):
                t = time.perf_counter()
                if first == 0:
                    last[0] = exe.run(feeds)
                    g.append(time.perf_counter() - t)
                else:
                    last[1] = sess.run(None, feeds)
                    o.append(time.perf_counter() - t)
        glow_r.append(statistics.median(g))
        ort_r.append(statistics.median(o))
    return statistics.median(glow_r), statistics.median(ort_r), tuple(last)
