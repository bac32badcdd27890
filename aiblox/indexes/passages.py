"""Dense document scores from passages: a document scored by the best of its passages' cosines
(MaxP, Dai and Callan, "Deeper Text Understanding for IR with Contextual Neural Language
Modeling", SIGIR 2019) or by the mean of its ``k`` best (``mean_top<k>``).

A model reads only so much of a text (all-MiniLM-L6-v2: 256 word pieces), so a document's own
vector sees its beginning only. Here every document's embedded text
(:func:`aiblox.contracts.embedding_text`, the text its own vector is made from) is cut into
passages by a registered chunker (``VectorConfig.passage_chunker``, ``passage_tokens``,
``passage_overlap``), each passage is embedded once, and a query is scored exactly against every
passage, then aggregated per document.

Where vectors come from: the store's chunk cache holds each document's passages and their
vectors (:func:`passage_cache_key`: item id, the item's content hash, the chunker id with its
parameters, and the model id marked as the embedded text's); a document not found there is
chunked and its passages embedded through the embedder given (the store's cached embedder,
whose cache is keyed by the text's sha256), so a passage text is embedded once ever, and a
document that is a single passage has exactly its own text, hence its own whole-document vector
from the embedding cache. Then the entries are written back to the chunk cache.

Scores are float64 inner products of the stored float32 vectors (cosines: the vectors are unit
length), so they do not depend on a BLAS's float32 rounding; lists are ordered by score desc,
then id asc, like every ranked list of the project.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiblox.chunking import Chunker, make_chunker
from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import ChunkingConfig, VectorConfig
from aiblox.embedding.base import Embedder
from aiblox.embedding.cache import CacheReadOnly, not_kept
from aiblox.stores.chunk_cache import ChunkCache, ChunkCacheEntry, ChunkCacheKey

__all__ = ["PASSAGE_TEXT", "PassageIndex", "PassageStats", "passage_cache_key", "passage_chunker",
           "passage_chunker_id"]

RankedList = list[tuple[str, float]]

_BATCH_DOCS = 512
"""Documents looked up, chunked and embedded at a time while building (bounded memory, and
the cache written as it goes: an interrupted build loses one batch of work)."""
_CELLS = 1 << 22
"""Query-passage scores held at a time while searching (float64: 32 MiB)."""


def passage_chunker(cfg: VectorConfig) -> Chunker:
    """The chunker ``cfg`` cuts passages with (raises for an unknown chunker or bad sizes)."""
    return make_chunker(ChunkingConfig(chunker_id=cfg.passage_chunker,
                                       max_chunk_tokens=cfg.passage_tokens,
                                       overlap_tokens=cfg.passage_overlap))


def passage_chunker_id(cfg: VectorConfig) -> str | None:
    """The passage chunker's id (name, parameters, encoding, version), None for ``first``."""
    return None if cfg.doc_score == "first" else passage_chunker(cfg).chunker_id


PASSAGE_TEXT = "embedding_text"
"""What passages are cut from, named after the model id in their chunk cache keys."""


def passage_cache_key(item: ItemRecord, chunker_id: str, model_id: str) -> ChunkCacheKey:
    """The chunk cache key of ``item``'s passages: its id and content hash (the hash an ingest
    prunes the cache against, so passages of documents left alone survive an update of
    another; they were keyed by the sha256 of the embedded text, which no prune kept), the
    chunker id, and ``model_id`` marked with :data:`PASSAGE_TEXT`: the late chunker keys a
    document's evidence chunks, cut from its text alone, by the same id, hash and maybe
    chunker, and neither may read the other's entries."""
    return ChunkCacheKey(item.id, item.content_hash, chunker_id, f"{model_id}@{PASSAGE_TEXT}")


@dataclass
class PassageStats:
    """What one build did (for progress reports and tests)."""

    documents: int = 0
    passages: int = 0
    cache_hits: int = 0
    """Documents whose passages (and vectors) came from the chunk cache."""
    chunked: int = 0
    """Documents chunked, their passages embedded (through the embedding cache) now."""
    written: int = 0
    """Chunk cache entries written."""


