"""The one MLflow writer: a sweep's parent run, created, adopted or resumed under its owner,
and its points' child runs (:class:`SweepTracker`); the runs of ``aiblox eval --mlflow`` and of
the notebooks (:func:`log_runs`). Every run is laid out by
:func:`~aiblox.engine.tracking.layout.point_record` and written by
:class:`~aiblox.engine.bulk_mlflow.BulkRunWriter`.

A sweep's points are buffered and written in batches, :data:`BATCH_POINTS` points or
:data:`BATCH_S` seconds after the first one buffered, whichever comes first, and at the end;
each batch is one transaction into a SQL store, its artifacts in place before it commits (a
server or a file store: run by run through MLflow's client). A point is logged once its batch
is written: a process killed loses the batch not yet written, whose points ``--resume`` scores
again from their cached stages and logs, each once; an error or Ctrl-C in this process writes
the buffered points before the parent is given up.

The TREC run file of a point is written for the points the sweep's conclusion names (the best,
the baseline, the points tested against it, the folds' choices), at :meth:`SweepTracker.finish`:
every manifest records the stage keys of its run, so any other point's run is written from the
stage cache on demand (:func:`aiblox.engine.tracking.reader.logged_runs`, ``aiblox runs export
REF --trec DIR``)."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiblox.engine.bulk_mlflow import BulkRunWriter, RunRecord, sql_store, whole_write
from aiblox.engine.cache import StageCache
from aiblox.engine.outputs import StageReader
from aiblox.engine.settings import ranked
from aiblox.engine.tracking.layout import (
    TAG_CONFIG,
    TAG_DATASET,
    TAG_KIND,
    TAG_OUTSIDE_GRID,
    TAG_PARENT,
    TAG_RERUN_OPTIONS,
    TAG_SPEC_PATH,
    TAG_SWEEP,
    TAG_WORKDIR,
    PointLog,
    cv_metrics,
    cv_summary,
    cv_tags,
    flatten,
    pareto_summary,
    point_record,
    run_file,
)
from aiblox.engine.tracking.mlflow_store import (
    artifact_location,
    mlflow_logs_off,
    store_lock,
    tag_filter,
    tracking_client,
    tracking_seconds,
)
from aiblox.engine.tracking.owner import (
    LIVE_TOKENS,
    TAG_HEARTBEAT,
    TAG_OWNER,
    Heartbeat,
    Owner,
    SweepBusy,
    SweepInterrupted,
    owner_status,
    this_process,
)
from aiblox.hashing import short_hash
from aiblox.inputs import EnvVarError, mask_url_passwords
from aiblox.stores.base import is_disk_full

__all__ = ["BATCH_POINTS", "BATCH_S", "SweepTracker", "experiment_id", "log_runs",
           "named_points"]

logger = logging.getLogger("aiblox.engine.tracking")


_TERMINAL = ("FINISHED", "FAILED", "KILLED")


BATCH_POINTS = 50
"""A sweep's buffered points are written once this many are waiting (``AIBLOX_TRACKING_BATCH``)
..."""


BATCH_S = 2.0
"""... or once the first of them has waited this many seconds (``AIBLOX_TRACKING_BATCH_S``),
and at the end."""


def _batch_points() -> int:
    """:data:`BATCH_POINTS`, or the whole number > 0 in ``AIBLOX_TRACKING_BATCH``."""
    raw = os.environ.get("AIBLOX_TRACKING_BATCH", "").strip()
    if not raw:
        return BATCH_POINTS
    if not raw.isdigit() or int(raw) < 1:
        raise EnvVarError("AIBLOX_TRACKING_BATCH", raw,
                          f"a whole number of points > 0 (unset: {BATCH_POINTS})")
    return int(raw)


def _params(flat: Mapping[str, str]) -> list[Any]:
    """MLflow params of ``flat``, each URL's password masked: a spec's ``db`` names its
    store, never its password (everyone reading the store sees the params)."""
    from mlflow.entities import Param

    return [Param(k, mask_url_passwords(v)[:6000]) for k, v in sorted(flat.items())]


def experiment_id(client: Any, tracking_uri: str, name: str, *, locked: bool = False) -> str:
    """The id of the experiment ``name``, created (its artifacts beside a local sqlite store,
    :func:`~aiblox.engine.tracking.artifact_location`) under the store's lock when missing
    (``locked``: the caller holds it)."""
    if not locked:
        with store_lock(tracking_uri):
            return experiment_id(client, tracking_uri, name, locked=True)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(
            name, artifact_location=artifact_location(tracking_uri, name)))
    except Exception:  # another process created it first (a remote server has no lock)
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def log_runs(tracking_uri: str, experiment: str, logs: Sequence[PointLog]) -> list[str]:
    """Write ``logs`` as finished runs of ``experiment`` (created when missing), in one batch:
    ``aiblox eval --mlflow`` and the notebooks. Returns their run ids, in order."""
    client = tracking_client(tracking_uri, create=True)
    writer = BulkRunWriter(client, experiment_id(client, tracking_uri, experiment))
    return writer.write([point_record(log) for log in logs])


def named_points(result: Any) -> list[Any]:
    """The points a sweep's conclusion names, each once: the best, the baseline, the points
    tested against the baseline, the folds' choices (a ``[cv]`` sweep)."""
    by_hash = {p.config_hash: p for p in result.points}
    by_label = {p.label: p for p in result.points}
    hashes = [result.best.config_hash]
    if result.baseline is not None:
        hashes.append(result.baseline.config_hash)
    hashes += [by_label[c.candidate].config_hash for c in result.significance
               if c.candidate in by_label]
    cv = getattr(result, "cv", None)
    if cv is not None:
        hashes += [r.config_hash for r in cv.rows]
    return [by_hash[h] for h in dict.fromkeys(hashes) if h in by_hash]


