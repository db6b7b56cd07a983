"""Running one case on the backend, the reference and onnxruntime, and classifying the result.

Categories (see docs/fuzzing.md): pass; on-host (right, with nodes the backend cannot run on the
host: glow.partition.host); both-refuse (the reference and the backend raise a
GlowError: a model glow does not take, consistently); refused (strict=True only: the reference runs
it, the backend says UnsupportedOp/Lowering/Backend error); ambiguous (glow's backends agree, onnxruntime differs
and onnx.reference does not side with onnxruntime: a spec ambiguity, verdict recorded). Failures:
mismatch (backend != reference), ort-mismatch (glow != onnxruntime and onnx.reference agrees with
onnxruntime), error (one side raises a GlowError the other does not), internal (a non-GlowError
escaped), crash, hang, unstable (with twice=True: a second compile in the same process gives other
outputs).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import select
import subprocess
import sys
import tempfile
import time

import numpy as np

from ..compare import mismatch
from .worker import HEADER, send

FAILING = ("mismatch", "ort-mismatch", "error", "internal", "crash", "hang", "unstable")
REFUSALS = ("UnsupportedOpError", "LoweringError", "BackendError", "NeedsInputValues")
STARTUP_S = 300.0  # importing glow on a loaded machine; not part of a case's timeout


class Worker:
    """One worker process (`glow` or `ort`), restarted after a crash or a timeout."""

    def __init__(self, mode="glow", timeout=60.0):
        self.mode, self.timeout, self.proc, self.err = mode, timeout, None, None

    def _start(self):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "glow.testing.fuzz.worker", self.mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        return self._reply(STARTUP_S, "starting")

    def _reply(self, seconds, doing):
        """The next reply within `seconds`, or a crash/hang verdict (the worker then killed)."""
        deadline = _now() + seconds
        head = self._read(HEADER.size, deadline)
        if head is None:
            self.close()
            return dict(status="hang", msg=f"no answer within {seconds:g}s {doing} (worker killed)")
        if len(head) < HEADER.size:
            return self._died()
        body = self._read(HEADER.unpack(head)[0], deadline)
        if not body:
            return self._died() if body == b"" else dict(status="hang", msg="reply cut off")
        return pickle.loads(body)

    def _read(self, n, deadline):
        buf = b""
        fd = self.proc.stdout.fileno()
        while len(buf) < n:
            left = deadline - _now()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                return b""
            buf += chunk
        return buf

    def call(self, req: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            ready = self._start()
            if ready.get("status") != "ready":
                return ready
        try:
            send(self.proc.stdin, req)
        except (BrokenPipeError, OSError):
            return self._died()
        return self._reply(self.timeout, "compiling and running")

    def _died(self):
        rc = self.proc.wait()
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip().splitlines()[-5:]
        self.proc = None
        why = f"signal {-rc}" if rc < 0 else f"exit {rc}"
        return dict(status="crash", msg=f"worker died ({why}): " + " | ".join(tail)[-600:])

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def _now():
    return time.monotonic()


def have_ort() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def tolerance(expected: np.ndarray, half=False):
    """rtol, atol for an output: float16 looser; atol scales with the output's magnitude.

    `half`: the model computes in float16 somewhere; then every float output gets float16's
    tolerance, since implementations may keep float16 intermediates in float32 (onnxruntime's CPU
    kernels do) and a float32 output computed from them differs in float16's last bits."""
    scale = 1.0
    if expected.dtype.kind == "f" and expected.size:
        finite = np.abs(expected[np.isfinite(expected)].astype(np.float64))
        scale = max(1.0, float(finite.max()) if finite.size else 1.0)
    if expected.dtype == np.float16 or half:
        return 2e-2, 2e-2 * scale
    return 1e-4, 2e-5 * scale


def uses_float16(model_bytes) -> bool:
    import onnx

    try:
        m = onnx.load_from_string(model_bytes)
    except Exception:  # not a model: the workers report that
        return False
    g, f16 = m.graph, onnx.TensorProto.FLOAT16
    return (any(v.type.tensor_type.elem_type == f16 for v in g.input)
            or any(t.data_type == f16 for t in g.initializer)
            or any(a.name == "to" and a.i == f16 for n in g.node for a in n.attribute))


def compare_outputs(expected: dict, actual: dict, half=False) -> str | None:
    for name, e in expected.items():
        if name not in actual:
            return f"output {name} missing"
        rtol, atol = tolerance(e, half)
        m = mismatch(e, actual[name], rtol, atol, what=name)
        if m:
            return m
    return None


