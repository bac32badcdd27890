"""What a sweep returns (:class:`PointResult`, :class:`SweepResult`) and how it concludes: the
ranking of points (:func:`ranking_key`), the best point, the baseline, the significance of the
top points against it and the confidence intervals of the best (:func:`conclude`).

The configuration is chosen on the tune split only (primary metric, ties broken by config hash
ascending) and reported on the report split, where the top ``significance_top`` points (the
chosen point first, then the others ranked on tune; the baseline itself left out) are tested
against the baseline, Holm-adjusted, and the
best point's primary metric gets a bootstrap interval on both splits
(:mod:`aiblox.metrics.significance`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.manifest import PointManifest
from aiblox.engine.settings import candidate_depth, ranked, ranking_key, ranking_order
from aiblox.metrics import PROJECTION_PREFIX, Comparison, bootstrap_ci, compare_to_baseline
from aiblox.metrics.pareto import objective_values, pareto_front
from aiblox.metrics.significance import DEFAULT_SEED, StatTest
from aiblox.sweep.crossval import CrossValidation, check_folds, cross_validate

if TYPE_CHECKING:
    from aiblox.sweep.spec import SweepSpec

__all__ = [
    "Conclusion",
    "PointResult",
    "SweepResult",
    "best_intervals",
    "choose_best",
    "conclude",
    "cross_validated",
    "metrics_tested",
    "pareto_points",
    "ranked",
    "ranking_key",
    "ranking_order",
    "significance_table",
    "tested_metrics",
    "tested_points",
]

FUSION_AXES = ("blend", "w_text", "rrf_k", "normalize", "missing", "depth", "fts_depth",
               "vector_depth")
"""Grid axes over fusion (a pipeline sweep that sets none keeps the base fusion)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PointResult(_Strict):
    """One scored sweep point."""

    label: str
    """Short readable name, e.g. ``linear-w0.35-minmax-zero-d100``."""
    config_hash: str
    """sha256 of the effective config."""
    scoring: dict[str, Any]
    """The point's fusion settings."""
    depth: tuple[int, int]
    """Full-text and vector candidate depth."""
    metrics: dict[str, dict[str, float]]
    """``{split: {metric: mean}}``."""
    manifest: PointManifest
    """Determinism manifest."""
    is_baseline: bool = False
    """True for the spec's named baseline point."""
    outside_grid: bool = False
    """True for a baseline scored as a point of its own (no point of the grid, or of the
    points a search drew, has its config): left out of the per-value tables and plots, which
    describe the points swept."""
    chunking: dict[str, Any] | None = None
    """Chunking settings of a pipeline point (chunker, sizes, chunk depth); None in a
    fusion-only sweep."""
    selection: dict[str, Any] | None = None
    """Selection policy of a pipeline point (id, version, overrides); None without one."""

    @property
    def candidates(self) -> int:
        """Documents it retrieves per query (:func:`~aiblox.engine.settings.candidate_depth`):
        the ``candidates`` cost."""
        return candidate_depth(self.manifest.config)


