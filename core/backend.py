"""What a backend is: the base classes a plugin subclasses (Backend, Device, Executable).

A backend says which ops it runs natively (`supports`, a predicate over op, types and attributes),
lists its devices with rough cost figures for the partitioner, and compiles a graph into an
`Executable`. Everything it does not support natively is lowered for it by the core.
"""

from __future__ import annotations

import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import BackendError, InputError, InternalError, internal_errors

if TYPE_CHECKING:  # imported where used: a plugin that subclasses Backend loads no NumPy or op table
    import numpy as np

    from .graph import Graph, Node


def check_inputs(graph, feeds):
    from .interpreter import check_inputs

    return check_inputs(graph, feeds)

#: The backend API this glow speaks: the contract of `Backend`, `Executable` and the hooks in
#: glow.hookspecs. A backend states the version it was built for in `Backend.api_version`;
#: discovery (glow.plugins) lists one built for an API outside OLDEST_BACKEND_API..BACKEND_API as
#: unavailable, with the reason. docs/backends.md says what each version changed.
BACKEND_API = 2
#: The oldest backend API this glow still runs: API 2 only added to API 1 (declared hooks, a
#: known-failures file, KernelNotWrittenError), so plugins built for API 1 work unchanged.
OLDEST_BACKEND_API = 1
#: BACKEND_API as the "major.minor" text API 1 used (`api_version = glow.API_VERSION`).
API_VERSION = f"{BACKEND_API}.0"


@dataclass(frozen=True)
class Device:
    """One device of a backend, with the figures the partitioner's cost model uses."""

    backend: str
    name: str
    kind: str = "cpu"  # cpu | gpu | accelerator
    memory_bytes: int | None = None  # None: no cap
    peak_gflops: float = 50.0
    mem_bandwidth_gbs: float = 20.0
    transfer_gbs: float = 10.0  # to/from host
    supported_ops: frozenset | None = None  # None: whatever the backend supports
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def id(self) -> str:
        return f"{self.backend}:{self.name}"


