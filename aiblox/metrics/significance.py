"""Significance: paired tests of per-query metric values, Holm's correction, and bootstrap
confidence intervals. The one implementation behind the sweep's significance table and
confidence intervals, ``aiblox compare`` and the notebooks' comparisons.

:func:`paired_test` compares two runs' per-query values of one metric, queries paired by id:
means, delta, the p-value of ranx's paired test (``paired_student_t_test``, two-sided, by
default, computed bit for bit from its formula by :func:`student_t_p_value`, which imports
neither ranx nor ``scipy.stats``; or the Fisher randomisation test, :func:`fisher_p_value`; or
scipy's Wilcoxon signed-rank test) and win/tie/loss counts. :func:`compare_to_baseline` runs it
for several candidates against one baseline (:func:`compare_pairwise` for every pair of
systems, as ranx's ``compare``): the p-values of the candidates compared on one metric form one
family and are adjusted (:func:`adjust`) with Holm's step-down method (Holm 1979, "A simple
sequentially rejective multiple test procedure") by default, or Bonferroni's, so comparing the
top few configurations does not inflate the false-positive rate. Its win/tie/loss counts follow
the metric's direction (:mod:`aiblox.metrics.directions`: for a cost, a decrease is a win).
Every test is deterministic: the same values (and, for Fisher's, the same seed) give the same
p-value in any process, whatever the thread count.

A NaN per-query value (a metric undefined for that query: no judged relevant chunk, no gold
answer) is no score at all, neither 0 nor a tie: a query where either side is NaN is left out,
pairwise, of the means, the test and the counts, and counted (:attr:`PairedTest.dropped`,
:attr:`Comparison.dropped`, shown beside the win/tie/loss counts), so the p-value is the test of
the queries both sides scored. It was 1.0 before (NaN made every test undefined), whatever the
other queries said.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from aiblox.metrics.directions import Direction, directed_counts, metric_direction

__all__ = [
    "CORRECTIONS",
    "Comparison",
    "Correction",
    "DEFAULT_SEED",
    "PairedTest",
    "STAT_TESTS",
    "StatTest",
    "TEST_NAMES",
    "adjust",
    "bonferroni",
    "bootstrap_ci",
    "compare_pairwise",
    "compare_to_baseline",
    "fisher_p_value",
    "holm",
    "paired_p_value",
    "paired_test",
    "scored_pairs",
    "student_t_p_value",
]

DEFAULT_SEED = 42
"""The seed of Fisher's random sign flips unless a caller gives one (a sweep spec's ``seed``)."""

StatTest = Literal["student", "fisher", "wilcoxon"]
"""The paired tests: ranx's two-sided paired t-test, the two-sided Fisher randomisation test
(:func:`fisher_p_value`, as ranx's), or scipy's two-sided Wilcoxon signed-rank test (zero
differences dropped, exact for small samples)."""
STAT_TESTS: tuple[str, ...] = ("student", "fisher", "wilcoxon")
"""The values of :data:`StatTest`."""
TEST_NAMES: dict[str, str] = {"student": "paired t-test", "fisher": "Fisher randomisation test",
                              "wilcoxon": "Wilcoxon signed-rank test"}
"""How tables and titles name each test."""
Correction = Literal["holm", "bonferroni", "none"]
"""Multiple-comparison corrections of a family of p-values (:func:`adjust`)."""
CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "none")
"""The values of :data:`Correction`."""


class Comparison(BaseModel):
    """One candidate against the baseline on one metric (report split)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    candidate: str
    """Candidate name (point label or config hash)."""
    metric: str
    """ranx metric name."""
    baseline_mean: float
    """Baseline's mean over the paired queries."""
    candidate_mean: float
    """Candidate's mean over the paired queries."""
    delta: float
    """``candidate_mean - baseline_mean``."""
    p_value: float
    """Raw two-sided p-value of the paired test."""
    p_adjusted: float = Field(validation_alias=AliasChoices("p_adjusted", "p_holm"))
    """Adjusted p-value within this metric's family of candidates (Holm's by default; the
    :attr:`correction` named). Named ``p_holm`` before it was named for what it is whatever
    the correction (``aiblox compare --json`` and the experiment table's ``p_adjusted``); a
    summary logged then still reads."""
    significant: bool
    """``p_adjusted <= alpha``."""
    wins: int
    """Queries where the candidate is better under the metric's direction (:attr:`direction`:
    higher for a quality metric, lower for a cost)."""
    ties: int
    """Queries with equal scores."""
    losses: int
    """Queries where the candidate is worse under the metric's direction."""
    test: str
    """Test used (``student``, ``fisher`` or ``wilcoxon``)."""
    direction: Direction = "higher"
    """Which way is better for this metric (:func:`~aiblox.metrics.directions.
    metric_direction`)."""
    correction: Correction = "holm"
    """Correction behind :attr:`p_adjusted`."""
    alpha: float = 0.05
    """The significance level :attr:`significant` was decided at."""
    against: str | None = None
    """The system the candidate is compared with (:func:`compare_pairwise`); None: the one
    baseline (:func:`compare_to_baseline`)."""
    dropped: int = 0
    """Queries left out because either side's value is NaN (:attr:`PairedTest.dropped`)."""

    @property
    def p_holm(self) -> float:
        """:attr:`p_adjusted`, by its former name."""
        return self.p_adjusted


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order (monotone, capped at 1).

    Sorted ascending (ties by position, so the result is deterministic), the i-th smallest of m
    is multiplied by ``m - i`` and made non-decreasing.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: (p_values[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni-adjusted p-values (each times the family size, capped at 1)."""
    m = len(p_values)
    return [min(1.0, m * p) for p in p_values]


def adjust(p_values: Sequence[float], correction: Correction = "holm") -> list[float]:
    """``p_values`` (one family) adjusted by ``correction``: :func:`holm`, :func:`bonferroni`,
    or ``none`` (as they are)."""
    if correction == "holm":
        return holm(p_values)
    if correction == "bonferroni":
        return bonferroni(p_values)
    if correction == "none":
        return [float(p) for p in p_values]
    raise ValueError(f"unknown correction {correction!r}; one of {', '.join(CORRECTIONS)}")


def student_t_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the paired t-test of ``a`` against ``b``: bit for bit what ranx's
    ``paired_student_t_test`` returns (scipy's ``ttest_rel``, whose steps it repeats: the mean
    of the differences over the standard error from their unbiased variance, then twice the
    Student t tail, ``scipy.special.stdtr``). Only ``scipy.special`` is imported, not
    ``scipy.stats`` and ranx (over a second of start-up for a sweep's conclusion); the
    equality is tested on random and real per-query values (``tests/metrics``). NaN when
    undefined (fewer than two pairs, or no variance)."""
    from scipy.special import stdtr

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.mean(d) if n else np.float64("nan")
        var = np.mean((d - mean) ** 2) if n else np.float64("nan")
        var *= np.float64(n) / np.float64(n - 1)
        t = np.divide(mean, np.sqrt(var / n))
        return float(2 * stdtr(np.float64(n - 1), -np.abs(t)))


def scored_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The positions where both aligned value arrays hold a number (neither is NaN): the pairs
    a paired test compares (see the module doc)."""
    return ~(np.isnan(np.asarray(a, dtype=np.float64)) | np.isnan(np.asarray(b, dtype=np.float64)))


def paired_p_value(a: np.ndarray, b: np.ndarray, test: StatTest = "student",
                   seed: int = DEFAULT_SEED) -> float:
    """Two-sided p-value of the paired ``test`` on two aligned value arrays, over the pairs
    neither of whose values is NaN (:func:`scored_pairs`); 1.0 when they are identical, or when
    the test is undefined (fewer pairs than it needs). ``seed`` draws Fisher's random flips."""
    keep = scored_pairs(a, b)
    if not keep.all():
        a, b = a[keep], b[keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if test == "student":
            if np.array_equal(a, b):
                return 1.0  # no differences: t is undefined (scipy returns nan)
            p = student_t_p_value(a, b)
        elif test == "wilcoxon":
            from scipy.stats import wilcoxon

            if a.size == 0 or np.array_equal(a, b):
                return 1.0  # no non-zero difference to rank
            flips = _wilcoxon_sign_flip_p(a, b)
            if flips is not None:
                return flips
            try:
                p = wilcoxon(a, b, zero_method="wilcox", alternative="two-sided").pvalue
            except ValueError:  # every difference zero
                return 1.0
        elif test == "fisher":
            p = fisher_p_value(a, b, seed=seed)
        else:
            raise ValueError(f"unknown paired test {test!r}; one of {', '.join(STAT_TESTS)}")
    p = float(p)
    return 1.0 if np.isnan(p) else p


FISHER_PERMUTATIONS = 1000
"""Random sign flips :func:`fisher_p_value` draws where it does not enumerate them all: ranx's
default ``n_permutations``."""
_FISHER_EXACT_MAX = 16
"""Up to this many pairs :func:`fisher_p_value` enumerates every sign flip (2**16 sums, under a
millisecond): the exact p-value, with no Monte Carlo error."""


def fisher_p_value(a: np.ndarray, b: np.ndarray, seed: int = DEFAULT_SEED,
                   permutations: int = FISHER_PERMUTATIONS) -> float:
    """Two-sided p-value of Fisher's paired randomisation test of ``a`` against ``b`` (Smucker,
    Allan and Carterette 2007, "A comparison of statistical significance tests for information
    retrieval evaluation"): the share of sign flips of the per-query differences whose mean is
    at least as far from zero as the observed one, ``|mean diff| >= observed`` (ranx's
    ``fisher_randomization_test`` definition, which swaps each pair with probability 1/2).

    Computed here, not by ranx: ranx draws its permutations inside numba parallel threads
    from per-thread generators, so its p-value changed from call to call with the same seed
    and, with two threads, came out about half the true value (0.12 where the exact p over
    all 4,096 flips of 12 queries is 0.25). Up to :data:`_FISHER_EXACT_MAX` pairs every one of
    the 2**n flips is counted (the exact p-value, the limit of ranx's estimate); beyond,
    ``permutations`` random flips (ranx's count) from numpy's seeded generator, the same in
    every process, counted with the observed arrangement among them: ``(hits + 1) /
    (permutations + 1)`` (Phipson and Smyth 2010, "Permutation p-values should never be
    zero"). ranx returns ``hits / permutations``, which is 0 when no flip reaches the observed
    mean: a p-value no correction can raise (Bonferroni over 20 metrics kept 0 where the exact
    p was 0.0026, adjusted 0.052); this one is never below ``1 / (permutations + 1)`` and is a
    valid test (under the null, ``P(p <= alpha) <= alpha``). The flips'
    sums are compared with a tolerance of the float error of summing the differences, so a
    flip that ties the observed mean in exact arithmetic counts as it should. 1.0 when there is
    no pair or a value is not finite (the test is undefined)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.shape[0]
    if n == 0 or not np.isfinite(d).all():
        return 1.0
    observed = abs(float(d.sum()))
    gamma = 4 * n * np.finfo(np.float64).eps * float(np.abs(d).sum())
    if n <= _FISHER_EXACT_MAX:
        sums = np.zeros(1)
        for x in d:  # n doublings: every flip's sum, 2**n of them
            sums = np.concatenate((sums + x, sums - x))
        return float(np.count_nonzero(np.abs(sums) >= observed - gamma) / sums.shape[0])
    signs = np.random.default_rng(seed).integers(0, 2, size=(permutations, n), dtype=np.int8)
    hits = 0
    block = max(1, 2 ** 20 // n)  # rows per product: memory bounded for any number of queries
    for start in range(0, permutations, block):
        flipped = np.where(signs[start:start + block] == 1, d, -d)
        hits += int(np.count_nonzero(np.abs(flipped.sum(axis=1)) >= observed - gamma))
    return (hits + 1) / (permutations + 1)


_FLIPS_MAX = 13
"""Up to this many pairs, scipy's ``wilcoxon`` (``method="auto"``) tests differences with zeros
or tied magnitudes by an exact permutation test over every sign flip (2**n of them)."""


def _wilcoxon_sign_flip_p(a: np.ndarray, b: np.ndarray) -> float | None:
    """The two-sided p-value scipy's ``wilcoxon(a, b, zero_method="wilcox")`` gives where it
    runs its exact sign-flip permutation test (at most :data:`_FLIPS_MAX` pairs, with a zero
    difference or tied magnitudes; float64 values), computed at once; None elsewhere (scipy
    is fast there).

    scipy evaluates the statistic once per flip in Python: 0.05 s a test at 8 pairs, 1.5 s at
    13, seconds for a table of them. Here every flip's rank sum is one matrix product. The rank sum
    under a flip is the sum of the (average) ranks of the differences made positive; ranks are
    multiples of 0.5, so every sum is exact and the counts below, with scipy's tolerance
    (100 eps of the observed sum) and scipy's two-sided rule (twice the smaller tail, at most
    1), give scipy's p-value bit for bit (checked by ``tests/metrics/test_directions.py``)."""
    from scipy.stats import rankdata

    if a.dtype != np.float64 or b.dtype != np.float64 or not 0 < a.shape[0] <= _FLIPS_MAX:
        return None
    d = a - b
    if not np.isfinite(d).all():
        return None
    nonzero = d != 0
    magnitudes = np.abs(d[nonzero])
    if nonzero.all() and np.unique(magnitudes).shape[0] == magnitudes.shape[0]:
        return None  # no zero, no tie: scipy's exact null distribution
    n = d.shape[0]  # every difference zero: every flip's sum is 0, so p is 1
    ranks = np.zeros(n)
    ranks[nonzero] = rankdata(magnitudes, method="average")
    observed = float(np.sum((d > 0) * ranks))
    flips = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1  # 1: that pair positive
    null = flips @ ranks
    gamma = abs(np.finfo(np.float64).eps * 100 * observed)
    less = np.count_nonzero(null <= observed + gamma) / 2 ** n
    greater = np.count_nonzero(null >= observed - gamma) / 2 ** n
    return float(np.clip(min(less, greater) * 2, 0.0, 1.0))


@dataclass(frozen=True)
class PairedTest:
    """One metric of run B against run A, queries paired by id."""

    n: int
    """Queries both runs have a value for (neither NaN): those the test compares."""
    mean_a: float
    """A's mean over the paired queries (0.0 without any)."""
    mean_b: float
    """B's mean over the paired queries."""
    delta: float
    """``mean_b - mean_a``."""
    p_value: float
    """Two-sided p-value of the paired test."""
    wins: int
    """Queries where B scores higher."""
    ties: int
    """Queries with equal scores."""
    losses: int
    """Queries where B scores lower."""
    dropped: int = 0
    """Queries both runs have where either value is NaN (the metric undefined there): left
    out of the means, the test and the counts."""


def paired_test(a: Mapping[str, float], b: Mapping[str, float], test: StatTest = "student",
                seed: int = DEFAULT_SEED) -> PairedTest:
    """B against A on the queries both have (``{qid: value}`` each), in sorted id order, less
    those where either value is NaN (counted in :attr:`PairedTest.dropped`)."""
    qids = sorted(set(a) & set(b))
    va = np.array([a[q] for q in qids], dtype=float)
    vb = np.array([b[q] for q in qids], dtype=float)
    keep = scored_pairs(va, vb)
    dropped = int((~keep).sum())
    if dropped:
        va, vb = va[keep], vb[keep]
    mean_a = float(va.mean()) if va.size else 0.0
    mean_b = float(vb.mean()) if vb.size else 0.0
    return PairedTest(n=int(va.size), mean_a=mean_a, mean_b=mean_b,
                      delta=float(vb.mean() - va.mean()) if va.size else 0.0,
                      p_value=paired_p_value(va, vb, test, seed), wins=int((vb > va).sum()),
                      ties=int((vb == va).sum()), losses=int((vb < va).sum()),
                      dropped=dropped)


def compare_to_baseline(baseline: Mapping[str, Mapping[str, float]],
                        candidates: Sequence[tuple[str, Mapping[str, Mapping[str, float]]]],
                        metrics: Sequence[str], test: StatTest = "student",
                        alpha: float = 0.05, seed: int = DEFAULT_SEED,
                        correction: Correction = "holm") -> list[Comparison]:
    """Paired tests (:func:`paired_test`) of each candidate against the baseline, per metric,
    adjusted within a metric (:func:`adjust`, Holm's by default); win/tie/loss counts under
    each metric's direction (:func:`~aiblox.metrics.directions.directed_counts`).

    ``baseline`` and each candidate are per-query values ``{metric: {qid: value}}``; queries are
    paired by id (those both have), in sorted order.
    """
    out: list[Comparison] = []
    for metric in metrics:
        rows = [(name, paired_test(baseline[metric], per_query[metric], test, seed))
                for name, per_query in candidates]
        adjusted = adjust([t.p_value for _, t in rows], correction)
        for (name, t), p_adj in zip(rows, adjusted, strict=True):
            wins, ties, losses = directed_counts(metric, t.wins, t.ties, t.losses)
            out.append(Comparison(
                candidate=name, metric=metric, baseline_mean=t.mean_a, candidate_mean=t.mean_b,
                delta=t.delta, p_value=t.p_value, p_adjusted=p_adj, significant=p_adj <= alpha,
                wins=wins, ties=ties, losses=losses, test=test,
                direction=metric_direction(metric), correction=correction, alpha=alpha,
                dropped=t.dropped))
    return out


def compare_pairwise(systems: Sequence[tuple[str, Mapping[str, Mapping[str, float]]]],
                     metrics: Sequence[str], test: StatTest = "student", alpha: float = 0.05,
                     seed: int = DEFAULT_SEED, correction: Correction = "holm") -> list[Comparison]:
    """Every pair of systems tested, as ranx's ``compare`` does: for systems ``s_0 .. s_n-1``
    (name and per-query values ``{metric: {qid: value}}``) and each metric, ``s_j`` against
    ``s_i`` for every ``i < j`` (:attr:`Comparison.against` names ``s_i``). The ``n(n-1)/2``
    p-values of one metric form one family, adjusted together (:func:`adjust`); win/tie/loss
    under the metric's direction, as :func:`compare_to_baseline`."""
    out: list[Comparison] = []
    for metric in metrics:
        rows = [(a, b, paired_test(pa[metric], pb[metric], test, seed))
                for i, (a, pa) in enumerate(systems) for b, pb in systems[i + 1:]]
        adjusted = adjust([t.p_value for _, _, t in rows], correction)
        for (a, b, t), p_adj in zip(rows, adjusted, strict=True):
            wins, ties, losses = directed_counts(metric, t.wins, t.ties, t.losses)
            out.append(Comparison(
                candidate=b, against=a, metric=metric, baseline_mean=t.mean_a,
                candidate_mean=t.mean_b, delta=t.delta, p_value=t.p_value, p_adjusted=p_adj,
                significant=p_adj <= alpha, wins=wins, ties=ties, losses=losses, test=test,
                direction=metric_direction(metric), correction=correction, alpha=alpha,
                dropped=t.dropped))
    return out


def bootstrap_ci(values: Mapping[str, float] | Sequence[float], n: int = 1000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """``(mean, low, high)``: percentile bootstrap over queries, seeded (same input, same
    interval). A mapping is read in sorted key order."""
    if isinstance(values, Mapping):
        values = [values[k] for k in sorted(values)]
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n, x.size))
    means = x[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    return float(x.mean()), float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))
