"""The conformance kit: what a backend claims, run and compared against the reference interpreter.

    glow conformance --backend NAME [--json] [--sections records,nodes,models] [--filter REGEX]
    pytest --pyargs glow.testing --glow-backend NAME

Three sections, each a list of `Check`s:

* **records**: the op records (`glow.testing.records`, plus `floor_records` for the primitives) whose
  node the backend claims, i.e. `backend.supports(node)` is true for that op, element type, shape
  and attributes. Element types the backend claims for an op that no record covers are added as
  variants of that op's records, so the manifest shows every type the predicate accepts.
* **nodes**: ONNX's own node test cases that the backend can run alone, natively or after lowering.
  A case that cannot be lowered to what the backend supports is skipped as "needs another device".
* **models**: the light models shipped in the onnx wheel, alone when the backend can run all of
  them, otherwise partitioned over the backend and a fallback device (`reference` by default),
  with objective "priority" so that the backend gets every node it can run and hold.

Each check ends as pass, fail (with the first mismatch or the error, one line), known (listed in a
known-failures file with its reason) or skip (with the reason). `Report` (conformance_report.py)
prints the support manifest (op, element types, passed/run) and the pass table; `--json` gives
the same as data. `collect`, `parametrize` and `pytest_check` run the checks as pytest tests (the
glow pytest plugin, pytest_plugin.py, adds the options and prints the report at the end).
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..errors import BackendError, GlowError, KernelNotWrittenError, LoweringError, ModelLoadError, UnsupportedOpError
from .compare import accumulates, mismatch, to_array
from .conformance_report import SECTIONS, Report
from .op_records import In, OpRecord

#: Element types tried as variants of an op's records when the backend claims them.
VARIANT_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool")
VARIANT_TOL = {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12), "float16": (5e-3, 5e-3),
               "bfloat16": (3e-2, 3e-2)}


@dataclass(frozen=True, eq=False)
class Check:
    """One thing to run: a record, a node case or a model, for the kit's backend."""

    section: str
    id: str
    op: str
    dtype: str = ""
    subject: object = field(default=None, repr=False)
    kit: Kit | None = field(default=None, repr=False)

    def run(self) -> Result:
        return self.kit.run(self)


@dataclass
class Result:
    check: Check
    status: str  # pass | fail | known | skip
    detail: str = ""
    seconds: float = 0.0
    #: A failure for want of a kernel (glow.KernelNotWrittenError): its op, and the ops of the graph
    #: the backend was given (so the report can tell which missing kernels the check needs).
    missing: str = ""
    needs: tuple = ()

    def to_json(self) -> dict:
        c = self.check
        out = {"section": c.section, "id": c.id, "op": c.op, "dtype": c.dtype, "status": self.status,
               "detail": self.detail, "seconds": round(self.seconds, 4)}
        if self.missing:
            out.update(missing=self.missing, needs=list(self.needs))
        return out


