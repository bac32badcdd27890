"""Compare two logged sweep points (MLflow child runs): per-metric deltas with a paired test on
their per-query metrics (:func:`aiblox.metrics.compare_to_baseline`, the sweep's
significance table and the notebooks' route too), win/tie/loss counts per query under each
metric's direction (:mod:`aiblox.metrics.directions`: for a cost such as
``selected_tokens``, a decrease is a win), the queries whose primary metric moved most, and for
selection-policy points the evidence that entered or left per query.

The runs are named by any reference :func:`aiblox.sweep.runs.resolve_run` takes (a run id,
``SWEEP:LABEL``, a config-hash or run-hash prefix). Means, deltas (``B - A``), the paired test
(ranx's two-sided paired Student t-test by default, deterministic; or the Wilcoxon signed-rank
or Fisher randomisation test) and win/tie/loss all come from the ``per_query.<split>.parquet``
artifacts, over the queries both runs have, paired by id: a run's logged mean
(``<split>.<metric>``) is over its own queries, so two runs scored on different query sets
would otherwise show a delta their test and counts do not describe. The pairing is per metric:
a metric may have no value for some queries (``citation_precision`` only for a query answered
with citations), so each row counts its own queries (:attr:`MetricDelta.n`, ``n_a``, ``n_b``)
and :meth:`RunComparison.partial` names the rows over fewer than the comparison's. Runs that
share no query are refused. The metrics compared form one family whose p-values are adjusted
together (Holm's correction by default; Bonferroni's, or none). Pipeline points with selection
also log ``evidence.<split>.parquet`` (``query_id, rank, chunk_id, item_id``: the selected
evidence in order); when both runs have it, :attr:`RunComparison.evidence` lists per query the
chunks only B selected (entered) and only A selected (left), and
:attr:`RunComparison.evidence_summary` counts them. mlflow is imported lazily (the ``tracking``
extra).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.tracking import metric_key, per_query_file, quiet_downloads
from aiblox.engine.tracking.layout import TAG_PARENT, TAG_PRIMARY
from aiblox.metrics.directions import Direction, metric_direction
from aiblox.metrics.ranking import DEFAULT_METRICS
from aiblox.metrics.significance import Correction, StatTest, adjust, compare_to_baseline

__all__ = [
    "DatasetMismatch",
    "EvidenceChange",
    "MetricDelta",
    "QueryMove",
    "RunComparison",
    "compare_runs",
    "dataset_text",
    "evidence_changes",
    "per_query_evidence",
    "per_query_metrics",
    "query_moves",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class MetricDelta(_Strict):
    """One metric of run B against run A on one split."""

    metric: str
    """ranx metric name, e.g. ``ndcg@10``."""
    a: float
    """A's mean over the :attr:`n` queries paired: its logged mean when those are all of A's
    (:attr:`n_a`)."""
    b: float
    """B's mean over the :attr:`n` queries paired."""
    delta: float
    """``b - a``."""
    direction: Direction = "higher"
    """Which way is better (:func:`~aiblox.metrics.directions.metric_direction`)."""
    p_value: float
    """Two-sided p-value of the paired test on per-query values (1.0 when identical)."""
    p_adjusted: float = 1.0
    """``p_value`` adjusted over the metrics compared (:attr:`RunComparison.correction`)."""
    significant: bool
    """``p_adjusted <= alpha``."""
    wins: int
    """Queries where B is better under :attr:`direction` (for a cost: lower)."""
    ties: int
    """Queries with equal scores."""
    losses: int
    """Queries where B is worse under :attr:`direction`."""
    dropped: int = 0
    """Queries both runs have where either value is NaN: left out of the means, the test and
    the counts (:attr:`aiblox.metrics.Comparison.dropped`)."""
    n: int = 0
    """Queries the means, the test and win/tie/loss are over: those both runs have a value of
    this metric for, less :attr:`dropped`."""
    n_a: int = 0
    """Queries A has a value of this metric for, which its logged mean is over. A metric may
    have none for some queries (``citation_precision`` only for a query answered with
    citations), so this can be fewer than :attr:`RunComparison.queries_a`."""
    n_b: int = 0
    """Queries B has a value of this metric for."""

    @property
    def shared(self) -> int:
        """Queries both runs have a value of this metric for, NaN or not (:attr:`n` +
        :attr:`dropped`)."""
        return self.n + self.dropped


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