class SweepResult(_Strict):
    """A finished sweep: every point, the choice made on the tune split, stage counts."""

    name: str
    """Sweep name."""
    sweep_hash: str
    """sha256 of the spec."""
    dataset: str
    """Dataset name."""
    dataset_hash: str
    """sha256 of the dataset files."""
    tune_split: str
    """Split the best point was chosen on."""
    report_split: str | None
    """Split the best point is reported on (None: a cross-validated sweep of one split)."""
    primary: str
    """Metric the choice was made by."""
    points: list[PointResult]
    """Every point, in grid order (baseline last when it is not a grid point)."""
    best: PointResult
    """The point with the highest primary metric on the tune split."""
    baseline: PointResult | None = None
    """The spec's baseline point, when named."""
    significance: list[Comparison] = Field(default_factory=list)
    """The chosen point and the top others (on tune) against the baseline on the report split,
    Holm-adjusted (:func:`tested_points`)."""
    ci: dict[str, tuple[float, float, float]] = Field(default_factory=dict)
    """Per split: ``(mean, low, high)`` 95% bootstrap interval of the best point's primary
    metric."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds: ``signals_s`` (retrieval, or reading its cached lists back), ``points_s``
    (fusion, metrics, logging), ``total_s``; and ``points_per_s``."""
    computed: dict[str, int] = Field(default_factory=dict)
    """Per stage: outputs computed in this run."""
    reused: dict[str, int] = Field(default_factory=dict)
    """Per stage: outputs read back from the stage cache."""
    repaired: dict[str, int] = Field(default_factory=dict)
    """Per stage: damaged cache entries found (a flipped bit, a truncated or missing file),
    removed and computed again."""
    tracking: dict[str, Any] = Field(default_factory=dict)
    """MLflow parent run id, children logged and skipped (empty without tracking)."""
    trials: list[str] = Field(default_factory=list)
    """A model-based search's trials in order, by config hash (a point chosen twice appears
    twice; its point once, in :attr:`points`); empty for ``grid`` and ``random``."""
    cv: CrossValidation | None = None
    """``[cv]``: the k-fold result over the tune split's queries (per fold the choice on the
    other folds and its held-out score; the margin against the baseline); None without."""
    objectives: dict[str, str] = Field(default_factory=dict)
    """``[search] objectives`` and their directions (``maximize``/``minimize``), in order;
    empty when the spec names none."""
    pareto: list[str] = Field(default_factory=list)
    """With ``objectives``: the Pareto front of the grid points on the tune split, by config
    hash, best first by ``primary`` (ties by config hash); :attr:`best` is its first point."""

    @property
    def splits(self) -> list[str]:
        """The splits the points were scored on: tune, then report if any."""
        return [self.tune_split] + ([self.report_split] if self.report_split else [])

    @property
    def gap(self) -> float | None:
        """The chosen point's primary metric on tune minus on report (None without a report
        split): how much the choice flatters itself."""
        if self.report_split is None:
            return None
        m = self.best.metrics
        return m[self.tune_split][self.primary] - m[self.report_split][self.primary]


def choose_best(points: Sequence[PointResult], split: str, metric: str) -> PointResult:
    """Highest ``metric`` on ``split``; ties broken by config hash ascending."""
    if not points:
        raise ValueError("no points to choose from")
    return min(points, key=lambda p: ranking_key(p, split, metric))


def tested_metrics(spec: SweepSpec) -> list[str]:
    """The metrics the top points are tested on against the baseline
    (:func:`metrics_tested` of the spec's metrics and the grid's axes that are set)."""
    g = spec.grid
    return metrics_tested(spec.metrics, spec.primary, spec.chunk_k,
                          {a for a in type(g).model_fields if getattr(g, a) is not None})


def metrics_tested(metrics: Sequence[str], primary: str, chunk_k: Sequence[int],
                   axes: Collection[str]) -> list[str]:
    """The metrics the top points are tested on against the baseline, from a spec's
    ``metrics``, ``primary`` and ``chunk_k`` and the names of its grid's axes that are set
    (``axes``; a logged sweep's are its ``spec.grid.*`` params other than ``None``, which
    ``aiblox eval verify`` reads): a fusion sweep's ranx metrics; in a pipeline sweep (a
    ``chunking`` or ``selection`` axis), the primary and the metrics a swept stage can move
    (the fused run's when fusion is swept, the chunk metrics when fusion or chunking is, the
    answer metrics when selection is), and the cost those stages move (``evidence_tokens``,
    ``selected_tokens``: lower is better, so a decrease counts as a win)."""
    if "chunking" not in axes and "selection" not in axes:
        return list(metrics)
    fusion = any(a in axes for a in FUSION_AXES)
    chunking = fusion or "chunking" in axes
    headline = [primary, *(metrics if fusion else [])]
    if chunking:
        headline += [*(f"{PROJECTION_PREFIX}{m}" for m in metrics),
                     *(f"answer_recall@{k}" for k in chunk_k), "evidence_tokens"]
    if "selection" in axes:
        headline += ["answer_f1", "answer_em", "evidence_answer_recall", "selected_tokens"]
    return list(dict.fromkeys(headline))


