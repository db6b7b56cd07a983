"""Latency benchmarks: glow and its peers (onnxruntime, OpenVINO) interleaved in one process,
medians over rounds.

Machines here are noisy, so glow and the peers are measured side by side: each round times one
run of each, rotating which goes first, and the report gives medians with min-max and the ratio
of medians (glow / peer; below 1 is faster than the peer). Before each timed run the same runtime
runs untimed for at least SETTLE_S, so none is timed while another's idle threads still hold a
core (onnxruntime's spin after each run, OpenVINO's TBB workers).

Every timed run gets fresh input values (`make_inputs` with a new seed per round, drawn before the
timer starts; every runtime gets the same ones in a round), never the values of an earlier run: a
repeated input could hit a cached specialisation or result and time nothing. The outputs of every
timed run are compared with the first peer's (`max_abs_diff`).

Busy threads: the process's CPU time over the wall time of the second half of each settling
window (untimed runs of the same runtime) and the timed run after it (median over rounds), per
runtime. Not of the timed run alone: Linux adds a running thread's CPU time to the process's at
scheduler ticks (milliseconds apart), so a 2-thread run of 1.5 ms whose second thread never left
its core read 1.0, where 0.5 s of the same runs read 1.9. It checks that `threads=T` keeps T
threads working; a spinning idle thread counts as busy, so it is a check, not a claim of useful
work.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import GlowError, InputError

#: The peers `bench` knows, in the order reports list them.
PEERS = ("onnxruntime", "openvino")


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
    busy_threads: float | None = None

    @staticmethod
    def of(samples: list[float], busy: list[float] | None = None) -> Timing:
        ms = [s * 1e3 for s in samples]
        return Timing(statistics.median(ms), min(ms), max(ms),
                      round(statistics.median(busy), 2) if busy else None)


@dataclass
class BenchResult:
    model: str
    backend: str
    threads: int
    rounds: int
    compile_s: float
    glow: Timing
    peers: dict[str, Timing] = field(default_factory=dict)
    max_abs_diff: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def peer_name(self) -> str | None:
        """The first peer (what `ratio` and `max_abs_diff` compare with)."""
        return next(iter(self.peers), None)

    @property
    def peer(self) -> Timing | None:
        return self.peers.get(self.peer_name) if self.peers else None

    def ratio_to(self, name: str) -> float:
        return self.glow.median_ms / self.peers[name].median_ms

    @property
    def ratio(self) -> float | None:
        return None if self.peer is None else self.ratio_to(self.peer_name)

    @property
    def fastest_peer(self) -> str | None:
        return min(self.peers, key=lambda n: self.peers[n].median_ms) if self.peers else None

    @property
    def ratio_fastest(self) -> float | None:
        """glow / the fastest peer's median (the issue-15 figure: below 1 beats every peer)."""
        return None if not self.peers else self.ratio_to(self.fastest_peer)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(peer_name=self.peer_name, ratio=self.ratio, fastest_peer=self.fastest_peer,
                 ratio_fastest=self.ratio_fastest, ratios={n: self.ratio_to(n) for n in self.peers})
        return d


def _model_bytes(model) -> bytes:
    return model.SerializeToString() if hasattr(model, "SerializeToString") else open(model, "rb").read()


