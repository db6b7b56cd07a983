"""The crash-isolated runner: `python -m glow.testing.fuzz.worker [glow|ort]`.

It reads requests from stdin and writes replies to its original stdout, each a length-prefixed
pickle. A `glow` worker imports glow and never onnxruntime (importing onnxruntime loads libraries
that can hide missing symbols in glow's generated code, finding 2 of issue 14); an `ort` worker
runs onnxruntime for the three-way comparison. A crash or hang kills only the worker; the parent
(runner.Worker) notices, reports it and starts a fresh one.

Test hooks (never set outside tests): GLOW_FUZZ_INJECT="abort:OP", "hang:OP", "corrupt:OP" or
"flaky:OP" makes a glow worker abort, hang, add 1 to every float output, or add 1 to the second
compile's outputs (with `twice`), for a non-reference backend running a model containing OP.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time
import traceback
import warnings

import numpy as np

HEADER = struct.Struct("<Q")


def send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(HEADER.pack(len(data)) + data)
    f.flush()


def recv(f):
    head = f.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (n,) = HEADER.unpack(head)
    return pickle.loads(f.read(n))


def _inject(req) -> str | None:
    spec = os.environ.get("GLOW_FUZZ_INJECT", "")
    if ":" not in spec or req["backend"] == "reference":
        return None
    import onnx

    what, op = spec.split(":", 1)
    try:
        model = onnx.load_from_string(req["model"])
    except Exception:  # not a model: glow's loader reports that
        return None
    return what if any(n.op_type == op for n in model.graph.node) else None


def run_glow(req) -> dict:
    import glow

    inject = _inject(req)
    if inject == "abort":
        os.abort()
    if inject == "hang":
        while True:
            time.sleep(1)
    kw = dict(backend=req["backend"], native=req.get("native"), strict=req.get("strict", False))
    try:
        with warnings.catch_warnings():  # host fallback is reported in the reply, not on stderr
            warnings.simplefilter("ignore", glow.GlowWarning)
            exe = glow.compile(req["model"], **kw)
            res = exe.run(dict(req["feeds"]))
        outs = {k: np.asarray(v) for k, v in res.items()}
        host = _on_host(exe)
        if req.get("twice"):  # compiling is pure: a second compile gives bit-identical outputs
            again = glow.compile(req["model"], **kw)
            res2 = {k: np.asarray(v) for k, v in again.run(dict(req["feeds"])).items()}
            if inject == "flaky":
                res2 = {k: v + 1 if v.dtype.kind == "f" else v for k, v in res2.items()}
            diff = [k for k in outs if not np.array_equal(outs[k], res2.get(k), equal_nan=outs[k].dtype.kind == "f")]
            if diff:
                return dict(status="unstable", msg=f"a second compile in the same process gives other "
                                                   f"values for {', '.join(diff)}")
    except glow.GlowError as e:
        if type(e).__name__ == "InternalError":  # glow's own "this is a glow bug" wrapper
            return dict(status="internal", kind="InternalError", msg=str(e), tb=traceback.format_exc())
        return dict(status="error", kind=type(e).__name__, msg=str(e))
    except Exception as e:  # anything else escaping compile or run is a glow bug
        return dict(status="internal", kind=type(e).__name__, msg=str(e)[:2000], tb=traceback.format_exc())
    if inject == "corrupt":
        outs = {k: v + 1 if v.dtype.kind == "f" else v for k, v in outs.items()}
    return dict(status="ok", outputs=outs, host=host)


def _on_host(exe) -> str | None:
    """The ops a host fallback (glow.partition.host) ran on the host, as "NonZero x1, ...", or None."""
    import collections

    pl = getattr(exe, "placement", None)
    if pl is None or len(pl.targets) < 2:
        return None
    host = pl.targets[1].name
    ops = collections.Counter(n.op.name for n in pl.graph.nodes if pl.device_of[n.name] == host)
    return ", ".join(f"{op} x{k}" for op, k in sorted(ops.items())) or None


def run_ort(req) -> dict:
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(req["model"], so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        vals = sess.run(names, dict(req["feeds"]))
    except Exception as e:  # onnxruntime refusing a model is a fact about onnxruntime, not glow
        return dict(status="error", kind=type(e).__name__, msg=str(e).splitlines()[0][:500])
    return dict(status="ok", outputs={n: np.asarray(v) for n, v in zip(names, vals)})


def main(argv=None) -> int:
    mode = (argv or sys.argv[1:] or ["glow"])[0]
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever native code prints goes to stderr, never into the replies
    inp = sys.stdin.buffer
    handler = run_ort if mode == "ort" else run_glow
    if mode == "ort":
        import onnxruntime  # noqa: F401
    else:
        import glow  # noqa: F401
    send(out, dict(status="ready"))  # the per-case timeout starts after the imports
    while True:
        req = recv(inp)
        if req is None:
            return 0
        reply = handler(req)
        if mode != "ort":
            assert "onnxruntime" not in sys.modules, "the glow worker must not import onnxruntime"
        send(out, reply)


if __name__ == "__main__":
    sys.exit(main())
