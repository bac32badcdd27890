"""Ranked lists for the fusion property tests (``tests/fusion/test_batch_fusion.py``,
``tests/metrics/test_score_fusions.py``)."""

from __future__ import annotations


def ranked(pairs):
    """``(doc, score)`` pairs as one ranked list: a document listed twice keeps its last
    score; score descending, ties by document id."""
    best = {}
    for d, s in pairs:
        best[d] = s
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
