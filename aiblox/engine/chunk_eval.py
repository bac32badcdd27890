"""Chunk-level evaluation: which chunking serves evidence best.

For one retrieval and chunking configuration on a deterministic subset of a split's queries
(the first ``limit`` query ids in sorted order), :func:`evaluate_chunks` reports

* answer recall@k over the returned evidence chunks (a query counts when one of its top ``k``
  chunks comes from the gold document and contains a gold answer span), for datasets with
  gold answers (``answers.jsonl``, e.g. ``squad-v1.1-dev``);
* the mean number of tokens of evidence returned (all ``top_k_chunks``, and the first ``k``);
* document-level ranx metrics of the chunk run projected to documents with the named
  projection (:data:`aiblox.chunking.PROJECTION`, max-passage: a document scores as its best
  chunk), recorded with the projection's name, next to the metrics of the fused document run
  the chunks were cut from.

Queries are processed in batches: full-text and vector search for the batch in one round, then
one chunk cache lookup, one embedding call and one cache write for the union of the batch's
candidate documents, then per-query scoring.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.chunking.metrics import (
    ANSWER_MATCH_RULE,
    PROJECTION,
    answer_recall_at_k,
    max_passage_projection,
    mean_evidence_tokens,
)
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset
from aiblox.engine.result import config_hash
from aiblox.hashing import sha256_hex
from aiblox.metrics import DEFAULT_METRICS, DepthError, check_depth, evaluate_run
from aiblox.metrics.depth import metrics_within
from aiblox.progress import progress_bar
from aiblox.retrieval.late_chunking import NO_EMBEDDER, LateChunker, ScoredChunk
from aiblox.retrieval.retriever import HybridRetriever

__all__ = ["CHUNK_EVAL_VERSION", "ChunkEvalResult", "check_precomputed", "evaluate_chunks",
           "gold_answers", "precomputed_refusal"]

CHUNK_EVAL_VERSION = 1
"""Version of this evaluation's definitions; part of its config hash."""


class ChunkEvalResult(BaseModel):
    """Chunk-level scores of one chunking configuration on a subset of one split."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset name."""
    split: str
    """Split whose queries (and qrels) were used."""
    n_queries: int
    """Queries evaluated (the first ``limit`` query ids of the split, sorted)."""
    chunker_id: str
    """The chunker's full id, parameters included."""
    answer_recall: dict[str, float] = Field(default_factory=dict)
    """``answer_recall@k`` means over queries with gold answers; empty without answers."""
    n_answer_queries: int = 0
    """Queries with gold answers that answer recall averages over."""
    evidence_tokens: dict[str, float] = Field(default_factory=dict)
    """Mean tokens of evidence returned per query: ``all`` (the ``top_k_chunks``) and ``@k``."""
    projection: str = PROJECTION
    """Name of the chunk-to-document projection behind ``projection_metrics``."""
    projection_metrics: dict[str, float] = Field(default_factory=dict)
    """ranx metrics of the projected document run (documents ranked by their best chunk)."""
    document_metrics: dict[str, float] = Field(default_factory=dict)
    """ranx metrics of the fused document run, cut to ``top_k_items`` (the chunked candidates)."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Summed late chunking counts (chunk cache hits and misses, chunks scored, ...)."""
    missing_documents: list[str] = Field(default_factory=list)
    """With the ``precomputed`` strategy: the candidate documents that had no valid precomputed
    chunks (changed since ``aiblox index build --chunks``, or never precomputed), sorted. They
    gave no evidence, so answer recall can drop: ``counts['precomputed_missing']`` sums them
    per batch, this names each once."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds: ``retrieve_s`` (search and fusion), ``chunk_s`` (chunks, vectors, scoring),
    ``score_s`` (metrics), ``total_s``."""
    hashes: dict[str, str] = Field(default_factory=dict)
    """``dataset``, ``config`` and ``run`` (the returned chunks: ids, scores, order) sha256."""
    config: dict[str, Any] = Field(default_factory=dict)
    """What ``hashes['config']`` covers."""
    chunk_run: dict[str, list[tuple[str, float]]] = Field(default_factory=dict, exclude=True)
    """Returned evidence per query: ``[(chunk_id, score), ...]`` (not serialised)."""
    per_query: dict[str, dict[str, float]] = Field(default_factory=dict, exclude=True)
    """Per-query values ``{name: {qid: value}}`` (not serialised)."""


