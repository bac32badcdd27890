"""A persistent embedding cache keyed by (model id, sha256 of the exact text embedded).

The cache itself lives in a store (``EmbeddingCache`` is the protocol every store implements);
:class:`CachedEmbedder` puts it in front of any :class:`Embedder`, so nothing is embedded twice,
documents and queries alike.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Protocol

import numpy as np

from aiblox.embedding.base import Embedder
from aiblox.embedding.device import embedder_device
from aiblox.hashing import sha256_text
from aiblox.progress import progress_bar

__all__ = ["CachedEmbedder", "EmbeddingCache", "InMemoryEmbeddingCache"]


class EmbeddingCache(Protocol):
    """Storage for vectors by (model id, text sha256)."""

    def get_embeddings(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``text_hashes`` (missing ones are absent)."""
        ...

    def cached_hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        """The hashes among ``text_hashes`` that have a cached vector (none is read)."""
        ...

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
                       replace: bool = False) -> int:
        """Store ``(text_sha256, vector)`` rows; returns how many were new. A row whose hash
        is cached already is skipped, or with ``replace`` replaces the cached vector (then
        every row given counts as written)."""
        ...


class InMemoryEmbeddingCache:
    """A dict-backed :class:`EmbeddingCache`, for tests and throwaway runs."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], np.ndarray] = {}

    def get_embeddings(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return {h: self._rows[(model_id, h)] for h in text_hashes if (model_id, h) in self._rows}

    def cached_hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        return {h for h in text_hashes if (model_id, h) in self._rows}

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
                       replace: bool = False) -> int:
        written = 0
        for h, vec in rows:
            if replace or (model_id, h) not in self._rows:
                written += 1
                self._rows[(model_id, h)] = np.asarray(vec, dtype=np.float32)
        return written


class CachedEmbedder:
    """An embedder that looks every text up in a cache first and stores what it computes."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache, batch_size: int = 256,
                 progress: bool = False) -> None:
        self.embedder = embedder
        self.cache = cache
        self.batch_size = batch_size
        self.progress = progress
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def device(self) -> str:
        """The device the embedder runs its model on (``cpu`` for one that runs none)."""
        return embedder_device(self.embedder)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, from the cache where possible."""
        hashes = [sha256_text(t) for t in texts]
        unique = sorted(set(hashes))
        found = self.cache.get_embeddings(self.model_id, unique)
        found.update(self._embed_missing(texts, hashes, unique, found))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([np.asarray(found[h], dtype=np.float32) for h in hashes])

    def ensure_cached(self, texts: Sequence[str], hashes: Sequence[str] | None = None
                      ) -> list[str]:
        """Make the cache hold a vector of each of ``texts`` (``hashes``: their sha256, when
        known), embedding the texts it lacks as :meth:`embed` does (and counting hits and
        misses alike), without reading a cached vector; returns the texts' hashes. An ingest
        then copies the vectors inside the store (:meth:`Store.set_item_vectors_from_cache`)."""
        hashes = list(hashes) if hashes is not None else [sha256_text(t) for t in texts]
        unique = sorted(set(hashes))
        held = self.cache.cached_hashes(self.model_id, unique)
        self._embed_missing(texts, hashes, unique, held)
        return hashes

    def _embed_missing(self, texts: Sequence[str], hashes: Sequence[str], unique: list[str],
                       cached: Container[str]) -> dict[str, np.ndarray]:
        """Embed the texts whose hashes (``unique``: those of ``hashes``, once each) are not
        ``cached`` and store their vectors; returns them. The cached ones count as hits."""
        todo = [h for h in unique if h not in cached]
        self.hits += len(unique) - len(todo)
        self.misses += len(todo)
        made: dict[str, np.ndarray] = {}
        if not todo:
            return made
        text_of = dict(zip(hashes, texts, strict=True))
        bar = progress_bar(len(todo), f"embedding ({self.model_id} on {self.device})",
                           unit="text", enabled=self.progress)
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            vectors = self.embedder.embed([text_of[h] for h in batch])
            rows = list(zip(batch, vectors, strict=True))
            self.cache.put_embeddings(self.model_id, rows)
            made.update(rows)
            bar.update(len(batch))
        bar.close()
        return made
