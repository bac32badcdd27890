"""A persistent embedding cache keyed by (model id, sha256 of the exact text embedded).

The cache itself lives in a store (``EmbeddingCache`` is the protocol every store implements);
:class:`CachedEmbedder` puts it in front of any :class:`Embedder`, so nothing is embedded twice,
documents and queries alike.

A cached vector is checked where it is read (:func:`damaged_vectors`: another length than the
model's dimension, or a value not finite, as a row edited or written by a faulty program has):
a damaged one is never served but counted (:attr:`CachedEmbedder.damaged`, with one warning
naming the cache), embedded again and replaced, as the chunk cache does with a corrupt entry.
An ingest into the store that is the cache reads no cached vector here
(:meth:`CachedEmbedder.ensure_cached`): the store checks each as it copies it into the item
vectors and names the damaged ones, which :meth:`CachedEmbedder.embed_again` replaces. What the
embedder gives is checked the same way before it is cached, so a damaged row is never
written here. The check is vectorised over the vectors read (their lengths in one array, then
the squared norms of the matrix :meth:`CachedEmbedder.embed` stacks anyway): measured at 100,000
cached vectors of 384 dimensions, which a DuckDB store read in 0.77 s, the stack and the check
took 0.15 s where the stack alone took 0.13 s; for a query batch, microseconds.

A cache its owner may only read (a PostgreSQL role granted only ``SELECT``) refuses a write with
:class:`CacheReadOnly`: what is computed through the cache at search time (a query's vector, a
document's chunks, a reranker's scores) is used all the same and not kept, said once in a
warning (:func:`not_kept`); a write that something reads back (an ingest copies its vectors from
the cache) fails with it.
"""

from __future__ import annotations

import warnings
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np

from aiblox.embedding.base import Embedder
from aiblox.embedding.device import embedder_device
from aiblox.hashing import sha256_text
from aiblox.progress import progress_bar

__all__ = ["CacheReadOnly", "CachedEmbedder", "EmbeddingCache", "InMemoryEmbeddingCache",
           "damaged_vectors", "finite_rows", "not_kept"]


def damaged_vectors(found: Mapping[str, np.ndarray], dim: int) -> set[str]:
    """The keys of ``found`` whose vector is damaged: not of length ``dim``, or its squared L2
    norm not a finite float32 (a NaN, an infinity, or values so large their squares overflow,
    past about 1.8e19: no unit vector has one).
    Vectorised: the lengths in one array, then the others' norms at once."""
    bad = _wrong_length(found, dim)
    keys = [h for h in found if h not in bad]
    if keys:
        rows = finite_rows(np.stack([found[h] for h in keys]).astype(np.float32, copy=False))
        bad.update(keys[i] for i in np.flatnonzero(~rows))
    return bad


def finite_rows(matrix: np.ndarray) -> np.ndarray:
    """Whether each row of the float32 ``matrix`` has a finite squared L2 norm (every value
    finite, none past about 1.8e19): one pass (``einsum``, 6 ms for 100,000 rows of 384, where
    ``isfinite(...).all(axis=1)`` took 14 ms). A DuckDB store checks a cached vector alike as
    it copies it (:mod:`aiblox.stores.duckdb_vectors`)."""
    with np.errstate(all="ignore"):
        return np.isfinite(np.einsum("ij,ij->i", matrix, matrix))


def _wrong_length(found: Mapping[str, np.ndarray], dim: int) -> set[str]:
    """The keys of ``found`` whose vector (1-D) is not of length ``dim``."""
    keys = list(found)
    sizes = np.fromiter(map(len, found.values()), dtype=np.int64, count=len(keys))
    return {keys[i] for i in np.flatnonzero(sizes != dim)}


class CacheReadOnly(RuntimeError):
    """A cache write its owner refuses for want of permission (PostgreSQL's
    ``insufficient_privilege``: :class:`aiblox.stores.StoreReadOnly` is one); the message names
    the store and what was written."""


