"""Claims: one process does a long piece of work, the others wait for it instead of doing it
too.

Two sweeps started at once over the same stage cache (two terminals, two specs on one
dataset) each trained the same fine-tuned model, half an hour of two CPUs spent twice, the
second copy thrown away. A claim is a small file beside the work's result
(``<models>/ft-<key>.claim``), created exclusively (``O_CREAT | O_EXCL``: one creator wins on a
local or NFS folder) and holding who made it (host, pid, when). :func:`claimed` yields True to
the process that made it, which does the work and removes the claim when the block ends, however
it ends; every other process waits, looking every ``poll_s`` seconds, until the work is done
(``done()``), and then yields False. A claim whose maker is gone (a process of this host that no
longer runs: killed, its machine's power cut) is taken over, as is one that does not parse and
is older than a minute (cut short as it was written); a claim made on another host is trusted,
and waited for, until it is ``stale_s`` old. Nothing here is needed for correctness: results are
published atomically and two makers write the same thing; a claim only saves the second one's
time.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiblox.processes import pid_alive

__all__ = ["claimed", "holder"]

_UNREADABLE_S = 60.0
"""A claim file that does not parse is another process's, being written, for this long."""


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the claim ``path`` (host, pid, since), ``{}`` when its file does not parse,
    None when there is no claim."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _stale(path: Path, who: dict[str, Any], stale_s: float) -> bool:
    """Whether the claim's maker is gone (see the module doc)."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False  # released meanwhile: not stale, gone (the next try creates it)
    if not who:
        return age > _UNREADABLE_S
    if who.get("host") == socket.gethostname() and isinstance(who.get("pid"), int):
        return not pid_alive(who["pid"])
    return age > stale_s


def _create(path: Path) -> bool:
    """Create the claim ``path`` for this process; False when another holds it."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}, f)
    return True


@contextlib.contextmanager
def claimed(path: Path, done: Callable[[], bool], *, poll_s: float = 2.0,
            stale_s: float = 24 * 3600.0,
            waiting: Callable[[dict[str, Any]], None] | None = None) -> Iterator[bool]:
    """True inside the block when this process claimed ``path`` and should do the work (the
    claim is removed when the block ends); False when the work is done (``done()``), already
    or once another process that claimed it has finished. ``waiting(holder)`` is called once,
    when this process starts waiting (to say so). See the module doc."""
    path.parent.mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        if done():
            yield False
            return
        if _create(path):
            break
        who = holder(path)
        if who is None:
            continue  # released between the two looks: try again at once
        if _stale(path, who, stale_s):
            # removed only if it is still the stale one (another waiter may have taken it
            # over since: its fresh claim stays)
            if holder(path) == who:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            continue
        if not told and waiting is not None:
            waiting(who)
            told = True
        time.sleep(poll_s)
    try:
        yield True
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
