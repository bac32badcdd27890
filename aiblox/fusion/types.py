"""Plain types shared by the fusion functions, and the one rule for a document listed twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

__all__ = ["MAX_SCORE", "FusedHit", "RankedList", "check_blend_finite", "first_occurrences",
           "rank_sorted"]

_Hit = TypeVar("_Hit", bound=Sequence[Any])

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


def first_occurrences(run: Sequence[_Hit]) -> tuple[Sequence[_Hit], Sequence[int]]:
    """``(hits, ranks)``: ``run`` (``(doc_id, score)`` pairs, best first) with each document's
    first entry only, and the rank of each entry kept, its 1-based position in ``run``.

    Every fusion route reads its input lists through this (:func:`~aiblox.fusion.rrf`,
    :func:`~aiblox.fusion.linear`, :class:`~aiblox.fusion.HybridScorer` and its reported ranks,
    :class:`~aiblox.fusion.BatchFusion`): a document listed twice in one list keeps its first
    entry, its rank and its score, and a later entry of it is dropped before anything is
    normalised or fused, as the retriever seed's ``rank_text``/``rank_vec`` (one rank per
    list) and ranx's runs (one score per document) have it. The documents after a dropped entry
    keep their positions (``[a, a, b]``: ``b`` is ranked 3). aiblox's retrievers never list a
    document twice; lists given from outside can (a user's stage, ``SignalRuns`` built by hand).
    A list with no repeat comes back as it is, with ranks ``1 .. len(run)``."""
    ids = [hit[0] for hit in run]
    if len(set(ids)) == len(ids):
        return run, range(1, len(run) + 1)
    seen: set[Any] = set()
    hits: list[_Hit] = []
    ranks: list[int] = []
    for rank, (doc_id, hit) in enumerate(zip(ids, run, strict=True), start=1):
        if doc_id not in seen:
            seen.add(doc_id)
            hits.append(hit)
            ranks.append(rank)
    return hits, ranks


MAX_SCORE = 3.4028234663852886e38
"""The largest score a run may hold: the largest 32-bit float. A TREC run file's order is
read in single precision (:func:`aiblox.data.trec.trec_scores`); past it every score is one
infinity and the order is lost."""


def check_blend_finite(largest: float, normalize: str) -> None:
    """Refuse a linear blend whose largest fused magnitude ``largest`` passes
    :data:`MAX_SCORE`: the documents that reach it would tie (at inf in 32 bits, or in 64)
    and come back in id order."""
    if largest != largest:  # NaN: from a score that is not a number, not from the weights
        raise ValueError(f"linear fusion: a {normalize}-normalised score is not a number (a "
                         f"list holds a NaN or infinite score): the scores blended must be "
                         f"finite numbers")
    if not largest <= MAX_SCORE:
        raise ValueError(f"linear fusion: the weights times the {normalize}-normalised scores "
                         f"reach {largest:.3g}, past the largest run score {MAX_SCORE:.3g} "
                         f"(a 32-bit float), where documents tie; only the weights' ratio "
                         f"ranks, scale them down")