def gold_answers(dataset: Dataset, qids: Sequence[str]) -> dict[str, list[tuple[str, str, int]]]:
    """``{qid: [(doc_id, answer_text, answer_start), ...]}`` for the ``qids`` with answers."""
    out = {}
    for qid in qids:
        gold = dataset.answers.get(qid)
        if gold is not None and gold.answers:
            out[qid] = [(gold.corpus_id, text, start)
                        for text, start in zip(gold.answers, gold.answer_starts, strict=True)]
    return out


def _late(retriever: HybridRetriever) -> LateChunker:
    late = retriever.evidence_builder
    if not isinstance(late, LateChunker):
        raise ValueError("chunk evaluation needs a retriever whose evidence builder is a "
                         "LateChunker (see aiblox.retrieval.make_retriever)")
    return late


def precomputed_refusal(chunker_id: str, model_id: str) -> str:
    """Why the ``precomputed`` strategy is refused over a store that holds no chunk
    precomputed for ``chunker_id`` and ``model_id`` (every chunk metric would be 0). Without
    an embedder (bm25) the chunks looked up are the text-only ones (model id ``none``), which
    ``aiblox index build --chunks`` writes beside the embedder's."""
    whose = ("for text-only scoring (no embedder: bm25 mode; a store whose chunks were "
             "precomputed before they were written beside the embedder's needs the build "
             "again)" if model_id == NO_EMBEDDER else "with this embedder")
    return (f"chunk strategy precomputed: the store holds no chunks precomputed for "
            f"{chunker_id} {whose}, so every chunk metric would be 0: `aiblox index build "
            f"--chunks` (its --chunker and sizes) precomputes them; or use late (chunks made "
            f"when a query needs them, cached) or mixed")


def check_precomputed(prefs: RetrievalPrefs, counts: dict[str, int], chunker_id: str,
                      model_id: str) -> None:
    """The ``precomputed`` strategy over a store that holds no chunk precomputed for this
    chunker scored every chunk metric 0, silently: refused once the first batch finds none
    (``ValueError``, :func:`precomputed_refusal`)."""
    if prefs.chunking.strategy == "precomputed" and counts.get("precomputed_missing") \
            and not counts.get("precomputed_hits"):
        raise ValueError(precomputed_refusal(chunker_id, model_id))


