"""The embedded default store: one DuckDB file, BM25 through the fts extension, vectors in SQL.

Tables:

- ``items``: id, kind, source, source_ref, title, text, metadata (canonical JSON), content_hash.
- ``item_vectors``: one vector per (item, embedding model), with the sha256 of the text embedded.
- ``embedding_cache``: vectors by (model id, text sha256), for documents and queries alike.
- ``aiblox_meta``: schema version, vector dimension and the full-text index state.
- ``evidence_packs``: the audit pack of each answer (:mod:`aiblox.evidence`), insert-only.

The evidence bundle tracking tables, when bundles are used, sit in the same file but belong to
:mod:`aiblox.bundles`, which creates them; this store neither creates nor reads them.

DuckDB's full-text index is a snapshot: it does not see later INSERTs or UPDATEs. Every write
that changes ``items`` marks the index stale (in the same transaction), and every full-text
search rebuilds a stale index before it reads, so a query never sees a stale index.

BM25 for many queries runs as one SQL statement over the index's own tables (``dict``,
``terms``, ``docs``, ``stats``) with the same formula, tokenizer and stemmer as the extension's
``match_bm25`` macro (k1 = 1.2, b = 0.75), which costs ~50 ms per call
(:mod:`aiblox.stores.duckdb_fts`). Opened ``shared`` (every command's and notebook's workspace),
the file is held alone only while written, so several processes read it side by side
(:class:`~aiblox.stores.duckdb_lock.SharedFile`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.fusion.types import RankedList
from aiblox.hashing import canonical_json
from aiblox.stores.base import (
    PACK_COLUMNS,
    ItemText,
    StoreError,
    UpsertReport,
    check_pack_row,
    plan_upsert,
    relocated,
)
from aiblox.stores.duckdb_fts import bm25_sql, load_extension
from aiblox.stores.duckdb_lock import SharedFile, StoreBusy, open_file, release_file
from aiblox.stores.duckdb_sql import (
    Connection,
    check_database_file,
    check_tables_readable,
    duckdb_filter_sql,
)
from aiblox.stores.duckdb_vectors import (
    cache_rows,
    cached_embeddings,
    cached_hash_set,
    copy_cached_vectors,
    vector_batches,
)

__all__ = ["SCHEMA_VERSION", "DuckDBStore", "query_rows"]

SCHEMA_VERSION = "1"
MEMORY_LIMIT = "2GB"
"""DuckDB's buffer pool limit unless ``memory_limit=`` or ``$AIBLOX_DUCKDB_MEMORY_LIMIT`` says
otherwise (DuckDB's own default, 80% of RAM, lets an ingest of a million documents cache the
whole file in memory; past the limit DuckDB evicts pages and spills, so memory stays flat)."""
ROW_GROUP_ROWS = 122_880
"""DuckDB's row group: an insert of this many rows or more is written before its commit."""
CHECKPOINT_THRESHOLD = "1GB"
"""How much write-ahead log DuckDB gathers before it checkpoints (its default, 16MB, checkpoints
after every few batches of an ingest, and each checkpoint rewrites the primary-key indexes:
quadratic in the corpus; at 1GB an ingest of 100k documents takes 16 s instead of 38 s)."""
_TABLES = {"aiblox_meta", "items", "item_vectors", "embedding_cache", "evidence_packs"}


