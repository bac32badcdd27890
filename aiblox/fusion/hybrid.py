"""HybridScorer: fuses a full-text list and a vector list under a :class:`ScoringConfig`.

A document listed more than once in one list keeps its first entry there, its rank and its
score (:func:`~aiblox.fusion.types.first_occurrences`): in the fused score and in the ranks and
scores each hit reports, as in :func:`~aiblox.fusion.rrf`, :func:`~aiblox.fusion.linear` and
:class:`~aiblox.fusion.BatchFusion`.
"""

from __future__ import annotations

from aiblox.contracts.retrieval import ScoringConfig
from aiblox.fusion.linear import linear
from aiblox.fusion.rrf import rrf
from aiblox.fusion.types import FusedHit, RankedList, first_occurrences

__all__ = ["HybridScorer"]


class HybridScorer:
    """Pure fusion of two ranked lists; knows nothing of stores or embedders."""

    def __init__(self, config: ScoringConfig | None = None) -> None:
        self.config = config or ScoringConfig()

    def fuse(self, text: RankedList, vec: RankedList, top_k: int | None = None) -> list[FusedHit]:
        """Fuse ``text`` and ``vec`` (each best first); ties break on score, then doc id."""
        cfg = self.config
        if cfg.blend == "rrf":
            fused = rrf([text, vec], k=cfg.rrf_k, weights=[cfg.rrf_w_text, cfg.rrf_w_vec])
        else:
            fused = linear([text, vec], weights=[cfg.w_text, cfg.w_vec],
                           normalize=cfg.normalize, missing=cfg.missing)
        if top_k is not None:
            fused = fused[:top_k]
        t_rank = _ranked(text)
        v_rank = _ranked(vec)
        hits = []
        for doc_id, score in fused:
            tr, ts = t_rank.get(doc_id, (None, None))
            vr, vs = v_rank.get(doc_id, (None, None))
            hits.append(FusedHit(doc_id, score, ts, vs, tr, vr))
        return hits

    @staticmethod
    def single(run: RankedList, signal: str, top_k: int | None = None) -> list[FusedHit]:
        """Pass one list through (``bm25`` or ``dense`` mode) as fused hits: each document's
        first entry, at its rank in ``run``, cut to ``top_k``."""
        make = tuple.__new__  # FusedHit's own __new__ without its keyword handling: 3x faster
        hits, ranks = first_occurrences(run[:top_k] if top_k else run)
        if top_k and len(hits) < top_k < len(run):  # a repeat among the first top_k: read on
            hits, ranks = first_occurrences(run)
        ranked = zip(ranks[:top_k] if top_k else ranks, hits, strict=False)
        if signal == "text":
            return [make(FusedHit, (d, s, s, None, r, None)) for r, (d, s) in ranked]
        return [make(FusedHit, (d, s, None, s, None, r)) for r, (d, s) in ranked]


def _ranked(run: RankedList) -> dict[str, tuple[int, float]]:
    """``{doc_id: (rank, score)}`` of each document's first entry in ``run``."""
    hits, ranks = first_occurrences(run)
    return {d: (r, s) for r, (d, s) in zip(ranks, hits, strict=True)}
