"""glow's pytest plugin (registered under the `pytest11` entry point): the conformance kit as tests.

    pytest --pyargs glow.testing --glow-backend NAME|all|A,B [--glow-sections records,nodes,models]
           [--glow-fallback DEVICE|none] [--glow-native floor] [--glow-known-failures FILE] [--glow-strict]

collects `glow/testing/suite/test_glow_conformance.py`, one test per check of the kit, and prints
the support manifest and the pass table at the end of the run. A backend's own package can use the
same checks directly (see the tests `glow new-backend` writes).
"""

from __future__ import annotations

import pytest

OPTIONS = [
    ("--glow-backend", dict(default=None, help="backend the glow conformance kit checks (default: reference); "
                            "'all': every available backend; or names joined by commas")),
    ("--glow-native", dict(default=None, help="restrict the backend's native ops, e.g. 'floor'")),
    ("--glow-sections", dict(default="records,nodes,models",
                             help="conformance sections to run (default: records,nodes,models)")),
    ("--glow-fallback", dict(default="reference", help="device for the nodes of a light model the backend "
                             "cannot run ('none': skip such models; default: reference)")),
    ("--glow-known-failures", dict(default=None, metavar="FILE",
                                   help="known failures of the backend: 'check id  # reason' per line")),
    ("--glow-strict", dict(action="store_true", default=False,
                           help="no fallback device: a light model the backend cannot run alone fails")),
]


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # After the initial conftests: a project that declares some of these options itself (glow's
    # own tests/conftest.py declares --glow-backend and --glow-native) keeps its declaration.
    result = yield
    for name, kw in OPTIONS:
        try:
            parser.addoption(name, **kw)
        except ValueError:  # already declared
            pass
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from .conformance import PYTEST_RESULTS, Report
    from .conformance_report import summary_table

    by_backend: dict = {}
    for r in PYTEST_RESULTS:
        by_backend.setdefault(r.check.kit.name, []).append(r)
    reports = []
    for name, results in by_backend.items():
        kit = results[0].check.kit
        reports.append(Report(name, results, kit.native_ops()))
        terminalreporter.write_sep("=", f"glow conformance: {name}")
        terminalreporter.write(reports[-1].to_text(failures=0))
    if len(reports) > 1:
        terminalreporter.write_sep("=", "glow conformance: every backend")
        terminalreporter.write(summary_table(reports))
