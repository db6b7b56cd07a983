"""One ray device: its actor (on the node), the handle this process keeps, and its executables.

The graphs go into Ray's object store once; every call to the actor carries the reference, and
its first call compiles them on the node. When Ray restarts a dead actor (`max_restarts`,
default 3), the new one compiles again on its first call, with no help from this process. A
request the actor held when it died fails (`max_task_retries=0`: a request is never run twice
behind the caller's back); one sent after that failure waits for the restart and goes again.

Every wait here has a timeout: `timeout_s` (default 60 s) a request, 60 s for the actor to
start, `compile_timeout_s` (default 600 s) for its compile. A failure is a `RemoteDeviceError`
naming the device; when no live node offers what the device asks for any more, the error says
that the placement no longer fits.
"""

from __future__ import annotations

import os
import platform
import socket
import tempfile
import threading
import time

from glow.backend import Executable
from glow.errors import BackendError, GlowError, InternalError

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_COMPILE_TIMEOUT_S = 600.0


class RemoteDeviceError(GlowError):
    """A ray device failed: its actor died, its node left, or it gave no answer in time."""


class _Restarting(Exception):
    """The actor could not take a request: it is restarting (the request never ran)."""


#: Longest wait for a TCP answer from a named cluster address before joining it.
REACH_TIMEOUT_S = 5.0
#: Seconds between tries of a request that found its actor restarting.
RETRY_S = 0.2
#: Longest wait for a new actor to exist (placed on a node, its process started), before its
#: compile: an actor Ray cannot place stays pending without a word, so this says why instead.
START_TIMEOUT_S = 60.0


def ensure_ray():
    """Ray, connected: to the cluster this process already joined (`ray.init(address=...)`), else
    to $GLOW_RAY_ADDRESS or $RAY_ADDRESS ("auto": the one `ray start` began on this machine), else
    to a new local Ray of its own. Not Ray's own default, which joins whatever cluster a file in
    /tmp/ray names and, when that one is gone, waits for it for minutes."""
    import ray

    if not ray.is_initialized():
        address = os.environ.get("GLOW_RAY_ADDRESS") or os.environ.get("RAY_ADDRESS") or "local"
        _check_reachable(address)
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    return ray


def _check_reachable(address: str):
    """A cluster address nothing answers at is a one-line error now, not minutes of Ray retrying."""
    if address == "local":
        return
    target = address
    if address == "auto":
        try:
            with open(os.path.join(tempfile.gettempdir(), "ray", "ray_current_cluster")) as f:
                target = f.read().strip()
        except OSError:
            raise RemoteDeviceError("Ray address 'auto': no Ray cluster was started on this machine "
                                    "(ray start --head), so there is none to join") from None
    host, _, port = target.split("://", 1)[-1].rpartition(":")
    if not port.isdigit():
        return  # a form Ray knows and this check does not: Ray says what is wrong with it
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as e:
        raise RemoteDeviceError(f"cannot reach the Ray cluster at {target} ({e}); is it running? "
                                "(GLOW_RAY_ADDRESS or RAY_ADDRESS names it)") from None


class PartitionServer:
    """The actor: compiles its device's partitions on its first call (again after a restart: Ray
    runs the constructor again and the compiled code is gone), then runs one request at a time.
    The graphs come as a reference inside a list, so Ray passes the reference, not the value, and
    reads them only when it compiles. Compile errors are kept and said by every call, not raised
    from the constructor: an actor whose constructor raised would be restarted to fail again."""

    def __init__(self, label: str, backend: str, threads, optimize: bool):
        self.label, self.backend, self.threads, self.optimize = label, backend, threads, optimize
        self.exes, self.error, self.info = None, None, {}

    def _load(self, box: list):
        if self.exes is not None:
            return
        t0 = time.perf_counter()
        self.exes = []
        try:
            import ray
            from glow.partition.compile import compile_for_device
            from glow.partition.devices import Target
            from glow.plugins import registry

            be = registry().get(self.backend)
            device = registry().records[be.name].devices[0]  # this node's own device and figures
            for graph, native in ray.get(box[0]):
                target = Target(self.label, device, be, native)
                self.exes.append(compile_for_device(graph, target, threads=self.threads, optimize=self.optimize))
        except Exception as e:  # noqa: BLE001 - said to the caller, in its process
            self.error = (type(e).__name__, str(e), isinstance(e, GlowError))
        self.info = {"node": platform.node(), "pid": os.getpid(), "compile_s": time.perf_counter() - t0,
                     "cpu": _host_cpu()}

    def ready(self, box: list):
        self._load(box)
        return self.error, self.info

    def run(self, box: list, index: int, names: list, outs: list, *arrays):
        self._load(box)
        if self.error is not None:
            raise RuntimeError(f"compiling failed on this node: {self.error[0]}: {self.error[1]}")
        t0 = time.perf_counter()
        res = self.exes[index].run(dict(zip(names, arrays)))
        return (*[res[n] for n in outs], time.perf_counter() - t0)

    def echo(self, x):
        """For measure_link: a tensor there and back."""
        return x