class QueryMove(_Strict):
    """One query whose primary metric differs from run A to run B."""

    query_id: str
    """The query."""
    a: float
    """A's value."""
    b: float
    """B's value."""
    delta: float
    """``b - a``."""
    better: bool
    """True when B is better under the metric's direction."""


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
    name_a: str = ""
    """A as ``SWEEP:LABEL`` (:attr:`~aiblox.sweep.runs.RunRef.name`)."""
    name_b: str = ""
    """B as ``SWEEP:LABEL``."""
    datasets: list[str | None] = Field(default_factory=list)
    """The dataset hashes of A and B when they differ (paired by query id anyway, asked for
    with ``across_datasets``); empty when both were scored on one dataset."""
    dataset_names: list[str] = Field(default_factory=list)
    """The names of those datasets, beside :attr:`datasets` (:func:`~aiblox.engine.tracking.
    read_dataset_name`: a manifest's ``dataset``, else a run's ``dataset`` param, else its
    ``experiment.json``'s; "" when the run records none)."""
    split: str
    """Split compared."""
    primary: str
    """Metric of the headline win/tie/loss counts: ``--primary``, else A's or B's logged
    primary (its sweep's, or the first metric ``aiblox eval`` computed), else ``ndcg@10`` or the
    first default metric both have."""
    n_queries: int
    """Queries both runs have per-query values of the primary metric for: what its mean,
    delta, test and the headline win/tie/loss are over."""
    queries_a: int = 0
    """Queries A has per-query values for (any metric compared)."""
    queries_b: int = 0
    """Queries B has per-query values for."""
    queries_shared: int = 0
    """Queries both have per-query values for (any metric compared). A metric's row is over
    its own shared queries (:attr:`MetricDelta.n`): these, unless the metric has no value for
    some of them (:meth:`partial`)."""
    test: str
    """Paired test used (``student``, ``wilcoxon`` or ``fisher``)."""
    correction: str = "holm"
    """Correction of the p-values over the metrics compared (``holm``, ``bonferroni``,
    ``none``)."""
    alpha: float
    """Significance level."""
    metrics: list[MetricDelta]
    """One row per metric: the primary first, then in the order the runs were given them (a
    sweep spec's ``metrics``, an eval's ``--metric``), then the others by name."""
    moved: list[QueryMove] = Field(default_factory=list)
    """Every query whose primary metric differs, largest change first (ties by query id)."""
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

    def partial(self) -> list[MetricDelta]:
        """The rows scored on fewer queries than the runs have: a metric with no value for
        some of :attr:`queries_a`, :attr:`queries_b` or :attr:`queries_shared` (its A and B
        are then not over the queries the comparison counts, nor perhaps its logged means)."""
        whole = (self.queries_a, self.queries_b, self.queries_shared)
        return [m for m in self.metrics if (m.n_a, m.n_b, m.shared) != whole]


def per_query_metrics(client: Any, run_id: str, split: str) -> dict[str, dict[str, float]]:
    """``{metric: {query_id: value}}`` from a run's ``per_query.<split>.parquet`` artifact
    (:func:`aiblox.engine.tracking.read_per_query`)."""
    from aiblox.engine.tracking import read_per_query

    return read_per_query(client, run_id, split)