class Kit:
    """The checks for one backend, and how to run them.

    `native="floor"` restricts the backend to the primitive floor; `fallback` is the device that
    takes the nodes of a light model the backend cannot run (None: such models are skipped);
    `strict` allows no fallback at all: such a model fails (every model must run on the backend);
    `known_failures` maps check ids to reasons (`read_known_failures` of a file of your own); the
    backend's own file (`Backend.known_failures`) and glow's list for it are read as well.
    """

    def __init__(self, backend: str, *, native: str | None = None, fallback: str | None = "reference",
                 known_failures: dict | None = None, strict: bool = False):
        from ..plugins import registry
        from .node_suite import load_known_failures

        self.name = backend
        self.backend = registry().get(backend)  # unknown or unavailable: BackendError with the reason
        self.native = native
        self.strict = strict
        self.fallback = fallback if fallback != backend and not strict else None
        # Expected failures: those given here, then the backend's own file (Backend.known_failures,
        # shipped with a plugin), then glow's lists for its built-in backends.
        self.known = dict(known_failures or {})
        declared = self.backend.known_failures
        for more in (read_known_failures(declared) if declared else {}, load_known_failures(backend)):
            self.known.update({k: v for k, v in more.items() if k not in self.known})
        self.oracle_fails = load_known_failures("reference")

    # -- collection --------------------------------------------------------------------------------
    def collect(self, sections=SECTIONS, pattern: str | None = None) -> list[Check]:
        unknown = set(sections) - set(SECTIONS)
        if unknown:
            raise GlowError(f"unknown conformance section(s) {sorted(unknown)} (known: {', '.join(SECTIONS)})")
        makers = {"records": self._record_checks, "nodes": self._node_checks, "models": self._model_checks}
        checks = [c for s in SECTIONS if s in sections for c in makers[s]()]
        if pattern:
            rx = re.compile(pattern)
            checks = [c for c in checks if rx.search(c.id)]
        return checks

    def native_ops(self) -> list[str]:
        try:
            return list(self.backend.native_ops())
        except Exception:  # noqa: BLE001 - a report, not a check
            return []

    def claims(self, node) -> bool:
        """Whether the backend runs `node` natively (its predicate; with native="floor" the floor's too)."""
        from ..lowering import supports_floor

        try:
            ok = bool(self.backend.supports(node))
        except Exception:  # noqa: BLE001 - a predicate that cannot judge a node does not claim it
            return False
        return ok and (self.native != "floor" or supports_floor(node))

    def _record_checks(self) -> list[Check]:
        from .floor_records import RECORDS as FLOOR
        from .op_records import all_records

        by_op, tried, checks = defaultdict(list), defaultdict(set), []
        claimed_ops = set()
        for rec in all_records() + FLOOR:
            node = _record_node(rec)
            if node is None:
                continue
            key, dtype = (rec.domain, rec.op), _node_dtype(node)
            by_op[key].append(rec)
            tried[key].add(dtype)
            if self.claims(node):
                claimed_ops.add(key)
                checks.append(Check("records", rec.id, rec.op, dtype, rec, self))
        for key in sorted(claimed_ops):
            for dtype in VARIANT_DTYPES:
                if dtype in tried[key]:
                    continue
                for rec in [r for r in by_op[key] if _retypable(r)][:2]:
                    var = _retyped(rec, dtype)
                    node = _record_node(var)
                    if node is not None and self.claims(node):
                        checks.append(Check("records", var.id, var.op, dtype, var, self))
        return checks

    def _node_checks(self) -> list[Check]:
        from .node_suite import collect_cases

        return [Check("nodes", c.name, c.model.graph.node[0].op_type if c.model.graph.node else "", "", c, self)
                for c in collect_cases()]

    def _model_checks(self) -> list[Check]:
        from .models import light_models

        return [Check("models", c.name, "model", "float32", c, self) for c in light_models()]

    # -- running -----------------------------------------------------------------------------------
    def run(self, check: Check) -> Result:
        t0 = time.perf_counter()
        run = {"records": self._run_record, "nodes": self._run_node_case, "models": self._run_model}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            status, detail, *missing = run[check.section](check.subject)
        reason = self.known.get(check.id)
        if reason is not None and status == "fail":
            status, detail, missing = "known", f"{reason} ({detail})", []
        elif reason is not None and status == "pass":
            status, detail = "fail", f"listed as a known failure ({reason}) but passes: remove it from the list"
        return Result(check, status, detail, time.perf_counter() - t0, *missing)

    def _compile(self, model, **kw):
        import glow

        # strict: what the backend itself runs (the host takes nothing); fallback is its own section
        return glow.compile(model, backend=self.name, native=self.native, strict=True, **kw)

    def _run_record(self, rec: OpRecord):
        from ..interpreter import run_graph

        graph, feeds = rec.build()
        try:
            expected = run_graph(graph, feeds)
        except Exception as e:  # noqa: BLE001
            return "skip", f"the reference cannot run this record ({type(e).__name__}: {e})"
        try:
            exe = self._compile(graph, optimize=False)  # the node itself, not what the optimiser makes of it
        except Exception as e:  # noqa: BLE001
            return "fail", f"compile: {_err(e)}"
        return _compare_run(exe, [(feeds, list(expected.values()))], list(expected), rec.rtol, rec.atol,
                            accumulates(rec.op))

    def _run_node_case(self, case):
        if case.name in self.oracle_fails:
            return "skip", f"the reference fails it too: {self.oracle_fails[case.name]}"
        try:
            exe = self._compile(case.model)
        except LoweringError as e:
            return "skip", f"needs another device: {_stuck_ops(e)}"
        except (UnsupportedOpError, ModelLoadError) as e:
            return "skip", f"glow cannot import it: {e}"
        except Exception as e:  # noqa: BLE001
            return "fail", f"compile: {_err(e)}"
        init = {t.name for t in case.model.graph.initializer}
        names = [i.name for i in case.model.graph.input if i.name not in init]
        sets = [({n: to_array(x) for n, x in zip(names, ins)}, [to_array(e) for e in outs])
                for ins, outs in case.data_sets]
        return _compare_run(exe, sets, [o.name for o in case.model.graph.output], case.rtol, case.atol,
                            accumulates(case.model))

    def _run_model(self, case):
        import glow

        how = "alone"
        try:
            exe = self._compile(case.model_path)
        except (LoweringError, BackendError) as e:
            if self.strict:
                return "fail", f"needs host fallback ({_stuck_ops(e)}); strict allows none"
            if not self.fallback:
                return "skip", f"needs another device ({_stuck_ops(e)}) and no fallback device was given"
            try:
                exe = glow.compile(case.model_path, devices=[self.name, self.fallback], native=self.native,
                                   objective="priority")
            except Exception as e2:  # noqa: BLE001
                return "fail", f"compile partitioned with {self.fallback}: {_err(e2)}"
            how = _placement_summary(exe, self.name, self.fallback)
        except Exception as e:  # noqa: BLE001
            return "fail", f"compile: {_err(e)}"
        names = [o.name for o in case.load().graph.output]
        status, detail, *missing = _compare_run(exe, case.data_sets, names, case.rtol, case.atol)
        exe.close()
        return status, (how if status == "pass" else f"{how}: {detail}"), *missing


