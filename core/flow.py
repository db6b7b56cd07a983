"""The compile flow, in one place: what `glow.compile`, the partitioner and every backend run.

    optimise (glow.passes)  ->  [partition]  ->  lower  ->  backend transforms  ->  clean up
    ->  lower again  ->  fuse  ->  backend.compile

`compile_for_backend` is the single-device flow; `backend_graph` is its graph half after
optimisation, which the partitioner runs per partition (it optimises the whole graph once before
placement) and specialisation runs again per input signature.

`SpecializingExecutable` is the one executable for graphs a code-generating backend cannot
compile as they are (symbolic dims, or shapes that input values decide): on first sight of an
input signature it specialises the graph (glow.specialize), runs the graph half again, and hands
the now static graph to the backend's static compile. Only inputs whose values decide a shape are
part of the signature (`glow.specialize.deciding_inputs`); token ids, masks and indices are data.
After the first signature, a new one is compiled on a background thread while the calls that
meet it run the graph on the reference interpreter (tiered execution, `$GLOW_TIERED`): a new
batch size or sequence length answers in milliseconds, not after a compile.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np

from .backend import CompileOptions, Executable
from .errors import BackendError, LoweringError
from .graph import Graph


class _CountedSwitch:
    """A process-wide setting turned off while any compile runs (nested and concurrent compiles
    count) and given back as the caller had it when the last one ends. `off()` turns it off and
    returns the previous state, `restore(state)` puts that back."""

    def __init__(self, off, restore):
        self._off, self._restore = off, restore
        self._lock = threading.Lock()
        self._depth = 0
        self._was = None

    @contextlib.contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._was = self._off()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._restore(self._was)


def _gc_off() -> bool:
    was = gc.isenabled()
    gc.disable()
    return was


#: Python's cyclic garbage collector off while a compile runs. A compile allocates hundreds of
#: thousands of small objects (graph nodes, llvmlite's IR) and every full collection walks all
#: that is alive: light ResNet-50 lowered to the primitive floor spent 0.3 s of its 2.4 s cold
#: compile in four of them (Zen 4). The collector frees the compile's garbage in its own time after.
collector_paused = _CountedSwitch(_gc_off, lambda was: gc.enable() if was else None)


def _numpy_hugepage_switch():
    """NumPy's switch for advising its large arrays for huge pages (private, in numpy 1.x and
    2.x alike), or None where it has none."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return None
    return _set_madvise_hugepage


def _np_pages_off():
    switch = _numpy_hugepage_switch()
    return None if switch is None else switch(False)


def _np_pages_restore(was):
    switch = _numpy_hugepage_switch()
    if switch is not None and was is not None:
        switch(was)


#: NumPy's huge-page advice off while a compile runs. A compile's large arrays are temporaries
#: (folded and cast weights, packed copies) written once; asking for huge pages for them makes a
#: machine whose memory is fragmented compact it while the compile waits (light ResNet-50 on the
#: primitive floor, Zen 4 VM: graph passes 1.3-1.8 s with the advice, 0.45-0.6 s without).
small_pages = _CountedSwitch(_np_pages_off, _np_pages_restore)


@contextlib.contextmanager
def compiling():
    """What every compile runs inside: `collector_paused` and `small_pages`."""
    with collector_paused(), small_pages():
        yield


def lower_for_backend(graph: Graph, be, native: str | None = None) -> Graph:
    """Lower every op the backend does not support natively (with `native="floor"`: every op
    outside the primitive floor, except what it defers to specialisation) until only supported
    ops remain. A LoweringError names what cannot get there."""
    from .interpreter import verify_level
    from .lowering import lower_to_supported

    return lower_to_supported(graph, native_support(be, native), be.name, verify=verify_level() >= 2)


def native_support(be, native: str | None = None):
    """The node predicate lowering stops at: the backend's, within the floor for `native="floor"`."""
    from .lowering import supports_floor

    if native == "floor":
        def supports(node):
            return (supports_floor(node) or be.defers(node)) and be.supports(node)
        return supports
    return be.supports


def backend_graph(graph: Graph, be, native: str | None = None) -> Graph:
    """The graph half after optimisation: lower, the backend's own transforms (layouts), clean
    up, lower again (clean-up may form ops the backend lacks), fuse."""
    from .passes import cleanup_graph, fuse_for_backend

    graph = lower_for_backend(graph, be, native)
    graph = be.transform_graph(graph)
    graph = lower_for_backend(cleanup_graph(graph), be, native)
    return fuse_for_backend(graph, be)


def optimize_for_backend(graph: Graph, be, native: str | None = None) -> Graph:
    """Optimise (glow.passes' default pipeline), then `backend_graph`."""
    from .passes import optimize_graph

    return backend_graph(optimize_graph(graph, supports=native_support(be, native)), be, native)