def onnx_reference(model_bytes, feeds) -> dict | None:
    """onnx.reference's outputs, or None when it cannot run the model."""
    try:
        import onnx
        from onnx.reference import ReferenceEvaluator

        m = onnx.load_from_string(model_bytes)
        names = [o.name for o in m.graph.output]
        vals = ReferenceEvaluator(m).run(None, dict(feeds))
        return {n: np.asarray(v) for n, v in zip(names, vals)}
    except Exception:  # onnx.reference has gaps of its own; no verdict then
        return None


class Runner:
    """Runs cases for one backend: a glow worker (reference + backend) and, if installed, an ort one."""

    def __init__(self, backend, native=None, timeout=60.0, use_ort=None, twice=False, strict=False):
        self.backend, self.native, self.twice, self.strict = backend, native, twice, strict
        self.glow = Worker("glow", timeout)
        self.ort = Worker("ort", timeout) if (have_ort() if use_ort is None else use_ort) else None

    def close(self):
        self.glow.close()
        if self.ort:
            self.ort.close()

    def run(self, model_bytes: bytes, feeds: dict) -> dict:
        """The verdict for one model: {'category', 'detail', ...}."""
        req = dict(model=model_bytes, feeds=feeds)
        ref = self.glow.call(dict(req, backend="reference", native=None))
        if self.backend == "reference" and self.native is None:
            be = ref
        else:
            be = self.glow.call(dict(req, backend=self.backend, native=self.native, twice=self.twice,
                                     strict=self.strict))
        ort = self.ort.call(req) if self.ort else None
        half = uses_float16(model_bytes)
        v = classify(ref, be, ort, self.backend == "reference" and self.native is None, half)
        if v["category"] in ("ort-mismatch",):
            onnx_ref = onnx_reference(model_bytes, feeds)
            if onnx_ref is None:
                v["onnx_reference"] = "cannot run the model"
            else:
                glow_side = compare_outputs(onnx_ref, ref["outputs"], half)
                ort_side = compare_outputs(onnx_ref, ort["outputs"], half)
                v["onnx_reference"] = ("agrees with onnxruntime" if ort_side is None else
                                       "agrees with glow" if glow_side is None else "agrees with neither")
                if ort_side is not None:
                    v["category"] = "ambiguous"  # not glow's fault beyond doubt: recorded, not failing
        return v


def _err(r):
    return f"{r.get('kind', r['status'])}: {r.get('msg', '')}"[:500]


def classify(ref, be, ort, same, half=False) -> dict:
    for who, r in (("backend", be), ("reference", ref)):
        if r["status"] in ("crash", "hang", "unstable"):
            return dict(category=r["status"], detail=f"{who}: {r['msg']}")
        if r["status"] == "internal":
            return dict(category="internal", detail=f"{who}: {_err(r)}", tb=r.get("tb", ""))
    if ref["status"] == "error" and be["status"] == "error":
        return dict(category="both-refuse", detail=_err(be), ort=ort and ort["status"])
    if be["status"] == "error":
        cat = "refused" if be["kind"] in REFUSALS else "error"
        return dict(category=cat, detail=f"backend: {_err(be)} (the reference runs it)")
    if ref["status"] == "error":
        return dict(category="error", detail=f"reference: {_err(ref)} (the backend runs it)")
    if not same:
        m = compare_outputs(ref["outputs"], be["outputs"], half)
        if m:
            d = dict(category="mismatch", detail=f"backend vs reference: {m}")
            if ort and ort["status"] == "ok":
                d["ort"] = ("onnxruntime agrees with the reference"
                            if compare_outputs(ort["outputs"], ref["outputs"], half) is None else
                            "onnxruntime agrees with the backend"
                            if compare_outputs(ort["outputs"], be["outputs"], half) is None else
                            "onnxruntime agrees with neither")
            return d
    if ort and ort["status"] == "ok":
        m = compare_outputs(ort["outputs"], ref["outputs"], half)
        if m:
            return dict(category="ort-mismatch", detail=f"glow vs onnxruntime: {m}")
    if be.get("host"):  # right, with what the backend cannot run on the host (glow.partition.host)
        return dict(category="on-host", detail=f"on the host: {be['host']}", ort=ort["status"] if ort else
                    "not installed")
    return dict(category="pass", detail="", ort=ort["status"] if ort else "not installed")
