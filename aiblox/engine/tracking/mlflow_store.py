"""The MLflow store: URIs (a local ``sqlite:///`` file, a file store, a server), its
inter-process file lock, a client opened once under it (:func:`tracking_client`, a new sqlite
database never left half made), the durations read from the environment, and MLflow filter
values (:func:`tag_filter`)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiblox.inputs import env_seconds
from aiblox.stores.base import is_disk_full

__all__ = [
    "CREATING",
    "DEFAULT_TRACKING_URI",
    "HEARTBEAT_S",
    "LEASE_S",
    "LOCK_TIMEOUT_S",
    "REACH_TIMEOUT_S",
    "SETTLE_S",
    "TrackingStoreError",
    "artifact_location",
    "check_tracking_server",
    "check_tracking_store",
    "new_tracking_files",
    "opened_uri",
    "quiet_downloads",
    "remove_made_store",
    "store_lock",
    "tag_filter",
    "tracking_client",
]


DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"


HEARTBEAT_S = 10.0
"""Seconds between two heartbeats of a running sweep, unless ``AIBLOX_SWEEP_HEARTBEAT_S`` says
otherwise. Each of these variables is read when used (:func:`tracking_seconds`): a value that
is not a finite number > 0 is an :class:`~aiblox.inputs.EnvVarError` naming it, before the
sweep starts."""


LEASE_S = 60.0
"""A sweep owned from another machine is live while its heartbeat is younger than this
(``AIBLOX_SWEEP_LEASE_S``); on the same machine the owner's process is checked instead."""


SETTLE_S = 2.0
"""Remote tracking servers (no file lock): seconds between writing a claim and reading it back
(``AIBLOX_TRACKING_SETTLE_S``)."""


LOCK_TIMEOUT_S = 600.0
"""Longest wait for a local store's file lock (held for seconds at most)."""


_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class TrackingStoreError(ValueError):
    """The tracking store cannot be used: a missing ``sqlite:///`` file for a reader, a folder
    that cannot be written, a lock that cannot be had. The message is one line naming it."""


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


def opened_uri(tracking_uri: str) -> str:
    """The URI MLflow is handed for ``tracking_uri``: a relative ``sqlite:///PATH`` made
    absolute against the working folder now. MLflow keeps one store per URI string for the
    process, so a relative one opened in one folder kept that folder's database after a
    ``chdir`` (a notebook's, a test's): ``sqlite:///mlruns/mlflow.db`` opened again in another
    folder wrote the runs into the first one's. Any other URI is returned as it is."""
    db = _sqlite_path(tracking_uri)
    if db is None or db.is_absolute():
        return tracking_uri
    query = tracking_uri.partition("?")[2]
    return f"sqlite:///{db.resolve().as_posix()}" + (f"?{query}" if query else "")


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
    tables = _sqlite_tables(db) if db is not None else None
    if tables == []:
        raise TrackingStoreError(f"no MLflow tracking database at {db} (--tracking-uri "
                                 f"{tracking_uri}): the file holds no table; nothing was "
                                 f"created")
    _refuse_foreign(db, tables, tracking_uri)


