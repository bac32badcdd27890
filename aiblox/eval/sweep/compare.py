"""Compare two logged sweep points (MLflow child runs): per-metric deltas with a paired test on
their per-query metrics (:func:`aiblox.eval.metrics.paired_test`, the notebooks' route too),
win/tie/loss counts per query, and for selection-policy points the evidence that entered or
left per query.

Deltas are ``B - A`` of the metrics logged on the runs (``<split>.<metric>``); the paired test
(ranx's two-sided paired Student t-test, deterministic) runs on the ``per_query.<split>.parquet``
artifacts, queries paired by id. Pipeline points with selection also log
``evidence.<split>.parquet`` (``query_id, rank, chunk_id, item_id``: the selected evidence in
order); when both runs have it, :attr:`RunComparison.evidence` lists per query the chunks only B
selected (entered) and only A selected (left), and :attr:`RunComparison.evidence_summary` counts
them. mlflow is imported lazily (the ``tracking`` extra).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.eval.metrics.significance import compare_to_baseline
from aiblox.eval.sweep.tracking import metric_key, split_file

__all__ = [
    "EvidenceChange",
    "MetricDelta",
    "RunComparison",
    "compare_runs",
    "evidence_changes",
    "per_query_evidence",
    "per_query_metrics",
]


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
    n: int = Field(default=0, exclude=True)
    """Queries both runs have a value for (not serialised: ``aiblox compare --json`` prints
    the run's ``n_queries``)."""


class EvidenceChange(_Strict):
    """How one query's selected evidence differs from run A to run B."""

    query_id: str
    """The query."""
    entered: list[str]
    """Chunk ids B selected and A did not, in B's order."""
    left: list[str]
    """Chunk ids A selected and B did not, in A's order."""
    kept: int
    """Chunks both selected."""
    reordered: bool = False
    """True when the kept chunks come in another order."""

    @property
    def size(self) -> int:
        """Chunks that entered or left."""
        return len(self.entered) + len(self.left)


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
    evidence: list[EvidenceChange] | None = None
    """Selection-policy runs: per query whose selected evidence differs, what entered and
    left, largest change first (ties by query id); None unless both runs logged
    ``evidence.<split>.parquet``."""
    evidence_summary: dict[str, int] | None = None
    """``queries`` (in both runs), ``changed``, ``entered``, ``left``, ``kept`` (chunk counts
    summed over queries); None without evidence artifacts."""

    @property
    def primary_row(self) -> MetricDelta:
        """The row of the primary metric."""
        return next(m for m in self.metrics if m.metric == self.primary)


def per_query_metrics(client: Any, run_id: str, split: str) -> dict[str, dict[str, float]]:
    """``{metric: {query_id: value}}`` from a run's ``per_query.<split>.parquet`` artifact."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        name = f"per_query.{split_file(split)}.parquet"
        try:
            local = client.download_artifacts(run_id, name, tmp)
        except Exception as exc:  # noqa: BLE001 - re-raised with the run and split named
            raise ValueError(f"run {run_id} has no {name} artifact (split {split})") from exc
        frame = pd.read_parquet(Path(local))
    out: dict[str, dict[str, float]] = {}
    for qid, metric, value in zip(frame["query_id"], frame["metric"], frame["value"],
                                  strict=True):
        out.setdefault(str(metric), {})[str(qid)] = float(value)
    return out


def per_query_evidence(client: Any, run_id: str, split: str) -> dict[str, list[str]] | None:
    """``{query_id: [chunk_id, ...]}`` (selected evidence, in rank order) from a run's
    ``evidence.<split>.parquet`` artifact; None when the run has none (not a selection point).
    A query that selected nothing is listed with an empty list (a row with no chunk id)."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run_id, f"evidence.{split_file(split)}.parquet",
                                              tmp)
        except Exception:  # noqa: BLE001 - no artifact: not a selection-policy point
            return None
        frame = pd.read_parquet(Path(local))
    out: dict[str, list[tuple[int, str]]] = {}
    for qid, rank, chunk in zip(frame["query_id"], frame["rank"], frame["chunk_id"],
                                strict=True):
        rows = out.setdefault(str(qid), [])
        if chunk is not None and not pd.isna(chunk) and int(rank) >= 0:
            rows.append((int(rank), str(chunk)))
    return {q: [c for _, c in sorted(rows)] for q, rows in sorted(out.items())}


def evidence_changes(a: dict[str, list[str]], b: dict[str, list[str]]
                     ) -> tuple[list[EvidenceChange], dict[str, int]]:
    """Per query in both ``a`` and ``b`` whose selected chunks differ: what entered (only in B)
    and left (only in A); largest change first, ties by query id. And the summary counts."""
    changes: list[EvidenceChange] = []
    summary = {"queries": 0, "changed": 0, "entered": 0, "left": 0, "kept": 0}
    for q in sorted(set(a) & set(b)):
        sa, sb = set(a[q]), set(b[q])
        entered = [c for c in b[q] if c not in sa]
        left = [c for c in a[q] if c not in sb]
        kept = [c for c in a[q] if c in sb]
        reordered = kept != [c for c in b[q] if c in sa]
        summary["queries"] += 1
        summary["entered"] += len(entered)
        summary["left"] += len(left)
        summary["kept"] += len(kept)
        if entered or left or reordered:
            summary["changed"] += 1
            changes.append(EvidenceChange(query_id=q, entered=entered, left=left,
                                          kept=len(kept), reordered=reordered))
    changes.sort(key=lambda c: (-c.size, c.query_id))
    return changes, summary


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
    from aiblox.eval.sweep.tracking import tracking_client

    client = tracking_client(tracking_uri)  # a reader: a missing store is an error
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
                                losses=c.losses, n=c.wins + c.ties + c.losses))
    n = len(set(pq_a[prim]) & set(pq_b[prim]))

    def label(r: Any) -> str:
        return r.data.tags.get("aiblox.label") or r.info.run_name or r.info.run_id

    ev_a = per_query_evidence(client, run_a, split)
    ev_b = per_query_evidence(client, run_b, split) if ev_a is not None else None
    evidence = summary = None
    if ev_a is not None and ev_b is not None:
        evidence, summary = evidence_changes(ev_a, ev_b)
    return RunComparison(run_a=run_a, run_b=run_b, label_a=label(runs[0]),
                         label_b=label(runs[1]), split=split, primary=prim, n_queries=n,
                         test="student", alpha=alpha, metrics=rows, evidence=evidence,
                         evidence_summary=summary)
