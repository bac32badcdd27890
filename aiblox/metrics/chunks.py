"""Chunk metrics of a sweep point: how well the returned evidence chunks serve the query.

Built on the pure chunk-level functions of :mod:`aiblox.chunking.metrics` (answer recall@k, the
max-passage projection) and on :class:`~aiblox.metrics.QrelsScorer` for the ranx metrics of
the projection, as :func:`aiblox.engine.chunk_eval.evaluate_chunks` is. Per query:

- ``answer_recall@k``: a returned chunk among the first ``k`` comes from the gold document and
  its span holds a gold answer span (queries with gold answers);
- ``evidence_tokens``: tokens of the returned chunks;
- ``max_passage:<metric>``: ranx metrics of every scored chunk projected to its document
  (:data:`aiblox.chunking.PROJECTION`: a document scores as its best chunk).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiblox.chunking import PROJECTION, answer_recall_at_k
from aiblox.metrics.answers import Gold
from aiblox.metrics.ranking import QrelsScorer

__all__ = ["CHUNK_SCALARS", "PROJECTION_PREFIX", "chunk_metrics"]

CHUNK_SCALARS: tuple[str, ...] = ("evidence_tokens",)
"""Chunk-level metrics besides ``answer_recall@k`` and ``max_passage:<ranx metric>``."""

PROJECTION_PREFIX = f"{PROJECTION}:"
"""Prefix of the ranx metrics of the max-passage projection (chunks to documents)."""


def chunk_metrics(chunks: Mapping[str, Any], qrels: Mapping[str, Mapping[str, int]], gold: Gold,
                  metrics: Sequence[str], k_values: Sequence[int], scorer: QrelsScorer
                  ) -> dict[str, Any]:
    """``{"means", "per_query"}`` of a chunks output (``evidence``: per query the returned
    chunks with ``item_id``, ``start``, ``end``, ``text``, ``tokens``; ``projection``: per query
    ``[[doc_id, score], ...]``); ``scorer`` scores ``qrels``."""
    evidence = chunks["evidence"]
    per_query: dict[str, dict[str, float]] = {}
    as_tuples = {q: [(c["item_id"], c["start"], c["end"], c["text"]) for c in ev]
                 for q, ev in evidence.items()}
    wanted = {q: g for q, g in gold.items() if q in evidence}
    if wanted:
        for k in sorted(set(k_values)):
            _, per = answer_recall_at_k(as_tuples, wanted, int(k))
            per_query[f"answer_recall@{k}"] = per
    per_query["evidence_tokens"] = {q: float(sum(c["tokens"] for c in ev))
                                    for q, ev in sorted(evidence.items())}
    if qrels:
        _, proj = scorer.evaluate(chunks["projection"], list(metrics))
        for m, vals in proj.items():
            per_query[f"{PROJECTION_PREFIX}{m}"] = vals
    means = {m: (sum(v.values()) / len(v) if v else 0.0) for m, v in per_query.items()}
    return {"means": means, "per_query": per_query}
