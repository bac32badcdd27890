"""Hybrid retrieval: full-text top-K and vector top-K from a store, fused by the HybridScorer.

The retriever coordinates; it owns none of its parts. The store answers full-text and vector
queries, the embedder (through its cache) embeds the query, the HybridScorer fuses, and the
evidence builder (late chunking) turns candidates into chunk-level evidence.

Work is split into stages that the eval runner can cache separately:

1. :meth:`HybridRetriever.signals`: the full-text and vector ranked lists per query;
2. :meth:`HybridRetriever.fuse`: fusion of those lists under ``prefs.scoring``;
3. :meth:`HybridRetriever.hydrate`: candidates (titles, metadata, snippets) and evidence.

Output is deterministic: every list is ordered by score desc, then id asc.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import (
    CandidateItem,
    EvidenceChunk,
    RequestContext,
    RetrievalBundle,
    RetrievalPrefs,
    RetrievalStats,
)
from aiblox.embedding.base import Embedder
from aiblox.embedding.device import embedder_device
from aiblox.fusion.hybrid import HybridScorer
from aiblox.fusion.types import FusedHit, RankedList
from aiblox.indexes import StoreIndexes, passage_chunker_id
from aiblox.memory import paused_gc
from aiblox.stores.base import Store
from aiblox.stores.identity import check_searchable

__all__ = ["EvidenceBuilder", "HybridRetriever", "Retriever", "SignalRuns", "blank_emptied",
           "without_query_id", "zero_emptied"]


class Retriever(Protocol):
    """The retriever seed's interface."""

    async def search(self, ctx: RequestContext, prefs: RetrievalPrefs) -> RetrievalBundle:
        """Hybrid retrieval: ranked candidates and evidence chunks; cancellable via ctx."""
        ...


EvidenceBuilder = Callable[
    [RetrievalPrefs, list[FusedHit], dict[str, ItemRecord], dict[str, Any]],
    list[EvidenceChunk],
]
"""``(prefs, hits, items, stats) -> evidence``: late chunking plugs in here; it may add
counts to ``stats["counts"]``."""


@dataclass(frozen=True)
class SignalRuns:
    """The per-query full-text and vector ranked lists (before fusion)."""

    text: list[RankedList]
    vec: list[RankedList]


def _group_key(prefs: RetrievalPrefs) -> str:
    from aiblox.hashing import canonical_json

    return canonical_json(prefs.model_dump(exclude={"query_text", "query_id"}))


