"""The one writer of a sweep's parent run: the process that owns it (:class:`Owner`, tag
``aiblox.owner``), its heartbeat, whether an owner is live (:func:`owner_status`), and a
sweep given up on an error (:func:`release_on_error`)."""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from aiblox.compiled import interrupt_behind
from aiblox.engine.tracking.mlflow_store import opened_uri, tracking_seconds

__all__ = [
    "Owner",
    "SweepBusy",
    "SweepInterrupted",
    "TAG_HEARTBEAT",
    "TAG_OWNER",
    "owner_status",
    "release_on_error",
]


logger = logging.getLogger("aiblox.engine.tracking")

TAG_OWNER = "aiblox.owner"
"""Parent-run tag: the process writing the sweep (JSON: host, boot id and pid namespace, pid,
its start time, token)."""


TAG_HEARTBEAT = "aiblox.heartbeat"
"""Parent-run tag: seconds since the epoch, renewed every :data:`HEARTBEAT_S` by the owner."""


class SweepInterrupted(RuntimeError):
    """The sweep has an unfinished parent run whose process is gone, and ``resume`` was not
    asked for."""


class SweepBusy(RuntimeError):
    """Another live process is writing this sweep (or took it over): refused, resume or not."""


# -- ownership ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Owner:
    """The process writing a sweep's parent run."""

    host: str
    boot: str
    pid: int
    started: str
    token: str

    def tag(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | None) -> Owner | None:
        try:
            d = json.loads(text or "")
            return cls(host=str(d["host"]), boot=str(d["boot"]), pid=int(d["pid"]),
                       started=str(d["started"]), token=str(d["token"]))
        except (ValueError, KeyError, TypeError):
            return None

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _boot_id() -> str:
    """This kernel's boot id and this process's pid namespace (Linux; empty elsewhere): two
    processes whose pids can be compared share both."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a Linux process, None where /proc cannot tell."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def this_process(token: str) -> Owner:
    stat = _proc_stat(os.getpid())
    return Owner(host=socket.gethostname(), boot=_boot_id(), pid=os.getpid(),
                 started=stat[1] if stat else "", token=token)


LIVE_TOKENS: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
"""The trackers of this process that own a parent run now, by token (a tracker garbage
collected without finishing, e.g. a notebook cell run again, owns nothing any more)."""


def _process_alive(owner: Owner) -> bool:
    if owner.pid == os.getpid():
        return owner.token in LIVE_TOKENS
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    except OSError:
        return False
    stat = _proc_stat(owner.pid)
    if stat is None:
        return True
    state, started = stat
    return state not in ("Z", "X") and (not owner.started or started == owner.started)


def owner_status(tags: dict[str, str], now: float | None = None) -> tuple[bool, str]:
    """``(live, why)`` of the owner recorded in a parent run's tags (see the module doc)."""
    owner = Owner.parse(tags.get(TAG_OWNER))
    if owner is None:
        return False, "no owner recorded"
    me = this_process("")
    if owner.host == me.host and owner.boot == me.boot and os.name == "posix":
        return (True, f"{owner} is running it") if _process_alive(owner) else \
            (False, f"{owner}, which ran it, has exited")
    try:
        age = (time.time() if now is None else now) - float(tags.get(TAG_HEARTBEAT, ""))
    except ValueError:
        return False, f"{owner}, which ran it, left no heartbeat"
    lease = tracking_seconds("lease")
    if age < lease:
        return True, f"{owner} is running it (heartbeat {max(age, 0):.0f} s ago)"
    return False, (f"{owner}, which ran it, has been silent for {age:.0f} s "
                   f"(lease {lease:.0f} s)")


class Heartbeat:
    """Renews the parent's heartbeat tag every :data:`HEARTBEAT_S` seconds from a daemon
    thread, and notes (``lost``) when the parent is no longer owned by ``token``."""

    def __init__(self, tracking_uri: str, run_id: str, token: str, every: float) -> None:
        self.tracking_uri, self.run_id, self.token = tracking_uri, run_id, token
        self.every = every
        self.stop_event = threading.Event()
        self.lost: str | None = None
        self.thread = threading.Thread(target=self._run, name="aiblox-sweep-heartbeat",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from mlflow.tracking import MlflowClient

        client = None
        while not self.stop_event.wait(self.every):
            try:
                client = client or MlflowClient(tracking_uri=opened_uri(self.tracking_uri))
                run = client.get_run(self.run_id)
                owner = Owner.parse(run.data.tags.get(TAG_OWNER))
                if owner is None or owner.token != self.token or run.info.status != "RUNNING":
                    self.lost = (f"MLflow run {self.run_id} was taken over by "
                                 f"{owner or 'nobody'} (status {run.info.status})")
                    return
                client.set_tag(self.run_id, TAG_HEARTBEAT, f"{time.time():.3f}")
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried, not fatal
                logger.warning("sweep heartbeat of run %s failed: %s", self.run_id, exc)

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)


P = ParamSpec("P")


R = TypeVar("R")


def release_on_error(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a sweep function taking ``tracker=``: when it raises (an error, Ctrl-C, SystemExit),
    the tracker gives its parent run up (``KILLED`` or ``FAILED``, owner released), so a later
    ``--resume`` can adopt it without waiting for this process to end."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            stop = interrupt_behind(exc)
            tracker = kwargs.get("tracker")
            if tracker is not None and hasattr(tracker, "release"):
                tracker.release(stop or exc)
            if stop is not None and stop is not exc:  # Ctrl-C that numba wrapped: a Ctrl-C
                raise KeyboardInterrupt from exc
            raise

    return run
