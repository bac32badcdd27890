"""MLflow logging of sweeps: one parent run per sweep, one child run per point.

The parent run is found by the sweep's hash (tag ``aiblox.sweep_hash``), so running the same spec
again logs nothing twice: a child is logged only when no FINISHED child of the parent carries
the point's config hash (tag ``aiblox.config_hash``). A child left unfinished by a killed sweep
is deleted and logged again on ``resume``. An unfinished parent is continued only with
``resume=True``; otherwise :class:`SweepInterrupted` says so.

Children: params are the flattened config; metrics ``<split>.<metric>`` (``@`` written ``_at_``,
which MLflow names cannot hold); tags hold the hashes; artifacts hold ``manifest.json``, one TREC
run file and one per-query metrics parquet per split (every stage with per-query values: ranx
metrics, and for pipeline points chunk and answer metrics), and for selection points
``evidence.<split>.parquet`` (``query_id, rank, chunk_id, item_id``). In file names a derived
split is written by :func:`split_file` (``test:0/2`` as ``test-0of2``). mlflow is imported here
only (the ``tracking`` extra).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiblox.eval.sweep.stages import StageCache

__all__ = [
    "DEFAULT_TRACKING_URI",
    "SweepInterrupted",
    "SweepTracker",
    "flatten",
    "metric_key",
    "split_file",
    "trec_run",
]

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"

TAG_KIND = "aiblox.kind"
TAG_SWEEP = "aiblox.sweep_hash"
TAG_CONFIG = "aiblox.config_hash"
TAG_PARENT = "mlflow.parentRunId"
EVIDENCE_COLUMNS = ["query_id", "rank", "chunk_id", "item_id"]
"""Columns of ``evidence.<split>.parquet``: the evidence a selection point kept, in order."""
TAG_SPEC_PATH = "aiblox.spec_path"
"""Parent-run tag: the spec file the sweep was run from (for the report's reproduce command)."""


class SweepInterrupted(RuntimeError):
    """The sweep has an unfinished parent run and ``resume`` was not asked for."""


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
    """TREC run format: ``qid Q0 doc rank score tag`` per line, queries sorted by id."""
    lines = []
    for qid in sorted(run):
        for rank, (doc, score) in enumerate(run[qid], start=1):
            lines.append(f"{qid} Q0 {doc} {rank} {score!r} {tag}")
    return "\n".join(lines) + ("\n" if lines else "")


def _artifact_root(tracking_uri: str) -> str | None:
    """Artifacts beside a local sqlite store (``mlruns/`` for the default URI)."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        return (db.parent.resolve() / "artifacts").as_uri()
    return None


class SweepTracker:
    """Logs one sweep to MLflow (parent run) and its points (child runs)."""

    def __init__(self, tracking_uri: str, experiment: str, sweep_hash: str,
                 spec: dict[str, Any], resume: bool = False,
                 spec_path: str | None = None) -> None:
        from mlflow.tracking import MlflowClient

        if tracking_uri.startswith("sqlite:///"):
            Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.tracking_uri = tracking_uri
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            root = _artifact_root(tracking_uri)
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in experiment)
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=f"{root}/{safe}" if root else None)
        else:
            self.experiment_id = exp.experiment_id
        self.sweep_hash = sweep_hash
        self.logged = 0
        self.skipped = 0
        parents = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{TAG_SWEEP}` = '{sweep_hash}' and tags.`{TAG_KIND}` = 'sweep'",
            order_by=["attributes.start_time DESC"], max_results=1)
        if parents:
            parent = parents[0]
            if parent.info.status != "FINISHED" and not resume:
                raise SweepInterrupted(
                    f"sweep {spec.get('name')} ({sweep_hash[:12]}) has an unfinished MLflow run "
                    f"{parent.info.run_id}; pass --resume to finish it")
            self.parent_id = parent.info.run_id
            self.resumed = True
            self.was_finished = parent.info.status == "FINISHED"
            if spec_path and parent.data.tags.get(TAG_SPEC_PATH) != spec_path:
                self.client.set_tag(self.parent_id, TAG_SPEC_PATH, spec_path)
            if parent.info.status not in ("RUNNING", "FINISHED"):
                self.client.update_run(self.parent_id, status="RUNNING")
        else:
            run = self.client.create_run(
                self.experiment_id, run_name=f"sweep-{spec.get('name')}",
                tags={TAG_KIND: "sweep", TAG_SWEEP: sweep_hash,
                      "aiblox.sweep_name": str(spec.get("name")),
                      **({TAG_SPEC_PATH: spec_path} if spec_path else {})})
            self.parent_id = run.info.run_id
            self.resumed = False
            self.was_finished = False
            self._log_batch(self.parent_id, params=_params(flatten(spec, "spec.")))
        self._existing: set[str] | None = None

    def children(self) -> list[Any]:
        """Every child run of the parent (any status)."""
        out: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{self.parent_id}'",
                max_results=1000, page_token=token)
            out.extend(page)
            token = page.token
            if not token:
                return out

    def logged_config_hashes(self) -> set[str]:
        """Config hashes of FINISHED children; unfinished children are deleted (re-logged)."""
        if self._existing is None:
            done = set()
            for r in self.children():
                if r.info.status == "FINISHED" and TAG_CONFIG in r.data.tags:
                    done.add(r.data.tags[TAG_CONFIG])
                else:
                    self.client.delete_run(r.info.run_id)
            self._existing = done
            self.skipped = len(done)
        return set(self._existing)

    def log_point(self, point: Any, cache: StageCache) -> str:
        """Log one point as a child run (params, metrics, tags, artifacts); returns its id."""
        import pandas as pd
        from mlflow.entities import Metric

        from aiblox.eval.sweep.pipeline import logged_per_query, selected_evidence
        from aiblox.eval.sweep.runner import load_fused_run

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
        params = flatten(m.config)
        metrics = [Metric(metric_key(s, k), float(v), 0, 0)
                   for s, vals in sorted(point.metrics.items()) for k, v in sorted(vals.items())]
        self._log_batch(rid, metrics=metrics, params=_params(params))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "manifest.json").write_text(
                json.dumps(m.model_dump(mode="json"), sort_keys=True, indent=1), encoding="utf-8")
            for split, sm in m.splits.items():
                name = split_file(split)
                signals = next(s for s in sm.stages if s["name"] == "signals")
                fusion = next(s for s in sm.stages if s["name"] == "fusion")
                run_out = load_fused_run(cache, signals["key"], fusion["key"])
                (folder / f"run.{name}.trec").write_text(
                    trec_run(run_out, f"aiblox-{point.config_hash[:12]}"), encoding="utf-8")
                # every stage with per-query values: ranx; chunk and answer metrics (pipeline)
                per_query = logged_per_query(cache, sm.stages)
                rows = [{"query_id": q, "metric": metric, "value": v}
                        for metric, vals in sorted(per_query.items())
                        for q, v in sorted(vals.items())]
                pd.DataFrame(rows, columns=["query_id", "metric", "value"]).to_parquet(
                    folder / f"per_query.{name}.parquet", index=False)
                evidence = selected_evidence(cache, sm.stages)  # selection points only
                if evidence is not None:
                    pd.DataFrame(evidence, columns=EVIDENCE_COLUMNS).astype(
                        {"query_id": "string", "rank": "int64", "chunk_id": "string",
                         "item_id": "string"}).to_parquet(
                        folder / f"evidence.{name}.parquet", index=False)
            self.client.log_artifacts(rid, str(folder))
        self.client.set_terminated(rid, status="FINISHED")
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
        best = result.best
        metrics = []
        for split, role in ((result.tune_split, "tune"), (result.report_split, "report")):
            for k, v in sorted(best.metrics[split].items()):
                metrics.append(Metric(f"best.{role}.{k.replace('@', '_at_')}", float(v), 0, 0))
        tags = {"aiblox.best_config_hash": best.config_hash, "aiblox.best_label": best.label,
                "aiblox.points": str(len(result.points))}
        self._log_batch(self.parent_id, metrics=metrics,
                        tags=[RunTag(k, v) for k, v in tags.items()])
        summary = {"best": best.model_dump(mode="json", exclude={"manifest"}),
                   "ci": result.ci,
                   "significance": [c.model_dump(mode="json") for c in result.significance],
                   "leaderboard": [
                       {"label": p.label, "config_hash": p.config_hash, "metrics": p.metrics}
                       for p in sorted(result.points,
                                       key=lambda p: (-p.metrics[result.tune_split][result.primary],
                                                      p.config_hash))]}
        self.client.log_text(self.parent_id, json.dumps(summary, sort_keys=True, indent=1),
                             "sweep_summary.json")
        self.client.set_terminated(self.parent_id, status="FINISHED")
        return info


def _params(flat: dict[str, str]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, v[:6000]) for k, v in sorted(flat.items())]
