"""Seeded k-fold cross-validation over a sweep's tuning queries (``[cv] folds = k``), as
PyTerrier's ``KFoldGridSearch`` does: an honest choice on a collection with one judged split.

The folds (:func:`fold_partition`): the tuning split's scored query ids, sorted, shuffled by
``random.Random(seed).shuffle``, then dealt round robin: fold ``i`` holds the shuffled positions
``i, i + k, i + 2k, ...`` (sorted again inside the fold), so fold sizes differ by at most one, a
query is in exactly one fold, and the same ids and seed give the same folds in any process.

Every grid point is scored once per query on the tuning split (its per-query values, which a
sweep has anyway); :func:`cross_validate` then, for each fold, chooses the point with the best
mean primary metric over the other ``k - 1`` folds' queries (ties by config hash ascending, the
sweep's one ranking, :func:`~aiblox.engine.settings.ranking_order`) and scores it on the held-out
fold. Held out exactly once, each query has one cross-validated value: the value, on that query,
of the point chosen without it. Against the spec's baseline those values are paired by query:
the margin ``mean(cv - baseline)`` with a seeded percentile bootstrap interval over queries
(:func:`~aiblox.metrics.bootstrap_ci` of the per-query differences) and the p-value of the
spec's paired test (:func:`~aiblox.metrics.paired_test`). Tuning beats the baseline only
when the interval lies above zero; the verdict says so in words either way.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.settings import ranking_order
from aiblox.metrics import StatTest, bootstrap_ci, paired_test
from aiblox.metrics.directions import directed_counts, lower_is_better
from aiblox.metrics.significance import TEST_NAMES

__all__ = [
    "CI_METHOD",
    "CVConfig",
    "CrossValidation",
    "FoldResult",
    "check_folds",
    "cross_validate",
    "fold_partition",
]

CI_METHOD = "paired percentile bootstrap over queries, 1000 resamples, 95%"
"""How the margin's interval is computed (named in every report)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True,
                              strict=True)  # no true for 1, no "10" for 10


class CVConfig(_Strict):
    """``[cv]``: k-fold cross-validation over the tuning split's queries."""

    folds: int = Field(ge=2)
    """Number of folds ``k`` (at least 2, at most the tuning split's query count)."""
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    """Seed of the shuffle that deals queries into folds, and of the margin's bootstrap."""


def check_folds(folds: int, n_queries: int, split: str) -> None:
    """Raise ``ValueError`` (one line, both counts) when ``folds`` cannot partition
    ``n_queries`` queries: fewer than 2, or more folds than queries."""
    if folds < 2:
        raise ValueError(f"cv.folds must be at least 2, got {folds}")
    if folds > n_queries:
        raise ValueError(f"cv.folds = {folds} is more than the {n_queries} queries of tuning "
                         f"split {split!r}: every fold needs a query (use at most {n_queries})")