@dataclass(frozen=True)
class Conclusion:
    """The end of a sweep: the choice on tune, the baseline, significance and intervals."""

    best: PointResult
    baseline: PointResult | None
    significance: list[Comparison]
    ci: dict[str, tuple[float, float, float]]
    cv: CrossValidation | None = None
    objectives: dict[str, str] = field(default_factory=dict)
    pareto: list[PointResult] = field(default_factory=list)


PerQuery = Callable[[Any, str], dict[str, dict[str, float]]]
"""``(point, split) -> {metric: {qid: value}}``: a point's per-query values on a split (a
:class:`PointResult`'s, or a logged point run's)."""


def conclude(spec: SweepSpec, points: Sequence[PointResult], n_grid: int,
             per_query: PerQuery, dataset: str = "", has_answers: bool = True,
             tune_qids: Sequence[str] = ()) -> Conclusion:
    """Choose the best of the first ``n_grid`` points (the grid; a baseline outside it comes
    after) on the tune split, test the top points against the baseline on the report split
    (:func:`tested_metrics`, Holm within a metric) and bootstrap the best point's primary metric
    on both splits. ``per_query`` reads a point's per-query values. With ``[cv]``, the grid's
    points are also cross-validated over ``tune_qids`` (the tune split's scored queries,
    :func:`~aiblox.sweep.crossval.cross_validate`); without a report split there is no
    significance table: the cross-validated margin against the baseline takes its place."""
    missing = [p.label for p in points if spec.primary not in p.metrics[spec.tune_split]]
    if missing:
        raise ValueError(f"primary metric {spec.primary!r} was not computed for {missing[0]} "
                         f"on {spec.tune_split} (answer_recall@k and the gold-based answer "
                         f"metrics need gold answers: {dataset} has "
                         f"{'some' if has_answers else 'no'} answers.jsonl)")
    grid = list(points[:n_grid])
    objectives: dict[str, str] = {}
    front: list[PointResult] = []
    if spec.search.objectives:
        objectives = spec.objective_directions()
        front = pareto_points(grid, spec.tune_split, objectives, spec.primary)
        best = front[0]  # the front's best by primary: the global best unless it ties
    else:
        best = choose_best(grid, spec.tune_split, spec.primary)
    baseline = next((p for p in points if p.is_baseline), None)
    significance: list[Comparison] = []
    if baseline is not None and spec.report_split is not None:
        significance = significance_table(
            points, grid, best, baseline, per_query, tested_metrics(spec),
            tune=spec.tune_split, report=spec.report_split, primary=spec.primary,
            top=spec.significance_top, test=spec.stat_test, alpha=spec.alpha, seed=spec.seed)
    ci = best_intervals(best, spec.splits, spec.primary, per_query)
    cv = None
    if spec.cv is not None:
        check_folds(spec.cv.folds, len(tune_qids), spec.tune_split)
        cv = cross_validated(grid, baseline, per_query, tune_qids, folds=spec.cv.folds,
                             seed=spec.cv.seed, split=spec.tune_split, metric=spec.primary,
                             test=spec.stat_test)
    return Conclusion(best=best, baseline=baseline, significance=significance, ci=ci, cv=cv,
                      objectives=objectives, pareto=front)


