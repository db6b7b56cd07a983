"""`glow new-backend NAME`: write a ready-to-install backend package, `glow-backend-NAME`.

The package is made from the templates in `glow/templates/new_backend` (a `.tmpl` file per output
file, `$name`-style placeholders; `package/` becomes the import package). Its kernels module is
generated from the op table: one stub per floor primitive, with the op's inputs as parameters and
its attributes as keyword-only parameters, each raising a glow.KernelNotWrittenError that names the op
and the file to write it in. Installed as is, the package is found by glow and its tests run the
conformance kit, which reports every kernel still missing.
"""

from __future__ import annotations

import builtins
import keyword
import os
import re
import shutil
import tempfile
import textwrap
from importlib import resources
from string import Template

from .backend import BACKEND_API
from .errors import InputError
from .fileio import umask

TEMPLATES = ("templates", "new_backend")
NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
#: Kernels written for you: an alias needs no device code, and lowering inserts it to keep names.
WRITTEN = {"Identity": "    return input"}


def new_backend(name: str, folder: str = ".") -> list[str]:
    """Write `folder/glow-backend-NAME/` and return the paths written. Raises InputError for a bad
    name or a target that already exists."""
    if not NAME.match(name):
        raise InputError(f"backend name '{name}': use lower-case letters and digits, words joined by "
                         "'-' or '_' (e.g. 'mydevice', 'my-npu')")
    if not os.path.isdir(folder):
        raise InputError(f"--dir {folder}: no such folder")
    words = re.split(r"[-_]", name)
    values = {
        "name": name,
        "dist": f"glow-backend-{name}",
        "module": "glow_backend_" + "_".join(words),
        "classname": "".join(w.capitalize() for w in words) + "Backend",
        "api_version": str(BACKEND_API),
        "glow_version": _glow_version(),
    }
    kernels, table, count = floor_kernel_stubs()
    values.update(kernels=kernels, table=table, floor_count=str(count))
    root = os.path.join(folder, values["dist"])
    if os.path.exists(root):
        raise InputError(f"{root} already exists; choose another --dir or remove it")
    # Build the package in a temporary folder beside it and rename it into place at the end:
    # an unwritable --dir is one clean error, and a failure halfway leaves nothing behind.
    try:
        tmp = tempfile.mkdtemp(prefix=f".{values['dist']}-", dir=folder)
    except OSError as e:
        raise InputError(f"--dir {folder}: cannot create {root} there: {e.strerror}") from None
    written = []
    try:
        for rel, text in _templates():
            out_rel = rel[:-len(".tmpl")].replace("package/", values["module"] + "/", 1)
            path = os.path.join(tmp, *out_rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(Template(text).substitute(values))
            written.append(os.path.join(root, *out_rel.split("/")))
        os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it private; the package is not
        os.rename(tmp, root)
    except OSError as e:
        raise InputError(f"--dir {folder}: cannot write {root}: {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return written


def floor_kernel_stubs() -> tuple[str, str, int]:
    """(the kernel functions, the body of the KERNELS table, how many): one per floor primitive."""
    from .lowering.floor import FLOOR_GROUPS
    from .ops import get_op

    chunks, rows = [], []
    for group, ops in FLOOR_GROUPS.items():
        header = f"# -- {group} " + "-" * max(0, 96 - len(group) - 6) + "\n"
        for i, op_name in enumerate(ops):
            fn = _py_name(op_name)
            op = get_op(op_name)
            doc = textwrap.fill(f"{op_name}: " + (op.doc or op_name).split(". ")[0].rstrip(".") + ".",
                                width=96, subsequent_indent="    ")
            body = WRITTEN.get(op_name, f'    raise _todo("{op_name}")')
            chunks.append(f"{header if i == 0 else ''}def {fn}({_signature(op)}):\n"
                          f'    """{doc}"""\n{body}')
            rows.append(f'    "{op_name}": {fn},')
    return "\n\n\n".join(chunks), "\n".join(rows), len(rows)


def _signature(op) -> str:
    params, variadic = [], False
    for port in op.in_ports:
        p = port.name.lower()
        if port.variadic:
            params.append(f"*{p}")
            variadic = True
        else:
            params.append(f"{p}=None" if port.optional else p)
    attrs = [a.name for a in op.attrs]
    if attrs:
        params += ([] if variadic else ["*"]) + attrs
    return ", ".join(params)


def _py_name(op_name: str) -> str:
    """'BitwiseAnd' -> 'bitwise_and', 'MatMul' -> 'matmul'; '_' appended to builtins and keywords."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op_name).lower().replace("mat_mul", "matmul")
    return name + "_" if keyword.iskeyword(name) or hasattr(builtins, name) else name


def _templates():
    base = resources.files("glow").joinpath(*TEMPLATES)

    def walk(node, prefix):
        for entry in sorted(node.iterdir(), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
            if entry.is_dir():
                yield from walk(entry, rel + "/")
            elif entry.name.endswith(".tmpl"):
                yield rel, entry.read_text()

    yield from walk(base, "")


def _glow_version() -> str:
    from . import __version__

    return __version__