def per_query_evidence(client: Any, run_id: str, split: str) -> dict[str, list[str]] | None:
    """``{query_id: [chunk_id, ...]}`` (selected evidence, in rank order) from a run's
    ``evidence.<split>.parquet`` artifact; None when the run has none (not a selection point;
    :func:`aiblox.engine.tracking.read_evidence`)."""
    from aiblox.engine.tracking import read_evidence

    return read_evidence(client, run_id, split)


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


def _run_primary(client: Any, run: Any) -> str | None:
    """The primary metric ``run`` was logged with: its tag ``aiblox.primary`` (``aiblox eval
    --mlflow``: the first metric it computed), else its sweep's ``spec.primary``; None when it
    records none (an eval run logged before the tag, a parent gone)."""
    if run.data.tags.get(TAG_PRIMARY):
        return str(run.data.tags[TAG_PRIMARY])
    parent = run.data.tags.get(TAG_PARENT)
    if not parent:
        return None
    try:
        return client.get_run(parent).data.params.get("spec.primary")
    except Exception:  # noqa: BLE001 - parent gone: no primary recorded
        return None


def _given_order(client: Any, run: Any) -> list[str]:
    """The metrics in the order ``run`` was given them: its manifest's (a sweep spec's
    ``metrics``, an eval's ``--metric`` options); [] for a run without a manifest (a scored
    run file)."""
    from aiblox.engine.tracking import read_manifest

    try:
        return list(read_manifest(client, run.info.run_id, run).metrics)
    except ValueError:
        return []


def _metric_order(client: Any, runs: list[Any], metrics: set[str]) -> list[str]:
    """``metrics`` in the order A was given them (else B; :func:`_given_order`), then those
    of :data:`~aiblox.metrics.ranking.DEFAULT_METRICS`, then the others by name (a selection
    point's answer and cost metrics)."""
    given = next((g for g in (_given_order(client, r) for r in runs) if g), [])
    ordered = list(dict.fromkeys(m for m in [*given, *DEFAULT_METRICS] if m in metrics))
    return ordered + sorted(metrics - set(ordered))


def _primary(client: Any, runs: list[Any], metrics: list[str]) -> str:
    """The headline metric: A's primary, else B's (:func:`_run_primary`), else the first of
    :data:`~aiblox.metrics.ranking.DEFAULT_METRICS` (``ndcg@10`` first) both runs have, else
    the first of ``metrics``. Without a recorded primary the choice depends on neither the argument
    order nor the metric names' alphabetical order (which put ``map@100`` first)."""
    for run in runs:
        prim = _run_primary(client, run)
        if prim in metrics:
            return prim
    return next((m for m in DEFAULT_METRICS if m in metrics), metrics[0])


def query_moves(a: dict[str, float], b: dict[str, float], metric: str) -> list[QueryMove]:
    """The queries (in both) whose ``metric`` value differs from ``a`` to ``b``, largest
    absolute change first, ties by query id; ``better`` under the metric's direction."""
    lower = metric_direction(metric) == "lower"
    moves = [QueryMove(query_id=q, a=a[q], b=b[q], delta=b[q] - a[q],
                       better=(b[q] < a[q]) if lower else (b[q] > a[q]))
             for q in sorted(set(a) & set(b)) if a[q] != b[q]]
    moves.sort(key=lambda m: (-abs(m.delta), m.query_id))
    return moves


def compare_runs(run_a: str, run_b: str, tracking_uri: str, split: str | None = None,
                 primary: str | None = None, alpha: float = 0.05, test: StatTest = "student",
                 correction: Correction = "holm",
                 across_datasets: bool = False) -> RunComparison:
    """Compare point ``run_b`` against ``run_a`` on ``split`` (see the module doc; None: the
    split both logged per-query values of, ``test`` when they share several and it is one of
    them, else refused naming them: a sweep tuned on ``test:0/2`` logged no ``test``); each
    is a run id, ``SWEEP:LABEL`` or a config-hash or run-hash prefix (:func:`~aiblox.sweep.runs.
    resolve_run`). Runs scored on different datasets (their ``aiblox.dataset_hash`` tags
    differ) are refused: their query ids need not name the same queries (cranfield's "1" is
    not medline's "1"); ``across_datasets`` pairs them by id anyway (the same queries with
    revised judgements), and the comparison says so (:attr:`RunComparison.datasets`)."""
    with quiet_downloads():
        return _compare_runs(run_a, run_b, tracking_uri, split, primary, alpha, test,
                             correction, across_datasets)


