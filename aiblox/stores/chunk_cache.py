"""The chunk cache: a document's chunks and their vectors, derived data keyed by what made them.

A key is ``(item_id, content_hash, chunker_id, embedding_model_id)`` (the retriever seed's chunk
cache rules), so a changed document, chunker parameter set or embedding model never finds the
old entry. Every entry carries the sha256 of its key and payload (chunks as canonical JSON and
the vectors' float32 bytes); a read recomputes it and checks the chunks against the key, and an
entry that fails (corrupt, truncated, written for another key) is reported as ``corrupt``, never
returned: the caller rebuilds it. ``created_at`` (seconds since the epoch, not hashed) lets a
reader treat entries older than ``ttl_seconds`` as missing.

Entries written at ingest (the ``precomputed`` chunking strategy) live in the same table with
``precomputed = true``; a later query-time write of the same key keeps that flag.

Nothing here is authoritative: dropping the table loses time, not data.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from aiblox.chunking.base import Chunk
from aiblox.hashing import canonical_json, sha256_bytes
from aiblox.stores.base import store_writes
from aiblox.stores.duckdb_lock import StoreBusy

__all__ = [
    "CHUNK_CACHE_VERSION",
    "ChunkCache",
    "ChunkCacheEntry",
    "ChunkCacheKey",
    "ChunkCacheLookup",
    "DuckDBChunkCache",
    "InMemoryChunkCache",
    "classify_cached",
    "decode_entry",
    "default_chunk_cache",
    "encode_entry",
    "entries_digest",
    "latest_entries",
]

CHUNK_CACHE_VERSION = 1
"""Version of the entry encoding; part of every payload hash, so a new encoding misses."""


class ChunkCacheKey(NamedTuple):
    """What a cache entry is keyed by."""

    item_id: str
    content_hash: str
    chunker_id: str
    embedding_model_id: str


@dataclass(frozen=True)
class ChunkCacheEntry:
    """A document's chunks (text order) and one vector per chunk (row ``i`` for chunk ``i``)."""

    key: ChunkCacheKey
    chunks: list[Chunk]
    vectors: np.ndarray
    precomputed: bool = False
    created_at: float = 0.0


@dataclass
class ChunkCacheLookup:
    """The answer to :meth:`ChunkCache.get_many`: valid entries and why the others are absent."""

    hits: dict[ChunkCacheKey, ChunkCacheEntry] = field(default_factory=dict)
    """Entries that passed the payload check (and the ttl)."""
    missing: list[ChunkCacheKey] = field(default_factory=list)
    """Keys with no entry."""
    corrupt: list[ChunkCacheKey] = field(default_factory=list)
    """Keys whose entry failed the payload check; not served, to be rebuilt."""
    expired: list[ChunkCacheKey] = field(default_factory=list)
    """Keys whose entry is older than ``ttl_seconds``; not served."""
    not_precomputed: list[ChunkCacheKey] = field(default_factory=list)
    """With ``precomputed_only``: keys whose entry was written at query time, not at ingest."""


@runtime_checkable
class ChunkCache(Protocol):
    """Storage for chunk cache entries."""

    def get_many(self, keys: Sequence[ChunkCacheKey], ttl_seconds: int | None = None,
                 precomputed_only: bool = False) -> ChunkCacheLookup:
        """Valid entries for ``keys``; with ``precomputed_only`` only those written at ingest
        (the ttl does not apply to them)."""
        ...

    def put_many(self, entries: Iterable[ChunkCacheEntry]) -> int:
        """Write (replace) entries; a replaced precomputed entry stays precomputed. Returns the
        number written."""
        ...

    def prune(self, current: dict[str, str]) -> int:
        """Delete entries of items absent from ``current`` (``{item_id: content_hash}``) or
        made from another content hash; returns how many were deleted."""
        ...

    def precomputed_digest(self, chunker_id: str, model_id: str) -> tuple[int, str]:
        """``(n, digest)`` of the entries written at ingest for ``chunker_id`` and
        ``model_id`` (:func:`entries_digest`): what the ``precomputed`` and ``mixed``
        strategies can read, so a result computed from them is keyed by it."""
        ...

    def count(self) -> int:
        """Number of entries."""
        ...


# -- encoding ---------------------------------------------------------------------------------
def _payload_hash(key: ChunkCacheKey, chunks_json: str, vectors: bytes, dim: int) -> str:
    head = canonical_json({"v": CHUNK_CACHE_VERSION, "key": list(key), "dim": dim})
    return sha256_bytes(head.encode() + b"\x00" + chunks_json.encode() + b"\x00" + vectors)