def _onnxruntime(model, threads: int, reduced: bool = False):
    """A runner `feeds -> [outputs in graph order]` on onnxruntime's CPU provider (float32 whatever
    `reduced` says: it has no reduced precision of its own on CPUs)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise InputError("--vs onnxruntime needs the onnxruntime package (pip install onnxruntime)") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(_model_bytes(model), opts, providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


def _openvino(model, threads: int, reduced: bool = False):
    """A runner on OpenVINO's CPU plugin, in fp32 (its default on some CPUs is bf16, which would
    not be the same computation), one stream of `threads` threads, latency mode; `reduced` (glow
    at precision bf16): at OpenVINO's default precision instead (bf16 on AVX512-BF16 and AMX)."""
    try:
        import openvino as ov
    except ImportError:
        raise InputError("--vs openvino needs the openvino package (pip install 'glow-compiler[bench]')") from None
    core = ov.Core()
    if hasattr(model, "SerializeToString"):  # a generated model: OpenVINO reads ONNX from a file
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.onnx")
            with open(path, "wb") as f:
                f.write(model.SerializeToString())
            ov_model = core.read_model(path)
    else:
        ov_model = core.read_model(model)
    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    compiled = core.compile_model(ov_model, "CPU", config if reduced else {**config, "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def run(feeds):
        request.infer(feeds)  # outputs live in the request's buffers: copy before the next run
        return [np.array(request.get_output_tensor(i).data) for i in range(len(compiled.outputs))]

    return run


_MAKERS = {"onnxruntime": _onnxruntime, "openvino": _openvino}


def peer_names(vs) -> list[str]:
    """`vs` as a list of peers: None/'none' -> [], 'onnxruntime,openvino' or a list -> the names."""
    if vs is None:
        return []
    names = [v.strip() for v in (vs.split(",") if isinstance(vs, str) else vs) if v.strip()]
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in _MAKERS]
    if bad:
        raise InputError(f"unknown peer {bad[0]!r} (known: {', '.join(PEERS)}, or none)")
    return list(dict.fromkeys(names))


def bench(spec: str, backend: str | None = None, threads: int = 1, rounds: int = 20,
          warmup: int = 3, vs="onnxruntime", native: str | None = None, precision: str | None = None) -> BenchResult:
    """`precision` (the cpu backend's option, e.g. "bf16"): glow is timed at it, OpenVINO at its
    default precision, and each round's outputs are compared with glow fp32's on the same inputs
    (`extra["accuracy"]`: per output, the largest error relative to fp32's largest magnitude and
    the smallest cosine)."""
    from . import api
    from .inputs import make_inputs
    from .onnx_import import load_onnx
    from .progress import bar

    names = peer_names(vs)
    model, name = resolve_model(spec)
    graph = load_onnx(model)
    feeds = make_inputs(graph, seed=0)
    t0 = time.perf_counter()
    exe = api.compile(graph, backend=backend, native=native, threads=threads, precision=precision)
    compile_s = time.perf_counter() - t0
    be_name = backend or api.registry().default().name
    reduced = precision not in (None, "fp32")
    exact = api.compile(graph, backend=backend, native=native, threads=threads) if reduced else None
    accuracy: dict = {}
    peers = [_MAKERS[n](model, threads, reduced) for n in names]
    out = exe.run(feeds)  # untimed: a first run may compile (specialising executables)
    diff = _max_diff(graph, out, peers[0](feeds)) if peers else None
    for _ in range(warmup):  # warm-up and settling runs use the seed-0 inputs; timed runs never do
        exe.run(feeds)
        for p in peers:
            p(feeds)
    runners = [exe.run] + peers
    times: list[list[float]] = [[] for _ in runners]
    busy: list[list[float]] = [[] for _ in runners]
    rounds_bar = bar(rounds, f"bench {name}", unit="round")  # drawn only on a terminal
    for i in range(rounds):
        rounds_bar.update(1)
        fresh = make_inputs(graph, seed=1 + i)  # this round's values, drawn before any timer starts
        outs = [None] * len(runners)
        for k in range(len(runners)):  # rotate who goes first, so no runtime always follows another
            who = (i + k) % len(runners)
            since = _settle(runners[who], feeds) if len(runners) > 1 else None
            c, t = time.process_time(), time.perf_counter()
            outs[who] = runners[who](fresh)
            end = time.perf_counter()
            times[who].append(end - t)
            c0, t0 = since or (c, t)
            busy[who].append((time.process_time() - c0) / (end - t0) if end > t0 else 0.0)
        if peers:
            diff = max(diff, _max_diff(graph, *outs[:2]))
        if exact is not None:
            _compare(accuracy, outs[0], exact.run(fresh))
    rounds_bar.close()
    extra = {"precision": precision, "accuracy": accuracy} if reduced else {}
    return BenchResult(name, be_name, threads, rounds, compile_s, Timing.of(times[0], busy[0]),
                       {n: Timing.of(t, b) for n, t, b in zip(names, times[1:], busy[1:])}, diff, extra)


def _compare(acc: dict, out: dict, ref: dict) -> None:
    """Fold one run's outputs into acc[name] = [max error / max |ref|, min cosine] against `ref`."""
    for k, r in ref.items():
        a, r = np.asarray(out[k], np.float64).ravel(), np.asarray(r, np.float64).ravel()
        if not r.size or not np.issubdtype(r.dtype, np.floating):
            continue
        scale = float(np.max(np.abs(r))) or 1.0
        den = float(np.linalg.norm(a) * np.linalg.norm(r))
        cos = float(a @ r / den) if den else float(np.array_equal(a, r))
        err = float(np.max(np.abs(a - r))) / scale
        old = acc.get(k, [0.0, 1.0])
        acc[k] = [max(old[0], err), min(old[1], cos)]


def _max_diff(graph, out: dict, ref: list) -> float:
    """The largest |glow - peer| over every output (glow's by name, the peer's in graph order)."""
    return max((float(np.max(np.abs(np.asarray(out[o.name], np.float64) - r))) if np.size(r) else 0.0
                for o, r in zip(graph.outputs, ref)), default=0.0)


#: Untimed runs after switching runtimes last at least this long: onnxruntime's idle worker spins
#: for about 45 ms after a run (`allow_spinning`; measured on Zen 3 as process CPU time after its
#: last run), holding a core the next runtime's threads need; glow's sleep. With 50 ms, glow's
#: 2-thread transformer was timed at 4.0-4.3 ms beside onnxruntime and 2.3 ms beside OpenVINO
#: alone: its scheduler, seeing its second thread stalled, had fallen back to one thread.
SETTLE_S = 0.15


def _settle(run, feeds) -> tuple[float, float]:
    """Run `run` untimed for SETTLE_S; (process CPU time, wall clock) once half of that has passed:
    busy threads are counted from there (the other runtime's spinning threads have stopped)."""
    t0 = time.perf_counter()
    run(feeds)
    mark = None
    while (now := time.perf_counter()) - t0 < SETTLE_S:
        if mark is None and now - t0 >= SETTLE_S / 2:
            mark = (time.process_time(), time.perf_counter())
        run(feeds)
    return mark or (time.process_time(), time.perf_counter())


def _busy(t: Timing) -> str:
    return "" if t.busy_threads is None else f", {t.busy_threads:.1f} busy threads"


def format_result(r: BenchResult) -> str:
    g = r.glow
    line = (f"{r.model}: glow[{r.backend}, {r.threads}T] {g.median_ms:.3f} ms "
            f"(min {g.min_ms:.3f}, max {g.max_ms:.3f}{_busy(g)}), compile {r.compile_s:.2f} s")
    for n, p in r.peers.items():
        line += (f"; {n} {p.median_ms:.3f} ms (min {p.min_ms:.3f}, max {p.max_ms:.3f}{_busy(p)}), "
                 f"ratio {r.ratio_to(n):.2f}")
    if r.peers:
        line += f"; max |diff| {r.max_abs_diff:.2e}"
    for k, (err, cos) in r.extra.get("accuracy", {}).items():
        line += (f"\n  {k}: {r.extra['precision']} against glow fp32: max error {err:.2e} of the largest "
                 f"value, cosine {cos:.6f}")
    return line