def _check_logged_means(run: Any, per_query: dict[str, dict[str, float]], metrics: list[str],
                        split: str) -> None:
    """``ValueError`` when a run's logged per-query values of a metric do not average to the
    mean it logged: the means shown and the paired test (which reads the per-query values)
    would then describe two different runs (an artifact changed after logging)."""
    for m in metrics:
        logged = run.data.metrics.get(metric_key(split, m))
        values = list(per_query[m].values())
        if logged is None or not values:
            continue
        mean = math.fsum(values) / len(values)
        if not math.isclose(mean, float(logged), rel_tol=1e-9, abs_tol=1e-12):
            rid = run.info.run_id
            raise ValueError(f"run {rid}: its logged per-query values of {m} on {split} "
                             f"average {mean:.6f}, but it logged {m} = {float(logged):.6f}: "
                             f"{per_query_file(split)} is not what the run was scored from "
                             f"(changed after logging?); aiblox eval verify {rid} recomputes "
                             f"both")


class DatasetMismatch(ValueError):
    """Two runs scored on different datasets, compared without ``across_datasets``."""


def dataset_text(name: str, digest: str | None) -> str:
    """A dataset as a comparison names it: ``adi (4c79a3481e8d811b)``, or its hash's first 16
    characters alone when the run records no name."""
    return f"{name} ({str(digest)[:16]})" if name else str(digest)[:16]


def _shared_split(client: Any, runs: list[Any], split: str | None) -> str:
    """The split to compare on: ``split`` when both runs logged per-query values of it, the
    one split both logged when None (``test`` among several); else ``ValueError`` naming the
    splits each has."""
    from aiblox.engine.tracking import logged_splits

    has = [logged_splits(client, r.info.run_id, r) for r in runs]
    shared = sorted(set(has[0]) & set(has[1]))
    if split is None and len(shared) == 1:
        return shared[0]
    if split in shared or (split is None and "test" in shared):
        return split or "test"
    which = "; ".join(f"{ab} ({r.info.run_id}) {', '.join(h) or 'none'}"
                      for ab, r, h in zip("AB", runs, has, strict=True))
    if split is not None:
        raise ValueError(f"split {split!r}: not logged with per-query values by both runs (A "
                         f"and B logged: {which}); --split names one both have")
    raise ValueError(f"which split? the runs share {', '.join(shared) or 'none'} (A and B "
                     f"logged: {which})" + ("; --split names one" if shared else ""))


