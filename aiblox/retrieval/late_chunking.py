"""Late chunking: chunk-level evidence cut from the candidate documents at query time.

The retriever seed's pipeline, for the top ``top_k_items`` candidates of one query:

1. get each document's full text (``ItemRecord.text``; chunk offsets index into it);
2. get its chunks and their vectors from the chunk cache, or make them with the chunker the
   ``ChunkingConfig`` names (:func:`aiblox.chunking.make_chunker`) and embed them through the
   (cached) embedder, writing the entry back;
3. score every chunk against the query: ``w_vec * cosine + w_text * bm25 / max(bm25)``, with
   BM25 (:func:`aiblox.text.bm25_scores`) computed over the pooled candidate chunks (vector
   dominant: 0.8 / 0.2 by default); ``score_vec`` and ``score_text`` keep the raw signals;
4. keep each document's best ``per_item_chunk_cap`` chunks;
5. pool and rank them globally (score desc, then chunk id asc);
6. return the top ``top_k_chunks`` as :class:`EvidenceChunk`.

Strategies (``ChunkingConfig.strategy``):

* ``late``: chunks made at query time (through the chunk cache, per ``CacheConfig``);
* ``precomputed``: only chunks written at ingest by :meth:`LateChunker.precompute`; a document
  without them (never precomputed, changed since, or a damaged entry) gives no evidence and is
  counted as ``precomputed_missing``;
* ``mixed``: precomputed chunks where a document has them, late chunks for the rest.

Cache entries are checked on every read: the payload hash (by the cache) and that every chunk
slices back to the document's current text (here). A failing entry is counted, not served, and
rebuilt. Counts added to ``stats["counts"]``: ``chunk_cache_hits``, ``chunk_cache_misses``
(documents chunked and embedded now), ``chunk_cache_corrupt``, ``chunk_cache_expired``,
``chunk_cache_writes``, ``precomputed_hits``, ``precomputed_missing``, ``chunks_scored``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiblox.chunking.base import Chunk, Chunker, to_evidence_chunk
from aiblox.chunking.registry import ChunkerRegistry, make_chunker
from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import ChunkingConfig, EvidenceChunk, RetrievalPrefs
from aiblox.embedding.base import Embedder
from aiblox.embedding.cache import CacheReadOnly, not_kept
from aiblox.fusion.types import FusedHit
from aiblox.retrieval.retriever import HybridRetriever
from aiblox.stores.base import Store
from aiblox.stores.chunk_cache import (
    ChunkCache,
    ChunkCacheEntry,
    ChunkCacheKey,
    default_chunk_cache,
)
from aiblox.text.lexical import ANALYZER_ID, bm25_scores
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = [
    "COUNT_KEYS",
    "LateChunker",
    "NO_EMBEDDER",
    "ScoredChunk",
    "default_chunk_cache",
    "make_retriever",
]

NO_EMBEDDER = "none"
"""Embedding model id in cache keys when the late chunker has no embedder (text scores only)."""

COUNT_KEYS = (
    "chunk_cache_corrupt",
    "chunk_cache_expired",
    "chunk_cache_hits",
    "chunk_cache_misses",
    "chunk_cache_writes",
    "chunks_scored",
    "precomputed_hits",
    "precomputed_missing",
)
"""Counts the late chunker adds to ``stats["counts"]`` (always all of them)."""


@dataclass(frozen=True)
class ScoredChunk:
    """A candidate chunk with its blended score and the raw signals behind it."""

    chunk: Chunk
    score: float
    score_text: float
    score_vec: float | None

    def to_evidence(self) -> EvidenceChunk:
        """The retrieval contract's evidence chunk."""
        return to_evidence_chunk(
            self.chunk, self.score, score_text=self.score_text, score_vec=self.score_vec,
            anchors={"position": self.chunk.position, "chunker_id": self.chunk.chunker_id})