def compile_for_backend(graph: Graph, be, options: CompileOptions, *, optimize: bool = True,
                        phase: Callable[[str], None] = lambda name: None) -> Executable:
    """The single-device flow: optimise, lower, transform, fuse, compile. `optimize=False` only
    lowers (no optimiser, no backend transforms or fusions). `phase(name)` is called as each of
    "optimise", "lower", "compile" starts. Nodes the backend cannot run go to the host
    (glow.partition.host: a partitioned executable and one warning), unless `options.strict`."""
    be.warm_up(options.device)  # e.g. a device compiler starting up while the passes run
    if optimize:
        from .passes import optimize_graph

        phase("optimise")
        graph = optimize_graph(graph, supports=native_support(be, options.native))
    phase("lower")
    try:
        lowered = backend_graph(graph, be, options.native) if optimize else lower_for_backend(graph, be, options.native)
    except LoweringError as e:  # nodes the backend cannot run: on the host, unless strict
        from .partition.host import compile_with_host

        phase("compile")
        return compile_with_host(graph, be, options, e, optimize=optimize)
    phase("compile")
    return compile_lowered(lowered, be, options)


def compile_lowered(graph: Graph, be, options: CompileOptions) -> Executable:
    """`be.compile` of a graph the flow prepared for it, checked to keep Executable's contract
    (the runtime and the facade rely on it)."""
    exe = be.compile(graph, options)
    if not isinstance(exe, Executable):
        raise BackendError(f"backend '{be.name}': compile() returned {type(exe).__name__}, not a glow.Executable")
    return exe


# -- one executable per input signature ---------------------------------------------------------

#: Specialised executables kept per SpecializingExecutable, least recently used dropped first
#: ($GLOW_SPECIALIZATIONS overrides).
MAX_SPECIALIZATIONS = 16


def max_specializations() -> int:
    env = os.environ.get("GLOW_SPECIALIZATIONS")
    if env:
        if not env.strip().isdigit() or int(env) < 1:
            raise BackendError(f"GLOW_SPECIALIZATIONS must be a positive integer, got {env!r}")
        return int(env)
    return MAX_SPECIALIZATIONS


def tiered() -> bool:
    """Whether a specialising executable compiles a new input signature (after its first) in the
    background and interprets the calls that meet it meanwhile: $GLOW_TIERED, 1 (default) or 0."""
    env = os.environ.get("GLOW_TIERED", "1").strip()
    if env not in ("0", "1"):
        raise BackendError(f"GLOW_TIERED must be 0 or 1, got {env!r}")
    return env == "1"


class NeedsInputValues(BackendError):
    """Raised by a backend's static compile when a kernel needs, at compile time, the value of
    an operand that is only known at run time (pads, axes, slice bounds fed as inputs). The
    specialising executable then also specialises on the values of every small integer input;
    if that does not settle it, the nodes of `ops` ({op name: count}) run on the host."""

    def __init__(self, message: str, ops: dict | None = None):
        super().__init__(message)
        self.ops = dict(ops or {})


