"""Regenerate docs/api.md from the docstrings of glow's public surface: every name in
`glow.__all__`, plus `glow.onnx_backend`'s functions.

    python scripts/gen_api_doc.py           # write docs/api.md
    python scripts/gen_api_doc.py --check   # exit 1 if docs/api.md differs from what it would write

Cheap (imports glow, runs nothing), so rerun it whenever a public signature or docstring changes;
tests/test_docs_current.py fails while docs/api.md is stale.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import types

OUT = os.path.join(os.path.dirname(__file__), "..", "docs", "api.md")
#: Extra public functions outside glow.__all__: (module, names).
EXTRA = [("glow.onnx_backend", ["prepare", "run_model", "run_node", "supports_device"])]


def doc(obj) -> str:
    """The object's own docstring, dedented by the indentation of its body ('' when it has none
    of its own; a dataclass's generated "Name(field, ...)" counts as none). Not inspect.cleandoc:
    a docstring whose later lines are all an indented example would lose that indentation."""
    d = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if not isinstance(d, str) or not d.strip():
        return ""
    if isinstance(obj, type) and "__dataclass_fields__" in obj.__dict__ and d.startswith(obj.__name__ + "("):
        return ""
    first, *rest = d.strip("\n").splitlines()
    margin = _body_indent(obj)
    rest = [ln[margin:] if ln[:margin].strip() == "" else ln.lstrip() for ln in rest]
    return "\n".join([first.strip(), *rest]).strip()


def _body_indent(obj) -> int:
    """Columns a docstring's lines are indented by in the source: a module's 0, a top-level
    def's 4, a method's 8."""
    if inspect.ismodule(obj):
        return 0
    target = obj.fget if isinstance(obj, property) else obj
    try:
        line = inspect.getsourcelines(target)[0][0]
    except (OSError, TypeError):
        return 0
    return len(line) - len(line.lstrip()) + 4


def signature(obj) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    # A default that prints as '<object at 0x...>' would make the file differ run to run.
    return re.sub(r" at 0x[0-9a-f]+", "", sig)


def block(text: str) -> list[str]:
    """A docstring as markdown: prose as is, its indented examples as code blocks."""
    if not text:
        return ["*(no docstring)*", ""]
    out, code = [], False
    for line in text.splitlines():
        indented = line.startswith(("    ", ">>>")) or (code and not line.strip())
        if indented and not code and (not out or not out[-1].strip()):
            out.append("```")
            code = True
        elif code and not indented:
            while out and not out[-1].strip():
                out.pop()
            out += ["```", ""]
            code = False
        out.append(line[4:] if code and line.startswith("    ") else line)
    if code:
        while out and not out[-1].strip():
            out.pop()
        out.append("```")
    return out + [""]


def members(cls) -> list[tuple[str, object]]:
    """Public attributes defined on the class itself, in definition order (not inherited ones)."""
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, (types.FunctionType, property)):
            out.append((name, value))
    return out


def describe_class(qual: str, cls) -> list[str]:
    bases = [b for b in cls.__bases__ if b is not object]
    base = f"({', '.join(b.__name__ for b in bases)})" if bases else ""
    lines = [f"### class `{qual}{base}`", ""]
    if "__init__" in cls.__dict__ or "__dataclass_fields__" in cls.__dict__:
        lines += ["```python", f"{qual}{signature(cls)}", "```", ""]
    lines += block(doc(cls))
    for name, value in members(cls):
        if name == "__init__":
            continue
        if isinstance(value, property):
            lines += [f"- `{name}` (property)" + (f": {_first_line(doc(value))}" if doc(value) else "")]
        else:
            d = doc(value)
            lines += [f"- `{name}{signature(value)}`" + (f": {_first_para(d)}" if d else "")]
    if any(n != "__init__" for n, _ in members(cls)):
        lines.append("")
    return lines


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _first_para(text: str) -> str:
    return " ".join(text.split("\n\n")[0].split())


def describe_function(qual: str, fn) -> list[str]:
    return [f"### `{qual}`", "", "```python", f"{qual}{signature(fn)}", "```", ""] + block(doc(fn))


def describe_module(qual: str, mod) -> list[str]:
    lines = [f"### module `{qual}`", ""] + block(doc(mod))
    names = getattr(mod, "__all__", None) or [
        n for n, v in vars(mod).items() if not n.startswith("_") and getattr(v, "__module__", None) == mod.__name__
        and (inspect.isclass(v) or inspect.isfunction(v))]
    for n in names:
        v = getattr(mod, n)
        d = doc(v)
        sig = signature(v) if inspect.isfunction(v) else ""
        kind = "class " if inspect.isclass(v) else ""
        lines.append(f"- {kind}`{qual}.{n}{sig}`" + (f": {_first_para(d)}" if d else ""))
    return lines + [""]


def describe(qual: str, obj) -> list[str]:
    if inspect.ismodule(obj):
        return describe_module(qual, obj)
    if inspect.isclass(obj):
        return describe_class(qual, obj)
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return describe_function(qual, obj)
    if isinstance(obj, (str, int, float)):
        return [f"### `{qual}`", "", f"`{obj!r}` ({type(obj).__name__})", ""]
    if type(obj).__name__ == "HookimplMarker":  # glow.hookimpl; pluggy's docstring is about pluggy
        return [f"### `{qual}`", "", f"pluggy's hook-implementation decorator for project "
                f"`{obj.project_name}`: mark a plugin module's hook functions with it (`@{qual}`); "
                "the hooks are declared in `glow.hookspecs`.", ""]
    return [f"### `{qual}`", "", f"An instance of `{type(obj).__module__}.{type(obj).__name__}`.", ""]


def render() -> str:
    import importlib

    import glow

    groups = {"Compiling and running": [], "Errors": [], "Graphs": [], "Writing a backend": [],
              "Other": []}
    for name in glow.__all__:
        obj = getattr(glow, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            group = "Errors"
        elif name in ("compile", "available_backends", "load_onnx", "run_graph", "Executable",
                      "CompileOptions"):
            group = "Compiling and running"
        elif name in ("Graph", "GraphBuilder", "Node", "Value", "dtypes"):
            group = "Graphs"
        elif name in ("Backend", "Device", "API_VERSION", "BACKEND_API", "hookimpl"):
            group = "Writing a backend"
        else:
            group = "Other"
        groups[group].append(describe(f"glow.{name}", obj))
    lines = [
        "# API reference",
        "",
        "Generated by `python scripts/gen_api_doc.py` from the docstrings of `glow.__all__` (and",
        "`glow.onnx_backend`); do not edit by hand. The [user guide](user-guide.md) shows how the",
        "pieces are used together.",
        "",
    ]
    for title, entries in groups.items():
        if not entries:
            continue
        lines += [f"## {title}", ""]
        for e in entries:
            lines += e
    for modname, names in EXTRA:
        mod = importlib.import_module(modname)
        lines += [f"## `{modname}`", ""] + block(doc(mod))
        for n in names:
            lines += describe(f"{modname}.{n}", getattr(mod, n))
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say whether docs/api.md is current")
    a = p.parse_args(argv)
    text = render()
    if a.check:
        with open(OUT) as f:
            current = f.read() == text
        print("docs/api.md is current" if current else "docs/api.md is stale: run scripts/gen_api_doc.py")
        return 0 if current else 1
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(OUT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
