"""Generated docs are current: docs/api.md is what scripts/gen_api_doc.py writes from today's
docstrings, and docs/ops.md's op-table columns are what scripts/gen_ops_doc.py writes from today's
op table (its pass counts need a node-suite run per backend, minutes each, so they are read back
from the file; `python scripts/gen_ops_doc.py` refreshes them)."""

import importlib.util
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def first_difference(want: str, got: str) -> str:
    for i, (a, b) in enumerate(zip(want.splitlines(), got.splitlines())):
        if a != b:
            return f"line {i + 1}:\n  generated: {a}\n  in file:   {b}"
    return f"lengths differ ({want.count(chr(10))} vs {got.count(chr(10))} lines)"


def test_api_md_is_current():
    want = script("gen_api_doc").render()
    got = read("docs/api.md")
    assert got == want, ("docs/api.md is stale (run python scripts/gen_api_doc.py): "
                         + first_difference(want, got))


def test_api_md_covers_the_public_surface():
    import glow

    text = read("docs/api.md")
    missing = [n for n in glow.__all__ if f"`glow.{n}" not in text]
    assert not missing, f"docs/api.md lacks {missing}"


@pytest.fixture(scope="module")
def ops_doc():
    from glow.testing.node_suite import collect_cases

    gen = script("gen_ops_doc")
    text = read("docs/ops.md")
    return gen, text, collect_cases()


def test_ops_md_is_current(ops_doc):
    gen, got, cases = ops_doc
    want = gen.render(cases, *gen.counts_from_doc(got))
    assert got == want, ("docs/ops.md is stale (run python scripts/gen_ops_doc.py, or with "
                         "--keep-counts to keep the pass counts): " + first_difference(want, got))


def test_ops_md_pass_counts_add_up(ops_doc):
    """The counts read back are consistent: each backend's total is the sum of its column."""
    gen, text, _ = ops_doc
    backends, passes, totals = gen.counts_from_doc(text)
    assert backends and all(sum(passes[b].values()) == totals[b] for b in backends), \
        {b: (sum(passes[b].values()), totals[b]) for b in backends}
