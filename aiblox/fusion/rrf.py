"""Reciprocal rank fusion.

Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
rank learning methods", SIGIR 2009: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based
ranks; a list that does not contain ``d`` contributes nothing. A document listed more than once
in one list has one rank there, its first (best) position: it counts once per list, as in the
retriever seed's ``1 / (k + rank_text) + 1 / (k + rank_vec)`` and in ranx, whose runs map each
document to one score. The other documents keep their positions
(:func:`~aiblox.fusion.types.first_occurrences`, the rule of every fusion route).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiblox.fusion.types import RankedList, first_occurrences, rank_sorted

__all__ = ["rrf"]


def rrf(runs: Sequence[RankedList], k: int = 60, weights: Sequence[float] | None = None
        ) -> RankedList:
    """Fuse ranked lists (each best first) by weighted reciprocal rank."""
    if weights is None:
        weights = [1.0] * len(runs)
    if len(weights) != len(runs):
        raise ValueError(f"rrf: {len(runs)} runs but {len(weights)} weights")
    fused: dict[str, float] = {}
    for run, w in zip(runs, weights, strict=True):
        hits, ranks = first_occurrences(run)  # a repeat in a list: its first position is its rank
        for rank, (doc_id, _score) in zip(ranks, hits, strict=True):
            fused[doc_id] = fused.get(doc_id, 0.0) + w / (k + rank)
    return rank_sorted(fused)
