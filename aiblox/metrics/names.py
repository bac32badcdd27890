"""Metric names: which strings ``ranx.evaluate`` computes, checked before any work.

ranx parses a metric name only when it scores it: a typo (``bogus@10``) or a negative cutoff
(``ndcg@-3``, which fails inside a compiled kernel) raises after every query was retrieved, and
some malformed names are silently read as something else (``ndcg@10@5`` is ``ndcg@10``).
:func:`validate_metrics` refuses both in microseconds, so every entry point (``aiblox eval
--metric``, sweep specs' ``metrics``, :func:`aiblox.metrics.evaluate_run`, the sweep's
metrics stage) checks names first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["RANX_METRICS", "canonical_metrics", "validate_metrics"]

RANX_METRICS: tuple[str, ...] = (
    "bpref", "dcg", "dcg_burges", "f1", "hit_rate", "hits", "map", "mrr", "ndcg", "ndcg_burges",
    "precision", "r-precision", "rbp", "recall",
)
"""The metric names ``ranx.evaluate`` accepts (ranx 0.3's ``metric_switch``;
``tests/metrics/test_metric_names.py`` holds the list to ranx's)."""

_POSITIVE = re.compile(r"[1-9][0-9]*")

_WHOLE_RUN = {"bpref": "bpref", "r-precision": "Rprec"}
"""Metrics with no cutoff (their trec_eval names): ``bpref@5`` was accepted, given a column of
its own and computed as plain ``bpref`` over whatever depth the evaluation retrieved."""

_SPELLED = {"p": "precision", "r": "recall", "ap": "map", "rr": "mrr", "recip_rank": "mrr",
            "ndcg_cut": "ndcg", "recall_cut": "recall", "rprec": "r-precision",
            "success": "hit_rate", **{m: m for m in RANX_METRICS}}
"""Lower-cased names other tools give a metric ranx computes (trec_eval's ``P``,
``recip_rank``, ``Rprec``, ``success``; ir-measures' ``AP``, ``RR``; ``NDCG`` for ``ndcg``):
an unknown name that is one of them says ranx's."""


def _metric_problem(name: str) -> str | None:
    """Why ``name`` is not a metric ranx computes as written, or None when it is (the grammar
    of ranx's ``extract_metric_and_params``, with its silent truncations refused)."""
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    head, level = name, None
    if name.count("-l") > 1:
        return f"{name!r}: the relevance level -lN is given twice"
    if "-l" in name:
        head, level = name.split("-l")
        if not _POSITIVE.fullmatch(level):
            return f"{name!r}: the relevance level after -l must be a positive integer"
    if head.startswith("rbp"):
        p = head[3:]
        if len(p) < 2 or p[0] not in "@." or not _POSITIVE.fullmatch(p[1:].lstrip("0") or "x"):
            return f"{name!r}: rbp needs its persistence, e.g. rbp.95 (p = 0.95)"
        return None
    base, sep, k = head.partition("@")
    if base not in RANX_METRICS:
        if base.partition(".")[0] in RANX_METRICS:
            return f"{name!r}: the cutoff is written @k, e.g. {base.partition('.')[0]}@10"
        stem, _, cut = base.rpartition("_")  # trec_eval's P_5, ndcg_cut_10
        if not (stem and cut.isdigit() and not sep):
            stem, cut = base, ""
        known = _SPELLED.get(stem.lower())
        if known is not None:  # trec_eval's or another tool's name, or another case
            at = f"@{cut}" if cut else f"{sep}{k}"
            return f"{name!r}: unknown metric {base!r} (ranx's name: {known}{at})"
        return f"{name!r}: unknown metric {base!r}"
    if sep and base in _WHOLE_RUN:
        return (f"{name!r}: {base} takes no cutoff @k (it reads the whole run, as trec_eval's "
                f"{_WHOLE_RUN[base]} does, and ranx ignores a k): write {base}, and cut the run "
                f"with --top-k/--depth if that is what you mean")
    if sep and not _POSITIVE.fullmatch(k):
        return f"{name!r}: the cutoff @k must be a positive integer, got {k!r}"
    return None


@lru_cache(maxsize=256)
def _validated(names: tuple[str, ...]) -> tuple[str, ...]:
    if not names:
        raise ValueError("no metric named: give at least one ranx metric, e.g. ndcg@10")
    bad = [p for p in map(_metric_problem, names) if p is not None]
    if bad:
        raise ValueError(f"bad metric name{'s' if len(bad) > 1 else ''}: {'; '.join(bad)}. "
                         f"Known: {', '.join(RANX_METRICS)}; written name, name@k (k >= 1, "
                         f"e.g. ndcg@10), rbp.95, with an optional relevance level -lN "
                         f"(e.g. ndcg@10-l2)")
    return names


def validate_metrics(names: Iterable[str], distinct: bool = False) -> list[str]:
    """``names`` if every one is a metric ``ranx.evaluate`` computes, else a ``ValueError``
    naming each bad one and the known names; with ``distinct`` (what a user wrote: a spec's
    ``metrics``, ``--metric``), a name given twice is refused too (a table with the column
    twice, a family of tests corrected over one metric counted twice).

    A name is one of :data:`RANX_METRICS` with an optional cutoff ``@k`` (``k`` a positive
    integer; without it the whole list is scored), ``rbp`` with its persistence (``rbp.95``),
    and an optional relevance level ``-lN`` (``N >= 1``, ranx's ``ndcg@10-l2``). Names are
    case-sensitive, as in ranx. Cheap (cached): call it before any work.
    """
    if isinstance(names, str):
        names = [names]
    try:
        out = list(_validated(tuple(names)))
    except TypeError:  # an unhashable entry
        bad = [n for n in names if not isinstance(n, str)]
        raise ValueError(f"bad metric names: {bad!r} are not strings") from None
    twice = next((n for i, n in enumerate(out) if n in out[:i]), None) if distinct else None
    if twice is not None:
        raise ValueError(f"metric {twice!r} is named twice: name each metric once")
    return out


_FAMILIES = ("ndcg", "recall", "mrr", "map")
"""The metric families first in :func:`canonical_metrics`, in the order of
:data:`~aiblox.metrics.DEFAULT_METRICS` (so the defaults are in canonical order)."""


def canonical_metrics(names: Iterable[str]) -> list[str]:
    """``names`` in the one order every hash of a list of metrics reads (a metrics stage's key
    and output, a manifest's hash, a sweep spec's hash): ``--metric recall@100 --metric
    ndcg@10`` scores what ``--metric ndcg@10 --metric recall@100`` does, so it is the same
    stage and the same manifest. By family, ``ndcg``, ``recall``, ``mrr``, ``map`` first (the
    order of :data:`~aiblox.metrics.DEFAULT_METRICS`, which is thus its own canonical order and
    keeps its keys), the others by name; then by cutoff, ascending, none last; then by name
    (``ndcg@10`` before ``ndcg@10-l2``). The order metrics are shown and logged in is the one
    given: only what is hashed is put in this order."""
    def order(name: str) -> tuple[int, str, int, int, str]:
        base, _, k = name.split("-l")[0].partition("@")
        family = base.partition(".")[0]  # rbp.95: the family rbp
        rank = _FAMILIES.index(family) if family in _FAMILIES else len(_FAMILIES)
        cutoff = int(k) if k.isdigit() else 0
        return rank, family, 0 if k.isdigit() else 1, cutoff, name

    return sorted(names, key=order)
