"""Many finished MLflow runs written at once: the fast path of the one MLflow writer.

MLflow's client writes a run in several round trips (create, log_batch, artifacts,
terminate), each its own database transaction: about 8 runs a second into a SQLite store on two
cores, whatever the run holds. A sweep logs hundreds of points, so :class:`BulkRunWriter`
writes a batch of finished runs in one transaction through MLflow's own tables and models
(``mlflow.store.tracking.dbmodels.models``: runs, tags, params, metrics, latest metrics; the
schema MLflow itself created and migrates), after writing each run's artifacts straight into its
artifact folder. A run is visible only once its transaction commits, with its artifacts already
in place: a kill loses the batch being written, never leaves half a run.

Where the store is not a SQL database MLflow manages (an HTTP tracking server, a file store)
or its artifacts do not live on a local path, the writer falls back to the client API, run by
run, with the same result.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["BulkRunWriter", "RunRecord", "defer_signal", "sql_store", "whole_write"]

_writing = 0
"""Whole writes under way in this process (:func:`whole_write`)."""
_deferred: list[int] = []
"""Signals that arrived during one (:func:`defer_signal`)."""


@contextlib.contextmanager
def whole_write() -> Iterator[None]:
    """A database transaction that a terminating signal must not cut: a SIGTERM handler that
    asks :func:`defer_signal` first lets it finish and exits just after it (``SystemExit(128 +
    signal)``). A sweep killed inside a batch's transaction once left SQLite's write lock held,
    so the release of its run failed (``database is locked``) and the run stayed RUNNING."""
    global _writing
    _writing += 1
    try:
        yield
    finally:
        _writing -= 1
    if not _writing and _deferred:
        signum = _deferred[0]
        _deferred.clear()
        raise SystemExit(128 + signum)


def defer_signal(signum: int) -> bool:
    """True, with ``signum`` kept for the end of the write, while a :func:`whole_write` runs
    (the caller's handler then returns); False otherwise."""
    if _writing:
        _deferred.append(signum)
        return True
    return False

MAX_PARAM = 6000
"""MLflow's longest param value; longer ones are cut (as the client's writer does)."""


@dataclass
class RunRecord:
    """One finished run to write."""

    name: str
    tags: Mapping[str, str]
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    artifacts: Mapping[str, bytes] = field(default_factory=dict)
    """File name -> content, written to the run's artifact folder."""
    status: str = "FINISHED"
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)


