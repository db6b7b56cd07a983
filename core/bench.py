"""Latency benchmarks: glow and onnxruntime interleaved in one process, medians over rounds.

Machines here are noisy, so glow and the peer are measured side by side: each round times one
run of each, alternating which goes first, and the report gives medians with min-max and the
ratio of medians (glow / peer; below 1 is faster than the peer). Before each timed run the same
runtime runs untimed for at least SETTLE_S, so neither is timed while the other's idle threads
still hold a core (onnxruntime's spin after each run).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import GlowError


def resolve_model(spec: str):
    """A path, a light model name ('resnet50' or 'light_resnet50') or a generated one ('mlp')."""
    from .testing.bench_models import GENERATED
    from .testing.models import DATA

    if os.path.exists(spec):
        return spec, os.path.splitext(os.path.basename(spec))[0]
    if spec in GENERATED:
        return GENERATED[spec](), spec
    name = spec if spec.startswith("light_") else f"light_{spec}"
    path = os.path.join(DATA, "light", f"{name}.onnx")
    if os.path.exists(path):
        return path, name
    raise GlowError(f"no model '{spec}': not a file, a light model name or one of {sorted(GENERATED)}")


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float

    @staticmethod
    def of(samples: list[float]) -> Timing:
        ms = [s * 1e3 for s in samples]
        return Timing(statistics.median(ms), min(ms), max(ms))


@dataclass
class BenchResult:
    model: str
    backend: str
    threads: int
    rounds: int
    compile_s: float
    glow: Timing
    peer: Timing | None = None
    peer_name: str | None = None
    max_abs_diff: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        return None if self.peer is None else self.glow.median_ms / self.peer.median_ms

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        return d


def _onnxruntime_session(model, threads: int):
    try:
        import onnxruntime as ort
    except ImportError:
        raise GlowError("--vs onnxruntime needs the onnxruntime package (pip install onnxruntime)") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else open(model, "rb").read()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def bench(spec: str, backend: str | None = None, threads: int = 1, rounds: int = 20,
          warmup: int = 3, vs: str | None = "onnxruntime", native: str | None = None) -> BenchResult:
    from . import api
    from .cli import make_inputs
    from .onnx_import import load_onnx

    model, name = resolve_model(spec)
    graph = load_onnx(model)
    feeds = make_inputs(graph, seed=0)
    t0 = time.perf_counter()
    exe = api.compile(graph, backend=backend, native=native, threads=threads)
    compile_s = time.perf_counter() - t0
    be_name = backend or api.registry().default().name
    peer = _onnxruntime_session(model, threads) if vs == "onnxruntime" else None
    if vs not in (None, "onnxruntime"):
        raise GlowError(f"unknown peer '{vs}' (only 'onnxruntime')")
    out = exe.run(feeds)
    diff = None
    if peer is not None:
        ref = peer.run(None, feeds)
        diff = max(float(np.max(np.abs(np.asarray(out[o.name], np.float64) - r))) if np.size(r) else 0.0
                   for o, r in zip(graph.outputs, ref))
    for _ in range(warmup):
        exe.run(feeds)
        if peer is not None:
            peer.run(None, feeds)
    runners = [lambda: exe.run(feeds)] + ([lambda: peer.run(None, feeds)] if peer is not None else [])
    times: list[list[float]] = [[] for _ in runners]
    from .progress import bar

    rounds_bar = bar(rounds, f"bench {name}", unit="round")  # drawn only on a terminal
    for i in range(rounds):
        rounds_bar.update(1)
        order = range(len(runners)) if i % 2 == 0 else reversed(range(len(runners)))
        for who in order:
            if len(runners) > 1:
                _settle(runners[who])
            t = time.perf_counter()
            runners[who]()
            times[who].append(time.perf_counter() - t)
    rounds_bar.close()
    g_times, p_times = times[0], times[1] if peer is not None else []
    return BenchResult(name, be_name, threads, rounds, compile_s, Timing.of(g_times),
                       Timing.of(p_times) if p_times else None, vs if peer is not None else None, diff)


#: Untimed runs after switching runtimes last at least this long: onnxruntime's idle workers spin
#: for tens of milliseconds after a run (`allow_spinning`), holding a core the next runtime's
#: threads need; glow's sleep. Timing the first run after a switch would charge one runtime for
#: the other's spinning.
SETTLE_S = 0.05


def _settle(run) -> None:
    t0 = time.perf_counter()
    run()
    while time.perf_counter() - t0 < SETTLE_S:
        run()


def format_result(r: BenchResult) -> str:
    g = r.glow
    line = (f"{r.model}: glow[{r.backend}, {r.threads}T] {g.median_ms:.3f} ms "
            f"(min {g.min_ms:.3f}, max {g.max_ms:.3f}), compile {r.compile_s:.2f} s")
    if r.peer is not None:
        p = r.peer
        line += (f"; {r.peer_name} {p.median_ms:.3f} ms (min {p.min_ms:.3f}, max {p.max_ms:.3f}); "
                 f"ratio {r.ratio:.2f}; max |diff| {r.max_abs_diff:.2e}")
    return line