class PassageIndex:
    """Every document's passages and their vectors, searched exactly, aggregated per document.

    ``ids`` are the documents (sorted), ``vectors`` the passages' (rows grouped by document, in
    text order) and ``owner[i]`` the position in ``ids`` of passage ``i``'s document."""

    def __init__(self, ids: list[str], vectors: np.ndarray, owner: np.ndarray,
                 chunker_id: str, model_id: str) -> None:
        self.ids = ids
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.chunker_id = chunker_id
        self.model_id = model_id
        counts = np.bincount(self.owner, minlength=len(ids)) if len(self.owner) else \
            np.zeros(len(ids), dtype=np.int64)
        self.counts = counts.astype(np.int64)
        """Passages per document."""
        self._starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64) \
            if len(ids) else np.zeros(0, dtype=np.int64)
        self._id_rank = np.argsort(np.argsort(np.asarray(ids, dtype=object), kind="stable"),
                                   kind="stable") if ids else np.zeros(0, dtype=np.int64)

    @property
    def n_passages(self) -> int:
        return int(len(self.owner))

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def build(cls, items: Iterable[ItemRecord], cfg: VectorConfig, embedder: Embedder,
              chunk_cache: ChunkCache | None = None, progress: Any = None,
              stats: PassageStats | None = None) -> PassageIndex:
        """Passages of ``items`` under ``cfg`` (see the module doc). ``progress(n)`` is called
        with each batch's document count."""
        chunker = passage_chunker(cfg)
        stats = stats if stats is not None else PassageStats()
        per_doc: dict[str, np.ndarray] = {}
        batch: list[ItemRecord] = []
        for item in items:
            batch.append(item)
            if len(batch) >= _BATCH_DOCS:
                per_doc.update(cls._batch(batch, chunker, embedder, chunk_cache, stats))
                if progress is not None:
                    progress(len(batch))
                batch = []
        if batch:
            per_doc.update(cls._batch(batch, chunker, embedder, chunk_cache, stats))
            if progress is not None:
                progress(len(batch))
        ids = sorted(per_doc)
        dim = int(embedder.dim)
        parts = [per_doc[i] for i in ids]
        vectors = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
        owner = np.repeat(np.arange(len(ids), dtype=np.int64), [len(p) for p in parts])
        stats.documents, stats.passages = len(ids), int(len(owner))
        return cls(ids, vectors, owner, chunker.chunker_id, embedder.model_id)

    @staticmethod
    def _batch(items: Sequence[ItemRecord], chunker: Chunker, embedder: Embedder,
               cache: ChunkCache | None, stats: PassageStats) -> dict[str, np.ndarray]:
        texts = {it.id: it.embedding_text for it in items}
        keys = {it.id: passage_cache_key(it, chunker.chunker_id, embedder.model_id)
                for it in items}
        out: dict[str, np.ndarray] = {}
        found = cache.get_many(list(keys.values())).hits if cache is not None else {}
        todo = []
        for it in items:
            entry = found.get(keys[it.id])
            text = texts[it.id]
            if entry is not None and all(text[c.start_idx:c.end_idx] == c.text
                                         for c in entry.chunks):
                out[it.id] = np.asarray(entry.vectors, dtype=np.float32)
                stats.cache_hits += 1
            else:
                todo.append(it)
        if not todo:
            return out
        chunks = {it.id: chunker.chunk(it.id, texts[it.id], keys[it.id].content_hash)
                  for it in todo}
        flat = [c.text for it in todo for c in chunks[it.id]]
        vectors = (np.asarray(embedder.embed(flat), dtype=np.float32) if flat
                   else np.zeros((0, embedder.dim), dtype=np.float32))
        entries = []
        row = 0
        for it in todo:
            n = len(chunks[it.id])
            out[it.id] = vectors[row:row + n]
            entries.append(ChunkCacheEntry(key=keys[it.id], chunks=chunks[it.id],
                                           vectors=vectors[row:row + n]))
            row += n
        stats.chunked += len(todo)
        if cache is not None:
            try:
                stats.written += cache.put_many(entries)
            except CacheReadOnly as exc:  # a read-only store: the index is built all the same
                not_kept(exc, "passages")
        return out

    # -- searching -----------------------------------------------------------------------------
    def doc_scores(self, queries: np.ndarray, doc_score: str) -> np.ndarray:
        """``(len(queries), len(ids))`` float64 document scores (``-inf`` for a document without
        passages), for ``doc_score`` ``maxp`` or ``mean_top<k>``."""
        cfg = VectorConfig(doc_score=doc_score)  # validates the name
        if cfg.doc_score == "first":
            raise ValueError("doc_score 'first' is the document's own vector, not its passages")
        k = cfg.passage_k
        q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
        nd = len(self.ids)
        out = np.full((len(q), nd), -np.inf, dtype=np.float64)
        if self.n_passages == 0 or len(q) == 0:
            return out
        if q.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"query vectors have {q.shape[1]} dimensions, the passages "
                             f"{self.vectors.shape[1]}")
        has = self.counts > 0
        starts = self._starts[has]
        step = max(1, _CELLS // max(1, self.n_passages))
        p64 = self.vectors.astype(np.float64)
        for start in range(0, len(q), step):
            s = q[start:start + step] @ p64.T  # (b, passages)
            if k == 1:
                out[start:start + step, has] = np.maximum.reduceat(s, starts, axis=1)
            else:
                out[start:start + step] = self._mean_top(s, k)
        return out

    def _mean_top(self, s: np.ndarray, k: int) -> np.ndarray:
        """Mean of each document's ``min(k, passages)`` best scores, for a block of queries."""
        nd = len(self.ids)
        out = np.full((len(s), nd), -np.inf, dtype=np.float64)
        # documents grouped by passage count: a (b, docs, count) array per group
        for count in np.unique(self.counts[self.counts > 0]):
            docs = np.flatnonzero(self.counts == count)
            cols = self._starts[docs][:, None] + np.arange(count)[None, :]
            block = s[:, cols]  # (b, docs, count)
            take = min(k, int(count))
            if take < count:
                block = -np.partition(-block, take - 1, axis=2)[:, :, :take]
            out[:, docs] = block.sum(axis=2) / take
        return out

    def search(self, queries: np.ndarray, k: int, doc_score: str,
               allowed: np.ndarray | None = None, min_score: float | None = None
               ) -> list[RankedList]:
        """The top ``k`` documents per query vector by ``doc_score``, best first (score desc,
        id asc); ``allowed`` masks documents (positions in ``ids``)."""
        scores = self.doc_scores(queries, doc_score)
        out: list[RankedList] = []
        want = min(int(k), len(self.ids))
        for row in scores:
            if allowed is not None:
                row = np.where(allowed, row, -np.inf)
            valid = np.isfinite(row)
            if min_score is not None:
                valid &= row >= min_score
            pos = np.flatnonzero(valid)
            if len(pos) > want:  # every document tied with the k-th is kept for the order
                kth = np.partition(row[pos], len(pos) - want)[len(pos) - want]
                pos = pos[row[pos] >= kth]
            order = np.lexsort((self._id_rank[pos], -row[pos]))[:want]
            out.append([(self.ids[i], float(row[i])) for i in pos[order]])
        return out