def significance_table(points: Sequence[Any], grid: Sequence[Any], best: Any, baseline: Any,
                       per_query: PerQuery, metrics: Sequence[str], *, tune: str, report: str,
                       primary: str, top: int, test: StatTest, alpha: float,
                       seed: int | None) -> list[Comparison]:
    """The significance table: the ``top`` points of ``grid`` (:func:`tested_points`, the chosen
    ``best`` first) tested against ``baseline`` on the ``report`` split, on each of ``metrics``
    some point of ``points`` computed there, with ``test`` (Holm-adjusted within a metric at
    ``alpha``; Fisher's sign flips drawn with ``seed``, None: the tests' default, 42). The
    points are :class:`PointResult` s or anything with ``label``, ``config_hash`` and
    ``metrics`` (a logged sweep's point runs, which ``aiblox eval verify`` tests again)."""
    tested = tested_points(grid, best, baseline, tune, primary, top)
    available = {m for p in points for m in p.metrics.get(report, {})}
    wanted = [m for m in metrics if m in available]

    def values(p: Any) -> dict[str, dict[str, float]]:
        got = per_query(p, report)
        return {m: got.get(m, {}) for m in wanted}

    return compare_to_baseline(values(baseline), [(p.label, values(p)) for p in tested], wanted,
                               test=test, alpha=alpha,
                               seed=DEFAULT_SEED if seed is None else seed)


def best_intervals(best: Any, splits: Sequence[str], primary: str, per_query: PerQuery
                   ) -> dict[str, tuple[float, float, float]]:
    """Per split, the 95% bootstrap interval ``(mean, low, high)`` of ``best``'s ``primary``
    over its queries (:func:`~aiblox.metrics.bootstrap_ci`, its default seed 0 whatever the
    spec's ``seed``, so two sweeps' intervals draw alike)."""
    return {s: bootstrap_ci(per_query(best, s).get(primary, {})) for s in splits}


def cross_validated(grid: Sequence[Any], baseline: Any, per_query: PerQuery,
                    qids: Sequence[str], *, folds: int, seed: int, split: str, metric: str,
                    test: StatTest) -> CrossValidation:
    """:func:`~aiblox.sweep.crossval.cross_validate` of ``grid`` over ``qids`` of ``split``
    from each point's per-query ``metric`` values there, against ``baseline`` (None: no
    margin)."""

    def primary(p: Any) -> dict[str, float]:
        return dict(per_query(p, split).get(metric, {}))

    return cross_validate(grid, {p.config_hash: primary(p) for p in grid}, qids, folds=folds,
                          seed=seed, split=split, metric=metric, baseline=baseline,
                          baseline_values=None if baseline is None else primary(baseline),
                          test=test)


def tested_points(grid: Sequence[PointResult], best: PointResult, baseline: PointResult,
                  split: str, primary: str, n: int) -> list[PointResult]:
    """The ``n`` points tested against ``baseline``: the chosen ``best`` first (with ``[search]
    objectives`` the Pareto front's best, which the ranking by ``primary`` alone may put
    lower: the choice is always tested), then the others best first by :func:`ranked`. The
    baseline is tested against, not with itself (a grid point can be the baseline: in the top
    it would take a slot, tie at p = 1 and count in Holm's family)."""
    first = [] if best.config_hash == baseline.config_hash else [best]
    rest = [p for p in ranked(grid, split, primary)
            if p.config_hash not in (best.config_hash, baseline.config_hash)]
    return (first + rest)[:n]


def pareto_points(points: Sequence[Any], split: str, objectives: dict[str, str],
                  primary: str) -> list[Any]:
    """The Pareto front of ``points`` on ``split`` under ``objectives`` (``{name: direction}``;
    :func:`~aiblox.metrics.pareto.pareto_front`), best first by ``primary`` (ties by config
    hash ascending, :func:`ranked`). The points are :class:`PointResult` s or anything
    :func:`~aiblox.metrics.pareto.objective_values` reads (a logged point run)."""
    names = list(objectives)
    values = [objective_values(p, split, names) for p in points]
    front = [points[i] for i in pareto_front(values, list(objectives.values()))]
    sign = 1.0 if objectives.get(primary, "maximize") == "maximize" else -1.0
    return sorted(front, key=lambda p: ranking_order(sign * p.metrics[split][primary],
                                                     p.config_hash, None))
