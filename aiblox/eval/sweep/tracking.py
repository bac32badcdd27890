"""MLflow logging of sweeps: one parent run per sweep, one child run per point.

The parent run is found by the sweep's hash (tag ``aiblox.sweep_hash``), so running the same spec
again logs nothing twice: a child is logged only when no FINISHED child of the parent carries
the point's config hash (tag ``aiblox.config_hash``).

One writer per sweep. A process writing a parent run owns it: tag ``aiblox.owner`` names the
host (with its boot id and pid namespace), the pid (and the process's start time) and a random
token, and tag
``aiblox.heartbeat`` holds a timestamp that a background thread renews every
:data:`HEARTBEAT_S` seconds while the sweep runs. An unfinished parent is live when its owner
is: on the same machine, when that process still runs (a definite answer, whatever the
heartbeat says); from another machine, when its heartbeat is younger than the lease
(:data:`LEASE_S`, ``AIBLOX_SWEEP_LEASE_S``). A second process on a live sweep is refused
(:class:`SweepBusy`), ``resume`` or not; an unfinished parent whose owner is gone is adopted
only with ``resume=True`` (else :class:`SweepInterrupted`). Adopting it deletes its children
that never finished (terminated ``KILLED`` first, so no run stays ``RUNNING``) and the repeats
of a config hash, so every point is logged exactly once, and the parent ends ``FINISHED``. A
sweep that raises in this process (Ctrl-C, an error) gives its parent up at once (status
``KILLED`` or ``FAILED``), see :func:`release_on_error`.

Creating and adopting a parent happen under an inter-process file lock for a local store
(``sqlite:///PATH``: ``PATH.lock``; a file store: ``.aiblox.lock`` in its folder), which also
covers MLflow's first use of the store (schema creation) and the experiment's creation, so
sweeps started together on a fresh store neither race nor duplicate. A remote tracking server
has no such lock: a claim is written, then read back after :data:`SETTLE_S` seconds, and the
earliest parent (or the last claim) wins. :func:`tracking_client` opens a store; read-only
callers pass ``create=False`` and a missing ``sqlite:///`` file is an error, not a new empty
database. Values put into MLflow filter strings go through :func:`tag_filter`, which refuses
anything but a plain name.

Children: params are the flattened config; metrics ``<split>.<metric>`` (``@`` written ``_at_``,
which MLflow names cannot hold); tags hold the hashes; artifacts hold ``manifest.json``, one TREC
run file and one per-query metrics parquet per split (every stage with per-query values: ranx
metrics, and for pipeline points chunk and answer metrics), and for selection points
``evidence.<split>.parquet`` (``query_id, rank, chunk_id, item_id``). In file names a derived
split is written by :func:`split_file` (``test:0/2`` as ``test-0of2``). mlflow (and filelock,
which it brings) is imported here only (the ``tracking`` extra).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import socket
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from aiblox.data.trec import trec_run_text
from aiblox.engine.cache import StageCache
from aiblox.engine.outputs import StageReader
from aiblox.engine.settings import ranked
from aiblox.inputs import env_seconds
from aiblox.stores.base import is_disk_full

__all__ = [
    "DEFAULT_TRACKING_URI",
    "HEARTBEAT_S",
    "LEASE_S",
    "SETTLE_S",
    "SweepBusy",
    "SweepInterrupted",
    "SweepTracker",
    "TrackingStoreError",
    "artifact_location",
    "check_tracking_server",
    "check_tracking_store",
    "cv_metrics",
    "flatten",
    "metric_key",
    "pareto_summary",
    "quiet_downloads",
    "release_on_error",
    "split_file",
    "tag_filter",
    "tracking_client",
    "trec_run",
]

logger = logging.getLogger("aiblox.eval.sweep.tracking")

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"

TAG_KIND = "aiblox.kind"
TAG_SWEEP = "aiblox.sweep_hash"
TAG_CONFIG = "aiblox.config_hash"
TAG_PARENT = "mlflow.parentRunId"
TAG_OWNER = "aiblox.owner"
"""Parent-run tag: the process writing the sweep (JSON: host, boot id and pid namespace, pid,
its start time, token)."""
TAG_HEARTBEAT = "aiblox.heartbeat"
"""Parent-run tag: seconds since the epoch, renewed every :data:`HEARTBEAT_S` by the owner."""
EVIDENCE_COLUMNS = ["query_id", "rank", "chunk_id", "item_id"]
"""Columns of ``evidence.<split>.parquet``: the evidence a selection point kept, in order."""
TAG_SPEC_PATH = "aiblox.spec_path"
"""Parent-run tag: the spec file the sweep was run from (for the report's reproduce command)."""


HEARTBEAT_S = 10.0
"""Seconds between two heartbeats of a running sweep, unless ``AIBLOX_SWEEP_HEARTBEAT_S`` says
otherwise. Each of these variables is read when used (:func:`_seconds`): a value that is not a
finite number > 0 is an :class:`~aiblox.inputs.EnvVarError` naming it, before the sweep starts."""
LEASE_S = 60.0
"""A sweep owned from another machine is live while its heartbeat is younger than this
(``AIBLOX_SWEEP_LEASE_S``); on the same machine the owner's process is checked instead."""
SETTLE_S = 2.0
"""Remote tracking servers (no file lock): seconds between writing a claim and reading it back
(``AIBLOX_TRACKING_SETTLE_S``)."""
LOCK_TIMEOUT_S = 600.0
"""Longest wait for a local store's file lock (held for seconds at most)."""

_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_TERMINAL = ("FINISHED", "FAILED", "KILLED")


class SweepInterrupted(RuntimeError):
    """The sweep has an unfinished parent run whose process is gone, and ``resume`` was not
    asked for."""


class SweepBusy(RuntimeError):
    """Another live process is writing this sweep (or took it over): refused, resume or not."""


class TrackingStoreError(ValueError):
    """The tracking store cannot be used: a missing ``sqlite:///`` file for a reader, a folder
    that cannot be written, a lock that cannot be had. The message is one line naming it."""


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` to ``{"a.b": "1"}``; empty dicts and lists as JSON text."""
    out: dict[str, str] = {}
    if isinstance(value, dict) and value:
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}{k}."))
        return out
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
    out[prefix.rstrip(".")] = text
    return out


def split_file(split: str) -> str:
    """A split's name in artifact file names: a derived split's ``:`` and ``/`` are written
    ``-`` and ``of`` (``test:0/2`` is ``test-0of2``); plain names stay as they are."""
    return split.replace(":", "-").replace("/", "of")


def metric_key(split: str, metric: str) -> str:
    """MLflow metric name of a ranx metric on a split: ``test.ndcg_at_10``."""
    return f"{split}.{metric.replace('@', '_at_')}"


def trec_run(run: dict[str, list[list[Any]]], tag: str) -> str:
    """TREC run format: ``qid Q0 doc rank score tag`` per line, queries sorted by id, scores
    strictly decreasing (:func:`aiblox.data.trec.trec_run_text`: trec_eval scores the ranking
    the sweep scored)."""
    return trec_run_text(run, tag)


def _artifact_root(tracking_uri: str) -> str | None:
    """Artifacts beside a local sqlite store (``mlruns/`` for the default URI)."""
    db = _sqlite_path(tracking_uri)
    if db is not None:
        return (db.parent.resolve() / "artifacts").as_uri()
    return None


def artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """Where a new experiment's artifacts go: ``<db dir>/artifacts/<safe name>`` beside a local
    sqlite store (None: MLflow's default). The name is made one plain folder name (anything
    but letters, digits, ``-``, ``_``, ``.`` becomes ``_``; a leading dot too), so it never
    leaves ``artifacts/``."""
    root = _artifact_root(tracking_uri)
    if root is None:
        return None
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in experiment)
    if not safe or safe.startswith("."):
        safe = "_" + safe
    return f"{root}/{safe}"


def _sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URI (relative or absolute), else None."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    path = tracking_uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def _file_store(tracking_uri: str) -> Path | None:
    """The folder of a local file store (``file:PATH`` or a plain path), else None."""
    if tracking_uri.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(tracking_uri).path))
    if "://" not in tracking_uri and not tracking_uri.startswith(("databricks", "sqlite:")):
        return Path(tracking_uri)
    return None


def _lock_path(tracking_uri: str) -> Path | None:
    """The inter-process lock file of a local store (None for a remote one)."""
    db = _sqlite_path(tracking_uri)
    if db is not None:
        return db.with_name(db.name + ".lock")
    folder = _file_store(tracking_uri)
    return folder / ".aiblox.lock" if folder is not None else None


@contextlib.contextmanager
def store_lock(tracking_uri: str, *, required: bool = True) -> Iterator[bool]:
    """Hold the local store's file lock (yields True), or nothing for a remote store (yields
    False). With ``required=False`` (readers) a lock file that cannot be created is skipped."""
    path = _lock_path(tracking_uri)
    if path is None:
        yield False
        return
    from filelock import FileLock, Timeout

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=LOCK_TIMEOUT_S)
        lock.acquire()
    except Timeout:
        raise TrackingStoreError(f"{path}: another process has held the MLflow store's lock "
                                 f"for {LOCK_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        if required:
            raise TrackingStoreError(f"cannot write the MLflow store's lock {path}: "
                                     f"{exc.strerror or exc}") from None
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def check_tracking_store(tracking_uri: str) -> None:
    """Raise :class:`TrackingStoreError` naming the path when ``tracking_uri`` is a local store
    (a ``sqlite:///`` file, a file-store folder) that does not exist; a read-only command then
    stops instead of creating an empty database. Remote URIs pass."""
    db = _sqlite_path(tracking_uri)
    local = db if db is not None else _file_store(tracking_uri)
    if local is not None and not (local.is_file() if db is not None else local.is_dir()):
        what = "database" if db is not None else "store"
        raise TrackingStoreError(f"no MLflow tracking {what} at {local} (--tracking-uri "
                                 f"{tracking_uri}); nothing was created")


REACH_TIMEOUT_S = 10.0
"""Seconds to wait for a tracking server to accept a connection (``AIBLOX_TRACKING_CONNECT_S``)
before the sweep stops; MLflow's own retries would take minutes to give up."""
_SECONDS_ENV = {"heartbeat": ("AIBLOX_SWEEP_HEARTBEAT_S", HEARTBEAT_S),
                "lease": ("AIBLOX_SWEEP_LEASE_S", LEASE_S),
                "settle": ("AIBLOX_TRACKING_SETTLE_S", SETTLE_S),
                "connect": ("AIBLOX_TRACKING_CONNECT_S", REACH_TIMEOUT_S)}


def _seconds(what: str) -> float:
    """The duration ``what`` (``heartbeat``, ``lease``, ``settle``, ``connect``): its variable's
    value, else the default."""
    return env_seconds(*_SECONDS_ENV[what])


def check_tracking_server(tracking_uri: str) -> None:
    """Raise :class:`TrackingStoreError` naming ``tracking_uri`` when it is an ``http(s)://``
    server that does not accept a connection (refused, no route, a name that does not
    resolve), within :data:`REACH_TIMEOUT_S`. Local stores and other schemes pass."""
    from urllib.parse import urlsplit

    parts = urlsplit(tracking_uri)
    if parts.scheme not in ("http", "https"):
        return
    timeout = _seconds("connect")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) \
            or type(exc).__name__
        raise TrackingStoreError(f"cannot reach the MLflow server {tracking_uri} "
                                 f"(--tracking-uri): {why}") from None


def tracking_client(tracking_uri: str, *, create: bool = False) -> Any:
    """An ``MlflowClient`` on ``tracking_uri`` whose store has been opened once under the local
    store's file lock (MLflow creates or upgrades a sqlite schema on first open; two processes
    doing it at once fail; a new sqlite database is made by :func:`_create_sqlite`, never left
    half made). MLflow's database-error log (``mlflow.store.db.utils``, which logs each failed
    write with its traceback before raising it) is turned off. ``create=False`` (readers): a
    ``sqlite:///`` file or a file-store folder that does not exist raises
    :class:`TrackingStoreError` naming it (nothing is created); ``create=True`` makes the
    folder."""
    from mlflow.tracking import MlflowClient

    # MLflow logs every failed database write with its traceback, then raises it: the error
    # raised is the one shown (one line from the CLI), so its log is off (with its INFO notes)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    db = _sqlite_path(tracking_uri)
    local = db if db is not None else _file_store(tracking_uri)
    check_tracking_server(tracking_uri)
    if not create:
        check_tracking_store(tracking_uri)
    elif local is not None:
        try:
            (local.parent if db is not None else local).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrackingStoreError(f"cannot create the MLflow store's folder for "
                                     f"{tracking_uri}: {exc.strerror or exc}") from None
    with store_lock(tracking_uri, required=create):
        if create and db is not None:
            _create_sqlite(db, tracking_uri)
        try:
            client = MlflowClient(tracking_uri=tracking_uri)
            client.search_experiments(max_results=1)  # opens the store: schema made or checked
        except Exception as exc:  # noqa: BLE001 - one line for the user, with the URI
            if not (create and db is not None and _holds_nothing(db)):
                raise _open_error(tracking_uri, exc) from exc
            # a database whose creation an older version left half done (a full disk, a
            # kill): it holds no run, no experiment of ours, nothing: made again
            _remove_sqlite(db, tracking_uri)
            _create_sqlite(db, tracking_uri)
            try:
                client = MlflowClient(tracking_uri=tracking_uri)
                client.search_experiments(max_results=1)
            except Exception as again:  # noqa: BLE001 - as above
                raise _open_error(tracking_uri, again) from again
    return client


def _open_error(tracking_uri: str, exc: BaseException) -> TrackingStoreError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if is_disk_full(exc):
        first = f"the disk is full (ENOSPC: {first})"
    return TrackingStoreError(f"cannot open the MLflow store {tracking_uri}: {first}")


CREATING = ".creating-"
"""Infix of the temporary file a sqlite MLflow store is made in (``.mlflow.db.creating-PID``)."""


def _create_sqlite(db: Path, tracking_uri: str) -> None:
    """Make the sqlite MLflow database ``db`` when it does not exist (or is empty): MLflow
    makes its schema in a temporary file beside it, which is renamed into place when complete,
    so a full disk or a kill never leaves a half-made database under the real name. Called
    under the store's file lock: a temporary file found is one whose creation did not finish,
    and is removed."""
    for stale in db.parent.glob(f".{db.name}{CREATING}*"):
        stale.unlink(missing_ok=True)
    if db.exists() and db.stat().st_size > 0:
        return
    from mlflow.tracking import MlflowClient

    tmp = db.with_name(f".{db.name}{CREATING}{os.getpid()}")
    tmp_uri = f"sqlite:///{tmp.resolve().as_posix()}"
    try:
        try:
            MlflowClient(tracking_uri=tmp_uri).search_experiments(max_results=1)  # the schema
        finally:
            _forget_engine(tmp_uri)
        os.replace(tmp, db)
    except Exception as exc:  # noqa: BLE001 - one line, with the URI
        raise _open_error(tracking_uri, exc) from exc
    finally:
        for leftover in db.parent.glob(f".{db.name}{CREATING}*"):
            leftover.unlink(missing_ok=True)


def _holds_nothing(db: Path) -> bool:
    """True when the sqlite file ``db`` holds no MLflow content: every table empty but the
    schema's version and the ``Default`` experiment (id 0) MLflow makes first. Read-only;
    False when it cannot be read."""
    import sqlite3

    if not db.is_file():
        return False
    try:
        con = sqlite3.connect(f"file:{db.resolve().as_posix()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            if table == "alembic_version" or table.startswith(("_alembic_tmp_", "sqlite_")):
                continue
            quoted = '"' + table.replace('"', '""') + '"'
            if table == "experiments":
                n = con.execute(f"SELECT count(*) FROM {quoted} "  # noqa: S608
                                "WHERE experiment_id != 0").fetchone()[0]
            else:
                n = con.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]  # noqa: S608
            if n:
                return False
        return True
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _remove_sqlite(db: Path, tracking_uri: str) -> None:
    _forget_engine(tracking_uri)
    for path in (db, *(db.with_name(db.name + s) for s in ("-journal", "-wal", "-shm"))):
        path.unlink(missing_ok=True)


def _forget_engine(uri: str) -> None:
    """Close the connections MLflow keeps open to the database at ``uri`` (one engine per URI
    for the life of the process) and forget them, so a database file replaced under that URI
    is opened afresh."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engines = getattr(SqlAlchemyStore, "_engine_map", None)
    engine = engines.pop(uri, None) if isinstance(engines, dict) else None
    if engine is not None:
        engine.dispose()


@contextlib.contextmanager
def quiet_downloads() -> Iterator[None]:
    """MLflow's per-download progress bars off while a reader downloads artifacts (a sweep's
    children, two runs' per-query values)."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def tag_filter(key: str, value: str) -> str:
    """``tags.`key` = 'value'`` for an MLflow filter string. MLflow's grammar has no escape for
    a quote inside a value, so a value must be a plain name (letters, digits, ``_``, ``.``,
    ``-``, not starting with a dot, as a sweep name) or a run id; anything else raises
    ``ValueError`` naming it, and no filter is built."""
    if not _PLAIN.match(key) or not _PLAIN.match(value):
        raise ValueError(f"{value!r} is not a plain name (letters, digits, '_', '.', '-')")
    return f"tags.`{key}` = '{value}'"


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


def _this_process(token: str) -> Owner:
    stat = _proc_stat(os.getpid())
    return Owner(host=socket.gethostname(), boot=_boot_id(), pid=os.getpid(),
                 started=stat[1] if stat else "", token=token)


_LIVE_TOKENS: weakref.WeakValueDictionary[str, SweepTracker] = weakref.WeakValueDictionary()
"""The trackers of this process that own a parent run now, by token (a tracker garbage
collected without finishing, e.g. a notebook cell run again, owns nothing any more)."""


def _process_alive(owner: Owner) -> bool:
    if owner.pid == os.getpid():
        return owner.token in _LIVE_TOKENS
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
    me = _this_process("")
    if owner.host == me.host and owner.boot == me.boot and os.name == "posix":
        return (True, f"{owner} is running it") if _process_alive(owner) else \
            (False, f"{owner}, which ran it, has exited")
    try:
        age = (time.time() if now is None else now) - float(tags.get(TAG_HEARTBEAT, ""))
    except ValueError:
        return False, f"{owner}, which ran it, left no heartbeat"
    lease = _seconds("lease")
    if age < lease:
        return True, f"{owner} is running it (heartbeat {max(age, 0):.0f} s ago)"
    return False, (f"{owner}, which ran it, has been silent for {age:.0f} s "
                   f"(lease {lease:.0f} s)")


class _Heartbeat:
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
                client = client or MlflowClient(tracking_uri=self.tracking_uri)
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


@contextlib.contextmanager
def _mlflow_logs_off() -> Iterator[None]:
    """MLflow's loggers silent for a while (they log a failed database write with its
    traceback before raising it)."""
    mlflow_logger = logging.getLogger("mlflow")
    before = mlflow_logger.level
    mlflow_logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        mlflow_logger.setLevel(before)


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
            tracker = kwargs.get("tracker")
            if tracker is not None and hasattr(tracker, "release"):
                tracker.release(exc)
            raise

    return run


class SweepTracker:
    """Logs one sweep to MLflow (parent run) and its points (child runs), as the parent's one
    writer (see the module doc). From a notebook, ``with SweepTracker(...) as tracker:`` gives
    the parent up if the block is left before :meth:`finish` (a sweep function wrapped by
    :func:`release_on_error` does so on an error anyway)."""

    def __init__(self, tracking_uri: str, experiment: str, sweep_hash: str,
                 spec: dict[str, Any], resume: bool = False,
                 spec_path: str | None = None) -> None:
        self.seconds = {what: _seconds(what) for what in ("heartbeat", "lease", "settle")}
        self.client = tracking_client(tracking_uri, create=True)
        self.tracking_uri = tracking_uri
        self.sweep_hash = sweep_hash
        self.name = str(spec.get("name"))
        self.logged = 0
        self.skipped = 0
        self.owned = False
        self.token = uuid.uuid4().hex
        self._heartbeat: _Heartbeat | None = None
        self._inflight: str | None = None
        self._existing: set[str] | None = None
        with store_lock(tracking_uri) as locked:
            self.experiment_id = self._experiment(experiment)
            parent = self._first_parent()
            if parent is None:
                run = self.client.create_run(
                    self.experiment_id, run_name=f"sweep-{self.name}",
                    tags={TAG_KIND: "sweep", TAG_SWEEP: sweep_hash,
                          "aiblox.sweep_name": self.name, **self._owner_tags(),
                          **({TAG_SPEC_PATH: spec_path} if spec_path else {})})
                self.parent_id = run.info.run_id
                self.resumed = False
                self.was_finished = False
                self._own()
                self._log_batch(self.parent_id, params=_params(flatten(spec, "spec.")))
            else:
                self.parent_id = parent.info.run_id
                self.resumed = True
                self.was_finished = parent.info.status == "FINISHED"
                if not self.was_finished:
                    self._adopt(parent, resume)
                if spec_path and parent.data.tags.get(TAG_SPEC_PATH) != spec_path:
                    self.client.set_tag(self.parent_id, TAG_SPEC_PATH, spec_path)
        if self.owned and not locked:
            self._settle()
        if self.owned:
            self._start_heartbeat()

    def __enter__(self) -> SweepTracker:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        """Leaving a ``with`` block: a parent still owned (the sweep raised, or never ran) is
        given up (:meth:`release`)."""
        self.release(error if error is not None else KeyboardInterrupt())

    # -- ownership ------------------------------------------------------------------------
    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return str(exp.experiment_id)
        try:
            return str(self.client.create_experiment(
                name, artifact_location=artifact_location(self.tracking_uri, name)))
        except Exception:  # another process created it first (a remote server has no lock)
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return str(exp.experiment_id)

    def _parents(self) -> list[Any]:
        """Every (undeleted) parent run of this sweep hash, earliest first (ties by id)."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"{tag_filter(TAG_SWEEP, self.sweep_hash)} and "
                          f"{tag_filter(TAG_KIND, 'sweep')}", max_results=1000)
        return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))

    def _first_parent(self) -> Any:
        parents = self._parents()
        return parents[0] if parents else None

    def _owner_tags(self) -> dict[str, str]:
        return {TAG_OWNER: _this_process(self.token).tag(), TAG_HEARTBEAT: f"{time.time():.3f}"}

    def _start_heartbeat(self) -> None:
        beat = _Heartbeat(self.tracking_uri, self.parent_id, self.token,
                          self.seconds["heartbeat"])
        self._heartbeat = beat
        weakref.finalize(self, beat.stop_event.set)  # a collected tracker stops beating

    def _own(self) -> None:
        self.owned = True
        _LIVE_TOKENS[self.token] = self

    def _adopt(self, parent: Any, resume: bool) -> None:
        """Take over an unfinished parent whose owner is gone (``resume`` only)."""
        if parent.info.status == "RUNNING":
            live, why = owner_status(parent.data.tags)
        else:  # KILLED or FAILED: its owner gave it up (release)
            live, why = False, "its process gave it up"
        head = f"sweep {self.name} ({self.sweep_hash[:12]}), MLflow run {parent.info.run_id}"
        if live:
            raise SweepBusy(f"{head}: {why}; wait for it to finish, or stop it and pass "
                            f"--resume")
        if not resume:
            raise SweepInterrupted(f"{head} is unfinished ({parent.info.status}): {why}; pass "
                                   f"--resume to finish it")
        tags = self._owner_tags()
        for k, v in tags.items():
            self.client.set_tag(self.parent_id, k, v)
        self.client.update_run(self.parent_id, status="RUNNING")
        self._own()

    def _settle(self) -> None:
        """A remote store: read the claim back after :data:`SETTLE_S` seconds; the earliest
        parent and the last claim win, a loser withdraws and is refused."""
        time.sleep(self.seconds["settle"])
        first = self._first_parent()
        mine = self.client.get_run(self.parent_id)
        owner = Owner.parse(mine.data.tags.get(TAG_OWNER))
        if first is not None and first.info.run_id != self.parent_id and not self.resumed:
            self._withdraw()
            self._discard(self.parent_id)
            raise SweepBusy(f"sweep {self.name} ({self.sweep_hash[:12]}) was started at the same "
                            f"time by another process (MLflow run {first.info.run_id})")
        if owner is None or owner.token != self.token:
            self._withdraw()
            raise SweepBusy(f"sweep {self.name} ({self.sweep_hash[:12]}), MLflow run "
                            f"{self.parent_id}: taken over at the same time by {owner}")

    def _withdraw(self) -> None:
        self.owned = False
        _LIVE_TOKENS.pop(self.token, None)
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _check_owner(self) -> None:
        if self._heartbeat is not None and self._heartbeat.lost:
            lost = self._heartbeat.lost
            self._withdraw()
            raise SweepBusy(f"sweep {self.name}: {lost}; stopped writing")

    def _claim_finished(self) -> None:
        """A point missing from a FINISHED parent: own it (it is RUNNING again) to log it."""
        with store_lock(self.tracking_uri) as locked:
            parent = self.client.get_run(self.parent_id)
            if parent.info.status != "FINISHED":
                self._adopt(parent, resume=True)
            else:
                for k, v in self._owner_tags().items():
                    self.client.set_tag(self.parent_id, k, v)
                self.client.update_run(self.parent_id, status="RUNNING")
                self._own()
        if not locked:
            self._settle()
        self._start_heartbeat()
        self._existing = None  # as the owner now: unfinished children and repeats go
        self.logged_config_hashes()

    def _discard(self, run_id: str) -> None:
        """Terminate (``KILLED``) a run left unfinished, then delete it."""
        run = self.client.get_run(run_id)
        if run.info.status not in _TERMINAL:
            self.client.set_terminated(run_id, status="KILLED")
        self.client.delete_run(run_id)

    def release(self, error: BaseException | None = None) -> None:
        """Give the parent up after an error in this process: the point being logged is
        discarded, the parent ends ``KILLED`` (interrupted) or ``FAILED`` and is no longer
        owned, so ``--resume`` adopts it at once. Never raises."""
        if not self.owned:
            return
        self._withdraw()
        status = "FAILED" if isinstance(error, Exception) else "KILLED"
        try:
            with _mlflow_logs_off():  # MLflow logs its own failures with their tracebacks
                if self._inflight is not None:
                    self._discard(self._inflight)
                    self._inflight = None
                owner = Owner.parse(
                    self.client.get_run(self.parent_id).data.tags.get(TAG_OWNER))
                if owner is not None and owner.token == self.token:
                    self.client.set_terminated(self.parent_id, status=status)
        except Exception as exc:  # noqa: BLE001 - the original error matters more
            # a full disk is what the error says already; ``--resume`` adopts the run anyway
            level = logging.DEBUG if is_disk_full(exc) or is_disk_full(error) \
                else logging.WARNING
            first = next((ln for ln in str(exc).splitlines()
                          if ln.strip() and not ln.startswith("(raised as a result")), "")
            logger.log(level, "could not release MLflow run %s: %s", self.parent_id,
                       first or type(exc).__name__)

    # -- children -------------------------------------------------------------------------
    def children(self) -> list[Any]:
        """Every child run of the parent (any status)."""
        out: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=tag_filter(TAG_PARENT, self.parent_id),
                max_results=1000, page_token=token)
            out.extend(page)
            token = page.token
            if not token:
                return out

    def logged_config_hashes(self) -> set[str]:
        """Config hashes of FINISHED children. As the owner, children that never finished and
        repeats of a config hash (the earliest is kept) are deleted: each point once."""
        if self._existing is None:
            done: set[str] = set()
            for r in sorted(self.children(),
                            key=lambda r: (r.info.start_time or 0, r.info.run_id)):
                h = r.data.tags.get(TAG_CONFIG)
                if r.info.status == "FINISHED" and h and h not in done:
                    done.add(h)
                elif self.owned:
                    self._discard(r.info.run_id)
            self._existing = done
            self.skipped = len(done)
        return set(self._existing)

    def log_point(self, point: Any, outputs: StageCache | StageReader) -> str:
        """Log one point as a child run (params, metrics, tags, artifacts), its stage outputs
        read from ``outputs`` (a sweep passes its reader, which keeps the split indexes its
        fused runs are decoded with); returns its id."""
        import pandas as pd
        from mlflow.entities import Metric

        reader = outputs if isinstance(outputs, StageReader) else StageReader(outputs)
        if not self.owned:
            self._claim_finished()
        self._check_owner()
        m = point.manifest
        tags = {TAG_PARENT: self.parent_id, TAG_CONFIG: point.config_hash,
                TAG_SWEEP: self.sweep_hash, TAG_KIND: "point",
                "aiblox.dataset_hash": m.dataset_hash, "aiblox.manifest_hash": m.manifest_hash,
                "aiblox.label": point.label, "aiblox.baseline": str(point.is_baseline).lower()}
        for split, sm in m.splits.items():
            tags[f"aiblox.run_hash.{split}"] = sm.run_hash
        if m.environment.get("git_commit"):
            tags["aiblox.git_commit"] = str(m.environment["git_commit"])
        run = self.client.create_run(self.experiment_id, run_name=point.label, tags=tags)
        rid = run.info.run_id
        self._inflight = rid
        params = _with_field_defaults(flatten(m.config))
        metrics = [Metric(metric_key(s, k), float(v), 0, 0)
                   for s, vals in sorted(point.metrics.items()) for k, v in sorted(vals.items())]
        self._log_batch(rid, metrics=metrics, params=_params(params))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "manifest.json").write_text(
                json.dumps(m.model_dump(mode="json"), sort_keys=True, indent=1), encoding="utf-8")
            for split, sm in m.splits.items():
                name = split_file(split)
                (folder / f"run.{name}.trec").write_text(
                    reader.point_trec(sm.stages, f"aiblox-{point.config_hash[:12]}"),
                    encoding="utf-8")
                # every stage with per-query values: ranx; chunk and answer metrics (pipeline)
                per_query = reader.per_query(sm.stages)
                rows = [{"query_id": q, "metric": metric, "value": v}
                        for metric, vals in sorted(per_query.items())
                        for q, v in sorted(vals.items())]
                pd.DataFrame(rows, columns=["query_id", "metric", "value"]).to_parquet(
                    folder / f"per_query.{name}.parquet", index=False)
                evidence = reader.selected_evidence(sm.stages)  # selection points only
                if evidence is not None:
                    pd.DataFrame(evidence, columns=EVIDENCE_COLUMNS).astype(
                        {"query_id": "string", "rank": "int64", "chunk_id": "string",
                         "item_id": "string"}).to_parquet(
                        folder / f"evidence.{name}.parquet", index=False)
            self.client.log_artifacts(rid, str(folder))
        self.client.set_terminated(rid, status="FINISHED")
        self._inflight = None
        self.logged += 1
        return rid

    def _log_batch(self, run_id: str, metrics: Sequence[Any] = (), params: Sequence[Any] = (),
                   tags: Sequence[Any] = ()) -> None:
        """log_batch in pieces within MLflow's limits (100 params, 1000 metrics per call)."""
        m, p, t = list(metrics), list(params), list(tags)
        while m or p or t:
            self.client.log_batch(run_id, metrics=m[:1000], params=p[:100], tags=t[:100])
            m, p, t = m[1000:], p[100:], t[100:]

    def finish(self, result: Any) -> dict[str, Any]:
        """Log the choice (best on tune, reported on report) to the parent and close it."""
        from mlflow.entities import Metric, RunTag

        info = {"tracking_uri": self.tracking_uri, "experiment_id": self.experiment_id,
                "parent_run_id": self.parent_id, "logged": self.logged,
                "skipped": self.skipped, "resumed": self.resumed}
        if self.was_finished and self.logged == 0:
            return info  # nothing new: the parent already holds this summary
        self._check_owner()
        best = result.best
        metrics = []
        for split, role in ((result.tune_split, "tune"), (result.report_split, "report")):
            if split is None:  # a cross-validated sweep of one split
                continue
            for k, v in sorted(best.metrics[split].items()):
                metrics.append(Metric(f"best.{role}.{k.replace('@', '_at_')}", float(v), 0, 0))
        tags = {"aiblox.best_config_hash": best.config_hash, "aiblox.best_label": best.label,
                "aiblox.points": str(len(result.points))}
        cv = getattr(result, "cv", None)
        if cv is not None:
            metrics += [Metric(k, float(v), 0, 0) for k, v in sorted(cv_metrics(cv).items())]
            tags.update({f"aiblox.cv.fold{r.fold}.config_hash": r.config_hash for r in cv.rows})
            tags["aiblox.cv.verdict"] = cv.verdict[:5000]
        self._log_batch(self.parent_id, metrics=metrics,
                        tags=[RunTag(k, v) for k, v in tags.items()])
        summary = {"best": best.model_dump(mode="json", exclude={"manifest"}),
                   "ci": result.ci,
                   "significance": [c.model_dump(mode="json") for c in result.significance],
                   "leaderboard": [
                       {"label": p.label, "config_hash": p.config_hash, "metrics": p.metrics}
                       for p in ranked(result.points, result.tune_split, result.primary)]}
        if getattr(result, "trials", None):  # a model-based search: its trials, in order
            summary["trials"] = list(result.trials)
        if getattr(result, "gap", None) is not None:
            summary["gap"] = result.gap
        if cv is not None:  # the fold table; every query's held-out value in cv_folds.json
            summary["cv"] = cv.model_dump(mode="json", exclude={"per_query", "fold_ids",
                                                                "candidates"})
            self.client.log_text(self.parent_id, json.dumps(cv.model_dump(mode="json"),
                                                            sort_keys=True, indent=1),
                                 "cv_folds.json")
        if getattr(result, "objectives", None):  # quality against cost: the front
            summary["pareto"] = pareto_summary(result)
        self.client.log_text(self.parent_id, json.dumps(summary, sort_keys=True, indent=1),
                             "sweep_summary.json")
        self.client.set_terminated(self.parent_id, status="FINISHED")
        self._withdraw()
        return info


def cv_metrics(cv: Any) -> dict[str, float]:
    """The parent run's metrics of a k-fold result (:class:`~aiblox.eval.sweep.crossval.
    CrossValidation`): per fold ``cv.fold<i>.tune`` / ``.held_out`` / ``.gap``, the means, the
    pooled held-out score and, with a baseline, the margin, its interval and the p-value."""
    out = {}
    for r in cv.rows:
        out.update({f"cv.fold{r.fold}.tune": r.tune, f"cv.fold{r.fold}.held_out": r.held_out,
                    f"cv.fold{r.fold}.gap": r.gap})
    out.update({"cv.mean_tune": cv.mean_tune, "cv.mean_held_out": cv.mean_held_out,
                "cv.mean_gap": cv.mean_gap, "cv.pooled_held_out": cv.pooled_held_out})
    if cv.margin is not None:
        out.update({"cv.baseline_mean": cv.baseline_mean, "cv.margin": cv.margin,
                    "cv.margin_low": cv.margin_low, "cv.margin_high": cv.margin_high,
                    "cv.p_value": cv.p_value, "cv.beats_baseline": float(cv.beats_baseline)})
    return out


def _with_field_defaults(params: dict[str, str]) -> dict[str, str]:
    """``params`` with BM25 field weighting written out at its defaults (a config leaves
    ``fts.title_weight`` 1.0 and ``fts.title_b`` None out, so its hashes stay those from before
    the settings existed): every point then has the param, and a report's per-axis tables
    hold the unweighted point too."""
    out = dict(params)
    for key in params:
        if key.endswith("fts.k1"):
            head = key[:-len("k1")]
            out.setdefault(f"{head}title_weight", "1.0")
            out.setdefault(f"{head}title_b", "None")
    return out


def _params(flat: dict[str, str]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, v[:6000]) for k, v in sorted(flat.items())]


def pareto_summary(result: Any) -> dict[str, Any]:
    """``sweep_summary.json``'s ``pareto``: the objectives and their directions (``[name,
    direction]`` pairs, in order), the front (by config hash, best first by primary) and every
    point's objective values on the tune and report splits, in the objectives' order
    (``front``, ``baseline`` flags), for the report's table and plots."""
    from aiblox.eval.sweep.pareto import objective_values

    names = list(result.objectives)
    front = set(result.pareto)
    return {"objectives": [[n, d] for n, d in result.objectives.items()],  # ordered pairs:
            "front": list(result.pareto),  # the summary's keys are sorted when written
            "points": [{"label": p.label, "config_hash": p.config_hash,
                        "front": p.config_hash in front, "baseline": p.is_baseline,
                        "tune": objective_values(p, result.tune_split, names),
                        "report": (objective_values(p, result.report_split, names)
                                   if result.report_split else [])}
                       for p in result.points]}
