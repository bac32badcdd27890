"""Compare two logged sweep points (MLflow child runs): per-metric deltas with a paired test on
their per-query metrics, and win/tie/loss counts per query.

Deltas are ``B - A`` of the metrics logged on the runs (``<split>.<metric>``); the paired test
(ranx's two-sided paired Student t-test, deterministic) runs on the ``per_query.<split>.parquet``
artifacts, queries paired by id. mlflow is imported lazily (the ``tracking`` extra).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from aiblox.eval.sweep.significance import compare_to_baseline
from aiblox.eval.sweep.tracking import metric_key

__all__ = ["MetricDelta", "RunComparison", "compare_runs", "per_query_metrics"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class MetricDelta(_Strict):
    """One metric of run B against run A on one split."""

    metric: str
    """ranx metric name, e.g. ``ndcg@10``."""
    a: float
    """Run A's logged mean."""
    b: float
    """Run B's logged mean."""
    delta: float
    """``b - a``."""
    p_value: float
    """Two-sided p-value of the paired test on per-query values (1.0 when identical)."""
    significant: bool
    """``p_value <= alpha``."""
    wins: int
    """Queries where B scores higher."""
    ties: int
    """Queries with equal scores."""
    losses: int
    """Queries where B scores lower."""


class RunComparison(_Strict):
    """Run B against run A on one split."""

    run_a: str
    """Run id of A."""
    run_b: str
    """Run id of B."""
    label_a: str
    """A's label (tag ``aiblox.label``, else its run name)."""
    label_b: str
    """B's label."""
    split: str
    """Split compared."""
    primary: str
    """Metric of the headline win/tie/loss counts (the sweep's primary when known)."""
    n_queries: int
    """Queries both runs have per-query values for."""
    test: str
    """Paired test used."""
    alpha: float
    """Significance level."""
    metrics: list[MetricDelta]
    """One row per metric, sorted by name."""

    @property
    def primary_row(self) -> MetricDelta:
        """The row of the primary metric."""
        return next(m for m in self.metrics if m.metric == self.primary)


def per_query_metrics(client: Any, run_id: str, split: str) -> dict[str, dict[str, float]]:
    """``{metric: {query_id: value}}`` from a run's ``per_query.<split>.parquet`` artifact."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run_id, f"per_query.{split}.parquet", tmp)
        except Exception as exc:  # noqa: BLE001 - re-raised with the run and split named
            raise ValueError(f"run {run_id} has no per_query.{split}.parquet artifact") from exc
        frame = pd.read_parquet(Path(local))
    out: dict[str, dict[str, float]] = {}
    for qid, metric, value in zip(frame["query_id"], frame["metric"], frame["value"],
                                  strict=True):
        out.setdefault(str(metric), {})[str(qid)] = float(value)
    return out


def _primary(client: Any, run: Any, metrics: list[str]) -> str:
    parent = run.data.tags.get("mlflow.parentRunId")
    if parent:
        try:
            prim = client.get_run(parent).data.params.get("spec.primary")
        except Exception:  # noqa: BLE001 - parent gone: fall back to the first metric
            prim = None
        if prim in metrics:
            return prim
    return metrics[0]


def compare_runs(run_a: str, run_b: str, tracking_uri: str, split: str = "test",
                 primary: str | None = None, alpha: float = 0.05) -> RunComparison:
    """Compare child run ``run_b`` against ``run_a`` on ``split`` (see the module doc)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    runs = []
    for rid in (run_a, run_b):
        try:
            runs.append(client.get_run(rid))
        except Exception as exc:  # noqa: BLE001 - shown to the user with the id
            raise ValueError(f"no MLflow run {rid} in {tracking_uri}") from exc
    pq_a = per_query_metrics(client, run_a, split)
    pq_b = per_query_metrics(client, run_b, split)
    metrics = sorted(set(pq_a) & set(pq_b))
    if not metrics:
        raise ValueError(f"runs {run_a} and {run_b} share no per-query metrics on {split}")
    prim = primary if primary is not None else _primary(client, runs[0], metrics)
    if prim not in metrics:
        raise ValueError(f"metric {prim} is not among {metrics}")
    tests = {c.metric: c for c in compare_to_baseline(pq_a, [(run_b, pq_b)], metrics,
                                                      alpha=alpha)}
    rows = []
    for m in metrics:
        key = metric_key(split, m)
        la, lb = runs[0].data.metrics.get(key), runs[1].data.metrics.get(key)
        c = tests[m]
        a = float(la) if la is not None else c.baseline_mean
        b = float(lb) if lb is not None else c.candidate_mean
        rows.append(MetricDelta(metric=m, a=a, b=b, delta=b - a, p_value=c.p_value,
                                significant=c.p_value <= alpha, wins=c.wins, ties=c.ties,
                                losses=c.losses))
    n = len(set(pq_a[prim]) & set(pq_b[prim]))

    def label(r: Any) -> str:
        return r.data.tags.get("aiblox.label") or r.info.run_name or r.info.run_id

    return RunComparison(run_a=run_a, run_b=run_b, label_a=label(runs[0]),
                         label_b=label(runs[1]), split=split, primary=prim, n_queries=n,
                         test="student", alpha=alpha, metrics=rows)
