"""Which way is better, per metric: the one place that says so.

A quality metric (ranx metrics, chunk and answer metrics, ``status:ANSWERED``) is better
higher; a cost is better lower: the tokens and chunks handed on (``evidence_tokens``,
``selected_tokens``, ``selected_chunks``), the candidates retrieved per query (``candidates``), and
anything that counts tokens or time (a name holding ``tokens``, ``latency`` or ``time``, or
ending in ``_ms``, ``_s``, ``_seconds``). The failure rates ``status:REFUSED``,
``status:NO_EVIDENCE``, ``status:INVALID`` and ``status:FAILED`` count a query B fails that A
did not as a loss (:data:`FAILURE_RATES`); as a search objective a status rate other than
``status:ANSWERED`` still needs an explicit direction (is refusing good?), see
:func:`aiblox.metrics.pareto.infer_direction`.

Win/tie/loss counts (:func:`aiblox.metrics.significance.compare_to_baseline`, the sweep's
significance table, its report, ``aiblox compare`` and the notebooks) count a win where B is
better under the metric's direction: for a cost, a decrease.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "COST_METRICS",
    "Direction",
    "FAILURE_RATES",
    "directed_counts",
    "lower_is_better",
    "metric_direction",
]

Direction = Literal["higher", "lower"]
"""``higher`` (a quality metric) or ``lower`` (a cost) is better."""

COST_METRICS: frozenset[str] = frozenset(
    {"evidence_tokens", "selected_tokens", "selected_chunks", "candidates"})
"""Costs by name: tokens and chunks handed on, candidates retrieved per query."""

FAILURE_RATES: frozenset[str] = frozenset(
    {"status:REFUSED", "status:NO_EVIDENCE", "status:INVALID", "status:FAILED"})
"""Status rates where a rise is a loss in a comparison."""

_COUNTS_TOKENS_OR_TIME = re.compile(r"tokens|latency|time|_ms$|_s$|_seconds$")


def _base(metric: str) -> str:
    """The metric without a projection prefix (``max_passage:ndcg@10`` is ``ndcg@10``); a
    status rate keeps its ``status:`` prefix."""
    if metric.startswith("status:"):
        return metric
    return metric.rpartition(":")[2]


def lower_is_better(metric: str) -> bool:
    """True for a cost (:data:`COST_METRICS`, a name counting tokens or time) or a failure
    rate (:data:`FAILURE_RATES`)."""
    base = _base(metric)
    return (base in COST_METRICS or base in FAILURE_RATES
            or (not base.startswith("status:") and bool(_COUNTS_TOKENS_OR_TIME.search(base))))


def metric_direction(metric: str) -> Direction:
    """``lower`` when :func:`lower_is_better`, else ``higher``."""
    return "lower" if lower_is_better(metric) else "higher"


def directed_counts(metric: str, higher: int, ties: int, lower: int) -> tuple[int, int, int]:
    """``(wins, ties, losses)`` of B against A under ``metric``'s direction, from the counts of
    queries where B is higher, equal, lower: for a cost a lower value is a win."""
    return (lower, ties, higher) if lower_is_better(metric) else (higher, ties, lower)
