"""Processes of this machine: whether one still runs. A claim, a half-finished sync's mark and a
temporary folder are taken over only when the process that made them is gone."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine still runs: only "no such process" says no (a
    process of another user, which this one may not signal, runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists: another user's
        return True
    return True
