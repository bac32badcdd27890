"""Repository boundaries of the retriever seed over the ORM models: items, caches.

Every public method is one transaction (``sessionmaker.begin()``): an upsert batch is written
whole or not at all, so a connection dropped mid-ingest leaves no half-written document and
re-running the ingest resumes where the last committed batch ended.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import numpy as np
from sqlalchemy import Text, any_, bindparam, delete, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session, sessionmaker

from aiblox.contracts.items import ItemRecord
from aiblox.stores.base import ItemText, StoreError, UpsertReport, plan_upsert, relocated
from aiblox.stores.chunk_cache import (
    ChunkCacheEntry,
    ChunkCacheKey,
    ChunkCacheLookup,
    classify_cached,
    encode_entry,
    entries_digest,
    latest_entries,
)
from aiblox.stores.postgres.models import (
    ChunkCacheRow,
    EmbeddingCacheRow,
    ItemRow,
    ItemVectorRow,
    MetaRow,
)

__all__ = ["BULK_REBUILD_ROWS", "ChunkCacheRepo", "EmbeddingCacheRepo", "ItemRepo"]

BULK_REBUILD_ROWS = 1000
"""A vector write of at least this many rows, and at least half the rows stored, drops the HNSW
indexes and builds them again after the insert, in the same transaction."""


def _any(column, values: Sequence[str], name: str):  # noqa: ANN001, ANN202 - SQL expression
    """``column = ANY(:name)`` with the values as one bound ``text[]``."""
    return column == any_(bindparam(name, list(values), type_=ARRAY(Text)))


def _content_changed(s: Session) -> None:
    """Inside a write to items or vectors: the sync record no longer describes the content."""
    s.execute(delete(MetaRow).where(MetaRow.key == "sync"))


def _no_nul(item: ItemRecord) -> None:
    for field in ("id", "kind", "source", "source_ref", "title", "text"):
        value = getattr(item, field)
        if value is not None and "\x00" in value:
            raise StoreError(f"item {item.id!r}: field {field!r} holds a NUL character, which "
                             f"PostgreSQL text cannot store")


class ItemRepo:
    """Items and their vectors."""

    def __init__(self, sessions: sessionmaker[Session], dim: int) -> None:
        self.sessions = sessions
        self.dim = dim

    def upsert(self, items: Iterable[ItemRecord]) -> UpsertReport:
        """Insert new items, replace changed ones and drop their vectors; one transaction."""
        items = list(items)
        if not items:
            return UpsertReport()
        with self.sessions.begin() as s:
            ids = sorted({it.id for it in items})
            stored = s.execute(select(ItemRow.id, ItemRow.content_hash, ItemRow.source,
                                      ItemRow.source_ref)
                               .where(_any(ItemRow.id, ids, "ids"))).all()
            existing = {r[0]: r[1] for r in stored}
            rows, report = plan_upsert(items, existing)
            for item in rows.values():
                _no_nul(item)
            moved = relocated(items, rows, {r[0]: (r[2], r[3]) for r in stored})
            if moved:  # one executemany (an UPDATE by primary key per row), not a call each
                s.execute(update(ItemRow), [{"id": it.id, "source": it.source,
                                             "source_ref": it.source_ref} for it in moved])
            if not rows:
                return report
            changed = sorted(i for i in rows if i in existing)
            if changed:
                s.execute(delete(ItemVectorRow).where(_any(ItemVectorRow.item_id, changed, "c")))
                s.execute(delete(ItemRow).where(_any(ItemRow.id, changed, "c")))
            _content_changed(s)
            s.execute(pg_insert(ItemRow), [
                {"id": r.id, "kind": r.kind, "source": r.source, "source_ref": r.source_ref,
                 "title": r.title, "text": r.text, "metadata_": r.metadata,
                 "content_hash": r.content_hash}
                for r in (rows[k] for k in sorted(rows))])
        return report

    def delete(self, ids: Sequence[str]) -> int:
        """Delete items and their vectors; returns how many existed."""
        ids = sorted(set(ids))
        if not ids:
            return 0
        with self.sessions.begin() as s:
            s.execute(delete(ItemVectorRow).where(_any(ItemVectorRow.item_id, ids, "ids")))
            result = s.execute(delete(ItemRow).where(_any(ItemRow.id, ids, "ids"))
                               .returning(ItemRow.id))
            n = len(result.all())
            if n:
                _content_changed(s)
            return n

    def get(self, ids: Sequence[str]) -> dict[str, ItemRecord]:
        """Stored items by id."""
        ids = sorted(set(ids))
        if not ids:
            return {}
        with self.sessions.begin() as s:
            rows = s.scalars(select(ItemRow).where(_any(ItemRow.id, ids, "ids"))).all()
            return {r.id: ItemRecord(id=r.id, kind=r.kind, source=r.source,
                                     source_ref=r.source_ref, title=r.title, text=r.text,
                                     metadata=r.metadata_) for r in rows}

    def hashes(self) -> dict[str, str]:
        """``{item_id: content_hash}`` of every item."""
        with self.sessions.begin() as s:
            return dict(s.execute(select(ItemRow.id, ItemRow.content_hash)).all())

    def _pages(self, columns: Sequence[Any], batch_size: int) -> Iterator[Sequence[Any]]:
        """Rows of ``columns`` (``ItemRow.id`` first) of every item, ``batch_size`` at a time,
        ids ascending in code point order (``COLLATE "C"``; keyset paging: each page starts
        after the last id of the one before)."""
        key = ItemRow.id.collate("C")
        last: str | None = None
        while True:
            stmt = select(*columns).order_by(key).limit(int(batch_size))
            if last is not None:
                stmt = stmt.where(key > last)
            with self.sessions.begin() as s:
                rows = s.execute(stmt).all()
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def batches(self, batch_size: int) -> Iterator[list[ItemRecord]]:
        """Every item in batches, ids ascending in code point order (``COLLATE "C"``)."""
        r = ItemRow
        for rows in self._pages((r.id, r.kind, r.source, r.source_ref, r.title, r.text,
                                 r.metadata_), batch_size):
            yield [ItemRecord(id=i, kind=k, source=src, source_ref=ref, title=ti, text=te,
                              metadata=m) for i, k, src, ref, ti, te, m in rows]

    def text_batches(self, batch_size: int) -> Iterator[list[ItemText]]:
        """:meth:`batches` with only ids, titles and texts."""
        for rows in self._pages((ItemRow.id, ItemRow.title, ItemRow.text), batch_size):
            yield [ItemText(*row) for row in rows]

    def matching(self, filters: dict[str, Any]) -> list[str]:
        """Ids of the items passing ``filters``, in code point order."""
        from sqlalchemy import text

        from aiblox.stores.postgres.filters import filter_sql

        where, params = filter_sql(filters, "i")
        with self.sessions.begin() as s:
            ids = [r[0] for r in s.execute(text(f"SELECT i.id FROM items i WHERE {where}"),
                                           params).all()]
        return sorted(ids)

    def count(self) -> int:
        """Number of items."""
        with self.sessions.begin() as s:
            return int(s.scalar(select(func.count()).select_from(ItemRow)) or 0)

    def set_vectors(self, model_id: str, rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Write (replace) ``(item_id, text_sha256, vector)`` rows; one transaction.

        A bulk write (see :data:`BULK_REBUILD_ROWS`) rebuilds the HNSW indexes instead of
        inserting into them row by row; the table is locked for the transaction either way.
        """
        latest: dict[str, tuple[str, np.ndarray]] = {}
        for item_id, h, vec in rows:
            vec = np.asarray(vec, dtype=np.float32)
            if vec.shape != (self.dim,):
                raise StoreError(f"vector of shape {vec.shape} for item {item_id!r}, store "
                                 f"holds {self.dim}-dim vectors")
            latest[item_id] = (h, vec)
        if not latest:
            return 0
        stmt = pg_insert(ItemVectorRow)
        stmt = stmt.on_conflict_do_update(
            index_elements=[ItemVectorRow.item_id, ItemVectorRow.model_id],
            set_={"text_sha256": stmt.excluded.text_sha256, "vector": stmt.excluded.vector})
        with self.sessions.begin() as s:
            conn = s.connection()
            hnsw = sorted(ItemVectorRow.__table__.indexes, key=lambda ix: str(ix.name))
            stored = conn.execute(select(func.count()).select_from(ItemVectorRow)).scalar_one()
            rebuild = len(latest) >= BULK_REBUILD_ROWS and 2 * len(latest) >= stored
            if rebuild:  # a bulk load: building HNSW afresh is ~5x faster than row by row
                for ix in hnsw:
                    ix.drop(conn)
            conn.execute(stmt, [{"item_id": i, "model_id": model_id,
                                 "text_sha256": latest[i][0], "vector": latest[i][1]}
                                for i in sorted(latest)])
            if rebuild:
                for ix in hnsw:
                    ix.create(conn)
            _content_changed(s)
        return len(latest)

    def vector_hashes(self, model_id: str) -> dict[str, str]:
        """``{item_id: text_sha256}`` of the vectors stored for ``model_id``."""
        with self.sessions.begin() as s:
            return dict(s.execute(select(ItemVectorRow.item_id, ItemVectorRow.text_sha256)
                                  .where(ItemVectorRow.model_id == model_id)).all())

    def vectors(self, model_id: str) -> tuple[list[str], np.ndarray]:
        """Every item vector of ``model_id``, by item id ascending, as one float32 matrix."""
        with self.sessions.begin() as s:
            rows = s.execute(select(ItemVectorRow.item_id, ItemVectorRow.vector)
                             .join(ItemRow, ItemRow.id == ItemVectorRow.item_id)
                             .where(ItemVectorRow.model_id == model_id)).all()
        if not rows:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        rows = sorted(rows, key=lambda r: r[0])  # code point order, not the collation's
        return ([r[0] for r in rows],
                np.stack([np.asarray(r[1], dtype=np.float32) for r in rows]))

    def vector_batches(self, model_id: str, batch_size: int
                       ) -> Iterator[tuple[list[str], np.ndarray]]:
        """:meth:`vectors` in batches, ids ascending in code point order (``COLLATE "C"``)."""
        key = ItemVectorRow.item_id.collate("C")
        last: str | None = None
        while True:
            stmt = (select(ItemVectorRow.item_id, ItemVectorRow.vector)
                    .join(ItemRow, ItemRow.id == ItemVectorRow.item_id)
                    .where(ItemVectorRow.model_id == model_id)
                    .order_by(key).limit(int(batch_size)))
            if last is not None:
                stmt = stmt.where(key > last)
            with self.sessions.begin() as s:
                rows = s.execute(stmt).all()
            if not rows:
                return
            yield ([r[0] for r in rows],
                   np.stack([np.asarray(r[1], dtype=np.float32) for r in rows]))
            last = rows[-1][0]

    def vector_count(self, model_id: str) -> int:
        """Items with a vector for ``model_id``."""
        with self.sessions.begin() as s:
            return int(s.scalar(select(func.count()).select_from(ItemVectorRow)
                                .join(ItemRow, ItemRow.id == ItemVectorRow.item_id)
                                .where(ItemVectorRow.model_id == model_id)) or 0)

    def read_meta(self) -> dict[str, str]:
        """Every ``aiblox_meta`` row."""
        with self.sessions.begin() as s:
            return {k: v for k, v in s.execute(select(MetaRow.key, MetaRow.value)).all()}

    def write_meta(self, values: dict[str, str | None]) -> None:
        """Set (or, for None, delete) metadata keys in one transaction."""
        with self.sessions.begin() as s:
            for key in sorted(values):
                value = values[key]
                if value is None:
                    s.execute(delete(MetaRow).where(MetaRow.key == key))
                else:
                    stmt = pg_insert(MetaRow).values(key=key, value=value)
                    s.execute(stmt.on_conflict_do_update(index_elements=[MetaRow.key],
                                                         set_={"value": stmt.excluded.value}))


