"""Latency benchmarks: glow and onnxruntime interleaved in one process, medians over rounds.

Machines here are noisy, so glow and the peer are measured side by side: each round times one
run of each, alternating which goes first, and the report gives medians with min-max and the
ratio of medians (glow / peer; below 1 is faster than the peer). Before each timed run the same
runtime runs untimed for at least SETTLE_S, so neither is timed while the other's idle threads
still hold a core (onnxruntime's spin after each run).

Every timed run gets fresh input values (`make_inputs` with a new seed per round, drawn before the
timer starts; glow and the peer get the same ones in a round), never the values of an earlier
run: a repeated input could hit a cached specialisation or result and time nothing. The outputs
of every timed run are compared with the peer's (`max_abs_diff`).
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
    from .inputs import make_inputs
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
    out = exe.run(feeds)  # untimed: a first run may compile (specialising executables)
    diff = None if peer is None else _max_diff(graph, out, peer.run(None, feeds))
    for _ in range(warmup):  # warm-up and settling runs use the seed-0 inputs; timed runs never do
        exe.run(feeds)
        if peer is not None:
            peer.run(None, feeds)
    runners = [lambda f: exe.run(f)] + ([lambda f: peer.run(None, f)] if peer is not None else [])
    times: list[list[float]] = [[] for _ in runners]
    from .progress import bar

    rounds_bar = bar(rounds, f"bench {name}", unit="round")  # drawn only on a terminal
    for i in range(rounds):
        rounds_bar.update(1)
        fresh = make_inputs(graph, seed=1 + i)  # this round's values, drawn before any timer starts
        outs = [None] * len(runners)
        order = range(len(runners)) if i % 2 == 0 else reversed(range(len(runners)))
        for who in order:
            if len(runners) > 1:
                _settle(runners[who], feeds)
            t = time.perf_counter()
            outs[who] = runners[who](fresh)
            times[who].append(time.perf_counter() - t)
        if peer is not None:
            diff = max(diff, _max_diff(graph, *outs))
    rounds_bar.close()
    g_times, p_times = times[0], times[1] if peer is not None else []
    return BenchResult(name, be_name, threads, rounds, compile_s, Timing.of(g_times),
                       Timing.of(p_times) if p_times else None, vs if peer is not None else None, diff)


def _max_diff(graph, out: dict, ref: list) -> float:
    """The largest |glow - peer| over every output (glow's by name, the peer's in graph order)."""
    return max((float(np.max(np.abs(np.asarray(out[o.name], np.float64) - r))) if np.size(r) else 0.0
                for o, r in zip(graph.outputs, ref)), default=0.0)


#: Untimed runs after switching runtimes last at least this long: onnxruntime's idle workers spin
#: for tens of milliseconds after a run (`allow_spinning`), holding a core the next runtime's
#: threads need; glow's sleep. Timing the first run after a switch would charge one runtime for
#: the other's spinning.
SETTLE_S = 0.05


def _settle(run, feeds) -> None:
    t0 = time.perf_counter()
    run(feeds)
    while time.perf_counter() - t0 < SETTLE_S:
        run(feeds)


def format_result(r: BenchResult) -> str:
    g = r.glow
    line = (f"{r.model}: glow[{r.backend}, {r.threads}T] {g.median_ms:.3f} ms "
            f"(min {g.min_ms:.3f}, max {g.max_ms:.3f}), compile {r.compile_s:.2f} s")
    if r.peer is not None:
        p = r.peer
        line += (f"; {r.peer_name} {p.median_ms:.3f} ms (min {p.min_ms:.3f}, max {p.max_ms:.3f}); "
                 f"ratio {r.ratio:.2f}; max |diff| {r.max_abs_diff:.2e}")
    return line