class HybridRetriever:
    """The default :class:`Retriever` over any :class:`Store`."""

    def __init__(self, store: Store, embedder: Embedder | None = None,
                 evidence_builder: EvidenceBuilder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.evidence_builder = evidence_builder
        self._indexes: StoreIndexes | None = None

    @property
    def indexes(self) -> StoreIndexes:
        """The store's derived BM25 and vector indexes (``engine = "index"``)."""
        if self._indexes is None:
            self._indexes = StoreIndexes(self.store)
        return self._indexes

    # -- public API ----------------------------------------------------------------------
    async def search(self, ctx: RequestContext, prefs: RetrievalPrefs) -> RetrievalBundle:
        """Retrieve for one query in a worker thread; checks ``ctx.cancellation`` per stage."""
        ctx.cancellation.raise_if_cancelled()
        bundles = await asyncio.to_thread(self.search_many, [prefs], ctx)
        return bundles[0]

    def search_many(self, prefs_list: Sequence[RetrievalPrefs],
                    ctx: RequestContext | None = None) -> list[RetrievalBundle]:
        """Retrieve for many queries; queries with the same settings share one SQL round."""
        out: list[RetrievalBundle | None] = [None] * len(prefs_list)
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prefs_list):
            groups.setdefault(_group_key(p), []).append(i)
        with paused_gc():  # lists, hits and bundles by the 10^4: see fuse
            for key in sorted(groups):
                idx = groups[key]
                group = [prefs_list[i] for i in idx]
                timings: dict[str, float] = {}
                signals = self.signals(group, ctx, timings)
                hits = self.fuse(group, signals, timings)
                _check(ctx)
                bundles = self.hydrate(group, hits, signals, timings, ctx)
                for i, b in zip(idx, bundles, strict=True):
                    out[i] = b
        return [b for b in out if b is not None]

    # -- stages --------------------------------------------------------------------------
    def signals(self, group: Sequence[RetrievalPrefs], ctx: RequestContext | None = None,
                timings: dict[str, float] | None = None) -> SignalRuns:
        """Full-text and vector lists for queries sharing one configuration."""
        timings = timings if timings is not None else {}
        p = group[0]
        texts = [g.query_text for g in group]
        n = len(group)
        text_runs: list[RankedList] = [[] for _ in range(n)]
        vec_runs: list[RankedList] = [[] for _ in range(n)]
        _check(ctx)
        needs_vec = p.mode in ("hybrid", "dense") and p.vector.embed_query
        if needs_vec and self.embedder is None:
            raise ValueError(f"mode {p.mode!r} needs an embedder for the query vector")
        if needs_vec and p.vector.doc_score != "first":
            passage_chunker_id(p.vector)  # an unknown chunker or bad sizes: refused before work
        # BEIR's way: the identical id is dropped from a list retrieved deeper, then the list is
        # cut, so a list keeps its depth (one more per list: a document id is listed once)
        extra = 1 if p.ignore_identical_ids else 0
        fts_k, vec_k = p.fts.top_k + extra, p.vector.top_k + extra
        # never silently one-sided: an empty store, an unfinished ingest or missing vectors
        check_searchable(self.store, self.embedder.model_id if needs_vec and self.embedder
                         else None)
        if p.mode in ("hybrid", "bm25"):
            t0 = time.perf_counter()
            if p.fts.engine == "index":
                bm25 = self.indexes.lexical(p.fts)
                text_runs = bm25.search(texts, fts_k, self.indexes.allowed(bm25.ids, p.filters))
                if p.fts.min_rank is not None:
                    text_runs = [[h for h in run if h[1] >= p.fts.min_rank]
                                 for run in text_runs]
            else:
                text_runs = self.store.fts_search_many(texts, fts_k, p.fts, p.filters)
            timings["fts_ms"] = _ms(t0)
        _check(ctx)
        if needs_vec and self.embedder is not None:
            t0 = time.perf_counter()
            qvecs = self.embedder.embed(texts)
            timings["embed_ms"] = _ms(t0)
            _check(ctx)
            t0 = time.perf_counter()
            if p.vector.doc_score != "first":  # documents scored from their passages
                passages = self.indexes.passages(self.embedder, p.vector)
                vec_runs = passages.search(qvecs, vec_k, p.vector.doc_score,
                                           self.indexes.allowed(passages.ids, p.filters),
                                           p.vector.min_score)
            elif p.vector.engine == "index":
                knn = self.indexes.vectors(self.embedder.model_id, p.vector)
                vec_runs = knn.search(qvecs, vec_k,
                                      self.indexes.allowed(knn.ids, p.filters),
                                      device=embedder_device(self.embedder))
            else:
                vec_runs = self.store.vector_search_many(qvecs, self.embedder.model_id,
                                                         vec_k, p.vector, p.filters)
            timings["vector_ms"] = _ms(t0)
            vec_runs = zero_emptied(vec_runs, qvecs)
        text_runs, vec_runs = blank_emptied(text_runs, texts), blank_emptied(vec_runs, texts)
        if p.ignore_identical_ids:
            text_runs = [without_query_id(run, g.query_id)[:p.fts.top_k]
                         for run, g in zip(text_runs, group, strict=True)]
            vec_runs = [without_query_id(run, g.query_id)[:p.vector.top_k]
                        for run, g in zip(vec_runs, group, strict=True)]
        return SignalRuns(text=text_runs, vec=vec_runs)

    @staticmethod
    def fuse(group: Sequence[RetrievalPrefs], signals: SignalRuns,
             timings: dict[str, float] | None = None) -> list[list[FusedHit]]:
        """Fuse each query's lists under the group's scoring config, cut to ``top_k_items``."""
        p = group[0]
        t0 = time.perf_counter()
        # a batch's hits are 10^4-10^5 tuples: with the collector on, its collections rescan
        # everything alive (a loaded corpus), and a bm25 pass over scifact's 300 queries took
        # 0.15 s against 0.03 s without (benchmarks/retrieval_speed.py)
        with paused_gc():
            if p.mode == "bm25":
                hits = [HybridScorer.single(t, "text", p.top_k_items) for t in signals.text]
            elif p.mode == "dense":
                hits = [HybridScorer.single(v, "vec", p.top_k_items) for v in signals.vec]
            else:
                scorer = HybridScorer(p.scoring)
                hits = [scorer.fuse(t, v, p.top_k_items)
                        for t, v in zip(signals.text, signals.vec, strict=True)]
        if timings is not None:
            timings["fusion_ms"] = _ms(t0)
        return hits

    def hydrate(self, group: Sequence[RetrievalPrefs], hits: list[list[FusedHit]],
                signals: SignalRuns, timings: dict[str, float] | None = None,
                ctx: RequestContext | None = None) -> list[RetrievalBundle]:
        """Turn fused hits into candidates and evidence, with stats."""
        from aiblox.text.snippet import make_snippet

        timings = dict(timings or {})
        t0 = time.perf_counter()
        ids = sorted({h.doc_id for hs in hits for h in hs})
        items = self.store.get_items(ids)
        timings["hydrate_ms"] = _ms(t0)
        bundles = []
        for prefs, hs, t_run, v_run in zip(group, hits, signals.text, signals.vec, strict=True):
            _check(ctx)
            stats: dict[str, Any] = {"counts": {}, "timing_ms": {}}
            evidence: list[EvidenceChunk] = []
            if self.evidence_builder is not None and prefs.chunking.enabled \
                    and prefs.top_k_chunks > 0:
                t1 = time.perf_counter()
                evidence = self.evidence_builder(prefs, hs, items, stats)
                stats["timing_ms"]["chunking_ms"] = _ms(t1)
            best_chunk: dict[str, EvidenceChunk] = {}
            for ev in evidence:  # evidence is best first
                best_chunk.setdefault(ev.item_id, ev)
            candidates = []
            for h in hs:
                item = items.get(h.doc_id)
                if item is None:  # deleted between search and hydrate
                    continue
                snippet: str | None = None
                snippet_from: Literal["doc", "chunk", "unknown"] = "unknown"
                chunk = best_chunk.get(h.doc_id)
                if prefs.snippet.prefer_chunk_snippet and chunk is not None:
                    snippet, snippet_from = make_snippet(chunk.text, prefs.snippet.max_chars), \
                        "chunk"
                elif item.text:
                    snippet, snippet_from = make_snippet(item.text, prefs.snippet.max_chars), "doc"
                candidates.append(CandidateItem(
                    item_id=item.id, kind=item.kind, source=item.source,
                    source_ref=item.source_ref, title=item.title or None,
                    metadata=dict(item.metadata), score=h.score, score_text=h.score_text,
                    score_vec=h.score_vec, rank_text=h.rank_text, rank_vec=h.rank_vec,
                    snippet=snippet, snippet_from=snippet_from))
            counts = {"text_hits": len(t_run), "vector_hits": len(v_run),
                      "candidates": len(candidates), "evidence": len(evidence),
                      **stats["counts"]}
            bundles.append(RetrievalBundle(
                candidates=candidates, evidence=evidence,
                stats=RetrievalStats(
                    timing_ms={**timings, **stats["timing_ms"]},
                    counts=counts,
                    params={"store": self.store.kind, "mode": prefs.mode,
                            "embedder": getattr(self.embedder, "model_id", None),
                            "scoring": prefs.scoring.model_dump(),
                            "fts_top_k": prefs.fts.top_k, "vector_top_k": prefs.vector.top_k,
                            "distance": prefs.vector.distance,
                            # the chunks asked for (fewer may come back): an answer's
                            # retrieval_top_k, read from the bundle (explore.answer_all)
                            "top_k_chunks": prefs.top_k_chunks,
                            # how the run was batched, not what it retrieved: an evidence
                            # pack's observation, outside its id
                            "batch_size": len(group)})))
        return bundles


