"""ONNX's own operator test cases (shipped in the onnx wheel), run on any glow backend.

    python -m glow.testing.node_suite --backend reference [--filter REGEX] [--show-failures]

Known failures per backend live in `known_failures/<backend>.txt`, one `case_name  # reason` line each.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import sys
import time
import warnings

from .compare import accumulates, mismatch, to_array

KNOWN_DIR = os.path.join(os.path.dirname(__file__), "known_failures")


@functools.lru_cache(maxsize=1)
def collect_cases():
    """All node cases, sorted by name (about 1,900 in onnx 1.23)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return tuple(sorted(cases, key=lambda c: c.name))


def case_by_name() -> dict:
    return {c.name: c for c in collect_cases()}


def load_known_failures(backend: str) -> dict[str, str]:
    """case name -> reason, from known_failures/<backend>.txt (missing file = no known failures)."""
    path = os.path.join(KNOWN_DIR, f"{backend}.txt")
    out: dict[str, str] = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            name, reason = name.strip(), reason.strip()
            if not reason:
                raise ValueError(f"{path}:{lineno}: known failure '{name}' has no reason")
            out[name] = reason
    return out


#: Known-failure reasons that start with this mark cases whose expected output is one particular
#: random draw (Bernoulli): a run may match it by chance, which does not make the entry stale.
RANDOM_OUTPUT = "random output"


def may_pass(reason: str) -> bool:
    return reason.startswith(RANDOM_OUTPUT)


def check_known(err: str | None, reason: str | None) -> None:
    """The pytest verdict of one case against its known-failures entry: an unlisted case must
    pass; a listed one must fail (so the list stays true; xfail with its reason), unless its
    output is random and matched by chance."""
    import pytest

    if reason is None:
        assert err is None, err
        return
    if err is None and may_pass(reason):
        return
    assert err is not None, f"listed as a known failure ({reason}) but passes now: remove it"
    pytest.xfail(reason)


def run_case(case, backend: str = "reference", native: str | None = None,
             fallback: str | None = None) -> str | None:
    """Run one case; None on success, else a one-line failure description. With `fallback` (a
    device such as "reference"), the partitioner places what `backend` cannot run there."""
    import glow
    import numpy as np

    model = case.model
    try:
        if fallback:
            exe = glow.compile(model, devices=[backend, fallback], native=native)
        else:
            exe = glow.compile(model, backend=backend, native=native, strict=True)  # the backend alone
    except Exception as e:  # noqa: BLE001 - reported as the case's failure
        return f"compile: {type(e).__name__}: {e}"
    init = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    summed = accumulates(model)
    for inputs, expected in case.data_sets:
        feeds = {n: to_array(x) for n, x in zip(names, inputs)}
        try:
            with np.errstate(all="ignore"):
                got = exe.run(feeds)
        except Exception as e:  # noqa: BLE001
            return f"run: {type(e).__name__}: {e}"
        outs = [o.name for o in model.graph.output]
        for name, exp in zip(outs, expected):
            m = mismatch(to_array(exp), got.get(name), case.rtol, case.atol, name, accumulated=summed)
            if m:
                return m
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m glow.testing.node_suite", description=__doc__)
    p.add_argument("--backend", default="reference")
    p.add_argument("--native", default=None, help="restrict the backend's native ops (e.g. 'floor')")
    p.add_argument("--filter", default=None, help="regex on case names")
    p.add_argument("--fallback", default=None, metavar="DEVICE",
                   help="partition each case over the backend and this host device (e.g. reference): "
                        "counts what the backend runs with host fallback; no known-failures check")
    p.add_argument("--show-failures", action="store_true")
    p.add_argument("--write-known", metavar="FILE", help="write failures as a known-failures file")
    a = p.parse_args(argv)
    cases = [c for c in collect_cases() if not a.filter or re.search(a.filter, c.name)]
    key = a.backend if not a.native else f"{a.backend}-{a.native}"
    known = {} if a.fallback else load_known_failures(key)
    fails: dict[str, str] = {}
    t0 = time.time()
    for c in cases:
        r = run_case(c, a.backend, a.native, a.fallback)
        if r:
            fails[c.name] = r
    dt = time.time() - t0
    passed = len(cases) - len(fails)
    label = key + (f" + {a.fallback} fallback" if a.fallback else "")
    print(f"{label}: {passed}/{len(cases)} passed in {dt:.1f}s")
    if a.show_failures:
        for n, r in sorted(fails.items()):
            print(f"  FAIL {n}: {r[:300]}")
        reasons = collections.Counter(known.get(n, "(not listed)") for n in fails)
        for r, k in reasons.most_common():
            print(f"  {k:4d}  {r}")
    new = sorted(set(fails) - set(known))
    fixed = sorted(n for n in known if n in {c.name for c in cases} and n not in fails and not may_pass(known[n]))
    if a.fallback:
        return 0
    if new:
        print(f"{len(new)} failing case(s) not in the known-failures list")
    if fixed:
        print(f"{len(fixed)} known failure(s) now pass: {fixed[:20]}")
    if a.write_known:
        with open(a.write_known, "w") as f:
            for n in sorted(fails):
                f.write(f"{n}  # {known.get(n, fails[n][:120])}\n")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