@dataclass(frozen=True)
class CompileOptions:
    native: str | None = None  # "floor": restrict the backend's native set to the primitive floor
    threads: int | None = None
    device: Device | None = None
    verify: bool = False
    #: refuse (a LoweringError naming every op) instead of running what the backend cannot on the
    #: host (glow.partition.host): at compile time, and for an input signature at run time
    strict: bool = False
    #: the backend's own options (`glow.compile(..., options={"isa": "avx2"})`), checked against
    #: `Backend.options` before the backend sees them
    backend_options: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output, as `exe.inputs` / `exe.outputs` list them.

    `shape` holds ints for static dims and strings for symbolic ones (`("N", 3, 224, 224)`);
    it is None when the rank is unknown or the value is not a tensor. `dtype` is the element
    type's name ("float32", "int64", ...; for a sequence or optional, its type as text) and
    `np_dtype` the NumPy dtype that holds it (None for non-tensors)."""

    name: str
    shape: tuple | None
    dtype: str
    np_dtype: object = None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


def _info(v) -> TensorInfo:
    from . import dtypes as dt

    t = v.type
    if isinstance(t, dt.TensorType):
        shape = None if t.shape is None else tuple(d if isinstance(d, int) else str(d) for d in t.shape)
        base = getattr(t.dtype, "base", None)  # a quantized type: held in its storage type
        try:
            npd = (base or t.dtype).np
        except Exception:  # noqa: BLE001 - an exotic holder that cannot load: the name still says it
            npd = None
        return TensorInfo(v.name, shape, str(t.dtype), npd)
    return TensorInfo(v.name, None, str(t), None)


@dataclass(frozen=True)
class ProfileRecord:
    """Time spent in one node (or instruction, partition, or the whole run: see
    `Profile.granularity`). `name` and `op` are the node's or the instruction's."""

    name: str
    op: str
    seconds: float


@dataclass(frozen=True)
class Profile:
    """`exe.profile(feeds)`: records sorted by time, slowest first, and the outputs of the run.

    `granularity` says what a record is: "node" (the reference backend times every node),
    "kernel" (a code-generating backend times every instruction of its compiled program: the
    kernels and copies of that instruction, one record for each instruction; on cpu an
    instrumented copy of the program runs on one thread, on opencl and cuda the device's own
    timestamps of each launch are summed), "partition" (a multi-device executable times every
    partition on its device) or "run" (a backend whose compiled code cannot be timed finer: one
    record for the whole run). `total_seconds` is the wall time of the profiled run."""

    records: list
    granularity: str
    total_seconds: float
    outputs: dict = field(default_factory=dict, compare=False, repr=False)

    def table(self, limit: int | None = 30) -> str:
        """A printable table: time, share of the total, op and name, slowest first."""
        rows = self.records if limit is None else self.records[:limit]
        total = self.total_seconds or 1e-12
        lines = [f"profile by {self.granularity}: {len(self.records)} record(s), "
                 f"{self.total_seconds * 1e3:.3f} ms in all"]
        if self.granularity == "run":
            lines.append("(this backend cannot time single nodes: the whole run is one record)")
        elif self.granularity == "kernel":
            lines.append("(one record per instruction of the compiled program, and per copy to or from "
                         "the device where it has memory of its own)")
        lines.append(f"{'ms':>10} {'%':>6}  {'op':<20} name")
        for r in rows:
            lines.append(f"{r.seconds * 1e3:>10.3f} {100 * r.seconds / total:>6.1f}  {r.op:<20.20} {r.name}")
        if len(rows) < len(self.records):
            lines.append(f"... {len(self.records) - len(rows)} more")
        rest = self.untracked_seconds
        if self.granularity != "run" and rest > 0:  # so the shares add up to the whole run
            lines.append(f"{rest * 1e3:>10.3f} {100 * rest / total:>6.1f}  {'(untracked)':<20} time in no record: "
                         "the runtime around them (inputs, outputs, dispatch, threads starting and waiting)")
        return "\n".join(lines) + "\n"

    @property
    def untracked_seconds(self) -> float:
        """The part of `total_seconds` that no record covers (0 when they cover it all)."""
        return max(0.0, self.total_seconds - sum(r.seconds for r in self.records))

    def __str__(self) -> str:
        return self.table()


class Executable:
    """A compiled graph. `run({name: array}) -> {name: array}`, inputs checked against the graph.

    Subclasses implement `_run(feeds)`, returning the outputs in the graph's output order keyed
    by the graph's output names or by the names of the IR's output buffers (which differ where
    an output is also an input or a weight: IR buffer names are unique, so `x` out is `x_1`).
    `run` keys them by the graph's output names either way, and turns any exception other
    than a GlowError into an InternalError (a glow bug, with the node it was working on).

    Every executable also has `inputs` / `outputs` (TensorInfo records), `run(feeds,
    outputs=[...])`, `profile(feeds)` and `submit(feeds)`. A subclass may time finer than the
    whole run by overriding `_profile(feeds) -> (records, granularity, outputs[, seconds])`;
    `seconds`, when given, is the run's own wall time (for one that first compiles what it
    needs to profile, which should not count).
    """

    def __init__(self, graph: Graph):
        self.graph = graph

    @property
    def input_names(self) -> list[str]:
        return self.graph.input_names

    @property
    def output_names(self) -> list[str]:
        return self.graph.output_names

    @property
    def inputs(self) -> list[TensorInfo]:
        """The graph inputs: name, shape (symbolic dims as strings), dtype."""
        return [_info(v) for v in self.graph.inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        """The graph outputs: name, shape (symbolic dims as strings), dtype."""
        return [_info(v) for v in self.graph.outputs]

    def run(self, feeds: dict, outputs=None, *, into: dict | None = None) -> dict:
        """Run the graph; `outputs=[names]` returns only those outputs, in that order (the whole
        graph still runs). An unknown output name is an InputError.

        `into={output name: array}` writes those outputs into the caller's arrays (each of the
        output's exact shape and element type, C-contiguous) and returns them. An array may also
        be fed as an input: a KV cache passed as past and present is then updated in place where
        the backend can prove that safe (`aliases`), and copied into after the run otherwise."""
        wanted = self._wanted(outputs)
        feeds = check_inputs(self.graph, feeds)
        into = self._check_into(into)
        with internal_errors(f"running graph '{self.graph.name}' on {type(self).__name__}"):
            outs = self._run_into(feeds, into) if into else self._run(feeds)
            return _select(_by_output_name(outs, self.output_names), wanted)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def bind_io(self, feeds: dict, *, into: dict | None = None):
        """A run of these very arrays, checked once: each call of the returned function runs the
        graph on the arrays' values at that moment and returns the outputs by name. For a loop
        that feeds the same arrays every time with new values (a decoding step: the token, the
        mask, the KV cache), it skips what `run` does per call: checking every input and `into`
        array, looking up the specialisation, the addresses (cpu). The caller may change the
        arrays' values between calls, never the arrays themselves (another array, shape or
        dtype needs a new `bind_io`); an input given as a list is read once, here. Outputs not
        in `into` may be arrays the binding owns, written over by its next call. (onnxruntime
        calls this an IOBinding.)"""
        feeds = check_inputs(self.graph, feeds)
        into = self._check_into(into)
        run, names = self._bind_io(feeds, into), self.output_names
        label = f"running graph '{self.graph.name}' on {type(self).__name__}"

        def bound() -> dict:
            with internal_errors(label):
                return _by_output_name(run(), names)
        return bound

    def _bind_io(self, feeds: dict, into: dict):
        """`bind_io`'s run, given checked feeds and `into`: a function of no arguments returning
        what `_run` returns. The default runs as `run` would; a backend overrides it to prepare
        once what its runs of the same arrays share."""
        return (lambda: self._run_into(feeds, into)) if into else (lambda: self._run(feeds))

    def _run_into(self, feeds: dict, into: dict) -> dict:
        """`_run` with outputs written into the arrays of `into` (checked). The default runs,
        then copies: right whatever aliases what, since every input was read by then."""
        import numpy as np

        outs = _by_output_name(self._run(feeds), self.output_names)
        for name, arr in into.items():
            got = np.asarray(outs[name])
            if got.shape != arr.shape:
                raise InputError(f"into=: output '{name}' has shape {list(got.shape)} in this run, the array "
                                 f"{list(arr.shape)}")
            np.copyto(arr, got, casting="no")
            outs[name] = arr
        return outs

    def _check_into(self, into) -> dict:
        import numpy as np

        if not into:
            return {}
        if not isinstance(into, dict):
            raise InputError(f"into= must be a dict of output name -> array, got {type(into).__name__}")
        infos = self.__dict__.get("_output_infos")
        if infos is None:  # asked on every step of a generation: made once
            infos = self.__dict__["_output_infos"] = {v.name: _info(v) for v in self.graph.outputs}
        out = {}
        for name, arr in into.items():
            info = infos.get(name)
            if info is None:
                raise InputError(f"into=: unknown output name '{name}'; the graph's outputs are {self.output_names}")
            if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous or not arr.flags.writeable:
                raise InputError(f"into=: output '{name}' needs a writable C-contiguous numpy array")
            if info.np_dtype is None or arr.dtype != info.np_dtype:
                raise InputError(f"into=: output '{name}' has element type {info.dtype}, the array {arr.dtype}")
            if info.shape is not None and (len(info.shape) != arr.ndim or any(
                    isinstance(d, int) and d != n for d, n in zip(info.shape, arr.shape))):
                raise InputError(f"into=: output '{name}' has shape {list(info.shape)}, the array {list(arr.shape)}")
            out[name] = arr
        return out

    # -- optional: device-resident runs (the partitioner's runtime, core/runtime/executor.py) ----
    def run_device(self, handles: dict) -> dict:
        """Optional. Run on device handles: `{input name: what Backend.to_device returned}` in,
        `{output name: handle}` out (handles `Backend.to_host` can read). Override it when
        values can stay on the device between the partitions of a multi-device run; the runtime
        then moves inputs with `to_device` and outputs with `to_host` around this call. When not
        overridden, the runtime calls `run` with host arrays instead."""
        raise NotImplementedError(f"{type(self).__name__} does not run on device handles")

    @property
    def uses_device_handles(self) -> bool:
        """Whether this executable overrides `run_device` (what the runtime asks before a run)."""
        return getattr(type(self), "run_device", None) is not Executable.run_device

    def _wanted(self, outputs) -> list[str] | None:
        if outputs is None:
            return None
        if isinstance(outputs, str):
            outputs = [outputs]
        outputs = list(outputs)
        unknown = [n for n in outputs if n not in self.output_names]
        if unknown:
            raise InputError(f"unknown output name(s) {unknown}; the graph's outputs are {self.output_names}")
        return outputs

    def profile(self, feeds: dict) -> Profile:
        """Run once and time it: per node where the backend can (see `Profile.granularity`),
        sorted slowest first. `print(exe.profile(feeds))` prints the table."""
        feeds = check_inputs(self.graph, feeds)
        with internal_errors(f"profiling graph '{self.graph.name}' on {type(self).__name__}"):
            t0 = time.perf_counter()
            records, granularity, outs, *own = self._profile(feeds)
            total = own[0] if own else time.perf_counter() - t0
        records = sorted(records, key=lambda r: r.seconds, reverse=True)
        return Profile(records, granularity, total, _by_output_name(outs, self.output_names))

    def _profile(self, feeds: dict):
        t0 = time.perf_counter()
        outs = self._run(feeds)
        return [ProfileRecord(self.graph.name, "(whole run)", time.perf_counter() - t0)], "run", outs

    def close(self) -> None:
        """Optional: release what the executable holds beyond memory (worker threads, remote
        actors, device queues) now rather than when it is collected; the multi-device and
        replicated executables do. Calling it twice is harmless; the default does nothing."""

    # -- optional: saving (core/saved.py) ------------------------------------------------------
    def save(self, path) -> None:
        """Write this executable to one file that `glow.load(path)` opens in another process
        without compiling (the cpu backend's executables of graphs with static shapes). The file
        holds machine code: load only files you trust. Written atomically."""
        from .saved import save

        save(self, path)

    def _saved_state(self) -> tuple[str, dict, dict]:
        """Optional: (backend name, JSON-able state, {section name: numpy array}) for `save`;
        the backend's `Backend.load_saved` makes the executable again from them."""
        raise BackendError(f"{type(self).__name__} cannot be saved: saving is built for the cpu backend's "
                           "executables of graphs with static shapes")

    def submit(self, feeds: dict, outputs=None) -> Future:
        """Start a run and return a concurrent.futures.Future of its outputs at once. A
        single-device executable runs its requests one after another, in submission order, on
        one worker thread of its own (made on first use); errors arrive through the future."""
        wanted = self._wanted(outputs)
        with _POOL_LOCK:
            pool = self.__dict__.get("_submit_pool")
            if pool is None:
                pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="glow-submit")
                self.__dict__["_submit_pool"] = pool
                weakref.finalize(self, pool.shutdown, wait=False)
        return pool.submit(self.run, feeds, wanted)