def _add(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _slices_back(entry: ChunkCacheEntry, text: str) -> bool:
    return all(text[c.start_idx:c.end_idx] == c.text for c in entry.chunks)


class LateChunker:
    """The evidence builder the :class:`HybridRetriever` calls: ``(prefs, hits, items, stats)``.

    ``embedder`` should be the retriever's (cached) embedder, so chunk vectors and query vectors
    share one space; None scores chunks by text alone. ``chunk_cache`` None: no cache (every
    query chunks and embeds again).
    """

    def __init__(self, embedder: Embedder | None, chunk_cache: ChunkCache | None = None,
                 registry: ChunkerRegistry | None = None, encoding: str = DEFAULT_ENCODING,
                 w_vec: float = 0.8, w_text: float = 0.2) -> None:
        if w_vec < 0 or w_text < 0 or w_vec + w_text <= 0:
            raise ValueError(f"late chunking weights must be >= 0 with a positive sum, got "
                             f"w_vec={w_vec}, w_text={w_text}")
        self.embedder = embedder
        self.chunk_cache = chunk_cache
        self.registry = registry
        self.encoding = encoding
        self.w_vec = w_vec
        self.w_text = w_text
        self._chunkers: dict[str, Chunker] = {}
        self._text_only: LateChunker | None = None
        self.keeps = True
        """False once the chunk cache refused the chunks a search made (a read-only store:
        :class:`~aiblox.embedding.cache.CacheReadOnly`): they are used, not kept, and later
        ones are not offered to it."""

    # -- parts -----------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """Embedding model id used in cache keys."""
        return NO_EMBEDDER if self.embedder is None else self.embedder.model_id

    @property
    def params(self) -> dict[str, Any]:
        """What decides chunk scores besides the prefs (for run configs and hashes)."""
        return {"w_vec": self.w_vec, "w_text": self.w_text, "text_signal": "bm25",
                "analyzer": ANALYZER_ID, "embedder": self.model_id, "encoding": self.encoding}

    def text_only(self) -> LateChunker:
        """This late chunker without its embedder (itself when it has none): chunks ranked
        by their BM25 alone, over the same cache, registry, encoding and weights, as a bm25
        retrieval ranks them (``aiblox eval --mode bm25 --chunks``, ``aiblox search``)."""
        if self.embedder is None:
            return self
        if self._text_only is None:
            self._text_only = LateChunker(None, self.chunk_cache, registry=self.registry,
                                          encoding=self.encoding, w_vec=self.w_vec,
                                          w_text=self.w_text)
        return self._text_only

    def chunker_for(self, config: ChunkingConfig) -> Chunker:
        """The chunker ``config`` names (memoised by config)."""
        memo = config.model_dump_json()
        if memo not in self._chunkers:
            self._chunkers[memo] = make_chunker(config, self.encoding, self.registry)
        return self._chunkers[memo]

    def key(self, item: ItemRecord, chunker: Chunker) -> ChunkCacheKey:
        """The cache key of ``item``'s chunks under ``chunker`` and this embedder."""
        return ChunkCacheKey(item.id, item.content_hash, chunker.chunker_id, self.model_id)

    def _build(self, items: Sequence[ItemRecord], chunker: Chunker,
               precomputed: bool = False) -> dict[str, ChunkCacheEntry]:
        per_item = [(it, chunker.chunk(it.id, it.text, it.content_hash)) for it in items]
        texts = [c.text for _, chunks in per_item for c in chunks]
        if self.embedder is None:
            vectors = np.zeros((len(texts), 1), dtype=np.float32)
        else:
            vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
            if not texts:
                vectors = np.zeros((0, self.embedder.dim), dtype=np.float32)
        out: dict[str, ChunkCacheEntry] = {}
        row = 0
        for it, chunks in per_item:
            out[it.id] = ChunkCacheEntry(key=self.key(it, chunker), chunks=chunks,
                                         vectors=vectors[row:row + len(chunks)],
                                         precomputed=precomputed)
            row += len(chunks)
        return out

    def prepare(self, prefs: RetrievalPrefs, items: Sequence[ItemRecord],
                counts: dict[str, int] | None = None) -> dict[str, ChunkCacheEntry]:
        """Chunks and vectors of ``items`` under ``prefs.chunking`` and ``prefs.cache``.

        One cache lookup, one embedding call and one cache write for all of them, so callers
        evaluating many queries prepare the union of their candidates once. Returns
        ``{item_id: entry}``; with the ``precomputed`` strategy, items without precomputed
        chunks are absent.
        """
        counts = counts if counts is not None else {}
        for k in COUNT_KEYS:
            counts.setdefault(k, 0)
        unique = {it.id: it for it in items}
        items = [unique[i] for i in sorted(unique)]
        chunker = self.chunker_for(prefs.chunking)
        strategy = prefs.chunking.strategy
        keys = {it.id: self.key(it, chunker) for it in items}
        out: dict[str, ChunkCacheEntry] = {}
        todo = list(items)
        if strategy in ("precomputed", "mixed"):
            found = self.chunk_cache.get_many(list(keys.values()), precomputed_only=True) \
                if self.chunk_cache is not None else None
            rest = []
            for it in todo:
                entry = found.hits.get(keys[it.id]) if found is not None else None
                if entry is not None and _slices_back(entry, it.text):
                    out[it.id] = entry
                    _add(counts, "precomputed_hits")
                    continue
                if found is not None and (keys[it.id] in found.corrupt or entry is not None):
                    _add(counts, "chunk_cache_corrupt")
                if strategy == "precomputed":
                    _add(counts, "precomputed_missing")
                else:
                    rest.append(it)
            todo = rest
        if not todo:
            return out
        if self.chunk_cache is not None and prefs.cache.use_chunk_cache:
            found = self.chunk_cache.get_many([keys[it.id] for it in todo],
                                              ttl_seconds=prefs.cache.ttl_seconds)
            _add(counts, "chunk_cache_expired", len(found.expired))
            rest = []
            for it in todo:
                key = keys[it.id]
                entry = found.hits.get(key)
                if entry is not None and _slices_back(entry, it.text):
                    out[it.id] = entry
                    _add(counts, "chunk_cache_hits")
                    continue
                if key in found.corrupt or entry is not None:
                    _add(counts, "chunk_cache_corrupt")
                rest.append(it)
            todo = rest
        built = self._build(todo, chunker)
        _add(counts, "chunk_cache_misses", len(built))
        if self.chunk_cache is not None and prefs.cache.write_chunk_cache and built \
                and self.keeps:
            try:
                _add(counts, "chunk_cache_writes", self.chunk_cache.put_many(built.values()))
            except CacheReadOnly as exc:
                self.keeps = False
                not_kept(exc, "chunks")
        out.update(built)
        return out

    def precompute(self, items: Sequence[ItemRecord], config: ChunkingConfig,
                   batch_size: int = 500) -> int:
        """Make and store the chunks of ``items`` at ingest (for the ``precomputed`` and
        ``mixed`` strategies); items whose valid precomputed entry exists are skipped.
        Returns the number of entries written."""
        if self.chunk_cache is None:
            raise ValueError("precomputing chunks needs a chunk cache to hold them")
        chunker = self.chunker_for(config)
        written = 0
        for start in range(0, len(items), batch_size):
            batch = list(items[start:start + batch_size])
            found = self.chunk_cache.get_many([self.key(it, chunker) for it in batch],
                                              precomputed_only=True)
            todo = [it for it in batch if self.key(it, chunker) not in found.hits]
            if todo:
                written += self.chunk_cache.put_many(
                    self._build(todo, chunker, precomputed=True).values())
        return written

    # -- scoring ---------------------------------------------------------------------------
    def query_vector(self, query_text: str) -> np.ndarray | None:
        """The query's vector (through the embedding cache), None without an embedder."""
        if self.embedder is None:
            return None
        return np.asarray(self.embedder.embed([query_text])[0], dtype=np.float32)

    def rank(self, prefs: RetrievalPrefs, hits: Sequence[FusedHit],
             items: dict[str, ItemRecord], counts: dict[str, int] | None = None,
             prepared: dict[str, ChunkCacheEntry] | None = None,
             query_vector: np.ndarray | None = None) -> list[ScoredChunk]:
        """Every candidate's best ``per_item_chunk_cap`` chunks, pooled, best first (score
        desc, chunk id asc); not cut to ``top_k_chunks``.

        ``prepared`` (from :meth:`prepare`) must hold the candidates' entries; without it
        they are prepared here. ``query_vector`` defaults to the embedded query text.
        """
        counts = counts if counts is not None else {}
        candidates = [items[h.doc_id] for h in hits[:prefs.top_k_items] if h.doc_id in items]
        if prepared is None:
            prepared = self.prepare(prefs, candidates, counts)
        else:
            for k in COUNT_KEYS:
                counts.setdefault(k, 0)
        pool: list[Chunk] = []
        vecs: list[np.ndarray] = []
        for it in candidates:
            entry = prepared.get(it.id)
            if entry is None:
                continue
            pool.extend(entry.chunks)
            vecs.append(entry.vectors)
        _add(counts, "chunks_scored", len(pool))
        if not pool:
            return []
        lexical = np.asarray(bm25_scores(prefs.query_text, [c.text for c in pool]),
                             dtype=np.float64)
        top = float(lexical.max())
        text_norm = lexical / top if top > 0 else np.zeros_like(lexical)
        if self.embedder is None:
            cosine = None
            blended = text_norm
        else:
            qvec = query_vector if query_vector is not None else self.query_vector(
                prefs.query_text)
            cosine = np.concatenate(vecs).astype(np.float64) @ np.asarray(qvec, np.float64)
            total = self.w_vec + self.w_text
            blended = (self.w_vec * cosine + self.w_text * text_norm) / total
        scored = [ScoredChunk(c, float(blended[i]), float(lexical[i]),
                              None if cosine is None else float(cosine[i]))
                  for i, c in enumerate(pool)]
        scored.sort(key=lambda s: (-s.score, s.chunk.chunk_id))
        taken: dict[str, int] = {}
        out = []
        for s in scored:
            n = taken.get(s.chunk.item_id, 0)
            if n < prefs.per_item_chunk_cap:
                taken[s.chunk.item_id] = n + 1
                out.append(s)
        return out

    def __call__(self, prefs: RetrievalPrefs, hits: list[FusedHit],
                 items: dict[str, ItemRecord], stats: dict[str, Any]) -> list[EvidenceChunk]:
        """The evidence builder hook: the top ``top_k_chunks`` evidence chunks."""
        ranked = self.rank(prefs, hits, items, stats.setdefault("counts", {}))
        return [s.to_evidence() for s in ranked[:prefs.top_k_chunks]]


def make_retriever(store: Store, embedder: Embedder | None,
                   chunk_cache: ChunkCache | None = None, **late_params: Any
                   ) -> HybridRetriever:
    """A :class:`HybridRetriever` with a :class:`LateChunker` as its evidence builder.

    ``chunk_cache`` None: the store's own (see :func:`default_chunk_cache`). Extra keyword
    arguments go to :class:`LateChunker` (``w_vec``, ``w_text``, ``registry``, ``encoding``).
    """
    cache = chunk_cache if chunk_cache is not None else default_chunk_cache(store)
    return HybridRetriever(store, embedder, evidence_builder=LateChunker(embedder, cache,
                                                                         **late_params))
