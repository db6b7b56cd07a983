"""A second process that builds PoCL kernels into PoCL's disk cache while this one builds others.

PoCL compiles each kernel of a program at its first launch, one at a time per process (its
kernel compiler holds a process-wide lock): light ResNet-50's 11 kernels take about 1.9 s of one
core. A built kernel goes to PoCL's cache folder (POCL_CACHE_DIR), keyed by the program (source
and options), the device, the kernel and its work-group size, and a process that launches a
kernel already there loads it (about a millisecond) instead of compiling it, even when it built
the program before the kernel arrived. So on a PoCL CPU device of a machine with two or more
cores, the first compile of a process starts one helper process for the device (its Python and
PoCL start-up overlap the graph passes), and each executable with at least MIN_KERNELS distinct
kernels hands it the program: the helper builds the program too and takes kernels from the far
end while the executable's warming thread takes them from the near end
(runtime.ClExecutable._warm_kernels); they meet in the middle.

The helper only fills a cache. The executable still launches every kernel once itself, so a
helper that dies, lags or never started costs time, never a result. GLOW_OPENCL_HELPER=0 turns
it off.

Protocol, one JSON object per line. To the helper: {"device": index, "name": device name} once,
then per executable {"job": id, "source": ..., "size": bytes, "kernels": [[name, [[numpy dtype,
value] of each argument after the buffer], global size, local size or null], ...]} (`job_kernels`)
and {"taken": [job, i]} as the executable starts its kernel i. From the helper: {"claim": [job,
i]} before it builds kernel i, {"done": [job, i]} after, {"end": job} when it stops taking
kernels of that job.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import subprocess
import sys
import threading

from glow import BackendError

#: Fewer distinct kernels than this are not worth the helper's build of the whole program.
MIN_KERNELS = 4
#: The longest an executable waits for the kernels the helper took (one kernel compile is
#: 0.05-0.3 s); after that it builds them itself.
WAIT_S = 30.0


def enabled() -> bool:
    """$GLOW_OPENCL_HELPER: 1 (default) or 0."""
    env = os.environ.get("GLOW_OPENCL_HELPER", "1").strip()
    if env not in ("0", "1"):
        raise BackendError(f"GLOW_OPENCL_HELPER must be 0 or 1, got {env!r}")
    return env == "1"


def job_kernels(warm) -> list:
    """The "kernels" of a job from an executable's warming launches [(kernel, arguments after
    the buffer, global size, local size)]."""
    return [[k.name, [[a.dtype.str, int(a)] for a in args], list(g), loc] for k, args, g, loc in warm]


def worth_starting(dev) -> bool:
    """Whether a helper can save time for `dev` (a runtime.ClDevice): PoCL's CPU device (other
    drivers build every kernel in clBuildProgram), its kernel cache on, two or more cores, and a
    Python interpreter to run it with (in an application that embeds Python, sys.executable is
    the application)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return (dev.is_cpu and "Portable Computing Language" in dev.device.platform.name
            and os.environ.get("POCL_KERNEL_CACHE", "1").strip() != "0" and cores >= 2
            and os.path.basename(sys.executable or "").lower().startswith("python"))


class BuildHelper:
    """The parent's side: the helper process, and what it has said about each job."""

    def __init__(self, index: int, name: str):
        stderr = None if os.environ.get("GLOW_VERBOSE", "") not in ("", "0") else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1)
        self.cond = threading.Condition()
        self.claimed: dict[int, set[int]] = {}
        self.done: dict[int, set[int]] = {}
        self.ended: set[int] = set()
        self.alive = True
        self._ids = itertools.count()
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, name="glow-opencl-helper", daemon=True).start()
        self._send({"device": index, "name": name})
        atexit.register(self.close)

    def _send(self, msg: dict) -> None:
        with self._write_lock:
            try:
                self.proc.stdin.write(json.dumps(msg) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):  # the helper is gone (or closed): the executable builds alone
                self._gone()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                if "claim" in msg:
                    self.claimed.setdefault(msg["claim"][0], set()).add(msg["claim"][1])
                elif "done" in msg:
                    self.done.setdefault(msg["done"][0], set()).add(msg["done"][1])
                elif "end" in msg:
                    self.ended.add(msg["end"])
                self.cond.notify_all()
        self._gone()

    def _gone(self) -> None:
        with self.cond:
            self.alive = False
            self.cond.notify_all()

    def submit(self, source: str, size: int, kernels: list) -> Job | None:
        """Hand the helper a program and its kernels' warming launches (see the protocol above)."""
        if not self.alive:
            return None
        job = Job(self, next(self._ids), len(kernels))
        self._send({"job": job.id, "source": source, "size": size, "kernels": kernels})
        return job

    def close(self) -> None:
        """End the helper: it exits when its input closes (after the kernel it is building)."""
        with self._write_lock:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Job:
    """One executable's kernels, shared with the helper."""

    def __init__(self, helper: BuildHelper, id: int, n: int):
        self.helper, self.id, self.n = helper, id, n

    def first_claimed(self) -> int:
        """The lowest kernel index the helper has taken (n: none)."""
        with self.helper.cond:
            return min(self.helper.claimed.get(self.id, ()), default=self.n)

    def take(self, i: int) -> None:
        """The executable starts kernel i: the helper takes no kernel at or below it from now."""
        self.helper._send({"taken": [self.id, i]})

    def wait(self, start: int) -> int:
        """Wait (at most WAIT_S) until the helper has built kernels start..n-1, stopped taking
        kernels of this job, or is gone; the number it built."""
        h, rest = self.helper, set(range(start, self.n))
        with h.cond:
            h.cond.wait_for(lambda: not h.alive or self.id in h.ended or rest <= h.done.get(self.id, set()),
                            timeout=WAIT_S)
            return len(h.done.get(self.id, ()))