def _compare_runs(run_a: str, run_b: str, tracking_uri: str, split: str | None,
                  primary: str | None, alpha: float, test: StatTest, correction: Correction,
                  across_datasets: bool = False) -> RunComparison:
    from aiblox.engine.tracking import read_dataset_name, tracking_client
    from aiblox.sweep.runs import resolve_run

    refs = [resolve_run(r, tracking_uri) for r in (run_a, run_b)]
    run_a, run_b = refs[0].run_id, refs[1].run_id
    client = tracking_client(tracking_uri)  # a reader: a missing store is an error
    runs = []
    for rid in (run_a, run_b):
        try:
            runs.append(client.get_run(rid))
        except Exception as exc:  # noqa: BLE001 - shown to the user with the id
            raise ValueError(f"no MLflow run {rid} in {tracking_uri}") from exc
    datasets = [r.data.tags.get("aiblox.dataset_hash") for r in runs]
    differ = None not in datasets and datasets[0] != datasets[1]
    names = [read_dataset_name(client, r) for r in runs] if differ else []
    if differ and not across_datasets:
        a, b = (dataset_text(n, h) for n, h in zip(names, datasets, strict=True))
        same_name = names[0] == names[1] != ""
        raise DatasetMismatch(f"runs {run_a} and {run_b} were scored on different datasets (A "
                              f"on {a}, B on {b}, their aiblox.dataset_hash tags): a query id "
                              f"need not name the same query in both; --across-datasets pairs "
                              f"them by id anyway (the same queries with revised judgements"
                              + ("; or the same files with other splits loaded: a dataset's "
                                 "hash covers the judgements of the splits it loaded, `aiblox "
                                 "eval` the split it scores, a sweep its tune and report "
                                 "splits)" if same_name else ")"))
    split = _shared_split(client, runs, split)
    pq_a = per_query_metrics(client, run_a, split)
    pq_b = per_query_metrics(client, run_b, split)
    metrics = _metric_order(client, runs, set(pq_a) & set(pq_b))
    for run, pq in zip(runs, (pq_a, pq_b), strict=True):
        _check_logged_means(run, pq, metrics, split)
    if not metrics:
        raise ValueError(f"runs {run_a} and {run_b} share no per-query metrics on {split}")
    own = [set().union(*(pq[m] for m in metrics)) for pq in (pq_a, pq_b)]
    if not own[0] & own[1]:
        raise ValueError(f"runs {run_a} and {run_b} share no query on {split} (A has "
                         f"{len(own[0])}, B has {len(own[1])}): nothing to pair; were they "
                         f"scored on different datasets?")
    prim = primary if primary is not None else _primary(client, runs, metrics)
    if prim not in metrics:
        raise ValueError(f"metric {prim} is not among {metrics}")
    metrics = [prim, *(m for m in metrics if m != prim)]  # the headline first
    # the sweep's own test (one candidate: no correction within a metric), then one family of
    # the metrics compared here
    tests = {c.metric: c for c in compare_to_baseline(pq_a, [(run_b, pq_b)], metrics,
                                                      test=test, alpha=alpha,
                                                      correction="none")}
    adjusted = dict(zip(metrics, adjust([tests[m].p_value for m in metrics], correction),
                        strict=True))
    rows = []
    for m in metrics:
        c = tests[m]
        rows.append(MetricDelta(metric=m, a=c.baseline_mean, b=c.candidate_mean,
                                delta=c.delta, direction=c.direction,
                                p_value=c.p_value, p_adjusted=adjusted[m],
                                significant=adjusted[m] <= alpha, wins=c.wins, ties=c.ties,
                                losses=c.losses, dropped=c.dropped,
                                n=c.wins + c.ties + c.losses, n_a=len(pq_a[m]),
                                n_b=len(pq_b[m])))
    n = len(set(pq_a[prim]) & set(pq_b[prim]))

    def label(r: Any) -> str:
        return r.data.tags.get("aiblox.label") or r.info.run_name or r.info.run_id

    ev_a = per_query_evidence(client, run_a, split)
    ev_b = per_query_evidence(client, run_b, split) if ev_a is not None else None
    evidence = summary = None
    if ev_a is not None and ev_b is not None:
        evidence, summary = evidence_changes(ev_a, ev_b)
    return RunComparison(run_a=run_a, run_b=run_b, datasets=datasets if differ else [],
                         dataset_names=names,
                         label_a=label(runs[0]),
                         label_b=label(runs[1]), name_a=refs[0].name, name_b=refs[1].name,
                         split=split, primary=prim, n_queries=n, queries_a=len(own[0]),
                         queries_b=len(own[1]), queries_shared=len(own[0] & own[1]), test=test,
                         correction=correction, alpha=alpha, metrics=rows,
                         moved=query_moves(pq_a[prim], pq_b[prim], prim), evidence=evidence,
                         evidence_summary=summary)