def not_kept(exc: CacheReadOnly, what: str) -> None:
    """Warn that the ``what`` (``vectors``, ``chunks``, ``scores``) computed now are not kept in
    the cache that refused them (``exc``), and are computed again next time."""
    warnings.warn(f"{exc}: the {what} computed now are used and not kept (computed again "
                  f"next time)", stacklevel=3)


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
        self.damaged = 0
        """Cached vectors found damaged (:func:`damaged_vectors`), embedded again and replaced
        (each counted as a miss too)."""
        self.keeps = True
        """False once the cache refused the vectors :meth:`embed` made (:class:`CacheReadOnly`):
        later ones are not offered to it."""

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
        """Vectors for ``texts``, from the cache where possible; a damaged cached vector
        (:func:`damaged_vectors`) is embedded again and replaced; those a read-only cache
        refuses (:class:`CacheReadOnly`) are returned and not kept, said once."""
        hashes = [sha256_text(t) for t in texts]
        unique = sorted(set(hashes))
        found = self.cache.get_embeddings(self.model_id, unique)
        wrong = _wrong_length(found, self.dim)
        for h in wrong:
            del found[h]
        found.update(self._embed_missing(texts, hashes, unique, found, wrong, tolerant=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.stack([np.asarray(found[h], dtype=np.float32) for h in hashes])
        finite = finite_rows(out)  # on the rows stacked anyway: one more pass
        if finite.all():
            self._count_damaged(len(wrong))
            return out
        rows = np.flatnonzero(~finite)  # cached ones (what was embedded now is checked)
        bad = sorted({hashes[i] for i in rows})
        self._count_damaged(len(wrong) + len(bad))
        self.hits -= len(bad)  # counted as hits above: misses now
        made = self._embed_missing(texts, hashes, bad, (), set(bad), tolerant=True)
        for i in rows:
            out[i] = made[hashes[i]]
        return out

    def ensure_cached(self, texts: Sequence[str], hashes: Sequence[str] | None = None
                      ) -> list[str]:
        """Make the cache hold a vector of each of ``texts`` (``hashes``: their sha256, when
        known), embedding the texts it lacks as :meth:`embed` does (and counting hits and
        misses alike), without reading a cached vector; returns the texts' hashes. An ingest
        then copies the vectors inside the store (:meth:`Store.set_item_vectors_from_cache`),
        which checks each as it copies it: a damaged one comes back to :meth:`embed_again`;
        so a cache that refuses them (:class:`CacheReadOnly`) fails it. Checking here would
        read every cached vector twice (measured in a cache of 300,000: a batch of 2,000
        hashes looked up in 35 ms by their column alone, in 1.2 s with their vectors
        checked)."""
        hashes = list(hashes) if hashes is not None else [sha256_text(t) for t in texts]
        unique = sorted(set(hashes))
        held = self.cache.cached_hashes(self.model_id, unique)
        self._embed_missing(texts, hashes, unique, held)
        return hashes

    def embed_again(self, texts: Sequence[str], hashes: Sequence[str] | None = None) -> None:
        """Embed ``texts`` (``hashes``: their sha256, when known) and replace their cached
        vectors, which a reader found damaged (a store copying them into item vectors): counted
        as damaged and as misses, no longer as the hits :meth:`ensure_cached` counted them."""
        hashes = list(hashes) if hashes is not None else [sha256_text(t) for t in texts]
        unique = sorted(set(hashes))
        self._count_damaged(len(unique))
        self.hits = max(self.hits - len(unique), 0)
        self._embed_missing(texts, hashes, unique, (), set(unique))

    def _count_damaged(self, n: int) -> None:
        """Count ``n`` damaged cached vectors, with a warning naming the cache."""
        if not n:
            return
        self.damaged += n
        where = getattr(self.cache, "location", None)
        warnings.warn(f"embedding cache{f' of store {where}' if where else ''}: {n} cached "
                      f"{self.model_id} {'vector' if n == 1 else 'vectors'} damaged (not "
                      f"{self.dim} finite values); embedded again and replaced", stacklevel=3)

    def _embed_missing(self, texts: Sequence[str], hashes: Sequence[str], unique: list[str],
                       cached: Container[str], damaged: Container[str] = (),
                       tolerant: bool = False) -> dict[str, np.ndarray]:
        """Embed the texts whose hashes (``unique``: those of ``hashes``, once each) are not
        ``cached`` and store their vectors, replacing the ``damaged`` ones the cache holds;
        returns them. The cached ones count as hits. A vector the embedder gives that is not
        ``dim`` finite values is a ``ValueError``, and is not cached. ``tolerant``: a cache
        that refuses the vectors (:class:`CacheReadOnly`) is warned of and offered no more
        (:attr:`keeps`)."""
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
            vectors = np.asarray(self.embedder.embed([text_of[h] for h in batch]),
                                 dtype=np.float32)
            if vectors.shape != (len(batch), self.dim) or not finite_rows(vectors).all():
                raise ValueError(f"embedder {self.model_id} gave {len(batch)} texts vectors of "
                                 f"shape {vectors.shape}, not {self.dim} finite values each: "
                                 f"not cached")
            rows = list(zip(batch, vectors, strict=True))
            if not tolerant or self.keeps:
                try:
                    self._put(rows, damaged)
                except CacheReadOnly as exc:
                    if not tolerant:
                        raise
                    self.keeps = False
                    not_kept(exc, "vectors")
            made.update(rows)
            bar.update(len(batch))
        bar.close()
        return made

    def _put(self, rows: list[tuple[str, np.ndarray]], damaged: Container[str]) -> None:
        """Store ``rows``, replacing those of the ``damaged`` hashes."""
        again = [r for r in rows if r[0] in damaged]
        if len(again) < len(rows):
            self.cache.put_embeddings(self.model_id, [r for r in rows if r[0] not in damaged])
        if again:
            self.cache.put_embeddings(self.model_id, again, replace=True)