class EmbeddingCacheRepo:
    """Vectors by (model id, text sha256)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def get(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        hashes = sorted(set(text_hashes))
        if not hashes:
            return {}
        with self.sessions.begin() as s:
            rows = s.execute(select(EmbeddingCacheRow.text_sha256, EmbeddingCacheRow.vector)
                             .where(EmbeddingCacheRow.model_id == model_id,
                                    _any(EmbeddingCacheRow.text_sha256, hashes, "h"))).all()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        hashes = sorted(set(text_hashes))
        if not hashes:
            return set()
        with self.sessions.begin() as s:
            return set(s.execute(select(EmbeddingCacheRow.text_sha256).where(
                EmbeddingCacheRow.model_id == model_id,
                _any(EmbeddingCacheRow.text_sha256, hashes, "h"))).scalars())

    def put(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
            replace: bool = False) -> int:
        unique: dict[str, np.ndarray] = {}
        for h, vec in rows:
            unique.setdefault(h, np.asarray(vec, dtype=np.float32))
        if not unique:
            return 0
        table = EmbeddingCacheRow.__table__
        insert = pg_insert(table)
        stmt = (insert.on_conflict_do_update(
                    index_elements=[table.c.model_id, table.c.text_sha256],
                    set_={"vector": insert.excluded.vector}) if replace
                else insert.on_conflict_do_nothing()).returning(table.c.text_sha256)
        with self.sessions.begin() as s:
            result = s.connection().execute(
                stmt, [{"model_id": model_id, "text_sha256": h, "vector": unique[h]}
                       for h in sorted(unique)])
            return len(result.all())


class ChunkCacheRepo:
    """The :class:`~aiblox.stores.chunk_cache.ChunkCache` protocol on the ``chunk_cache``
    table: the same encoded rows and payload checks as ``DuckDBChunkCache``. ``errors(doing)``
    turns the driver's errors into the store's (:meth:`PostgresStore.db_errors
    <aiblox.stores.postgres.store.PostgresStore.db_errors>`: a write a read-only role may not
    do is a :class:`~aiblox.stores.base.StoreReadOnly`); by default they pass as raised."""

    def __init__(self, sessions: sessionmaker[Session],
                 clock: Callable[[], float] = time.time,
                 errors: Callable[[str], ContextManager[None]] | None = None) -> None:
        self.sessions = sessions
        self.clock = clock
        self.errors = errors or (lambda doing: contextlib.nullcontext())

    def get_many(self, keys: Sequence[ChunkCacheKey], ttl_seconds: int | None = None,
                 precomputed_only: bool = False) -> ChunkCacheLookup:
        wanted = sorted(set(map(ChunkCacheKey._make, keys)))
        lookup = ChunkCacheLookup()
        if not wanted:
            return lookup
        c = ChunkCacheRow
        with self.errors("read the chunk cache"), self.sessions.begin() as s:
            rows = s.execute(
                select(c.item_id, c.content_hash, c.chunker_id, c.embedding_model_id,
                       c.chunks_json, c.vectors, c.dim, c.payload_sha256, c.precomputed,
                       c.created_at)
                .where(_any(c.item_id, sorted({k.item_id for k in wanted}), "ids"))).all()
        found = {ChunkCacheKey(*r[:4]): tuple(r[4:]) for r in rows}
        now = self.clock()
        for key in wanted:
            classify_cached(lookup, key, found.get(key), ttl_seconds, precomputed_only, now)
        return lookup

    def put_many(self, entries: Iterable[ChunkCacheEntry]) -> int:
        latest = latest_entries(entries)
        if not latest:
            return 0
        now = self.clock()
        values = []
        for key in sorted(latest):
            e = latest[key]
            chunks_json, blob, dim, digest = encode_entry(e)
            values.append({**key._asdict(), "chunks_json": chunks_json, "vectors": blob,
                           "dim": dim, "n_chunks": len(e.chunks), "payload_sha256": digest,
                           "precomputed": bool(e.precomputed), "created_at": now})
        table = ChunkCacheRow.__table__
        stmt = pg_insert(table)
        x = stmt.excluded
        stmt = stmt.on_conflict_do_update(
            index_elements=list(ChunkCacheKey._fields),
            set_={"chunks_json": x.chunks_json, "vectors": x.vectors, "dim": x.dim,
                  "n_chunks": x.n_chunks, "payload_sha256": x.payload_sha256,
                  "precomputed": table.c.precomputed | x.precomputed,
                  "created_at": x.created_at})
        with self.errors("write the chunk cache"), self.sessions.begin() as s:
            s.connection().execute(stmt, values)
        return len(latest)

    def prune(self, current: dict[str, str]) -> int:
        ids = sorted(current)
        cur = func.unnest(bindparam("ids", ids, type_=ARRAY(Text)),
                          bindparam("hashes", [current[i] for i in ids], type_=ARRAY(Text))
                          ).table_valued("item_id", "content_hash").render_derived(name="cur")
        c = ChunkCacheRow
        keep = (select(cur.c.item_id).where(cur.c.item_id == c.item_id,
                                             cur.c.content_hash == c.content_hash).exists())
        with self.errors("prune the chunk cache"), self.sessions.begin() as s:
            return len(s.execute(delete(c).where(~keep).returning(c.item_id)).all())

    def precomputed_digest(self, chunker_id: str, model_id: str) -> tuple[int, str]:
        c = ChunkCacheRow
        query = (select(c.item_id, c.content_hash, c.payload_sha256)
                 .where(c.precomputed, c.chunker_id == chunker_id,
                        c.embedding_model_id == model_id)
                 .order_by(c.item_id.collate("C"), c.content_hash.collate("C")))
        with self.errors("read the chunk cache"), self.sessions.begin() as s:
            return entries_digest((str(i), str(h), str(p)) for i, h, p in
                                  s.execute(query.execution_options(yield_per=50_000)))

    def count(self) -> int:
        with self.errors("count the chunk cache"), self.sessions.begin() as s:
            return int(s.scalar(select(func.count()).select_from(ChunkCacheRow)) or 0)
