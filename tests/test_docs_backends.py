"""docs/backends.md, the backend authoring guide: every code block in it runs.

Python blocks run in order in one namespace (the example backend importable, as after
`pip install examples/glow-backend-example`); TOML blocks are loaded the way glow loads them; shell
blocks run with bash in one empty folder, in a throwaway venv over the test environment (its
`glow`, `pip` and `pytest` first on PATH), so what they install stays there.
"""

import os
import re
import sys

import pytest
from glow import plugins
from plugin_env import PluginEnv

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = os.path.join(os.path.dirname(__file__), "..")
DOC = os.path.join(ROOT, "docs", "backends.md")
EXAMPLE = os.path.join(ROOT, "examples", "glow-backend-example")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(lang=None):
    with open(DOC) as f:
        text = f.read()
    found = [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    return [code for kind, code in found if lang is None or kind == lang]


@pytest.fixture
def example_importable(monkeypatch):
    """The example backend importable and registered (what installing it does), plus this repo's devices."""
    monkeypatch.syspath_prepend(EXAMPLE)
    config = plugins.load_config(os.path.join(ROOT, "plugins.toml"))
    config.setdefault("plugins", {})["modules"] = ["glow_backend_example.plugin"]
    plugins.reload(config)
    yield config
    plugins.reload()


def test_every_block_is_python_toml_or_bash():
    with open(DOC) as f:
        kinds = {m.group(1) for m in FENCE.finditer(f.read())}
    assert kinds <= {"python", "toml", "bash"}, kinds
    assert len(blocks("python")) >= 5 and len(blocks("bash")) >= 3 and len(blocks("toml")) >= 3


def test_the_floor_table_is_the_floor():
    from glow.lowering import FLOOR

    with open(DOC) as f:
        text = f.read()
    table = text[text.index("| group | ops |"):text.index("A backend that implements the floor")]
    listed = set(re.findall(r"\b([A-Z][A-Za-z]+)\b", table)) - {"Max/Min"}
    assert FLOOR <= listed
    assert f"a closed set of {len(FLOOR)} primitives" in text


def test_python_blocks_run_in_order(example_importable, capsys):
    namespace = {"__name__": "docs_backends"}
    for code in blocks("python"):
        exec(compile(code, DOC, "exec"), namespace)  # noqa: S102 - the guide's own snippets
    out = capsys.readouterr().out
    assert "False True" in out
    assert "40\n{'MatMul': 1, 'Add': 1, 'Identity': 1}\n{'Add': 2, 'Identity': 1}" in out
    assert "backend 'tiny' cannot run" in out and "Exp (x1)" in out
    assert "example:0 accelerator 8388608 500.0 8.0" in out
    assert "placement of" in out and "example" in out
    assert "conformance of 'example': PASS" in out


def test_toml_blocks_load_as_glow_loads_them(example_importable):
    docs = [tomllib.loads(code) for code in blocks("toml")]
    devices = [d for doc in docs for d in doc.get("devices", [])]
    reg = plugins.reload({**example_importable, "devices": devices})
    small = reg.logical_device("example-small")
    assert small.memory_bytes == 2 * 2**20 and small.transfer_gbs == 4.0 and small.backend == "example"
    (modules,) = [doc["plugins"]["modules"] for doc in docs if "plugins" in doc]
    reg = plugins.reload({"plugins": {"modules": modules}})
    assert "example" in reg.available()
    (project,) = [doc for doc in docs if "project" in doc]
    assert project["project"]["name"].startswith("glow-backend-")
    (eps,) = project["project"]["entry-points"].values()
    assert all(v.endswith(".plugin") for v in eps.values())
    with open(os.path.join(EXAMPLE, "pyproject.toml"), "rb") as f:
        example = tomllib.load(f)["project"]["entry-points"]
    assert set(example) == set(project["project"]["entry-points"]) == {"glow.backends"}


@pytest.mark.slow
def test_shell_blocks_run(tmp_path):
    env = PluginEnv(tmp_path / "venv")  # what the blocks install stays in this throwaway venv
    work = tmp_path / "work"
    work.mkdir()
    for code in blocks("bash"):
        r = env.run(["bash", "-e", "-c", code], work, timeout=600)
        assert r.returncode == 0, f"{code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        if "glow backends" in code:
            assert re.search(r"^mydevice\s+available", r.stdout, re.MULTILINE), r.stdout
        if "pytest" in code:
            assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    wheels = os.listdir(work / "glow-backend-mydevice" / "dist")
    assert any(w.startswith("glow_backend_mydevice-0.1.0") and w.endswith(".whl") for w in wheels)
    assert "mydevice" not in plugins.reload().records