def _compare_run(exe, data_sets, out_names, rtol, atol, accumulated=False):
    for feeds, expected in data_sets:
        try:
            got = exe.run(feeds)
        except KernelNotWrittenError as e:  # the author's work in progress: grouped by op in the report
            return "fail", str(e), e.op, _graph_ops(exe)
        except Exception as e:  # noqa: BLE001
            return "fail", f"run: {_err(e)}"
        for name, exp in zip(out_names, expected):
            m = mismatch(exp, got.get(name), rtol, atol, name, accumulated=accumulated)
            if m:
                return "fail", m
    return "pass", ""


def _graph_ops(exe) -> tuple:
    """The ops of the graph a single-backend executable runs (its backend's kernels); () for a
    partitioned one."""
    graph = None if getattr(exe, "placement", None) is not None else getattr(exe, "graph", None)
    return tuple(sorted({n.op.name for n in graph.nodes})) if graph is not None else ()


def _err(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:400]}"


def _stuck_ops(e: BaseException) -> str:
    """'cannot run A (x1), B (x2)' from a LoweringError's message, else the message."""
    msg = " ".join(str(e).split())
    head, sep, ops = msg.rpartition("supported ops: ")
    return f"cannot run {ops}" if sep else msg[:300]


def _placement_summary(exe, name: str, fallback: str) -> str:
    placement = getattr(exe, "placement", None)
    device_of = getattr(placement, "device_of", None) or {}
    counts = Counter(device_of.values())
    total = sum(counts.values())
    return f"partitioned with {fallback}: {counts.get(name, 0)}/{total} nodes on {name}"