def local_path(uri: str) -> Path | None:
    """The local folder of a ``file:`` URI or a plain path; None for remote artifact stores."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri)
    return None


class BulkRunWriter:
    """Writes finished runs into one experiment, in batches (see the module doc)."""

    def __init__(self, client: Any, experiment_id: str) -> None:
        self.client = client
        self.experiment_id = str(experiment_id)
        self._store = sql_store(client)
        self._artifact_root: str | None = None
        if self._store is not None:
            location = client.get_experiment(self.experiment_id).artifact_location
            if local_path(location) is not None:
                self._artifact_root = location
            else:
                self._store = None
        self.user = os.environ.get("USER") or os.environ.get("USERNAME") or "aiblox"
        self.inflight: str | None = None
        """The run the client's route is writing now (unfinished if the process dies)."""

    @property
    def bulk(self) -> bool:
        """Whether runs are written in one transaction per batch (a SQL store with local
        artifacts) rather than through the client, run by run."""
        return self._store is not None

    def write(self, runs: Sequence[RunRecord]) -> list[str]:
        """Write ``runs`` (finished); returns their run ids, in order."""
        if not runs:
            return []
        if self._store is None:
            return [self._one(r) for r in runs]
        return self._batch(runs)

    # -- the client's route ---------------------------------------------------------------
    def _one(self, r: RunRecord) -> str:
        import tempfile

        from mlflow.entities import Metric, Param

        run = self.client.create_run(self.experiment_id, run_name=r.name, tags=dict(r.tags))
        rid = self.inflight = run.info.run_id
        params = [Param(k, str(v)[:MAX_PARAM]) for k, v in sorted(r.params.items())]
        metrics = [Metric(k, float(v), 0, 0) for k, v in sorted(r.metrics.items())]
        while params or metrics:
            self.client.log_batch(rid, metrics=metrics[:1000], params=params[:100])
            params, metrics = params[100:], metrics[1000:]
        if r.artifacts:
            with tempfile.TemporaryDirectory() as tmp:
                for name, data in r.artifacts.items():
                    (Path(tmp) / name).write_bytes(data)
                self.client.log_artifacts(rid, tmp)
        self.client.set_terminated(rid, status=r.status)
        self.inflight = None
        return rid

    def add_artifacts(self, run_id: str, files: Mapping[str, bytes]) -> None:
        """Write ``files`` (name -> content) into the artifacts of the existing run ``run_id``
        (its local folder, else through the client)."""
        import tempfile

        if not files:
            return
        if self._store is not None:
            folder = local_path(self.client.get_run(run_id).info.artifact_uri)
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
                for name, data in files.items():
                    _write_file(folder / name, data)
                return
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in files.items():
                (Path(tmp) / name).write_bytes(data)
            self.client.log_artifacts(run_id, tmp)

    # -- one transaction per batch -----------------------------------------------------------
    def _batch(self, runs: Sequence[RunRecord]) -> list[str]:
        from mlflow.store.tracking.dbmodels.models import (
            SqlLatestMetric,
            SqlMetric,
            SqlParam,
            SqlRun,
            SqlTag,
        )
        from sqlalchemy import insert

        assert self._store is not None and self._artifact_root is not None
        now = int(time.time() * 1000)
        rows: dict[Any, list[dict[str, Any]]] = {SqlRun: [], SqlTag: [], SqlParam: [],
                                                 SqlMetric: [], SqlLatestMetric: []}
        root = self._artifact_root.rstrip("/")
        for r in runs:
            artifact_uri = f"{root}/{r.run_id}/artifacts"
            if r.artifacts:  # in place before the run exists: a visible run is complete
                folder = local_path(artifact_uri)
                assert folder is not None
                folder.mkdir(parents=True, exist_ok=True)
                for name, data in r.artifacts.items():
                    _named(folder / name, (folder / name).write_bytes, data)
            rows[SqlRun].append(dict(
                run_uuid=r.run_id, name=r.name, experiment_id=int(self.experiment_id),
                user_id=self.user, status=r.status, start_time=now, end_time=now,
                deleted_time=None, source_type="LOCAL", source_name="", entry_point_name="",
                source_version="", lifecycle_stage="active", artifact_uri=artifact_uri))
            tags = {"mlflow.runName": r.name, "mlflow.user": self.user, **dict(r.tags)}
            rows[SqlTag] += [dict(key=k, value=str(v), run_uuid=r.run_id)
                             for k, v in sorted(tags.items())]
            rows[SqlParam] += [dict(key=k, value=str(v)[:MAX_PARAM], run_uuid=r.run_id)
                               for k, v in sorted(r.params.items())]
            for k, v in sorted(r.metrics.items()):
                nan, value = self._store.sanitize_metric_value(float(v))  # NaN, infinities
                row = dict(key=k, value=float(value), timestamp=now, step=0,
                           is_nan=nan, run_uuid=r.run_id)
                rows[SqlMetric].append(row)
                rows[SqlLatestMetric].append(dict(row))
        with whole_write(), self._store.ManagedSessionMaker() as session:
            for model, values in rows.items():
                if values:
                    session.execute(insert(model), values)
        return [r.run_id for r in runs]


def _write_file(path: Path, data: bytes) -> None:
    """``data`` into ``path`` whole: written beside it, then renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _named(path, tmp.write_bytes, data)
    os.replace(tmp, path)


def _named(path: Path, write: Any, data: bytes) -> None:
    """``write(data)``; an ``OSError`` that names no file (a full disk found by the write, not
    the open) raised again naming ``path``, so the error says what could not be written."""
    try:
        write(data)
    except OSError as exc:
        if exc.filename:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def sql_store(client: Any) -> Any:
    """The ``SqlAlchemyStore`` behind an ``MlflowClient`` (a SQLite, PostgreSQL or MySQL
    store MLflow manages), None for any other store (a tracking server, a file store)."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:  # pragma: no cover - mlflow without SQLAlchemy
        return None
    return store if isinstance(store, SqlAlchemyStore) else None