def fold_partition(qids: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    """The ``folds`` disjoint folds covering ``qids`` (see the module doc): sorted ids shuffled
    by ``random.Random(seed)``, dealt round robin, each fold sorted."""
    ids = sorted(set(qids))
    check_folds(folds, len(ids), "(given)")
    random.Random(seed).shuffle(ids)
    return [sorted(ids[i::folds]) for i in range(folds)]


class FoldResult(_Strict):
    """One fold: the point chosen on the other folds, scored on this one."""

    fold: int
    """Fold number, from 0."""
    n_tune: int
    """Queries the choice was made on (the other folds)."""
    n_held_out: int
    """Queries of this fold."""
    label: str
    """The chosen point's label."""
    config_hash: str
    """The chosen point's config hash."""
    tune: float
    """The chosen point's mean primary metric over the other folds' queries."""
    held_out: float
    """Its mean primary metric over this fold's queries."""
    gap: float
    """``tune - held_out``: how much the choice flattered itself."""
    baseline_held_out: float | None = None
    """The baseline's mean over this fold's queries (None without a baseline)."""


class CrossValidation(_Strict):
    """The k-fold result of a sweep (:func:`cross_validate`)."""

    split: str
    """The tuning split whose queries were partitioned."""
    metric: str
    """The primary metric the choices were made by."""
    folds: int
    """``k``."""
    seed: int
    """The partition's seed."""
    fold_ids: list[list[str]]
    """The query ids of each fold."""
    candidates: list[str] = Field(default_factory=list)
    """Config hashes of the points chosen among (the grid's, in grid order)."""
    rows: list[FoldResult]
    """One row per fold."""
    mean_tune: float
    """Mean over folds of the chosen points' tuning scores."""
    mean_held_out: float
    """Mean over folds of the held-out scores (the cross-validated estimate, per fold)."""
    mean_gap: float
    """``mean_tune - mean_held_out``."""
    pooled_held_out: float
    """Mean over queries of each query's held-out value (equals ``mean_held_out`` when the
    folds are of equal size); the number compared with the baseline."""
    n_queries: int
    """Tuning queries (each held out once)."""
    baseline: str | None = None
    """The baseline's label (None without one)."""
    baseline_mean: float | None = None
    """The baseline's mean primary metric over the same queries."""
    margin: float | None = None
    """``pooled_held_out - baseline_mean``: mean of the paired per-query differences."""
    margin_low: float | None = None
    """Lower end of the margin's 95% interval (:data:`CI_METHOD`)."""
    margin_high: float | None = None
    """Upper end."""
    ci_method: str = CI_METHOD
    """How the interval was computed."""
    test: str | None = None
    """The paired test (``student``: ranx's two-sided paired t-test; ``fisher``)."""
    p_value: float | None = None
    """Its two-sided p-value, cross-validated values against the baseline's."""
    wins: int = 0
    """Queries where the cross-validated value beats the baseline's."""
    ties: int = 0
    """Queries where they are equal."""
    losses: int = 0
    """Queries where the baseline's beats it (lower is better for a cost)."""
    beats_baseline: bool | None = None
    """True when the margin's interval lies on the better side of 0 (above it; below it for a
    cost, :func:`~aiblox.metrics.directions.lower_is_better`); None without a baseline."""
    verdict: str = ""
    """The outcome in one sentence."""
    per_query: dict[str, float] = Field(default_factory=dict)
    """Each query's held-out value (the point chosen without it, on it)."""


def _mean(values: Mapping[str, float], qids: Sequence[str]) -> float:
    return sum(values[q] for q in qids) / len(qids)


def cross_validate(candidates: Sequence[Any], values: Mapping[str, Mapping[str, float]],
                   qids: Sequence[str], *, folds: int, seed: int, split: str, metric: str,
                   baseline: Any = None, baseline_values: Mapping[str, float] | None = None,
                   test: StatTest = "student") -> CrossValidation:
    """k-fold choice among ``candidates`` (anything with ``label`` and ``config_hash``) whose
    per-query primary values are ``values[config_hash]`` (``{qid: value}``, every id of
    ``qids``); against ``baseline`` (per-query ``baseline_values``) when given."""
    if not candidates:
        raise ValueError("cross-validation needs at least one point")
    qids = sorted(set(qids))
    for c in list(candidates) + ([baseline] if baseline is not None else []):
        got = values[c.config_hash] if c is not baseline else (baseline_values or {})
        missing = [q for q in qids if q not in got]
        if missing:
            raise ValueError(f"cross-validation: {c.label} has no {metric} value for query "
                             f"{missing[0]!r} of {split} ({len(missing)} missing)")
    parts = fold_partition(qids, folds, seed)
    rows: list[FoldResult] = []
    held: dict[str, float] = {}
    for i, held_ids in enumerate(parts):
        tune_ids = sorted(q for j, part in enumerate(parts) if j != i for q in part)
        best = min(candidates, key=lambda c: ranking_order(
            _mean(values[c.config_hash], tune_ids), c.config_hash, metric))
        v = values[best.config_hash]
        tune, out = _mean(v, tune_ids), _mean(v, held_ids)
        held.update({q: float(v[q]) for q in held_ids})
        rows.append(FoldResult(
            fold=i, n_tune=len(tune_ids), n_held_out=len(held_ids), label=best.label,
            config_hash=best.config_hash, tune=tune, held_out=out, gap=tune - out,
            baseline_held_out=None if baseline_values is None
            else _mean(baseline_values, held_ids)))
    mean_tune = sum(r.tune for r in rows) / len(rows)
    mean_out = sum(r.held_out for r in rows) / len(rows)
    pooled = _mean(held, qids)
    extra: dict[str, Any] = {}
    if baseline is not None and baseline_values is not None:
        base = {q: float(baseline_values[q]) for q in qids}
        diff = {q: held[q] - base[q] for q in qids}
        margin, low, high = bootstrap_ci(diff, seed=seed)
        t = paired_test(base, held, test, seed=seed)
        wins, ties, losses = directed_counts(metric, t.wins, t.ties, t.losses)
        # the metric's direction: for a cost (evidence_tokens) a margin below 0 is a gain
        cost = lower_is_better(metric)
        beats, worse = (high < 0, low > 0) if cost else (low > 0, high < 0)
        better_side, worse_side = ("below", "above") if cost else ("above", "below")
        lower = " (lower is better)" if cost else ""
        # the interval decides; the test's p (another method) is named as such, so that a p
        # just over 0.05 beside an interval off 0 does not read as a contradiction
        said = f"{TEST_NAMES[test]} p {t.p_value:.3g}"
        if beats:
            verdict = (f"tuning by {folds}-fold cross-validation beats the baseline "
                       f"{baseline.label}: "
                       f"{metric}{lower} {margin:+.4f}, 95% interval [{low:+.4f}, {high:+.4f}] "
                       f"{better_side} 0 ({said})")
        elif worse:
            verdict = (f"tuning by {folds}-fold cross-validation did NOT beat the "
                       f"baseline {baseline.label}: "
                       f"it is worse, {metric}{lower} {margin:+.4f}, 95% interval "
                       f"[{low:+.4f}, {high:+.4f}] {worse_side} 0 ({said})")
        else:
            verdict = (f"tuning by {folds}-fold cross-validation did NOT beat the "
                       f"baseline {baseline.label}: "
                       f"{metric} {margin:+.4f}, 95% interval [{low:+.4f}, {high:+.4f}] "
                       f"includes 0 ({said})")
        extra = {"baseline": baseline.label, "baseline_mean": _mean(base, qids),
                 "margin": margin, "margin_low": low, "margin_high": high, "test": test,
                 "p_value": t.p_value, "wins": wins, "ties": ties, "losses": losses,
                 "beats_baseline": beats, "verdict": verdict}
    else:
        extra = {"verdict": f"{folds}-fold cross-validated {metric} {mean_out:.4f} "
                            f"(no baseline to compare with)"}
    return CrossValidation(
        split=split, metric=metric, folds=folds, seed=seed, fold_ids=parts,
        candidates=[c.config_hash for c in candidates], rows=rows,
        mean_tune=mean_tune, mean_held_out=mean_out, mean_gap=mean_tune - mean_out,
        pooled_held_out=pooled, n_queries=len(qids), per_query=held, **extra)