def _record_node(rec: OpRecord):
    """The record's node, or None when the record does not build (an element type the op refuses)."""
    try:
        graph, _ = rec.build()
    except GlowError:
        return None
    return graph.nodes[0] if graph.nodes else None


def _node_dtype(node) -> str:
    """The element type a node is about: its first non-bool input's (Where's X, not its condition)."""
    names = [getattr(getattr(v.type, "dtype", None), "name", str(v.type)) for v in node.inputs if v is not None]
    names = names or [getattr(getattr(v.type, "dtype", None), "name", str(v.type)) for v in node.outputs]
    return next((n for n in names if n != "bool"), names[0] if names else "")


def _retypable(rec: OpRecord) -> bool:
    ins = [i for i in rec.inputs if isinstance(i, In)]
    return bool(ins) and len({i.dtype for i in ins}) == 1


def _retyped(rec: OpRecord, dtype: str) -> OpRecord:
    """`rec` with every random input of element type `dtype` (integers drawn from 1..5: no zero divisors)."""
    def retype(i):
        if not isinstance(i, In):
            return i
        if dtype in VARIANT_TOL:
            return dataclasses.replace(i, dtype=dtype)
        return dataclasses.replace(i, dtype=dtype, low=1, high=5)

    rtol, atol = VARIANT_TOL.get(dtype, (0.0, 0.0))
    base = rec.id[len(rec.op) + 1:]
    return dataclasses.replace(rec, inputs=[retype(i) for i in rec.inputs], name=f"{base}-as-{dtype}",
                               rtol=max(rtol, rec.rtol if dtype in VARIANT_TOL else 0.0),
                               atol=max(atol, rec.atol if dtype in VARIANT_TOL else 0.0))


def run_conformance(backend: str, *, sections=SECTIONS, pattern: str | None = None, native: str | None = None,
                    fallback: str | None = "reference", known_failures: dict | None = None,
                    progress=None, jobs: int = 1, strict: bool = False) -> Report:
    """Collect and run every check for `backend`; `progress(done, total, check)` after each one.

    `jobs > 1` runs the checks in that many fresh processes (the light models first, as they take
    longest); the processes find plugins as a new `glow` process would (entry points, plugins.toml).
    """
    kit = Kit(backend, native=native, fallback=fallback, known_failures=known_failures, strict=strict)
    checks = kit.collect(sections, pattern)
    if jobs > 1 and len(checks) > 1:
        results = _run_in_processes(kit, checks, jobs, progress)
    else:
        results = []
        for i, c in enumerate(checks):
            results.append(kit.run(c))
            if progress:
                progress(i + 1, len(checks), c)
    return Report(backend, results, kit.native_ops())


def _run_in_processes(kit: Kit, checks: list[Check], jobs: int, progress) -> list[Result]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    options = (kit.name, kit.native, kit.fallback, kit.known, kit.strict)
    order = sorted(range(len(checks)), key=lambda i: checks[i].section != "models")
    results: list = [None] * len(checks)
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init, initargs=options) as pool:
        futures = {pool.submit(_worker_run, checks[i].section, checks[i].id): i for i in order}
        for done, fut in enumerate(as_completed(futures), 1):
            i = futures[fut]
            results[i] = Result(checks[i], *fut.result())
            if progress:
                progress(done, len(checks), checks[i])
    return results


_WORKER: dict = {}


def _worker_init(backend, native, fallback, known, strict):
    _WORKER["kit"] = Kit(backend, native=native, fallback=fallback, known_failures=known, strict=strict)


def _worker_run(section: str, check_id: str):
    kit = _WORKER["kit"]
    if section not in _WORKER:
        _WORKER[section] = {c.id: c for c in kit.collect([section])}
    r = kit.run(_WORKER[section][check_id])
    return r.status, r.detail, r.seconds, r.missing, r.needs