def encode_entry(entry: ChunkCacheEntry) -> tuple[str, bytes, int, str]:
    """``(chunks_json, vector_bytes, dim, payload_sha256)`` of an entry."""
    vectors = np.ascontiguousarray(entry.vectors, dtype="<f4")
    if vectors.ndim != 2 or vectors.shape[0] != len(entry.chunks):
        raise ValueError(f"chunk cache entry {entry.key}: need one vector per chunk, got shape "
                         f"{vectors.shape} for {len(entry.chunks)} chunks")
    for c in entry.chunks:
        if (c.item_id, c.content_hash, c.chunker_id) != entry.key[:3]:
            raise ValueError(f"chunk cache entry {entry.key}: chunk {c.chunk_id} belongs to "
                             f"{(c.item_id, c.content_hash, c.chunker_id)}")
    chunks_json = canonical_json([c.model_dump(mode="json") for c in entry.chunks])
    blob = vectors.tobytes()
    dim = int(vectors.shape[1])
    return chunks_json, blob, dim, _payload_hash(entry.key, chunks_json, blob, dim)


def decode_entry(key: ChunkCacheKey, chunks_json: Any, blob: Any, dim: Any, payload_sha256: Any,
                 precomputed: bool = False, created_at: float = 0.0) -> ChunkCacheEntry | None:
    """The entry stored under ``key``, or None when it fails any check (hash, shapes, key)."""
    try:
        if not isinstance(chunks_json, str) or not isinstance(payload_sha256, str):
            return None
        blob = bytes(blob)
        dim = int(dim)
        if _payload_hash(key, chunks_json, blob, dim) != payload_sha256:
            return None
        chunks = [Chunk.model_validate(c) for c in json.loads(chunks_json)]
        if dim < 1 and chunks:
            return None
        n = len(chunks)
        if len(blob) != n * max(dim, 0) * 4:
            return None
        vectors = np.frombuffer(blob, dtype="<f4").reshape(n, max(dim, 0)).astype(np.float32)
        for pos, c in enumerate(chunks):
            if (c.item_id, c.content_hash, c.chunker_id) != key[:3] or c.position != pos:
                return None
    except (ValueError, TypeError):
        return None
    return ChunkCacheEntry(key=key, chunks=chunks, vectors=vectors, precomputed=bool(precomputed),
                           created_at=float(created_at))


def entries_digest(rows: Iterable[tuple[str, str, str]]) -> tuple[int, str]:
    """``(n, sha256)`` of ``(item_id, content_hash, payload_sha256)`` rows given in ascending
    order (code point order: DuckDB's and PostgreSQL's ``COLLATE "C"`` byte order)."""
    h = hashlib.sha256(f"precomputed-v{CHUNK_CACHE_VERSION}\n".encode())
    n = 0
    for item_id, content_hash, payload in rows:
        h.update(f"{item_id}\x00{content_hash}\x00{payload}\n".encode())
        n += 1
    return n, h.hexdigest()


def latest_entries(entries: Iterable[ChunkCacheEntry]) -> dict[ChunkCacheKey, ChunkCacheEntry]:
    """Entries by key, the last one given winning (what ``put_many`` writes)."""
    latest: dict[ChunkCacheKey, ChunkCacheEntry] = {}
    for e in entries:
        latest[ChunkCacheKey._make(e.key)] = e
    return latest


def classify_cached(lookup: ChunkCacheLookup, key: ChunkCacheKey, row: tuple | None,
                    ttl_seconds: int | None, precomputed_only: bool, now: float) -> None:
    """Sort one stored row (or None) into ``lookup``: hit, missing, corrupt, expired or not
    precomputed. Every backend's ``get_many`` reads its rows and calls this."""
    if row is None:
        lookup.missing.append(key)
        return
    chunks_json, blob, dim, digest, precomputed, created_at = row
    if precomputed_only and not precomputed:
        lookup.not_precomputed.append(key)
        return
    entry = decode_entry(key, chunks_json, blob, dim, digest, precomputed, created_at)
    if entry is None:
        lookup.corrupt.append(key)
    elif (ttl_seconds is not None and not precomputed_only
          and now - float(created_at) > ttl_seconds):
        lookup.expired.append(key)
    else:
        lookup.hits[key] = entry