_POOL_LOCK = threading.Lock()


def _select(outs: dict, wanted: list[str] | None) -> dict:
    return outs if wanted is None else {n: outs[n] for n in wanted}


def _by_output_name(outs: dict, names: list[str]) -> dict:
    if list(outs) == names:
        return outs
    if set(outs) == set(names):
        return {n: outs[n] for n in names}
    if len(outs) == len(names):  # keyed by IR buffer names, in graph output order (see above)
        return dict(zip(names, outs.values()))
    raise InternalError(f"executable returned outputs {sorted(outs)}, the graph has {names}")


class Backend:
    """Subclass this to add a device type. Only `name` and `compile` are required.

    The whole contract glow relies on is declared here (nothing else is looked up by name):
    `name`, `api_version`, `priority`, `description`, `options`, `specialises_shapes`,
    `known_failures`; `check_available`, `devices`, `supports`, `defers`, `native_ops`,
    `fusions`, `transform_graph`, `warm_up`, `compile`; for multi-device runs `to_device` /
    `to_host` (with `Executable.run_device`, and `handle_kind`); for devices named by the backend
    at run time, or served elsewhere, `find_device`, `bind` and `compile_remote` (glow.backends.
    ray); for saved executables `load_saved` (with `Executable._saved_state`); for ahead-of-time
    bundles `bundle`. A plugin's backends are instances of this class (discovery refuses others)."""

    name: str = ""
    #: The backend API this backend was built for (`glow.BACKEND_API` when it was written: the
    #: scaffold writes it). None, not declaring one, is taken as API 1, the last version in which
    #: declaring was optional; a version this glow cannot run makes the backend unavailable.
    api_version: int | None = None
    #: The conformance kit's expected failures of this backend: a path to a file of
    #: `check id  # reason` lines (the scaffold ships an empty `known_failures.txt` beside its
    #: backend module); None: none. glow's own lists (glow/testing/known_failures) are read too.
    known_failures: str | None = None
    #: The default backend (no backend named: `glow.compile(model)`, `glow run model.onnx`) is the
    #: available one with the highest priority; equal priorities go to the first name
    #: alphabetically. The built-ins rank by what serves a user on this machine best: cuda 20
    #: (a working GPU is the fastest device there is), cpu 10 (native LLVM code, every core),
    #: opencl 5 (through PoCL it is a slower CPU path; a real OpenCL GPU is named explicitly),
    #: reference 0 (the NumPy oracle: always there, slow), reference-ir -1 (a test vehicle).
    #: A third-party plugin picks its place on that scale: above 20 to become the default.
    priority: int = 0
    description: str = ""
    #: The options `glow.compile(..., options={...})` may pass this backend: {name: what it does}.
    #: Any other name is a one-line error naming the backend and these.
    options: dict = {}
    #: Set when the handles this backend's `Executable.run_device` returns can go straight to
    #: another executable of a backend with the same `handle_kind`, with no copy to this process
    #: between them (the multi-device runtime keeps them as they are until such an executable, or
    #: the caller, reads them). Ray's object references: a tensor moves node to node in Ray's
    #: object store. None: outputs come back to host memory after every partition.
    handle_kind: str | None = None
    #: Whether this backend's code needs every shape known when it compiles: a graph with dynamic
    #: shapes is compiled once per input signature (glow.flow.SpecializingExecutable). The
    #: partitioner then prices a node whose shapes tensor data decides (glow.specialize.
    #: data_shaped: a NonZero's rows) with a compile on every run, so such nodes go to the host
    #: unless their arithmetic outweighs that.
    specialises_shapes: bool = False

    def check_available(self) -> None:
        """Raise `BackendError("why")` when the library is missing. Cheap checks only (is the
        package installed? `importlib.util.find_spec`): glow asks every backend whenever it
        lists them (`glow backends`, every CLI command); probing a device belongs in `devices`."""

    def devices(self) -> list[Device]:
        """The devices, with the partitioner's figures. Here a backend probes its platform (imports
        its device library, asks the driver); glow calls it when a device is first needed, and a
        BackendError from it, or no device, makes the backend unavailable with that reason."""
        return [Device(self.name, "0")]

    def find_device(self, name: str) -> Device | None:
        """A device called `name` that `devices()` does not list ("ray:cpu/node_a" asks backend
        "ray" for "cpu/node_a"): a backend whose devices the user names (a remote node) makes it
        here. None: no such device (the default: only `devices()` exist)."""
        return None

    def bind(self, device: Device) -> tuple[Backend, Device]:
        """The backend object that drives `device`, and the device with its figures complete. By
        default this backend and the device as they are; a backend that forwards to another per
        device (glow.backends.ray: a remote node running the named backend) returns a proxy."""
        return self, device

    def supports(self, node: Node) -> bool:
        """The support predicate: can this backend run `node` (its op, types, attributes) natively?"""
        return True

    def defers(self, node: Node) -> bool:
        """Whether `supports` accepts `node` only to decide it once inputs are seen (shapes or
        index operands known at run time, settled by shape specialisation). Such nodes stay
        under `native="floor"` too: after specialisation the graph is lowered to the floor again."""
        return False

    def native_ops(self) -> list[str]:
        """Names of the ops this backend claims natively (for reports; `supports` decides)."""
        from .ops import all_ops

        return [o.name for o in all_ops()]

    def fusions(self) -> list:
        """Fusion requests (glow.passes.fusion: FuseElementwise(), FuseActivation({...})) applied
        to the lowered graph; none by default."""
        return []

    def transform_graph(self, graph: Graph) -> Graph:
        """Backend graph transforms after lowering (layout changes, backend-private ops); the
        result is cleaned up and lowered again, so it may use any op with a lowering rule."""
        return graph

    def warm_up(self, device: Device | None) -> None:
        """Called as a compile for `device` (None: the first) starts, before the graph passes:
        start any slow one-time set-up, such as a device compiler's own start-up, in the
        background so it overlaps them. Must return at once and never raise; the default does
        nothing."""

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:  # pragma: no cover
        raise BackendError(f"backend '{self.name}' does not implement compile()")

    def compile_remote(self, target, parts: list, *, threads: int | None = None, optimize: bool = True):
        """Optional, for devices whose partitions compile elsewhere (a ray device compiles them on
        its node): start compiling `parts` (glow.partition.Partition's of `target`, a
        glow.partition.Target of this backend) and return at once a callable that waits and gives
        their executables, in order. glow calls it instead of `compile` for every partition placed
        on such a device (`compiles_remotely`), before compiling the local ones."""
        raise BackendError(f"backend '{self.name}' compiles in this process (it has no compile_remote)")

    @property
    def compiles_remotely(self) -> bool:
        """Whether this backend overrides `compile_remote` (what the partitioner asks)."""
        return type(self).compile_remote is not Backend.compile_remote

    def load_saved(self, graph: Graph, state: dict, sections: dict, options: CompileOptions,
                   where: str) -> Executable:
        """Optional: the executable that `Executable._saved_state` described, from a file that
        glow.load read (`graph`: the inputs and outputs only; `sections`: {name: uint8 array};
        `where`: the file, for errors). Refuse state this host cannot run with a BackendError."""
        raise BackendError(f"{where}: backend '{self.name}' cannot load saved executables")

    def bundle(self, graph: Graph, out_dir: str, *, name: str = "net", target: str | None = None,
               cpu: str | None = None, weights_c: bool = False, native: str | None = None) -> dict:
        """Optional: write an ahead-of-time bundle of a static graph into `out_dir` (`glow
        bundle`): code, header and weights for `target` (an LLVM triple; None: this host) and
        `cpu`. Returns what was written (sizes, tensors, files)."""
        raise BackendError(f"backend '{self.name}' cannot make ahead-of-time bundles (the cpu backend can)")

    # Transfers for the partitioner's runtime: host staging by default.
    def to_device(self, array: np.ndarray, device: Device):
        """A host array as a handle on `device`, for `Executable.run_device` (default: the array)."""
        return array

    def to_host(self, handle, device: Device) -> np.ndarray:
        """A handle `Executable.run_device` returned, as a host array (default: the handle)."""
        return handle