class SpecializingExecutable(Executable):
    """One static executable per input signature, compiled on first sight of it.

    `compile_static(graph)` is the backend's compile of a static graph; `static_backend` is the
    backend whose predicate the specialised graph is lowered for (one that defers nothing). The
    signature is the inputs' shapes and dtypes plus the values of `deciding_inputs(graph)`; the
    cache keeps the `max_specializations()` most recently used executables. `stats` says how many
    compiles ran, what the cache holds and the last compile's figures.

    Tiered (`tiered()`): the first signature compiles in the calling thread, so the backend's
    code serves the first call and a compile error shows at once. A later new signature starts a
    compile on a background thread, and until it lands the calls that meet it run the graph on
    the reference interpreter (the oracle: same results within float rounding, NumPy's speed).
    A background compile that fails is compiled again in the foreground by the next call with
    that signature, which raises what the compile raises. `wait_compiles()` waits for them.
    """

    def __init__(self, graph: Graph, static_backend, compile_static: Callable[[Graph], Executable],
                 options: CompileOptions, *, all_values: bool = False):
        from .specialize import deciding_inputs, specializable_inputs

        super().__init__(graph)
        self.static_backend, self.compile_static, self.options = static_backend, compile_static, options
        self._source: Graph | None = None  # the graph specialisation starts from (fusions undone)
        self._all = specializable_inputs(graph)
        self._values = self._all if all_values else deciding_inputs(graph) & self._all
        self._cache: OrderedDict = OrderedDict()
        self._limit = max_specializations()
        self._lock = threading.RLock()  # the cache and counters; held through a foreground compile
        self._compiles, self._compile_s, self._last = 0, 0.0, {}
        self._tiered = tiered()
        self._pending: dict[tuple, Future] = {}  # signature -> its background compile
        self._failed: OrderedDict = OrderedDict()  # signatures whose background compile raised
        self._interpreted = 0  # calls answered by the interpreter while a compile ran
        self._background: ThreadPoolExecutor | None = None
        self._queued: list[Callable[[], None]] = []  # compiles to submit once their call answered
        #: the placement of the latest input signature some of whose nodes run on the host (None:
        #: none has): what ran where and why (glow.partition.host)
        self.placement = None

    def _key(self, feeds) -> tuple:
        from .specialize import signature

        return signature(self.graph, feeds, self._values)

    def specialized(self, feeds, *, tier: bool = False) -> tuple[Executable, dict] | None:
        """The static executable for these inputs (compiled now if new) and the feeds it takes.
        With `tier`, a new signature after the first starts a background compile instead, and
        None says so (the caller interprets)."""
        with self._lock:
            key = self._key(feeds)
            exe = self._cache.get(key)
            if exe is not None:
                self._cache.move_to_end(key)
            elif tier and self._tiered and self._compiles and key not in self._failed:
                if key not in self._pending:
                    self._start(key, feeds)
                return None
            else:
                exe = self._compile(feeds)
                self._store(feeds, exe)
                self._failed.pop(key, None)
        names = {v.name for v in exe.graph.inputs}
        return exe, {k: v for k, v in feeds.items() if k in names}

    def _store(self, feeds, exe) -> None:
        self._cache[self._key(feeds)] = exe  # the key may have widened
        while len(self._cache) > self._limit:
            self._cache.popitem(last=False)

    def _start(self, key, feeds) -> None:
        """Queue a background compile for `key` (`_launch` submits it once the call that met the
        signature has its answer: the compile's Python half would share the GIL with it), from
        a copy of what specialisation reads of the feeds (the caller may overwrite its arrays
        once the run returns): the small integer inputs' values, other arrays' shapes and dtypes."""
        copied = {k: (v.copy() if k in self._all else np.broadcast_to(np.zeros((), v.dtype), v.shape))
                  if isinstance(v, np.ndarray) else v for k, v in feeds.items()}
        done = self._pending[key] = Future()
        ctx = contextvars.copy_context()  # the caller's compile settings (e.g. the ISA level)
        self._queued.append(lambda: ctx.run(self._compile_behind, key, copied, done))

    def _launch(self) -> None:
        with self._lock:
            queued, self._queued = self._queued, []
            if queued and self._background is None:
                self._background = ThreadPoolExecutor(1, thread_name_prefix="glow-compile")
                weakref.finalize(self, self._background.shutdown, wait=False)
        for task in queued:
            self._background.submit(task)

    def _compile_behind(self, key, feeds, done: Future) -> None:
        try:
            exe = self._compile(feeds)
        except BaseException as e:
            with self._lock:
                self._pending.pop(key, None)
                self._failed[key] = True  # the next call compiles it in the foreground and raises
                while len(self._failed) > self._limit:
                    self._failed.popitem(last=False)
            done.set_exception(e)
            return
        with self._lock:
            self._pending.pop(key, None)
            self._store(feeds, exe)
        done.set_result(None)

    def wait_compiles(self, timeout: float | None = None) -> bool:
        """Wait for the background compiles under way; False if `timeout` seconds passed first."""
        with self._lock:
            pending = list(self._pending.values())
        return not wait(pending, timeout).not_done

    def _interpret(self, feeds) -> dict:
        from .interpreter import run_detached

        with self._lock:
            self._interpreted += 1
        return run_detached(self._source, feeds)

    def specialized_graph(self, feeds) -> Graph:
        """The static graph for these inputs, prepared for the static backend: specialised on
        shapes and the deciding inputs' values; if a node still cannot be settled, on the values
        of every small integer input before it is called data-dependent."""
        from .passes.fusion import unfuse
        from .specialize import specialize

        if self._source is None:
            self._source = unfuse(self.graph)
        while True:
            try:
                g, _ = specialize(self._source, feeds, self._values)
                g = optimize_for_backend(g, self.static_backend, self.options.native)
                self._check_static(g)
                return g
            except (BackendError, LoweringError):
                if not self._widen():
                    raise

    def _widen(self) -> bool:
        with self._lock:
            if self._values == self._all:
                return False
            self._values = self._all
            self._cache.clear()
            return True

    def _compile(self, feeds) -> Executable:
        from .specialize import sizes_varying, symbolic_sizes

        t0 = time.perf_counter()
        while True:
            with compiling(), sizes_varying(symbolic_sizes(self.graph, feeds)):
                try:
                    g = self.specialized_graph(feeds)
                    exe = self.compile_static(g)
                    break
                except NeedsInputValues as e:  # a kernel wants an operand's value at compile time
                    if self._widen():
                        continue
                    exe = self._with_host(feeds, e)
                    break
                except LoweringError as e:  # nothing runs these nodes here, for these shapes
                    exe = self._with_host(feeds, e)
                    break
        with self._lock:
            self._compiles += 1
            self._compile_s += time.perf_counter() - t0
            self._last = dict(getattr(exe, "stats", None) or {})
        return exe

    def _check_static(self, g: Graph) -> None:
        from collections import Counter

        left = Counter(n.op.name for n in g.nodes if not all(getattr(v.type, "is_static", True) for v in n.outputs))
        if left:
            raise LoweringError(f"backend '{self.static_backend.name}': shapes in graph '{self.graph.name}' stay "
                                f"unknown after specialisation: they depend on data ({', '.join(sorted(left))})",
                                dict(left))

    def _with_host(self, feeds, why) -> Executable:
        """The executable for these inputs when the backend cannot run some nodes for their shapes
        (`why` names them): the specialised graph placed over the backend and the host
        (glow.partition.host), those ops kept off the backend so that a partition placed there
        compiles. Under `options.strict`, `why` is raised."""
        from .partition.host import compile_with_host
        from .passes import optimize_graph
        from .specialize import specialize

        if self._source is None:
            from .passes.fusion import unfuse

            self._source = unfuse(self.graph)
        g, _ = specialize(self._source, feeds, self._values)
        g = optimize_graph(g, supports=native_support(self.static_backend, self.options.native))
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items() if isinstance(v, np.ndarray))
        exe = compile_with_host(g, self.static_backend, self.options, why, when=f" for inputs {shapes}",
                                avoid=set(getattr(why, "ops", ()) or ()))
        with self._lock:
            self.placement = exe.placement
        return exe

    def _run(self, feeds):
        found = self.specialized(feeds, tier=True)
        if found is None:  # compiling in the background
            try:
                return self._interpret(feeds)
            except Exception:  # noqa: BLE001 - whatever the interpreter cannot do, the compile decides
                pass  # (a tier never fails a call that the compiled code would answer)
            finally:
                self._launch()
            self.wait_compiles()
            found = self.specialized(feeds)  # compiled by now, or compiled here, raising its error
        exe, rest = found
        return exe._run(rest)

    def _run_into(self, feeds, into):
        found = self.specialized(feeds, tier=True)
        if found is None:  # compiling in the background: the interpreter answers, then a copy
            return super()._run_into(feeds, into)
        exe, rest = found
        return exe._run_into(rest, into)

    def _bind_io(self, feeds, into):
        if self._values & feeds.keys():  # an input's values choose the signature: looked up per run
            return super()._bind_io(feeds, into)
        exe, rest = self.specialized(feeds)  # shapes alone choose it, and a binding's never change
        return exe._bind_io(rest, into)

    def _profile(self, feeds):
        exe, rest = self.specialized(feeds)
        return exe._profile(rest)

    def _saved_state(self):
        """With static input shapes and no input specialised on its values there is one signature
        (nodes left for specialisation, such as an exporter's GatherND, are settled by shapes
        alone): its executable is saved. Anything else would need one file per signature."""
        import numpy as np

        from . import dtypes as dt

        ins = self.graph.inputs
        if self._values or not all(isinstance(v.type, dt.TensorType) and v.type.is_static for v in ins):
            raise BackendError(f"graph '{self.graph.name}' has dynamic input shapes, which a saved executable "
                               "cannot hold yet: save a compile for fixed shapes (`glow compile MODEL --save FILE "
                               "--shape NAME=DxD`)")
        exe, _ = self.specialized({v.name: np.zeros(v.type.shape, v.type.dtype.np) for v in ins})
        return exe._saved_state()

    @property
    def stats(self) -> dict:
        """Compiles so far, their total seconds, the cache (entries, limit, bytes held by the
        cached executables' arenas and weights) and the last compile's own stats."""
        with self._lock:
            held = sum(_bytes_held(e) for e in self._cache.values())
            return {**self._last, "compiles": self._compiles, "compile_s": self._compile_s,
                    "specializations": len(self._cache), "specialization_limit": self._limit,
                    "specialized_on_values": sorted(self._values), "cache_bytes": held,
                    "tiered": self._tiered, "compiles_pending": len(self._pending),
                    "interpreted_runs": self._interpreted}

    def clear_cache(self) -> None:
        """Drop every specialised executable (the next run compiles again)."""
        with self._lock:
            self._cache.clear()


def _bytes_held(exe) -> int:
    s = getattr(exe, "stats", None) or {}
    return int(s.get("arena_bytes", 0)) + int(s.get("weights_bytes", 0))


__all__ = ["MAX_SPECIALIZATIONS", "NeedsInputValues", "SpecializingExecutable", "backend_graph",
           "compile_for_backend", "compile_lowered", "lower_for_backend", "max_specializations", "optimize_for_backend",
           "tiered"]
