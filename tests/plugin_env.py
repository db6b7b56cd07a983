"""A throwaway virtual environment layered on the test environment, for tests that pip-install
backend packages the way a user does.

The venv sees everything installed in the test environment (glow, pytest, pip, ...): its
site-packages through a `.pth` file (`system_site_packages` reaches only the base interpreter's
when the tests themselves run in a venv) and the system site-packages. So `pip install` there
adds only the package under test, and what it installs never leaks into the environment the rest
of the suite (or another run of it) uses. `bin/` holds `glow`,
`pytest` and `pip` bound to the venv's interpreter, so shell commands written for a user run as is.
"""

import glob
import os
import shutil
import site
import subprocess
import sys
import venv

SCRIPTS = {"glow": "glow.cli", "pytest": "pytest", "pip": "pip"}


def create_layered_venv(root, with_pip=False) -> None:
    """A venv at `root` whose interpreter also sees this interpreter's site-packages (after its own)."""
    venv.create(str(root), system_site_packages=True, with_pip=with_pip, symlinks=True)
    (own,) = glob.glob(os.path.join(str(root), "lib", "python*", "site-packages"))
    outer = [d for d in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(d)]
    if sys.prefix == sys.base_prefix:
        return  # not in a venv: system_site_packages already shows these
    with open(os.path.join(own, "_glow_test_outer_env.pth"), "w") as f:
        f.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in outer) + "\n")


class PluginEnv:
    def __init__(self, root):
        self.root = str(root)
        create_layered_venv(self.root)
        self.bin = os.path.join(self.root, "bin")
        self.python = os.path.join(self.bin, "python")
        for name, module in SCRIPTS.items():
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(f'#!/bin/sh\nexec "{self.python}" -m {module} "$@"\n')
            os.chmod(path, 0o755)

    @property
    def env(self) -> dict:
        env = dict(os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"], VIRTUAL_ENV=self.root,
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("GLOW_PLUGINS_TOML", None)  # a user's view: entry points and the shipped defaults
        env.pop("PYTHONPATH", None)
        return env

    def run(self, args, cwd, timeout=900, shell=False) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout,
                              shell=shell)

    def python_m(self, *args, cwd, timeout=900) -> subprocess.CompletedProcess:
        return self.run([self.python, "-m", *args], cwd, timeout)

    def pip(self, *args, cwd):
        r = self.python_m("pip", *args, cwd=cwd)
        assert r.returncode == 0, f"pip {' '.join(args)}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        return r

    def install_copy(self, source: str, workdir) -> str:
        """pip-install a copy of the package folder `source` (its in-tree build leaves the repo alone)."""
        dest = os.path.join(str(workdir), os.path.basename(source.rstrip(os.sep)))
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "dist"))
        self.pip("install", "--no-deps", "-q", dest, cwd=workdir)
        return dest