def _check(ctx: RequestContext | None) -> None:
    if ctx is not None:
        ctx.cancellation.raise_if_cancelled()


def without_query_id(run: RankedList, query_id: str | None) -> RankedList:
    """``run`` without the document whose id is the query's (``ignore_identical_ids``,
    BEIR's protocol; the caller retrieved one deeper and cuts after)."""
    if query_id is None:
        raise ValueError("ignore_identical_ids needs prefs.query_id")
    return [(d, s) for d, s in run if d != query_id]


def blank_emptied(runs: list[RankedList], texts: Sequence[str]) -> list[RankedList]:
    """``runs`` (one per query text) with a query of no text retrieving nothing, as a topic
    with no run lines in trec_eval: an empty string's vector, or feedback's terms or vector
    for it, is not a query."""
    return [run if text.strip() else [] for run, text in zip(runs, texts, strict=True)]


def zero_emptied(runs: list[RankedList], vectors: np.ndarray) -> list[RankedList]:
    """``runs`` (one per query vector) with a query whose vector is all zeros retrieving
    nothing: its cosine with every document is 0 (undefined), and a list of documents at score
    0 in id order would earn credit for nothing (the hashing embedder's vector of a query with
    no letter or digit)."""
    empty = ~np.any(np.asarray(vectors) != 0, axis=1)
    return [[] if e else run for run, e in zip(runs, empty.tolist(), strict=True)]


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
