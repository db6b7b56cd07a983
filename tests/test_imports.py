"""Import hygiene of the package sources (core/ is `glow`, backends/ is `glow.backends`):

* no module imports another package's underscore names (a name used across packages is public);
  within one package (one folder) they are fine;
* the cpu backend's kernel modules have no import cycle at module level (the elementwise op
  table, ewops.py, loads its emitters on first use instead of importing them).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package_folder(dotted: str) -> Path:
    """Where the module or package `dotted` (glow..., glow.backends...) lives, without '.py'."""
    parts = dotted.split(".")
    if parts[:2] == ["glow", "backends"]:
        return ROOT / "backends" / Path(*parts[2:])
    return ROOT / "core" / Path(*parts[1:])


def _sources():
    """(path, dotted package it belongs to) for every source file."""
    for folder, top in (("core", "glow"), ("backends", "glow.backends")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).parent.parts
            yield path, ".".join((top, *parts))


def _imports(path: Path, package: str, top_level_only: bool = False):
    """(line, module, name) of every `from ... import name` (relative ones resolved)."""
    tree = ast.parse(path.read_text())
    for node in tree.body if top_level_only else ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        if node.level:
            base = package.split(".")[:len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module
        for alias in node.names:
            yield node.lineno, module, alias.name


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_packages_underscore_names():
    bad = []
    for path, package in _sources():
        for line, module, name in _imports(path, package):
            if not module.startswith("glow"):
                continue
            # The package the name comes from: `module` itself when it is a folder (the name is
            # one of its modules, or from its __init__), else the folder `module` is in.
            owner = module if _package_folder(module).is_dir() else module.rpartition(".")[0]
            if owner != package and (_private(name) or any(_private(p) for p in module.split("."))):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module} {name}")
    assert not bad, "underscore names imported across packages:\n" + "\n".join(bad)


def test_cpu_kernel_modules_have_no_import_cycle():
    package = "glow.backends.cpu.kernels"
    folder = _package_folder(package)
    deps = {}
    for path in folder.glob("*.py"):
        found = set()
        for _, module, name in _imports(path, package, top_level_only=True):
            if module == package:
                found.add(name)  # from . import x
            elif module.startswith(package + "."):
                found.add(module.rpartition(".")[2])  # from .x import y
        deps[path.stem] = found & {p.stem for p in folder.glob("*.py")}

    def cycle_from(m, trail):
        if m in trail:
            return trail[trail.index(m):] + [m]
        for d in sorted(deps.get(m, ())):
            c = cycle_from(d, trail + [m])
            if c:
                return c
        return None

    cycles = [c for c in (cycle_from(m, []) for m in sorted(deps)) if c]
    assert not cycles, f"import cycle: {' -> '.join(cycles[0])}"