def _host_cpu() -> str:
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()
    except Exception:  # noqa: BLE001 - information only
        return platform.machine()


_actor_class = None
_class_lock = threading.Lock()


def actor_class():
    global _actor_class
    with _class_lock:
        if _actor_class is None:
            _actor_class = ensure_ray().remote(PartitionServer)
        return _actor_class


class Server:
    """This process's side of one ray device: the actor, its options, and errors in its name."""

    def __init__(self, target, parts: list, *, threads=None, optimize=True):
        dev = target.device
        self.label, self.device = target.name, dev
        ex = dev.extra
        self.resources = dict(ex.get("resources") or {})
        threads = ex.get("threads", threads) if threads is None else threads
        self.num_cpus = ex.get("num_cpus", threads or 1)
        self.num_gpus = ex.get("num_gpus", 0)
        self.timeout = float(ex.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.compile_timeout = float(ex.get("compile_timeout_s", DEFAULT_COMPILE_TIMEOUT_S))
        self.max_restarts = int(ex.get("max_restarts", 3))
        why = unplaceable(self.need())
        if why:
            raise RemoteDeviceError(f"ray device '{self.label}': {why}")
        # The graphs go into the object store once; this process keeps the reference for as
        # long as the device lives, and each call passes it inside a list (Ray passes a nested
        # reference as it is), so a restarted actor can read them again to compile.
        self._box = [ensure_ray().put(parts)]
        self.actor = actor_class().options(
            num_cpus=self.num_cpus, num_gpus=self.num_gpus, resources=self.resources or None,
            max_restarts=self.max_restarts, max_task_retries=0, max_concurrency=1,
            runtime_env=ex.get("runtime_env") or None,
        ).remote(self.label, ex["remote_backend"], threads, optimize)
        self._started = self.actor.echo.remote(None)  # answered as soon as the actor exists
        self._ready = self.actor.ready.remote(self._box)
        self.info: dict = {}
        self.requests = 0  # answered
        self.sent_at: float | None = None  # when the request it holds now was sent (None: it holds none)
        self.busy_s = 0.0
        self._down_since: float | None = None  # when a request first found the actor dead

    # -- start ---------------------------------------------------------------------------------
    def executables(self, graphs: list) -> list[Executable]:
        ray = ensure_ray()
        done, _ = ray.wait([self._started], timeout=min(START_TIMEOUT_S, self.compile_timeout))
        if not done:  # Ray keeps an actor it cannot place pending: say so instead of waiting on
            self.close()
            why = unplaceable(self.need()) or (f"the nodes that offer {_fmt(self.need())} have none of it free "
                                               "(other actors or tasks hold it)")
            raise RemoteDeviceError(f"ray device '{self.label}': its actor did not start within "
                                    f"{min(START_TIMEOUT_S, self.compile_timeout):g} s: {why}")
        error, self.info = self.wait(self._ready, self.compile_timeout, "compiling its partitions")
        if error is not None:
            name, msg, is_glow = error
            where = f"ray device '{self.label}' (node {self.info.get('node')})"
            if not is_glow:
                raise InternalError(f"{where}: compiling failed: {name}: {msg}")
            import glow.errors as errors

            cls = getattr(errors, name, BackendError)
            try:
                err = cls(f"{where}: {msg}")
            except TypeError:  # an error class with more arguments than a message
                err = BackendError(f"{where}: {name}: {msg}")
            raise err
        return [RemoteExecutable(g, self, k) for k, g in enumerate(graphs)]

    # -- requests ------------------------------------------------------------------------------
    def call(self, index: int, names: list, outs: list, args: list) -> list:
        """Run partition `index` on the node; returns its outputs' object refs once it finished.
        A request sent while the actor was alive, as far as this process knew, and answered by
        its death or restart, was held by it: it fails, naming the device. One sent after such a
        failure waits for the restart (and a new compile there) and goes again, up to timeout_s;
        when no live node can host the device any more, it fails at once saying so."""
        deadline = time.monotonic() + self.timeout
        while True:
            if self._down_since is not None:
                why = self.missing()
                if why:
                    raise RemoteDeviceError(f"ray device '{self.label}': its actor is gone and cannot "
                                            f"come back: {why}")
            sent = self.sent_at = time.monotonic()
            refs = self.actor.run.options(num_returns=len(outs) + 1).remote(self._box, index, names, outs, *args)
            try:
                seconds = self.wait(refs[-1], max(deadline - time.monotonic(), 1e-3), "running a request")
                self._down_since = None
                break
            except _Restarting as e:
                held = self._down_since is None or sent < self._down_since
                if self._down_since is None:
                    self._down_since = time.monotonic()
                why = self.missing()
                if held or why or time.monotonic() >= deadline:
                    what = ("its actor died or restarted while it held this request" if held
                            else f"its actor is not back after {self.timeout:g} s")
                    after = (f"; {why}" if why else f"; Ray restarts the actor (at most {self.max_restarts} "
                             "times) and later requests are served again")
                    raise RemoteDeviceError(f"ray device '{self.label}': {what} ({e}){after}") from None
                time.sleep(RETRY_S)
            finally:
                self.sent_at = None
        self.requests += 1
        self.busy_s += seconds
        return refs[:-1]

    def wait(self, ref, timeout: float, doing: str):
        """ray.get with a timeout, every failure said in this device's name."""
        ray = ensure_ray()
        exc = ray.exceptions
        try:
            return ray.get(ref, timeout=timeout)
        except exc.GetTimeoutError:
            why = self.missing()
            raise RemoteDeviceError(f"ray device '{self.label}': no answer within {timeout:g} s while {doing}"
                                    + (f": {why}" if why else " (timeout_s sets the limit)")) from None
        except exc.RayTaskError as e:
            cause = e.cause
            if isinstance(cause, GlowError):  # the model's own error, as it would be said locally
                raise cause from None
            raise RemoteDeviceError(f"ray device '{self.label}' failed while {doing}: "
                                    f"{type(cause).__name__}: {cause}") from None
        except exc.ActorUnavailableError as e:
            raise _Restarting(_first_line(e)) from None
        except exc.RayActorError as e:
            self._down_since = self._down_since or time.monotonic()
            why = self.missing()
            after = (f"; {why}" if why else f"; Ray restarts its actor (at most {self.max_restarts} "
                     "times), later requests are served again")
            raise RemoteDeviceError(f"ray device '{self.label}': its actor died while {doing} "
                                    f"({_first_line(e)}){after}") from None
        except exc.ObjectLostError as e:
            raise RemoteDeviceError(f"ray device '{self.label}': a tensor was lost while {doing} "
                                    f"({_first_line(e)})") from None
        except exc.RayError as e:  # e.g. a runtime_env that cannot be set up on the node
            raise RemoteDeviceError(f"ray device '{self.label}': {type(e).__name__} while {doing}: "
                                    f"{_first_line(e)}") from None

    def need(self) -> dict:
        """Everything the actor reserves on its node."""
        need = dict(self.resources)
        if self.num_cpus:
            need["CPU"] = need.get("CPU", 0) + self.num_cpus
        if self.num_gpus:
            need["GPU"] = need.get("GPU", 0) + self.num_gpus
        return need

    def missing(self) -> str:
        """Why no live node can host this device any more ("" when one can)."""
        why = unplaceable(self.need())
        return why + NO_LONGER_FITS if why else ""

    def kill(self, no_restart: bool = False):
        """Kill the actor (tests and fault drills); Ray restarts it unless `no_restart`."""
        ensure_ray().kill(self.actor, no_restart=no_restart)

    def close(self):
        """End the actor for good, releasing what it reserved on its node (executable.close)."""
        import ray

        if ray.is_initialized():
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone, or Ray shut down: nothing held
                pass


def unplaceable(need: dict) -> str:
    """Why no live node of the cluster offers `need` (resource -> amount), "" when one does."""
    ray = ensure_ray()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if any(all(n.get("Resources", {}).get(k, 0) >= v for k, v in need.items()) for n in nodes):
        return ""
    offered = sorted({k for n in nodes for k in n.get("Resources", {})
                      if not k.startswith(("node:", "memory", "object_store_memory"))})
    return (f"no live node of the Ray cluster offers what it asks for ({_fmt(need)}; the {len(nodes)} "
            f"live node(s) offer {', '.join(offered) or 'nothing'})")


#: Said after `unplaceable` once a device has run: its node left the cluster.
NO_LONGER_FITS = ": the placement no longer fits, compile again for the devices there are"


def _fmt(need: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(need.items()))


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def fetch(ref, device) -> object:
    """An output left in Ray's object store, read here (Backend.to_host)."""
    ray = ensure_ray()
    timeout = float(device.extra.get("timeout_s", DEFAULT_TIMEOUT_S))
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise RemoteDeviceError(f"ray device '{device.name}': an output was not readable within "
                                f"{timeout:g} s") from None
    except (ray.exceptions.ObjectLostError, ray.exceptions.RayActorError) as e:
        raise RemoteDeviceError(f"ray device '{device.name}': an output was lost ({_first_line(e)})") from None


class RemoteExecutable(Executable):
    """A partition compiled in a ray device's actor. `run` takes and gives host arrays;
    `run_device` takes arrays or object refs and gives object refs (the multi-device runtime
    keeps them in Ray's object store between two ray devices)."""

    def __init__(self, graph, server: Server, index: int):
        super().__init__(graph)
        self.server, self.index = server, index
        self._outs = list(graph.output_names)

    def run_device(self, handles: dict) -> dict:
        names = list(self.input_names)
        refs = self.server.call(self.index, names, self._outs, [handles[n] for n in names])
        return dict(zip(self._outs, refs))

    def _run(self, feeds: dict) -> dict:
        refs = self.run_device(feeds)
        return {n: self.server.wait(r, self.server.timeout, "reading an output") for n, r in refs.items()}

    def close(self):
        self.server.close()

    @property
    def node(self) -> dict:
        """Where it runs: node name, pid, host CPU, seconds it took to compile there."""
        return dict(self.server.info)
