"""Plain types shared by the fusion functions."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FusedHit", "RankedList", "rank_sorted"]

RankedList = list[tuple[str, float]]
"""A ranked list: ``(doc_id, score)`` pairs, best first (score desc, then doc_id asc)."""


class FusedHit(NamedTuple):
    """One fused document with the raw signals it came from."""

    doc_id: str
    score: float
    score_text: float | None
    score_vec: float | None
    rank_text: int | None
    rank_vec: int | None


def rank_sorted(scores: dict[str, float]) -> RankedList:
    """Sort ``{doc_id: score}`` by score desc, then doc_id asc: the one tie-break rule."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
