"""Generated docs are current: docs/api.md is what scripts/gen_api_doc.py writes from today's
docstrings, and docs/ops.md's op-table columns are what scripts/gen_ops_doc.py writes from today's
op table (its pass counts need a node-suite run per backend, minutes each, so they are read back
from the file; `python scripts/gen_ops_doc.py` refreshes them)."""

import importlib.util
import os
import re
import shlex

import pytest
from helpers import backend_unavailable

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


# -- docs/user-guide.md: its examples run, its commands exist, its variable table is complete -----

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def guide_blocks(lang):
    return [code for kind, code in FENCE.findall(read("docs/user-guide.md")) if kind == lang]


@pytest.mark.skipif(backend_unavailable("cpu") is not None, reason=str(backend_unavailable("cpu")))
def test_user_guide_python_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "user_guide"}
    for code in guide_blocks("python"):
        exec(compile(code, "docs/user-guide.md", "exec"), namespace)  # noqa: S102 - the guide's own
    out = capsys.readouterr().out
    assert "['image'] ['probs']\nimage (1, 1, 28, 28) float32\nprobs (1, 10) float32\n(1, 10)\nTrue\nTrue\n" in out
    assert "True (1, 10)" in out
    assert "True\nTrue\n['probs']\nnode " in out and "profile by node: " in out  # run(outputs=), profile
    assert "ms in all" in out and out.count("True\n") >= 3  # the submitted future's result
    assert "('N', 4)\n(1, 4)\n(3, 4)\n(5, 4)\nTrue\n" in out  # ..., then the saved executable's run
    assert "unknown input name(s) ['img']; the graph's inputs are ['image']" in out
    assert "unknown backend 'no-such-backend'" in out and "{'Frobnicate': 1}" in out


def guide_commands():
    """Every `glow ...` command line in the guide's bash blocks, as argv lists (environment
    assignments in front and `; ...` after dropped)."""
    out = []
    for code in guide_blocks("bash"):
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words.pop(0)
            if words and words[0] == "glow":
                cut = [i for i, w in enumerate(words) if w.endswith(";")]
                words = words[:cut[0] + 1] if cut else words
                words[-1] = words[-1].rstrip(";")
                out.append(words[1:])
    return out


def test_user_guide_commands_parse_with_todays_cli():
    """The guide's commands and options exist (they were run by hand when written: see the guide;
    running them all here would take minutes). A renamed or removed option fails here."""
    from glow.cli import build_parser

    commands = guide_commands()
    assert len(commands) >= 15
    for argv in commands:
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:
            if e.code != 0 or argv != ["--version"]:  # --version prints and exits 0 while parsing
                pytest.fail(f"docs/user-guide.md: `glow {' '.join(argv)}` does not parse (exit {e.code})")
    subcommands = {argv[0] for argv in commands}
    assert {"run", "compile", "partition", "bench", "backends", "conformance", "new-backend"} <= subcommands


def test_user_guide_lists_every_environment_variable_glow_reads():
    used = set()
    for top in ("core", "backends"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith(".py"):
                    with open(os.path.join(folder, n)) as f:
                        used |= set(re.findall(r"\bGLOW_[A-Z][A-Z0-9_]*\b", f.read()))
    text = read("docs/user-guide.md")
    table = text[text.index("## Environment variables"):]
    listed = set(re.findall(r"^\| `(GLOW_[A-Z0-9_]+)` \|", table, re.MULTILINE))
    assert used - listed == set(), f"read by glow, missing from the user guide's table: {sorted(used - listed)}"
    assert listed - used == set(), f"in the user guide's table, read nowhere: {sorted(listed - used)}"


def test_the_default_backend_is_what_the_docs_say(monkeypatch):
    """user-guide.md and backends.md: the default is the available backend with the highest
    declared priority (cuda, cpu, opencl, reference). If the rule changes, so must they."""
    from glow import plugins

    reg = plugins.registry()
    for name, doc in (("user-guide", "docs/user-guide.md"), ("backends", "docs/backends.md")):
        assert "highest" in read(doc) and "priority" in read(doc), name
    for n in ("cuda", "cpu", "opencl"):
        if backend_unavailable(n) is None:
            assert reg.default().name == n
            monkeypatch.setattr(reg.records[n], "available", False)
    assert reg.default().name == "reference"


def test_user_guide_says_what_is_missing_only_while_it_is():
    """Sentences about what glow lacks today (other work may add these): each must go when the
    feature comes."""
    import inspect

    import glow
    from glow.cli import build_parser

    text = " ".join(read("docs/user-guide.md").split())
    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]
    run_options = {s for a in run_parser._actions for s in a.option_strings}
    assert ("`glow run` has no `--threads` option" in text) == ("--threads" not in run_options)
    assert ("there is no choice of outputs" in text) == (
        "outputs" not in inspect.signature(glow.Executable.run).parameters)