def evaluate_chunks(retriever: HybridRetriever, dataset: Dataset, split: str,
                    prefs: RetrievalPrefs, metrics: Sequence[str] | None = None,
                    k_values: Sequence[int] = (1, 5, 10), limit: int | None = None,
                    batch_size: int = 100, match: str = ANSWER_MATCH_RULE,
                    progress: bool = True) -> ChunkEvalResult:
    """Chunk-level evaluation of ``prefs`` (its ``chunking``, ``cache``, ``top_k_items``,
    ``top_k_chunks`` and ``per_item_chunk_cap``) on the first ``limit`` queries of ``split``.

    The document runs scored with ranx ``metrics`` (the fused run and its max-passage
    projection) hold the ``top_k_items`` chunked documents, and ``top_k_chunks`` chunks are
    returned: a metric cutoff above ``top_k_items`` or a ``k_values`` entry above
    ``top_k_chunks`` raises :class:`~aiblox.metrics.DepthError` before any work
    (:mod:`aiblox.metrics.depth`). ``metrics`` None: those of
    :data:`~aiblox.metrics.DEFAULT_METRICS` whose cutoff is at most ``top_k_items`` (and
    the candidate depths)."""
    late = _late(retriever)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    ks = sorted({int(k) for k in k_values})
    if not ks or ks[0] < 1:
        raise ValueError(f"k_values must be positive ints, got {list(k_values)!r}")
    metrics = list(metrics_within(prefs, DEFAULT_METRICS) if metrics is None else metrics)
    check_depth(prefs, metrics)
    if ks[-1] > prefs.top_k_chunks:
        raise DepthError(f"answer_recall@{ks[-1]} reads {ks[-1]} chunks per query, but "
                         f"top_k_chunks = {prefs.top_k_chunks} returns at most "
                         f"{prefs.top_k_chunks}: use k_values of at most {prefs.top_k_chunks}, "
                         f"or return more chunks")
    queries = dataset.split_queries(split)[:limit]
    chunker_id = late.chunker_for(prefs.chunking).chunker_id
    counts: dict[str, int] = {}
    missing: set[str] = set()
    returned: dict[str, list[ScoredChunk]] = {}
    pooled: dict[str, list[tuple[str, float]]] = {}
    fused: dict[str, list[tuple[str, float]]] = {}
    t_retrieve = t_chunk = 0.0
    t0 = time.perf_counter()
    bar = progress_bar(len(queries), f"chunks {dataset.name}/{split}", unit="q",
                       enabled=progress)
    for start in range(0, len(queries), batch_size):
        batch = queries[start:start + batch_size]
        group = [prefs.model_copy(update={"query_text": text, "query_id": qid})
                 for qid, text in batch]
        t1 = time.perf_counter()
        signals = retriever.signals(group)
        hits = retriever.fuse(group, signals)
        t2 = time.perf_counter()
        ids = sorted({h.doc_id for hs in hits for h in hs[:prefs.top_k_items]})
        items = retriever.store.get_items(ids)
        prepared = late.prepare(prefs, [items[i] for i in ids if i in items], counts)
        check_precomputed(prefs, counts, chunker_id, late.model_id)
        if prefs.chunking.strategy == "precomputed":
            missing.update(i for i in ids if i in items and i not in prepared)
        qvecs = (late.embedder.embed([text for _, text in batch])
                 if late.embedder is not None else [None] * len(batch))
        for (qid, _), p, hs, qv in zip(batch, group, hits, qvecs, strict=True):
            ranked = late.rank(p, hs, items, counts, prepared=prepared, query_vector=qv)
            returned[qid] = ranked[:prefs.top_k_chunks]
            pooled[qid] = [(s.chunk.item_id, s.score) for s in ranked]
            fused[qid] = [(h.doc_id, h.score) for h in hs[:prefs.top_k_items]]
        t_retrieve += t2 - t1
        t_chunk += time.perf_counter() - t2
        bar.update(len(batch))
    bar.close()
    t3 = time.perf_counter()
    per_query: dict[str, dict[str, float]] = {}
    qids = [q for q, _ in queries]
    gold = gold_answers(dataset, qids)
    chunks = {q: [s.chunk for s in returned[q]] for q in qids}
    answer_recall = {}
    for k in ks:
        mean, per = answer_recall_at_k(chunks, gold, k, match=match)  # type: ignore[arg-type]
        if gold:
            answer_recall[f"answer_recall@{k}"] = mean
            per_query[f"answer_recall@{k}"] = per
    tokens = {q: [s.chunk.token_count for s in returned[q]] for q in qids}
    evidence_tokens = {"all": mean_evidence_tokens(tokens)[0]}
    for k in ks:
        evidence_tokens[f"@{k}"] = mean_evidence_tokens(tokens, k)[0]
    judged = dataset.split_qrels(split)
    qrels = {q: judged[q] for q in qids if q in judged}
    projected = {q: list(docs.items()) for q, docs in max_passage_projection(pooled).items()}
    scored = bool(qrels) and bool(metrics)
    projection_metrics, proj_per = evaluate_run(qrels, projected, metrics) if scored else ({}, {})
    document_metrics, _ = evaluate_run(qrels, fused, metrics) if scored else ({}, {})
    for m, per in proj_per.items():
        per_query[f"{PROJECTION}:{m}"] = per
    score_s = time.perf_counter() - t3
    base_hash, base = config_hash(prefs, getattr(late.embedder, "model_id", None),
                                  retriever.store.kind, reads_embedder=True)  # the late chunker's
    config = {**base, "chunk_eval": CHUNK_EVAL_VERSION, "chunker_id": chunker_id,
              "late": late.params, "k_values": ks, "limit": limit, "split": split,
              "match": match, "projection": PROJECTION, "metrics": list(metrics)}
    chunk_run = {q: [(s.chunk.chunk_id, s.score) for s in returned[q]] for q in qids}
    return ChunkEvalResult(
        dataset=dataset.name, split=split, n_queries=len(queries), chunker_id=chunker_id,
        answer_recall=answer_recall, n_answer_queries=len(gold),
        evidence_tokens=evidence_tokens, projection_metrics=projection_metrics,
        document_metrics=document_metrics, counts=dict(sorted(counts.items())),
        missing_documents=sorted(missing),
        timings={"retrieve_s": round(t_retrieve, 3), "chunk_s": round(t_chunk, 3),
                 "score_s": round(score_s, 3),
                 "total_s": round(time.perf_counter() - t0, 3)},
        hashes={"dataset": dataset.hash, "config": sha256_hex(config),
                "run": sha256_hex({q: [[c, s] for c, s in run]
                                   for q, run in sorted(chunk_run.items())})},
        config=config, chunk_run=chunk_run, per_query=per_query)