def query_rows(con: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """Rows of ``sql`` on a DuckDB connection as dicts; empty when a table it reads is absent
    (a read-only or older file without it)."""
    import duckdb

    try:
        cur = con.execute(sql, params)
    except duckdb.CatalogException:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class DuckDBStore(SharedFile):
    """Items, BM25, vectors and the embedding cache in one DuckDB file (or ``:memory:``)."""

    kind = "duckdb"

    def __init__(self, path: str | Path = ":memory:", dim: int | None = 384,
                 read_only: bool = False, memory_limit: str | None = None,
                 shared: bool = False) -> None:
        """``dim``: the vectors' (another's store refused; None: the store's, a new one 384).
        ``shared``: read, and hold the file alone only inside :meth:`writable` (every write
        is), so other processes can read it meanwhile (:mod:`aiblox.stores.duckdb_lock`);
        opening waits for another process's lock. A new file is made first."""
        asked, dim = dim, 384 if dim is None else dim
        self.location = str(path)
        if self.location != ":memory:":
            check_database_file(self.location)
            Path(self.location).parent.mkdir(parents=True, exist_ok=True)
        limit = memory_limit or os.environ.get("AIBLOX_DUCKDB_MEMORY_LIMIT") or MEMORY_LIMIT
        self._config: dict[str, Any] = {"memory_limit": limit,
                                        "checkpoint_threshold": CHECKPOINT_THRESHOLD}
        self._shared = shared and not read_only and self.location != ":memory:"
        self.dim = dim  # the stored one once read (below)
        self._closed = False
        fresh = self._shared and not os.path.exists(self.location)
        self._file, new = open_file(self.location if self._shared else None, lambda: Connection(
            self._connect(read_only or (self._shared and not fresh))))
        try:
            if new and not read_only and (fresh or not self._shared):
                self._create_schema(dim)
            else:
                self._check_version()
                if new and self._shared:
                    self._check_shared(_TABLES)
            self.dim = int(self._meta("vector_dim") or dim)
            if asked is not None and self.dim != asked and not read_only:
                raise StoreError(f"{self.location}: store holds {self.dim}-dim vectors, "
                                 f"asked for {dim}")
            if new and fresh:
                self._reopen(read_only=True)
        except BaseException:
            self.close()
            raise

    # -- schema and metadata -------------------------------------------------------------
    def _create_schema(self, dim: int) -> None:
        with self._lock:
            self.con.execute("CREATE TABLE IF NOT EXISTS aiblox_meta (key VARCHAR PRIMARY KEY, "
                             "value VARCHAR)")
            self._check_version()
            stored_dim = self._meta("vector_dim")
            dim = int(stored_dim) if stored_dim else dim
            self.con.execute("""
                CREATE TABLE IF NOT EXISTS items (
                    id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, source VARCHAR NOT NULL,
                    source_ref VARCHAR, title VARCHAR NOT NULL, text VARCHAR NOT NULL,
                    metadata VARCHAR NOT NULL, content_hash VARCHAR NOT NULL)""")
            self.con.execute(f"""
                CREATE TABLE IF NOT EXISTS item_vectors (
                    item_id VARCHAR NOT NULL, model_id VARCHAR NOT NULL,
                    text_sha256 VARCHAR NOT NULL, vector FLOAT[{dim}] NOT NULL,
                    PRIMARY KEY (item_id, model_id))""")
            self.con.execute("""
                CREATE TABLE IF NOT EXISTS embedding_cache (
                    model_id VARCHAR NOT NULL, text_sha256 VARCHAR NOT NULL,
                    vector FLOAT[] NOT NULL, PRIMARY KEY (model_id, text_sha256))""")
            for key, value in (("schema_version", SCHEMA_VERSION), ("vector_dim", str(dim)),
                               ("fts_state", "stale")):
                self.con.execute("INSERT OR IGNORE INTO aiblox_meta VALUES (?, ?)", [key, value])
            self._create_pack_schema()

    def _check_version(self) -> None:
        version = self._meta("schema_version")
        if version is not None and version != SCHEMA_VERSION:
            raise StoreError(f"{self.location}: schema version {version}, this aiblox "
                             f"reads {SCHEMA_VERSION}")

    def _meta(self, key: str) -> str | None:
        try:
            row = self.con.execute("SELECT value FROM aiblox_meta WHERE key = ?", [key]).fetchone()
        except Exception:  # table absent in a read-only, never-initialised file
            return None
        return row[0] if row else None

    def _count(self, sql: str, params: list[Any] | None = None) -> int:
        """The single integer a statement returns: a ``SELECT count(*)``, or the rows an INSERT
        wrote."""
        row = self.con.execute(sql, params or []).fetchone()
        if row is None:
            raise StoreError(f"{self.location}: no row from {sql!r}")
        return int(row[0])

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN`` ... ``COMMIT`` under the lock. On an error the transaction is rolled back,
        and a ``ROLLBACK`` that fails in turn (a failed ``COMMIT`` ended the transaction
        already) never hides the first error; a full disk is raised as a :class:`StoreError`
        naming the file (:meth:`_writing`)."""
        with self._lock, self.writable(), self._writing():
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield
                self.con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    self.con.execute("ROLLBACK")
                raise

    def _set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO aiblox_meta VALUES (?, ?)", [key, value])

    def _content_changed(self) -> None:
        """Inside a write transaction to items or vectors: the full-text index is stale and the
        sync record no longer describes the content."""
        self._set_meta("fts_state", "stale")
        self.con.execute("DELETE FROM aiblox_meta WHERE key = 'sync'")

    def read_meta(self) -> dict[str, str]:
        with self._lock:
            try:
                return dict(self.con.execute("SELECT key, value FROM aiblox_meta").fetchall())
            except Exception:  # noqa: BLE001 - table absent in a never-initialised file
                return {}

    def write_meta(self, values: dict[str, str | None]) -> None:
        with self._transaction():
            for key in sorted(values):
                if values[key] is None:
                    self.con.execute("DELETE FROM aiblox_meta WHERE key = ?", [key])
                else:
                    self._set_meta(key, str(values[key]))

    @property
    def lock(self) -> threading.RLock:
        """The lock held around every use of :attr:`con`; a repository sharing the connection
        (the chunk cache, the evidence bundle tracking tables) holds it too."""
        return self._lock

    @property
    def fts_stale(self) -> bool:
        """True when items changed since the full-text index was last built."""
        return self._meta("fts_state") != "fresh"

    def _load_fts(self) -> None:
        """DuckDB's fts extension on this connection, at its first use (index build, search)."""
        with self._lock:
            if not self._fts_loaded:
                load_extension(self.con, "fts")
                self._fts_loaded = True

    def rebuild_fts(self) -> None:
        """(Re)build the BM25 index over title + text: porter stemmer, English stop words."""
        self._load_fts()
        with self._transaction():
            self.con.execute(
                "PRAGMA create_fts_index('items', 'id', 'title', 'text', stemmer='porter', "
                "stopwords='english', ignore='(\\.|[^a-z])+', strip_accents=1, lower=1, "
                "overwrite=1)")
            self._set_meta("fts_state", "fresh")

    # -- items ---------------------------------------------------------------------------
    def upsert_items(self, items: Iterable[ItemRecord]) -> UpsertReport:
        """Insert new items, replace changed ones, drop vectors of changed ones; one transaction."""
        items = list(items)
        with self._lock:
            stored = self.con.execute(
                "SELECT id, content_hash, source, source_ref FROM items "
                "WHERE id IN (SELECT unnest(?::VARCHAR[]))",
                [sorted({it.id for it in items})]).fetchall()
            existing = {r[0]: r[1] for r in stored}
            rows, report = plan_upsert(items, existing)
            moved = relocated(items, rows, {r[0]: (r[2], r[3]) for r in stored})
            if not rows and not moved:
                return report
            ordered = [rows[k] for k in sorted(rows)]
            table = pa.table({
                "id": [r.id for r in ordered],
                "kind": [r.kind for r in ordered],
                "source": [r.source for r in ordered],
                "source_ref": pa.array([r.source_ref for r in ordered], type=pa.string()),
                "title": [r.title for r in ordered],
                "text": [r.text for r in ordered],
                "metadata": [canonical_json(r.metadata) for r in ordered],
                "content_hash": [r.content_hash for r in ordered],
            })
            places = pa.table({"id": [r.id for r in moved], "source": [r.source for r in moved],
                               "ref": pa.array([r.source_ref for r in moved], pa.string())})
            changed = [r.id for r in ordered if r.id in existing]
            with self.writable(), self.con.registered("_aiblox_upsert", table), \
                    self.con.registered("_aiblox_moved", places), self._transaction():
                if moved:  # one statement: a line inserted at the top moves every item
                    self.con.execute("UPDATE items SET source = m.source, source_ref = m.ref "
                                     "FROM _aiblox_moved m WHERE items.id = m.id")
                if changed:
                    self.con.execute("DELETE FROM item_vectors WHERE item_id IN "
                                     "(SELECT unnest(?::VARCHAR[]))", [changed])
                    self.con.execute("DELETE FROM items WHERE id IN "
                                     "(SELECT unnest(?::VARCHAR[]))", [changed])
                if rows:
                    self.con.execute("INSERT INTO items SELECT id, kind, source, source_ref, "
                                     "title, text, metadata, content_hash FROM _aiblox_upsert")
                    self._content_changed()
        return report

    def delete_items(self, ids: Sequence[str]) -> int:
        with self._lock:
            ids = sorted(set(ids))
            present = self._count("SELECT count(*) FROM items WHERE id IN "
                                  "(SELECT unnest(?::VARCHAR[]))", [ids])
            if present:
                with self._transaction():
                    self.con.execute("DELETE FROM item_vectors WHERE item_id IN "
                                     "(SELECT unnest(?::VARCHAR[]))", [ids])
                    self.con.execute("DELETE FROM items WHERE id IN "
                                     "(SELECT unnest(?::VARCHAR[]))", [ids])
                    self._content_changed()
            return int(present)

    def get_items(self, ids: Sequence[str]) -> dict[str, ItemRecord]:
        import json

        with self._lock:
            rows = self.con.execute(
                "SELECT id, kind, source, source_ref, title, text, metadata FROM items "
                "WHERE id IN (SELECT unnest(?::VARCHAR[]))", [sorted(set(ids))]).fetchall()
        return {
            r[0]: ItemRecord(id=r[0], kind=r[1], source=r[2], source_ref=r[3], title=r[4],
                             text=r[5], metadata=json.loads(r[6]))
            for r in rows
        }

    def item_hashes(self) -> dict[str, str]:
        with self._lock:
            return dict(self.con.execute("SELECT id, content_hash FROM items").fetchall())

    def _item_pages(self, columns: str, batch_size: int) -> Iterator[list[list[Any]]]:
        """``columns`` (``id`` first) of every item, a page of ``batch_size`` at a time, ids
        ascending (keyset paging: each page starts after the last id of the one before), as
        one list of values per column."""
        last: str | None = None
        while True:
            with self._lock:
                table = self.con.execute(
                    f"SELECT {columns} FROM items "
                    + ("WHERE id > ? " if last is not None else "")
                    + "ORDER BY id LIMIT ?",
                    [*([last] if last is not None else []), int(batch_size)]).to_arrow_table()
            if table.num_rows == 0:
                return
            page = [col.to_pylist() for col in table.columns]
            yield page
            last = page[0][-1]

    def iter_items(self, batch_size: int = 10000) -> Iterator[list[ItemRecord]]:
        import json

        for ids, kinds, sources, refs, titles, texts, metas in self._item_pages(
                "id, kind, source, source_ref, title, text, metadata", batch_size):
            yield [ItemRecord(id=i, kind=k, source=s, source_ref=r, title=ti, text=te,
                              metadata=json.loads(m))
                   for i, k, s, r, ti, te, m in zip(ids, kinds, sources, refs, titles, texts,
                                                    metas, strict=True)]

    def iter_item_texts(self, batch_size: int = 10000) -> Iterator[list[ItemText]]:
        for ids, titles, texts in self._item_pages("id, title, text", batch_size):
            yield list(map(ItemText, ids, titles, texts))

    def matching_ids(self, filters: dict[str, Any]) -> list[str]:
        where, params = duckdb_filter_sql(filters, "i")
        with self._lock:
            return [r[0] for r in self.con.execute(
                f"SELECT i.id FROM items i WHERE {where} ORDER BY i.id", params).fetchall()]

    def count_items(self) -> int:
        with self._lock:
            return self._count("SELECT count(*) FROM items")

    # -- vectors -------------------------------------------------------------------------
    def _vector_array(self, matrix: np.ndarray) -> pa.FixedSizeListArray:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            raise StoreError(f"{self.location}: vectors of shape {matrix.shape}, store holds "
                             f"{self.dim}-dim vectors")
        return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), self.dim)

    def set_item_vectors(self, model_id: str,
                         rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        rows = sorted(rows, key=lambda r: r[0])
        if not rows:
            return 0
        table = pa.table({
            "item_id": [r[0] for r in rows],
            "model_id": [model_id] * len(rows),
            "text_sha256": [r[1] for r in rows],
            "vector": self._vector_array(np.stack([np.asarray(r[2]) for r in rows])),
        })
        with self._lock, self.writable(), self.con.registered("_aiblox_vecs", table), \
                self._transaction():
            self.con.execute(
                f"INSERT OR REPLACE INTO item_vectors SELECT item_id, model_id, "
                f"text_sha256, vector::FLOAT[{self.dim}] FROM _aiblox_vecs")
            self.con.execute("DELETE FROM aiblox_meta WHERE key = 'sync'")
        return len(rows)

    def set_item_vectors_from_cache(self, model_id: str,
                                    rows: Sequence[tuple[str, str]]) -> int:
        rows = sorted(rows)
        if not rows:
            return 0
        table = pa.table({"item_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows]})
        with self._lock, self.writable(), self.con.registered("_aiblox_pairs", table), \
                self._transaction():
            written = copy_cached_vectors(self.con, self.dim, model_id, "_aiblox_pairs",
                                          self.location)
            self.con.execute("DELETE FROM aiblox_meta WHERE key = 'sync'")
        if written >= ROW_GROUP_ROWS:
            self._checkpoint()  # its row groups were written before the commit (_checkpoint)
        return written

    def item_vector_hashes(self, model_id: str) -> dict[str, str]:
        with self._lock:
            return dict(self.con.execute(
                "SELECT item_id, text_sha256 FROM item_vectors WHERE model_id = ?",
                [model_id]).fetchall())

    def item_vectors(self, model_id: str) -> tuple[list[str], np.ndarray]:
        n = self.vector_count(model_id)
        ids: list[str] = []
        matrix = np.empty((n, self.dim), dtype=np.float32)
        for batch_ids, batch in self.iter_item_vectors(model_id):
            if len(ids) + len(batch_ids) > n:  # written meanwhile: read it whole again
                return self.item_vectors(model_id)
            matrix[len(ids):len(ids) + len(batch_ids)] = batch
            ids += batch_ids
        return ids, matrix[:len(ids)]

    def iter_item_vectors(self, model_id: str, batch_size: int = 50_000
                          ) -> Iterator[tuple[list[str], np.ndarray]]:
        with self._lock:  # a cursor of its own: the store stays usable between batches
            cur = self.con.cursor()
        try:
            yield from vector_batches(cur, self.dim, model_id, batch_size)
        finally:
            cur.close()

    def check_readable(self) -> None:
        if self.location != ":memory:":
            with self._lock:
                check_tables_readable(self.con, self.location, ("items", "item_vectors"))

    def vector_count(self, model_id: str) -> int:
        with self._lock:
            return self._count("SELECT count(*) FROM item_vectors v JOIN items i "
                               "ON i.id = v.item_id WHERE v.model_id = ?", [model_id])

    # -- search --------------------------------------------------------------------------
    def fts_search_many(self, queries: Sequence[str], k: int, cfg: FtsConfig | None = None,
                        filters: dict[str, Any] | None = None) -> list[RankedList]:
        """BM25 top ``k`` per query in one SQL statement over the fts index tables."""
        cfg = cfg or FtsConfig()
        results: list[RankedList] = [[] for _ in queries]
        if not queries:
            return results
        with self._lock:
            if self.count_items() == 0:
                return results
            if self.fts_stale:
                self.rebuild_fts()
            self._load_fts()
            where, params = duckdb_filter_sql(filters, "i")
            min_rank = "" if cfg.min_rank is None else f"AND score >= {float(cfg.min_rank)!r}"
            queries_table = pa.table({"qidx": list(range(len(queries))), "qtext": list(queries)})
            with self.con.registered("_aiblox_q", queries_table):
                rows = self.con.execute(bm25_sql(where, min_rank, k), params).fetchall()
        for qidx, doc_id, score in rows:
            results[qidx].append((doc_id, float(score)))
        return results

    def vector_search_many(self, vectors: np.ndarray, model_id: str, k: int,
                           cfg: VectorConfig | None = None,
                           filters: dict[str, Any] | None = None) -> list[RankedList]:
        """Exact top ``k`` by cosine similarity, negated L2 distance or inner product."""
        cfg = cfg or VectorConfig()
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        results: list[RankedList] = [[] for _ in range(len(vectors))]
        if len(vectors) == 0:
            return results
        sim = {
            "cosine": "array_cosine_similarity(v.vector, q.vec)",
            "l2": "-array_distance(v.vector, q.vec)",
            "ip": "array_inner_product(v.vector, q.vec)",
        }[cfg.distance]
        where, params = duckdb_filter_sql(filters, "i")
        min_score = "" if cfg.min_score is None else f"AND sim >= {float(cfg.min_score)!r}"
        table = pa.table({"qidx": list(range(len(vectors))), "vec": self._vector_array(vectors)})
        with self._lock, self.con.registered("_aiblox_qv", table):
            rows = self.con.execute(f"""
                    WITH q AS (SELECT qidx, vec::FLOAT[{self.dim}] AS vec FROM _aiblox_qv),
                    scored AS (
                        SELECT q.qidx, v.item_id AS id, {sim} AS sim
                        FROM q, item_vectors v JOIN items i ON i.id = v.item_id
                        WHERE v.model_id = ? AND {where})
                    SELECT qidx, id, sim FROM scored WHERE sim IS NOT NULL {min_score}
                    QUALIFY row_number() OVER (PARTITION BY qidx ORDER BY sim DESC, id ASC)
                            <= {int(k)}
                    ORDER BY qidx, sim DESC, id ASC""", [model_id, *params]).fetchall()
        for qidx, doc_id, score in rows:
            results[qidx].append((doc_id, float(score)))
        return results

    # -- embedding cache -----------------------------------------------------------------
    def get_embeddings(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            return cached_embeddings(self.con, model_id, text_hashes)

    def cached_hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        with self._lock:
            return cached_hash_set(self.con, model_id, text_hashes)

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
                       replace: bool = False) -> int:
        unique: dict[str, np.ndarray] = {}
        for h, vec in rows:
            unique.setdefault(h, np.asarray(vec, dtype=np.float32))
        if not unique:
            return 0
        if self._shared and not self._writers:  # a cache write of its own: it never waits
            try:
                with self.writable(wait_s=0):
                    return self.put_embeddings(model_id, unique.items(), replace)
            except StoreBusy as exc:
                self._busy_once(exc, "new embeddings are used but not cached")
                return 0
        with self._lock:
            # only rows not cached yet, by a plain INSERT (1.6x faster than OR IGNORE)
            held = set() if replace else cached_hash_set(self.con, model_id, list(unique))
            hashes = sorted(unique.keys() - held)
            if not hashes:
                return 0
            table = cache_rows(model_id, hashes, [unique[h] for h in hashes])
            # DuckDB returns the rows an INSERT wrote: no count(*) before and after
            with self.con.registered("_aiblox_emb", table), self._transaction():
                written = self._count(f"INSERT {'OR REPLACE ' if replace else ''}INTO "
                                      "embedding_cache SELECT model_id, text_sha256, vector "
                                      "FROM _aiblox_emb")
            if written >= ROW_GROUP_ROWS:
                self._checkpoint()
            return written

    # -- audit packs ---------------------------------------------------------------------
    def _create_pack_schema(self) -> None:
        """The audit pack table (additive: created in files made before it existed)."""
        self.con.execute("""
            CREATE TABLE IF NOT EXISTS evidence_packs (
                pack_id VARCHAR PRIMARY KEY, parent_pack_id VARCHAR,
                tenant_id VARCHAR NOT NULL, trace_id VARCHAR, created_at VARCHAR,
                sha256 VARCHAR NOT NULL, signed BOOLEAN NOT NULL, json VARCHAR NOT NULL)""")

    def put_evidence_pack(self, pack_id: str, parent_pack_id: str | None, sha256: str,
                          json_text: str, *, tenant_id: str = "default",
                          trace_id: str | None = None, created_at: str | None = None,
                          signed: bool = False) -> bool:
        check_pack_row(pack_id, parent_pack_id, sha256, json_text)
        with self._transaction():
            old = self.con.execute("SELECT sha256 FROM evidence_packs WHERE pack_id = ?",
                                   [pack_id]).fetchone()
            if old is None:
                self.con.execute(
                    "INSERT INTO evidence_packs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [pack_id, parent_pack_id, tenant_id, trace_id, created_at, sha256,
                     bool(signed), json_text])
        if old is not None and old[0] != sha256:
            raise StoreError(f"{self.location}: a different evidence pack is stored under "
                             f"{pack_id}")
        return old is None

    def get_evidence_pack(self, pack_id: str) -> dict[str, Any] | None:
        with self._lock:
            rows = query_rows(self.con, f"SELECT {', '.join(PACK_COLUMNS)}, json "
                              "FROM evidence_packs WHERE pack_id = ?", [pack_id])
        return rows[0] if rows else None

    def list_evidence_packs(self, with_json: bool = False) -> list[dict[str, Any]]:
        columns = (*PACK_COLUMNS, "json") if with_json else PACK_COLUMNS
        with self._lock:
            return query_rows(self.con, f"SELECT {', '.join(columns)} FROM evidence_packs "
                              "ORDER BY pack_id", [])

    def close(self) -> None:
        """Close the store (its file's connection, with the last store of this process on it)."""
        with self._lock:
            if not self._closed and release_file(self._file):
                with self._writing():  # closing checkpoints: a write
                    self.con.close()
            self._closed = True

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