def warm_compiler(cl, ctx) -> None:
    """Build and launch a one-line kernel: PoCL's first build loads LLVM and its kernel library
    (about 0.7 s), its first launch the work-group compiler."""
    prg = cl.Program(ctx, "kernel void glow_warm(global float* a) { a[0] += 1.0f; }").build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    queue = cl.CommandQueue(ctx)
    prg.glow_warm(queue, (1,), (1,), buf)
    queue.finish()


# ---- the helper process


def main() -> int:
    # Below the executable's process in priority: its graph passes and its own build come first;
    # the helper needs only the cores they leave.
    try:
        os.nice(10)
    except OSError:  # pragma: no cover - not allowed here: run at the same priority
        pass
    import queue
    import warnings

    import pyopencl as cl

    warnings.filterwarnings("ignore", category=cl.CompilerWarning)
    out_lock = threading.Lock()

    def say(msg: dict) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()

    first = sys.stdin.readline()
    if not first:
        return 0
    hello = json.loads(first)
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    if hello["device"] >= len(devices) or devices[hello["device"]].name != hello["name"]:
        return 1  # not the parent's device: build nothing rather than fill the cache wrongly
    ctx = cl.Context([devices[hello["device"]]])
    q = cl.CommandQueue(ctx)
    warm_compiler(cl, ctx)  # PoCL loads LLVM and its kernel library now, not with the first job
    jobs: queue.Queue = queue.Queue()
    taken: dict[int, int] = {}  # job: the highest kernel index the executable has started
    latest = [-1]
    eof = threading.Event()

    def read() -> None:
        try:
            for line in sys.stdin:
                msg = json.loads(line)
                if "taken" in msg:
                    job, i = msg["taken"]
                    taken[job] = max(taken.get(job, -1), i)
                else:
                    latest[0] = msg["job"]
                    jobs.put(msg)
        finally:  # the executable's process is ending (or garbled): stop after the kernel in hand
            eof.set()
            jobs.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (job := jobs.get()) is not None:
        jid = job["job"]
        try:
            if jid == latest[0]:  # else a newer executable came: this one's has moved on
                build_from_end(cl, ctx, q, job, say, lambda j, i: taken.get(j, -1) < i and latest[0] == j
                               and not eof.is_set())
        except Exception:  # noqa: BLE001 - the executable builds what is left, and says what fails
            pass
        say({"end": jid})
    return 0


def build_from_end(cl, ctx, q, job: dict, say, mine) -> None:
    """Build the job's program, then launch its kernels from the last one down while `mine(job, i)`
    (each once, one work-group, on zeroed memory of the executable's size: PoCL builds the kernel
    for that work-group size and caches it on disk)."""
    import numpy as np

    jid, kernels = job["job"], job["kernels"]
    prg = cl.Program(ctx, job["source"]).build()
    # Zeroed host memory the device uses in place: pages no kernel writes stay unmapped
    host = np.zeros(max(job["size"], 4), np.uint8)
    mem = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=host)
    for i in range(len(kernels) - 1, -1, -1):
        if not mine(jid, i):
            break
        say({"claim": [jid, i]})
        name, args, gsize, local = kernels[i]
        kern = cl.Kernel(prg, name)
        kern.set_args(mem, *(np.dtype(t).type(v) for t, v in args))
        cl.enqueue_nd_range_kernel(q, kern, gsize, local)
        q.finish()
        say({"done": [jid, i]})


if __name__ == "__main__":
    sys.exit(main())
