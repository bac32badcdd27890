"""The one MLflow writer (:class:`SweepTracker`): a sweep's parent run, created, adopted or
resumed under its owner, and one child run per point with its params, metrics, tags and
artifacts."""

from __future__ import annotations

import json
import logging
import tempfile
import time
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiblox.engine.cache import StageCache
from aiblox.engine.outputs import StageReader
from aiblox.engine.settings import ranked
from aiblox.engine.tracking.layout import (
    EVIDENCE_COLUMNS,
    TAG_CONFIG,
    TAG_KIND,
    TAG_PARENT,
    TAG_SPEC_PATH,
    TAG_SWEEP,
    _params,
    _with_field_defaults,
    cv_metrics,
    flatten,
    metric_key,
    pareto_summary,
    split_file,
)
from aiblox.engine.tracking.mlflow_store import (
    _mlflow_logs_off,
    _seconds,
    artifact_location,
    store_lock,
    tag_filter,
    tracking_client,
)
from aiblox.engine.tracking.owner import (
    _LIVE_TOKENS,
    TAG_HEARTBEAT,
    TAG_OWNER,
    Owner,
    SweepBusy,
    SweepInterrupted,
    _Heartbeat,
    _this_process,
    owner_status,
)
from aiblox.stores.base import is_disk_full

__all__ = ["SweepTracker"]

logger = logging.getLogger("aiblox.engine.tracking")


_TERMINAL = ("FINISHED", "FAILED", "KILLED")


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
