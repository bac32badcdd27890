"""Progress, decided in one place for every command, sweep and library call.

- :func:`progress_bar` is what long loops tick: a tqdm bar when stderr is a terminal (or a
  Jupyter notebook's widget), plain lines when it is not (a log, a pipe: never ``\\r`` or
  escape codes), nothing when progress is off.
- :func:`phase` times one step that has no ticks of its own (a split's retrieval in a sweep):
  its time at the end; when it runs long, a line when it started and a ``still running`` line
  every :data:`HEARTBEAT_S` seconds, one plain line each.

Progress is off when the caller asks for none (``progress=False``), when ``AIBLOX_NO_PROGRESS``
is set, or in quiet mode (``aiblox --quiet``, :func:`set_quiet`), which also silences the
CLI's informational lines (errors still print).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HEARTBEAT_S", "PHASE_START_S", "bars_on", "is_quiet", "phase", "progress_bar",
           "progress_on", "set_quiet", "settle"]

NO_PROGRESS_ENV = "AIBLOX_NO_PROGRESS"
HEARTBEAT_S = 30.0
"""Seconds between the plain lines of a running step (a bar's counts, a phase's time)."""
PHASE_START_S = 2.0
"""A :func:`phase` running this long prints that it started (a shorter one prints one line)."""
MIN_LINE_S = 1.0
"""A plain bar that finished faster than this prints no line (a log is not flooded by the many
short loops of one command)."""

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Quiet mode on or off for this process (``aiblox --quiet``)."""
    global _quiet
    _quiet = bool(quiet)


def is_quiet() -> bool:
    """Quiet mode is on: no progress, no informational lines."""
    return _quiet


def progress_on(requested: bool = True) -> bool:
    """Progress of any kind is shown: ``requested``, not quiet and ``AIBLOX_NO_PROGRESS`` not
    set."""
    return bool(requested) and not _quiet and not os.environ.get(NO_PROGRESS_ENV)


def bars_on() -> bool:
    """Progress may redraw a bar in place: stderr is a terminal, or this is a Jupyter kernel."""
    if _in_notebook():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def _in_notebook() -> bool:
    """This process is a Jupyter kernel (tqdm.auto draws a widget there)."""
    ipython = sys.modules.get("IPython")
    try:
        shell = ipython.get_ipython() if ipython is not None else None
    except Exception:  # noqa: BLE001 - any failure: not a notebook
        return False
    return getattr(shell, "kernel", None) is not None


def _line(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # a closed stderr never stops the work
        print(text, file=sys.stderr, flush=True)


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 600 else f"{s / 60:.1f} min"


class _PlainProgress:
    """tqdm's ``update``/``close`` as plain lines: ``desc: n/total unit (time)`` every
    :data:`HEARTBEAT_S` seconds while it runs, and once at the end when it took
    :data:`MIN_LINE_S` or more."""

    def __init__(self, total: int | None, desc: str, unit: str) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n = 0
        self.t0 = self.last = time.perf_counter()
        self.closed = False

    def _counts(self) -> str:
        of = f"/{self.total}" if self.total is not None else ""
        return f"{self.n}{of} {self.unit}"

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self.last >= HEARTBEAT_S:
            self.last = now
            _line(f"{self.desc}: {self._counts()} ({_seconds(now - self.t0)})")

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        if desc is not None:
            self.desc = desc

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        elapsed = time.perf_counter() - self.t0
        if elapsed >= MIN_LINE_S or self.last != self.t0:
            _line(f"{self.desc}: {self._counts()} in {_seconds(elapsed)}")

    def __enter__(self) -> _PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _NoProgress(_PlainProgress):
    """Counts, prints nothing."""

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        self.closed = True


def progress_bar(total: int | None, desc: str, unit: str = "it", enabled: bool = True,
                 leave: bool = True) -> Any:
    """A progress object with tqdm's ``update(n)`` and ``close()``: a tqdm bar on a terminal,
    plain lines on a log or pipe, silent when progress is off (see :func:`progress_on`)."""
    if not progress_on(enabled):
        return _NoProgress(total, desc, unit)
    if bars_on():
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, leave=leave)
    return _PlainProgress(total, desc, unit)


def settle(bar: Any) -> None:
    """A bar whose work turned out smaller than its total (a search's baseline that was one of
    its trials) made to end at ``n/n``: its total set to what it counted."""
    if bar.total is not None and bar.n < bar.total:
        bar.total = bar.n
        refresh = getattr(bar, "refresh", None)
        if refresh is not None:  # tqdm redraws
            refresh()


@contextmanager
def phase(desc: str, enabled: bool = True) -> Iterator[None]:
    """Time one step: ``desc ... N s`` when it ends; a step still running after
    :data:`PHASE_START_S` seconds also says so then (``desc ... running``) and every
    :data:`HEARTBEAT_S` seconds after (``desc ... still running (N s)``), so a log shows a long
    step while it runs (nothing at all when progress is off)."""
    if not progress_on(enabled):
        yield
        return
    t0 = time.perf_counter()
    stop = threading.Event()

    def beat() -> None:
        if stop.wait(PHASE_START_S):
            return
        _line(f"{desc} ... running")
        while not stop.wait(HEARTBEAT_S):
            _line(f"{desc} ... still running ({_seconds(time.perf_counter() - t0)})")

    thread = threading.Thread(target=beat, name="aiblox-phase", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    _line(f"{desc} ... {_seconds(time.perf_counter() - t0)}")