def checkable_backends() -> tuple[list[str], dict[str, str]]:
    """The available backends `--all` checks, and those it leaves out with why: a backend whose
    devices are all remote (ray) runs another backend's code, which is checked as that backend."""
    from ..plugins import registry

    reg, names, left_out = registry(), [], {}
    for name in reg.available():
        devices = reg.records[name].devices
        if devices and all(d.kind == "remote" for d in devices):
            left_out[name] = "remote devices: checked as the backend they run"
        else:
            names.append(name)
    return names, left_out


def read_known_failures(path: str) -> dict[str, str]:
    """`check id  # reason` per line, as in glow's own known_failures/*.txt (a reason is required)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise GlowError(f"{path}: cannot read the known-failures file ({e.strerror})") from None
    out = {}
    for lineno, line in enumerate(lines, 1):
        name, _, reason = line.strip().partition("#")
        if not name.strip():
            continue
        if not reason.strip():
            raise GlowError(f"{path}:{lineno}: known failure '{name.strip()}' has no reason")
        out[name.strip()] = reason.strip()
    return out


# -- pytest ----------------------------------------------------------------------------------------
#: Results of the checks run through `pytest_check`, for the summary the glow pytest plugin prints.
PYTEST_RESULTS: list[Result] = []
_KITS: dict = {}


def kit_for(backend: str, **kw) -> Kit:
    """One Kit per backend and options in this process (pytest collection and runs share it)."""
    key = (backend, tuple(sorted((k, str(v)) for k, v in kw.items())))
    if key not in _KITS:
        _KITS[key] = Kit(backend, **kw)
    return _KITS[key]


def collect(backend: str, sections=SECTIONS, pattern: str | None = None, **kw) -> list[Check]:
    """The checks for `backend` (see `Kit`), e.g. to parametrize a test in a backend's own package."""
    return kit_for(backend, **kw).collect(sections, pattern)


def parametrize(metafunc, backend: str | None = None) -> None:
    """The body of a `pytest_generate_tests` hook: parametrize the test's `check` argument with the
    kit's checks for `backend` (default: `--glow-backend`, else reference; "all": every backend
    `glow conformance --all` checks; or names joined by commas), honouring the glow pytest plugin's
    options --glow-sections, --glow-fallback, --glow-native, --glow-known-failures, --glow-strict."""
    if "check" not in metafunc.fixturenames:
        return
    cfg = metafunc.config

    def option(name, default=None):
        try:
            return cfg.getoption(name) or default
        except ValueError:  # the plugin is not loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD): defaults
            return default

    backend = backend or option("--glow-backend", "reference")
    names = checkable_backends()[0] if backend == "all" else [b.strip() for b in backend.split(",") if b.strip()]
    fallback = option("--glow-fallback", "reference")
    known_path = option("--glow-known-failures")
    sections = [s.strip() for s in option("--glow-sections", ",".join(SECTIONS)).split(",") if s.strip()]
    checks = [c for name in names for c in collect(
        name, sections, native=option("--glow-native"), fallback=None if fallback == "none" else fallback,
        known_failures=read_known_failures(known_path) if known_path else None, strict=bool(option("--glow-strict")))]
    prefix = len(names) > 1
    metafunc.parametrize("check", checks, ids=[f"{c.kit.name + '/' if prefix else ''}{c.section}/{c.id}"
                                               for c in checks])


def pytest_check(check: Check) -> Result:
    """Run `check` inside a pytest test: fail with the one-line reason, skip or xfail as the kit says."""
    import pytest

    r = check.run()
    PYTEST_RESULTS.append(r)
    if r.status == "skip":
        pytest.skip(r.detail)
    if r.status == "known":
        pytest.xfail(r.detail)
    if r.status == "fail":
        pytest.fail(r.detail, pytrace=False)
    return r
