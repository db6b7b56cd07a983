"""Progress on a terminal: bars for long loops (bench rounds, conformance checks, fuzz cases) and
a phase line for compiles (import, optimise, lower, compile). Drawn with tqdm on stderr, and only
when stderr is a TTY (and GLOW_NO_PROGRESS is unset): piped or captured output stays clean.
"""

from __future__ import annotations

import os
import sys


def enabled(stream=None) -> bool:
    """Whether to draw progress: stderr is a terminal and GLOW_NO_PROGRESS is unset or 0."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("GLOW_NO_PROGRESS", "") not in ("", "0"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class _Silent:
    """What `bar` returns when no progress is drawn: the same calls, doing nothing."""

    def update(self, n: int = 1):
        pass

    def set_description_str(self, text: str):
        pass

    def set_postfix_str(self, text: str):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bar(total: int | None, desc: str, unit: str = "it"):
    """A progress bar on stderr (tqdm), or a silent stand-in off a terminal."""
    if not enabled():
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:  # a broken install: progress is a nicety, never a failure
        return _Silent()
    try:
        cols, rows = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        cols = rows = 0
    # A terminal that reports no size (a pty nobody sized, as `script` makes) would hide the bar
    # (tqdm hides bars past the screen's height): assume 80x24 there.
    size = {"dynamic_ncols": True} if cols > 0 and rows > 0 else {"ncols": 80, "nrows": 24}
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, **size)


class Phases:
    """A compile's phases as a bar of named steps: `ph.start("lower")` ends the previous phase.
    `ph.seconds` maps each phase to its wall time (kept also when nothing is drawn)."""

    def __init__(self, names: list[str], desc: str = "compile"):
        import time

        self._time = time.perf_counter
        self.names, self.desc = list(names), desc
        self.seconds: dict[str, float] = {}
        self._bar = bar(len(self.names), desc, unit="phase")
        self._current: str | None = None
        self._t0 = 0.0

    def start(self, name: str):
        self._end_current()
        self._current, self._t0 = name, self._time()
        self._bar.set_description_str(f"{self.desc}: {name}")

    def _end_current(self):
        if self._current is not None:
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + self._time() - self._t0
            self._bar.update(1)
            self._current = None

    def close(self):
        self._end_current()
        self._bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