def _sqlite_tables(db: Path) -> list[str] | None:
    """The tables of the sqlite file ``db`` ([] for an empty file); None when it is missing or
    cannot be read as sqlite (MLflow's own error names it then)."""
    import sqlite3

    if not db.is_file():
        return None
    if db.stat().st_size == 0:
        return []
    try:
        con = sqlite3.connect(f"file:{db.resolve().as_posix()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return sorted(r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.Error:
        return None
    finally:
        con.close()


def _mlflow_schema(tables: list[str]) -> bool:
    """Whether ``tables`` are an MLflow schema, whole or half made: alembic's version table
    with MLflow's ``experiments`` table, or nothing but alembic's own tables (a first migration
    cut short)."""
    own = [t for t in tables if not t.startswith(("sqlite_", "_alembic_tmp_"))]
    return "alembic_version" in own and ("experiments" in own or own == ["alembic_version"])


def _refuse_foreign(db: Path | None, tables: list[str] | None, tracking_uri: str) -> None:
    """Raise :class:`TrackingStoreError` when the sqlite file ``db`` holds ``tables`` and they
    are not MLflow's (another tool's database given as ``--tracking-uri``): MLflow would add
    its ~60 tables to it, and a store it could not open is made again. Nothing is changed."""
    if tables and not _mlflow_schema(tables):
        shown = ", ".join(tables[:5]) + (f", ... ({len(tables)} tables)"
                                         if len(tables) > 5 else "")
        raise TrackingStoreError(f"{db} is not an MLflow tracking database (--tracking-uri "
                                 f"{tracking_uri}): it holds the tables {shown} and no MLflow "
                                 f"schema; nothing was changed. Give MLflow a file of its own")


REACH_TIMEOUT_S = 10.0
"""Seconds to wait for a tracking server to accept a connection (``AIBLOX_TRACKING_CONNECT_S``)
before the sweep stops; MLflow's own retries would take minutes to give up."""


_SECONDS_ENV = {"heartbeat": ("AIBLOX_SWEEP_HEARTBEAT_S", HEARTBEAT_S),
                "lease": ("AIBLOX_SWEEP_LEASE_S", LEASE_S),
                "settle": ("AIBLOX_TRACKING_SETTLE_S", SETTLE_S),
                "connect": ("AIBLOX_TRACKING_CONNECT_S", REACH_TIMEOUT_S),
                "batch": ("AIBLOX_TRACKING_BATCH_S", 2.0)}


def tracking_seconds(what: str) -> float:
    """The duration ``what`` (``heartbeat``, ``lease``, ``settle``, ``connect``, ``batch``): its
    variable's value, else the default."""
    return env_seconds(*_SECONDS_ENV[what])


def check_tracking_server(tracking_uri: str) -> None:
    """Raise :class:`TrackingStoreError` naming ``tracking_uri`` when it is an ``http(s)://``
    server that does not accept a connection (refused, no route, a name that does not
    resolve), within :data:`REACH_TIMEOUT_S`. Local stores and other schemes pass."""
    from urllib.parse import urlsplit

    parts = urlsplit(tracking_uri)
    if parts.scheme not in ("http", "https"):
        return
    timeout = tracking_seconds("connect")
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
        _refuse_foreign(db, _sqlite_tables(db) if db is not None else None, tracking_uri)
    with store_lock(tracking_uri, required=create):
        if create and db is not None:
            _create_sqlite(db, tracking_uri)
        try:
            client = MlflowClient(tracking_uri=opened_uri(tracking_uri))
            client.search_experiments(max_results=1)  # opens the store: schema made or checked
        except Exception as exc:  # noqa: BLE001 - one line for the user, with the URI
            if not (create and db is not None and _holds_nothing(db)):
                raise _open_error(tracking_uri, exc) from exc
            # a database whose creation an older version left half done (a full disk, a
            # kill): it holds no run, no experiment of ours, nothing: made again
            _remove_sqlite(db, tracking_uri)
            _create_sqlite(db, tracking_uri)
            try:
                client = MlflowClient(tracking_uri=opened_uri(tracking_uri))
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
    template = _schema_template()
    try:
        made = template is not None and _copy_template(template, tmp)
        try:  # the schema (MLflow's migrations, unless copied), the Default experiment
            MlflowClient(tracking_uri=tmp_uri).search_experiments(max_results=1)
        finally:
            _forget_engine(tmp_uri)
        if template is not None and not made:
            _save_template(tmp, template)
        os.replace(tmp, db)
    except Exception as exc:  # noqa: BLE001 - one line, with the URI
        raise _open_error(tracking_uri, exc) from exc
    finally:
        for leftover in db.parent.glob(f".{db.name}{CREATING}*"):
            leftover.unlink(missing_ok=True)


def _schema_template() -> Path | None:
    """Where an empty sqlite MLflow schema of this MLflow version is kept
    (``~/.cache/aiblox/mlflow/schema-<version>.db``, ``AIBLOX_MLFLOW_TEMPLATE_DIR`` elsewhere;
    ``AIBLOX_MLFLOW_TEMPLATE_DIR=off``: none): a new store is a copy of it rather than MLflow's
    ~50 schema migrations run again (seconds each time)."""
    import mlflow

    folder = os.environ.get("AIBLOX_MLFLOW_TEMPLATE_DIR", "").strip()
    if folder.lower() == "off":
        return None
    root = Path(folder) if folder else Path.home() / ".cache" / "aiblox" / "mlflow"
    return root / f"schema-{mlflow.__version__}.db"


def _copy_template(template: Path, tmp: Path) -> bool:
    """``tmp`` as a copy of the schema ``template``; False (nothing copied) when there is none
    or it is not a whole database of the schema."""
    import shutil
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{template.resolve().as_posix()}?mode=ro", uri=True)
        try:
            (version,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
            (runs,) = con.execute("SELECT count(*) FROM runs").fetchone()
        finally:
            con.close()
        if not version or runs:
            return False
        shutil.copyfile(template, tmp)
        return True
    except (OSError, sqlite3.Error, TypeError, ValueError):
        tmp.unlink(missing_ok=True)
        return False


def _save_template(made: Path, template: Path) -> None:
    """Keep the schema of the store MLflow just made (``made``), its experiments removed (MLflow
    makes the Default one on first open, with the store's own artifact root), as ``template``:
    written beside it, then renamed into place. Best effort: a folder that cannot be written
    keeps no template."""
    import shutil
    import sqlite3

    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, tmp)
        con = sqlite3.connect(tmp)
        try:
            con.execute("DELETE FROM experiment_tags")
            con.execute("DELETE FROM experiments")
            con.commit()
        finally:
            con.close()
        os.replace(tmp, template)
    except (OSError, sqlite3.Error):
        tmp.unlink(missing_ok=True)


_MADE_FIRST: dict[str, tuple[str, object]] = {"experiments": ("experiment_id", 0),
                                              "workspaces": ("name", "default")}
"""The rows MLflow writes when it makes its schema, by table: not content."""


def _holds_nothing(db: Path) -> bool:
    """True when the sqlite file ``db`` is an MLflow schema (:func:`_mlflow_schema`) that holds
    no MLflow content: every table empty but the schema's version, the ``Default`` experiment
    (id 0) and the ``default`` workspace (MLflow 3's) MLflow makes first. Read-only; False
    when it cannot be read."""
    import sqlite3

    tables = _sqlite_tables(db)
    if not tables or not _mlflow_schema(tables):  # another tool's database is never removed
        return False
    try:
        con = sqlite3.connect(f"file:{db.resolve().as_posix()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        for table in tables:
            if table == "alembic_version" or table.startswith(("_alembic_tmp_", "sqlite_")):
                continue
            quoted = '"' + table.replace('"', '""') + '"'
            if table in _MADE_FIRST:
                column, value = _MADE_FIRST[table]
                n = con.execute(f"SELECT count(*) FROM {quoted} "  # noqa: S608
                                f"WHERE {column} != ?", (value,)).fetchone()[0]
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


def new_tracking_files(tracking_uri: str) -> list[Path]:
    """What opening the local store of ``tracking_uri`` with ``create=True`` would make that is
    not there yet: its sqlite file (a file store: its folder), its lock file, and the folders
    above, deepest first; [] for a server. Listed before a command opens the store, for
    :func:`remove_made_store` when the command then fails."""
    db = _sqlite_path(tracking_uri)
    local = db if db is not None else _file_store(tracking_uri)
    lock = _lock_path(tracking_uri)
    if local is None or lock is None:
        return []
    folder = local.parent if db is not None else local
    return [p for p in (*([db] if db is not None else []), lock, folder, *folder.parents)
            if not p.exists()]


def remove_made_store(tracking_uri: str, made: list[Path]) -> None:
    """Remove the store this command made (``made``: :func:`new_tracking_files`, listed before
    it was opened) when it holds nothing: a command that failed before logging (a run file
    refused, a dataset that does not load) leaves no new store behind for the next one to
    find. A sqlite database holding any MLflow content (:func:`_holds_nothing`: a run, an
    experiment) is kept, and so is a store that was there before, with its lock file and its
    folders; a folder this command made is removed when it is empty."""
    db = _sqlite_path(tracking_uri)
    if db is not None:
        if db not in made:
            return  # there before: never this command's to remove
        if db.exists():
            if not _holds_nothing(db):
                return
            _remove_sqlite(db, tracking_uri)
    for path in made:  # the lock file, then the folders deepest first
        try:
            if path.is_dir():
                path.rmdir()
            elif path != db:
                path.unlink(missing_ok=True)
        except OSError:
            return  # a folder not empty (something else was written there): kept, and above it


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


@contextlib.contextmanager
def mlflow_logs_off() -> Iterator[None]:
    """MLflow's loggers silent for a while (they log a failed database write with its
    traceback before raising it)."""
    mlflow_logger = logging.getLogger("mlflow")
    before = mlflow_logger.level
    mlflow_logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        mlflow_logger.setLevel(before)