class SweepTracker:
    """Logs one sweep to MLflow (parent run) and its points (child runs), as the parent's one
    writer (see the module doc). From a notebook, ``with SweepTracker(...) as tracker:`` gives
    the parent up if the block is left before :meth:`finish` (a sweep function wrapped by
    :func:`release_on_error` does so on an error anyway)."""

    def __init__(self, tracking_uri: str, experiment: str, sweep_hash: str,
                 spec: dict[str, Any], resume: bool = False,
                 spec_path: str | None = None, dataset_hash: str | None = None,
                 rerun_options: str | None = None, workdir: str | None = None) -> None:
        self.seconds = {what: tracking_seconds(what) for what in ("heartbeat", "lease", "settle")}
        self.client = tracking_client(tracking_uri, create=True)
        self.tracking_uri = tracking_uri
        self.sweep_hash = sweep_hash
        self.dataset_hash = dataset_hash
        """The content hash of the data the sweep scores (tag ``aiblox.dataset_hash`` of its
        parent): a parent of the same spec over other data is another sweep, never resumed
        (None: any parent of the spec, as before parents carried it; the hash of the data the
        parent found records, if it records one, and :meth:`bind_dataset` refuses other
        data)."""
        self.other_data = 0
        """Parents of the same spec logged over other data (the dataset changed since)."""
        self.name = str(spec.get("name"))
        if rerun_options is not None:  # tagged: never with a password (aiblox sweep masks it)
            rerun_options = mask_url_passwords(rerun_options)
        self.logged = 0
        self.skipped = 0
        self.owned = False
        self.token = uuid.uuid4().hex
        self._heartbeat: Heartbeat | None = None
        self._existing: set[str] | None = None
        self._writer: BulkRunWriter | None = None
        self._pending: list[RunRecord] = []
        self._pending_since = 0.0
        self._ids: dict[str, str] = {}  # config hash -> run id, of the points written here
        self.batch_points = _batch_points()
        self.batch_s = tracking_seconds("batch")
        with store_lock(tracking_uri) as locked:
            self.experiment_id = self._experiment(experiment)
            parent = self._first_parent()
            if parent is None:
                run = self.client.create_run(
                    self.experiment_id, run_name=f"sweep-{self.name}",
                    tags={TAG_KIND: "sweep", TAG_SWEEP: sweep_hash,
                          "aiblox.sweep_name": self.name, **self._owner_tags(),
                          **({TAG_SPEC_PATH: spec_path} if spec_path else {}),
                          **({TAG_WORKDIR: workdir} if workdir else {}),
                          **({TAG_RERUN_OPTIONS: rerun_options} if rerun_options else {}),
                          **({TAG_DATASET: dataset_hash} if dataset_hash else {})})
                self.parent_id = run.info.run_id
                self.resumed = False
                self.was_finished = False
                self._own()
                self._log_batch(self.parent_id, params=_params(flatten(spec, "spec.")))
            else:
                self.parent_id = parent.info.run_id
                self.dataset_hash = self.dataset_hash or parent.data.tags.get(TAG_DATASET)
                self.resumed = True
                self.was_finished = parent.info.status == "FINISHED"
                if not self.was_finished:
                    self._adopt(parent, resume)
                for tag, value in ((TAG_SPEC_PATH, spec_path), (TAG_WORKDIR, workdir)):
                    if value and parent.data.tags.get(tag) != value:
                        self.client.set_tag(self.parent_id, tag, value)
                if rerun_options is not None \
                        and parent.data.tags.get(TAG_RERUN_OPTIONS, "") != rerun_options:
                    self.client.set_tag(self.parent_id, TAG_RERUN_OPTIONS, rerun_options)
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

    def bind_dataset(self, dataset_hash: str) -> None:
        """The sweep scores the data ``dataset_hash`` (its runner says so before any point):
        ``ValueError`` when the parent is another data's (its logged points would be taken for
        this data's and skipped), and a parent that records no data is tagged with it. A
        spec's hash leaves its ``dataset`` out (where the data lies), so two specs that differ
        only there share a hash: opened without a dataset hash, the tracker finds the other
        data's parent, and this refuses it."""
        if self.dataset_hash and self.dataset_hash != dataset_hash:
            raise ValueError(f"the tracker's parent run is for dataset "
                             f"{self.dataset_hash[:16]}, the sweep scores {dataset_hash[:16]}: "
                             f"open the tracker with this dataset's hash")
        if not self.dataset_hash:
            self.client.set_tag(self.parent_id, TAG_DATASET, dataset_hash)
            self.dataset_hash = dataset_hash

    # -- ownership ------------------------------------------------------------------------
    def _experiment(self, name: str) -> str:
        return experiment_id(self.client, self.tracking_uri, name, locked=True)

    def _parents(self) -> list[Any]:
        """Every (undeleted) parent run of this sweep hash over this data (a parent that
        records no dataset hash: any), earliest first (ties by id)."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"{tag_filter(TAG_SWEEP, self.sweep_hash)} and "
                          f"{tag_filter(TAG_KIND, 'sweep')}", max_results=1000)
        if self.dataset_hash:
            ours = [r for r in runs if r.data.tags.get(TAG_DATASET, self.dataset_hash)
                    == self.dataset_hash]
            self.other_data = len(runs) - len(ours)
            runs = ours
        return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))

    def _first_parent(self) -> Any:
        parents = self._parents()
        return parents[0] if parents else None

    def _owner_tags(self) -> dict[str, str]:
        return {TAG_OWNER: this_process(self.token).tag(), TAG_HEARTBEAT: f"{time.time():.3f}"}

    def _start_heartbeat(self) -> None:
        beat = Heartbeat(self.tracking_uri, self.parent_id, self.token,
                          self.seconds["heartbeat"])
        self._heartbeat = beat
        weakref.finalize(self, beat.stop_event.set)  # a collected tracker stops beating

    def _own(self) -> None:
        self.owned = True
        LIVE_TOKENS[self.token] = self

    def _adopt(self, parent: Any, resume: bool) -> None:
        """Take over an unfinished parent whose owner is gone (``resume`` only)."""
        if parent.info.status == "RUNNING":
            live, why = owner_status(parent.data.tags)
        else:  # KILLED or FAILED: its owner gave it up (release)
            live, why = False, "its process gave it up"
        head = f"sweep {self.name} ({short_hash(self.sweep_hash)}), MLflow run {parent.info.run_id}"
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
            raise SweepBusy(f"sweep {self.name} ({short_hash(self.sweep_hash)}) was started "
                            f"at the same time by another process (MLflow run {first.info.run_id})")
        if owner is None or owner.token != self.token:
            self._withdraw()
            raise SweepBusy(f"sweep {self.name} ({short_hash(self.sweep_hash)}), MLflow run "
                            f"{self.parent_id}: taken over at the same time by {owner}")

    def _withdraw(self) -> None:
        self.owned = False
        LIVE_TOKENS.pop(self.token, None)
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
        """Give the parent up after an error in this process: the buffered points are written
        (they are whole), a run the client's route left half written is discarded, the parent
        ends ``KILLED`` (interrupted) or ``FAILED`` and is no longer owned, so ``--resume``
        adopts it at once. Never raises."""
        if not self.owned:
            return
        status = "FAILED" if isinstance(error, Exception) else "KILLED"
        with mlflow_logs_off():  # MLflow logs its own failures with their tracebacks
            try:
                try:
                    self._write_pending()
                except Exception as exc:  # noqa: BLE001 - the original error matters more
                    self._pending = []
                    self._warn("write the buffered points of", exc, error)
            finally:
                self._withdraw()
            try:
                inflight = self._writer.inflight if self._writer is not None else None
                if inflight is not None:  # a run the client's route left half written
                    self._writer.inflight = None  # type: ignore[union-attr]
                    self._discard(inflight)
                owner = Owner.parse(
                    self.client.get_run(self.parent_id).data.tags.get(TAG_OWNER))
                if owner is not None and owner.token == self.token:
                    self.client.set_terminated(self.parent_id, status=status)
            except Exception as exc:  # noqa: BLE001 - the original error matters more
                self._warn("release", exc, error)

    def _warn(self, what: str, exc: BaseException, error: BaseException | None) -> None:
        # a full disk is what the error says already; ``--resume`` adopts the run anyway
        level = logging.DEBUG if is_disk_full(exc) or is_disk_full(error) else logging.WARNING
        first = next((ln for ln in str(exc).splitlines()
                      if ln.strip() and not ln.startswith("(raised as a result")), "")
        logger.log(level, "could not %s MLflow run %s: %s", what, self.parent_id,
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

    def child_rows(self) -> list[tuple[str, str, int, str | None]]:
        """``(run id, status, start time, config hash)`` of every child run (any status),
        sorted. In a SQL store one query on MLflow's own tables: ``search_runs`` reads every
        tag, param and metric of every child (2-3 s for 1,228 children), where a re-run needs
        four columns. Elsewhere (a tracking server) through :meth:`children`."""
        store = sql_store(self.client)
        if store is None:
            rows = [(r.info.run_id, r.info.status, int(r.info.start_time or 0),
                     r.data.tags.get(TAG_CONFIG)) for r in self.children()]
        else:
            from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag
            from sqlalchemy import and_, select
            from sqlalchemy.orm import aliased

            parent, config = aliased(SqlTag), aliased(SqlTag)
            query: Any = (
                select(SqlRun.run_uuid, SqlRun.status, SqlRun.start_time, config.value)
                .join(parent, and_(parent.run_uuid == SqlRun.run_uuid,
                                   parent.key == TAG_PARENT, parent.value == self.parent_id))
                .outerjoin(config, and_(config.run_uuid == SqlRun.run_uuid,
                                        config.key == TAG_CONFIG))
                .where(SqlRun.experiment_id == int(self.experiment_id),
                       SqlRun.lifecycle_stage == "active"))
            with store.ManagedSessionMaker() as session:
                rows = [(str(u), str(st), int(t or 0), v) for u, st, t, v in
                        session.execute(query)]
        return sorted(rows, key=lambda r: (r[2], r[0]))

    def logged_config_hashes(self) -> set[str]:
        """Config hashes of FINISHED children. As the owner, children that never finished and
        repeats of a config hash (the earliest is kept) are deleted: each point once."""
        if self._existing is None:
            done: set[str] = set()
            for run_id, status, _, h in self.child_rows():
                if status == "FINISHED" and h and h not in done:
                    done.add(h)
                elif self.owned:
                    self._discard(run_id)
            self._existing = done
            self.skipped = len(done)
        return set(self._existing)

    def log_point(self, point: Any, outputs: StageCache | StageReader) -> None:
        """Log one point as a child run (params, metrics, tags, artifacts; the layout's
        :func:`~aiblox.engine.tracking.layout.point_record`), its per-query values and evidence
        read from ``outputs`` now (a sweep passes its reader). The run is buffered and written
        with its batch (see the module doc; :meth:`flush` writes the batch at once)."""
        reader = outputs if isinstance(outputs, StageReader) else StageReader(outputs)
        if not self.owned:
            self._claim_finished()
        self._check_owner()
        m = point.manifest
        evidence = {}
        per_query = {}
        for split, sm in m.splits.items():
            # every stage with per-query values: ranx; chunk and answer metrics (pipeline)
            per_query[split] = reader.per_query(sm.stages)
            rows = reader.selected_evidence(sm.stages)  # selection points only
            if rows is not None:
                evidence[split] = rows
        record = point_record(PointLog(
            kind="point", label=point.label, metrics=point.metrics, per_query=per_query,
            manifest=m, evidence=evidence,
            tags={TAG_PARENT: self.parent_id, TAG_SWEEP: self.sweep_hash,
                  "aiblox.baseline": str(point.is_baseline).lower(),
                  **({TAG_OUTSIDE_GRID: "true"} if getattr(point, "outside_grid", False)
                     else {})}))
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(record)
        if len(self._pending) >= self.batch_points or \
                time.monotonic() - self._pending_since >= self.batch_s:
            self.flush()

    def flush(self) -> None:
        """Write the buffered points now (one batch), as the parent's owner."""
        if self._pending:
            self._check_owner()
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._writer = BulkRunWriter(self.client, self.experiment_id)
        with whole_write():  # a SIGTERM waits for the batch and its bookkeeping: the release
            ids = self._writer.write(self._pending)  # then writes none of it again
            for record, rid in zip(self._pending, ids, strict=True):
                self._ids[record.tags[TAG_CONFIG]] = rid
            self.logged += len(ids)
            self._pending = []

    def _write_runs(self, points: Sequence[Any],
                    runs: Callable[[Any], Mapping[str, str]]) -> None:
        """``run.<split>.trec`` of ``points`` into their child runs' artifacts."""
        missing = [p.config_hash for p in points if p.config_hash not in self._ids]
        if missing:  # logged by an earlier process
            for r in self.children():
                h = r.data.tags.get(TAG_CONFIG)
                if r.info.status == "FINISHED" and h in missing and h not in self._ids:
                    self._ids[h] = r.info.run_id
        if self._writer is None:
            self._writer = BulkRunWriter(self.client, self.experiment_id)
        for p in points:
            if p.config_hash in self._ids:
                self._writer.add_artifacts(self._ids[p.config_hash], {
                    run_file(split): text.encode("utf-8") for split, text in runs(p).items()})

    def _log_batch(self, run_id: str, metrics: Sequence[Any] = (), params: Sequence[Any] = (),
                   tags: Sequence[Any] = ()) -> None:
        """log_batch in pieces within MLflow's limits (100 params, 1000 metrics per call)."""
        m, p, t = list(metrics), list(params), list(tags)
        while m or p or t:
            self.client.log_batch(run_id, metrics=m[:1000], params=p[:100], tags=t[:100])
            m, p, t = m[1000:], p[100:], t[100:]

    def finish(self, result: Any,
               runs: Callable[[Any], Mapping[str, str]] | None = None) -> dict[str, Any]:
        """Write the buffered points, then the TREC run files of the points the conclusion
        names (:func:`named_points`; ``runs(point)`` gives ``{split: TREC text}``, None: no
        run files), log the choice (best on tune, reported on report) to the parent and close
        it."""
        from mlflow.entities import Metric, RunTag

        self.flush()
        info = {"tracking_uri": self.tracking_uri, "experiment_id": self.experiment_id,
                "parent_run_id": self.parent_id, "logged": self.logged,
                "skipped": self.skipped, "resumed": self.resumed}
        if self.was_finished and self.logged == 0:
            return info  # nothing new: the parent already holds this summary
        self._check_owner()
        if runs is not None:
            self._write_runs(named_points(result), runs)
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
            tags.update(cv_tags(cv))
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
            summary["cv"] = cv_summary(cv)
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