# -- in memory ------------------------------------------------------------------------------
class InMemoryChunkCache:
    """A dict-backed :class:`ChunkCache` holding the same encoded rows as the DuckDB one."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.rows: dict[ChunkCacheKey, tuple] = {}
        """Encoded rows ``(chunks_json, vectors, dim, payload_sha256, precomputed, created_at)``;
        public so tests can damage them."""

    def get_many(self, keys: Sequence[ChunkCacheKey], ttl_seconds: int | None = None,
                 precomputed_only: bool = False) -> ChunkCacheLookup:
        lookup = ChunkCacheLookup()
        now = self.clock()
        for key in sorted(set(map(ChunkCacheKey._make, keys))):
            classify_cached(lookup, key, self.rows.get(key), ttl_seconds, precomputed_only, now)
        return lookup

    def put_many(self, entries: Iterable[ChunkCacheEntry]) -> int:
        n = 0
        now = self.clock()
        for e in entries:
            chunks_json, blob, dim, digest = encode_entry(e)
            old = self.rows.get(e.key)
            precomputed = e.precomputed or bool(old is not None and old[4])
            self.rows[e.key] = (chunks_json, blob, dim, digest, precomputed, now)
            n += 1
        return n

    def prune(self, current: dict[str, str]) -> int:
        stale = [k for k in self.rows if current.get(k.item_id) != k.content_hash]
        for k in stale:
            del self.rows[k]
        return len(stale)

    def precomputed_digest(self, chunker_id: str, model_id: str) -> tuple[int, str]:
        return entries_digest(sorted(
            (k.item_id, k.content_hash, row[3]) for k, row in self.rows.items()
            if row[4] and k.chunker_id == chunker_id and k.embedding_model_id == model_id))

    def count(self) -> int:
        return len(self.rows)


# -- DuckDB -----------------------------------------------------------------------------------
_TABLE = """
CREATE TABLE IF NOT EXISTS chunk_cache (
    item_id VARCHAR NOT NULL, content_hash VARCHAR NOT NULL, chunker_id VARCHAR NOT NULL,
    embedding_model_id VARCHAR NOT NULL, chunks_json VARCHAR NOT NULL, vectors BLOB NOT NULL,
    dim INTEGER NOT NULL, n_chunks INTEGER NOT NULL, payload_sha256 VARCHAR NOT NULL,
    precomputed BOOLEAN NOT NULL, created_at DOUBLE NOT NULL,
    PRIMARY KEY (item_id, content_hash, chunker_id, embedding_model_id))"""


class DuckDBChunkCache:
    """The chunk cache as the ``chunk_cache`` table of a :class:`DuckDBStore` (created if
    missing), sharing the store's connection and lock."""

    def __init__(self, store: Any, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.con = store.con
        self._lock: threading.RLock = getattr(store, "_lock", None) or threading.RLock()
        self.clock = clock
        self.read_only = False
        """True when the table could not be created (a read-only file without it): every
        lookup misses and writes are dropped."""
        self._busy_said = False
        with self._lock:
            try:
                self.con.execute(_TABLE)
            except Exception:  # noqa: BLE001 - duckdb raises its own error types
                exists = self.con.execute(
                    "SELECT count(*) FROM information_schema.tables "
                    "WHERE table_name = 'chunk_cache'").fetchone()[0]
                if not exists:  # a shared store made before the table: made now, or never
                    try:
                        with store_writes(store, wait_s=0):
                            self.con.execute(_TABLE)
                    except Exception:  # noqa: BLE001 - read-only, or another process reads
                        self.read_only = True

    def _written(self, write: Callable[[], int]) -> int:
        """``write()`` holding a shared store alone; a store another process reads at the
        moment is not waited for (a cache: the write is dropped, with one warning)."""
        try:
            with store_writes(self.store, wait_s=0):
                return write()
        except StoreBusy as exc:
            if not self._busy_said:
                self._busy_said = True
                warnings.warn(f"chunk cache: {exc.holder} is using store "
                              f"{self.store.location}: new chunks are used but not cached",
                              stacklevel=3)
            return 0

    def get_many(self, keys: Sequence[ChunkCacheKey], ttl_seconds: int | None = None,
                 precomputed_only: bool = False) -> ChunkCacheLookup:
        wanted = sorted(set(map(ChunkCacheKey._make, keys)))
        lookup = ChunkCacheLookup()
        if self.read_only:
            lookup.missing.extend(wanted)
            return lookup
        if not wanted:
            return lookup
        # the keys as lists unnested side by side (registering an arrow table would import
        # pyarrow.dataset: 0.06 s of a search)
        columns = [[k[i] for k in wanted] for i in range(len(ChunkCacheKey._fields))]
        with self._lock:
            rows = self.con.execute(
                "SELECT c.item_id, c.content_hash, c.chunker_id, c.embedding_model_id, "
                "c.chunks_json, c.vectors, c.dim, c.payload_sha256, c.precomputed, "
                "c.created_at FROM chunk_cache c JOIN (SELECT unnest(?::VARCHAR[]) AS item_id, "
                "unnest(?::VARCHAR[]) AS content_hash, unnest(?::VARCHAR[]) AS chunker_id, "
                "unnest(?::VARCHAR[]) AS embedding_model_id) k USING "
                "(item_id, content_hash, chunker_id, embedding_model_id)", columns).fetchall()
        found = {ChunkCacheKey(*r[:4]): tuple(r[4:]) for r in rows}
        now = self.clock()
        for key in wanted:
            classify_cached(lookup, key, found.get(key), ttl_seconds, precomputed_only, now)
        return lookup

    def put_many(self, entries: Iterable[ChunkCacheEntry]) -> int:
        import pyarrow as pa

        latest = latest_entries(entries)
        if not latest or self.read_only:
            return 0
        now = self.clock()
        cols: dict[str, list[Any]] = {name: [] for name in (
            *ChunkCacheKey._fields, "chunks_json", "vectors", "dim", "n_chunks",
            "payload_sha256", "precomputed", "created_at")}
        for key in sorted(latest):
            e = latest[key]
            chunks_json, blob, dim, digest = encode_entry(e)
            for name, value in zip(ChunkCacheKey._fields, key, strict=True):
                cols[name].append(value)
            cols["chunks_json"].append(chunks_json)
            cols["vectors"].append(blob)
            cols["dim"].append(dim)
            cols["n_chunks"].append(len(e.chunks))
            cols["payload_sha256"].append(digest)
            cols["precomputed"].append(bool(e.precomputed))
            cols["created_at"].append(now)
        table = pa.table({**cols, "vectors": pa.array(cols["vectors"], type=pa.binary()),
                          "dim": pa.array(cols["dim"], type=pa.int32()),
                          "n_chunks": pa.array(cols["n_chunks"], type=pa.int32())})

        def write() -> int:
            with self._lock, self.con.registered("_aiblox_cw", table):
                self.con.execute(
                    "INSERT INTO chunk_cache SELECT * FROM _aiblox_cw ON CONFLICT DO UPDATE "
                    "SET chunks_json = excluded.chunks_json, vectors = excluded.vectors, "
                    "dim = excluded.dim, n_chunks = excluded.n_chunks, "
                    "payload_sha256 = excluded.payload_sha256, "
                    "precomputed = chunk_cache.precomputed OR excluded.precomputed, "
                    "created_at = excluded.created_at")
            return len(latest)

        return self._written(write)

    def prune(self, current: dict[str, str]) -> int:
        import pyarrow as pa

        if self.read_only:
            return 0
        table = pa.table({"item_id": sorted(current),
                          "content_hash": [current[k] for k in sorted(current)]})

        def write() -> int:
            with self._lock:
                before = self.count()
                with self.con.registered("_aiblox_cur", table):
                    self.con.execute(
                        "DELETE FROM chunk_cache WHERE NOT EXISTS (SELECT 1 FROM _aiblox_cur "
                        "k WHERE k.item_id = chunk_cache.item_id "
                        "AND k.content_hash = chunk_cache.content_hash)")
                return before - self.count()

        return self._written(write)

    def precomputed_digest(self, chunker_id: str, model_id: str) -> tuple[int, str]:
        if self.read_only:
            return entries_digest([])

        def rows() -> Iterable[tuple[str, str, str]]:
            cur = self.con.execute(
                "SELECT item_id, content_hash, payload_sha256 FROM chunk_cache WHERE precomputed "
                "AND chunker_id = ? AND embedding_model_id = ? ORDER BY item_id, content_hash",
                [chunker_id, model_id])
            while batch := cur.fetchmany(50_000):
                yield from batch

        with self._lock:
            return entries_digest(rows())

    def count(self) -> int:
        if self.read_only:
            return 0
        with self._lock:
            return int(self.con.execute("SELECT count(*) FROM chunk_cache").fetchone()[0])


def default_chunk_cache(store: Any) -> ChunkCache:
    """The store's own chunk cache: a ``chunk_cache`` table for DuckDB and PostgreSQL, else in
    memory."""
    if getattr(store, "kind", None) == "duckdb" and hasattr(store, "con"):
        return DuckDBChunkCache(store)
    own = getattr(store, "chunk_cache", None)
    if callable(own):  # e.g. PostgresStore's chunk_cache table
        return own()
    return InMemoryChunkCache()
