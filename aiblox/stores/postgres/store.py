"""The reference backend: PostgreSQL with pgvector and tsvector, through SQLAlchemy 2.

Items and caches go through the ORM repositories (:mod:`.repos`); the two searches are the only
raw SQL, each in its own query builder (:mod:`.fts_query`, :mod:`.vector_query`). Scores follow
the store contract: higher is better, ties broken by item id ascending.

Full-text scores are ``ts_rank_cd`` (or ``ts_rank``) values, not BM25: rankings differ from the
DuckDB store's, by design of the two engines (``benchmarks/backend_parity.py`` measures how).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import create_engine, exc, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.embedding.cache import damaged_vectors
from aiblox.fusion.types import RankedList
from aiblox.inputs import mask_url_passwords
from aiblox.stores.base import (
    DamagedCachedVectors,
    ItemText,
    StoreError,
    StoreReadOnly,
    UpsertReport,
)
from aiblox.stores.postgres.fts_query import fts_batch_query, tsquery_check
from aiblox.stores.postgres.limits import (
    check_id,
    check_item,
    is_data_error,
    locate_refused,
    sqlstate,
)
from aiblox.stores.postgres.models import FTS_CONFIG, VECTOR_DIM
from aiblox.stores.postgres.pack_repo import PackRepo
from aiblox.stores.postgres.repos import ChunkCacheRepo, EmbeddingCacheRepo, ItemRepo
from aiblox.stores.postgres.schema import create_schema, current_meta
from aiblox.stores.postgres.vector_query import planner_settings, vector_batch_query

__all__ = ["PostgresStore", "is_postgres_url", "mask_url", "normalize_url"]

_SCHEMES = ("postgresql+psycopg://", "postgresql://", "postgres://")


def is_postgres_url(db: str) -> bool:
    """True for ``postgresql+psycopg://``, ``postgresql://`` and ``postgres://`` URLs."""
    return str(db).startswith(_SCHEMES)


def normalize_url(db: str | URL) -> URL:
    """The URL with the ``postgresql+psycopg`` driver (psycopg 3)."""
    try:
        url = make_url(str(db)) if not isinstance(db, URL) else db
    except exc.ArgumentError as e:
        raise StoreError(f"not a PostgreSQL URL: {mask_url(str(db))}") from e
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername != "postgresql+psycopg":
        raise StoreError(f"{mask_url(str(db))}: use a postgresql+psycopg:// URL")
    return url


def mask_url(db: str | URL) -> str:
    """The URL with its passwords replaced by ``***``: the userinfo's and libpq's
    ``password`` and ``sslpassword`` query parameters (SQLAlchemy's ``hide_password`` leaves
    those in clear, and psycopg takes them)."""
    from aiblox.stores import mask_password

    try:
        url = make_url(str(db)) if not isinstance(db, URL) else db
        return mask_password(url.render_as_string(hide_password=True))
    except Exception:  # noqa: BLE001 - not parseable: hide everything between : and @
        import re

        return mask_password(re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(db)))


def _unreachable(error: exc.DBAPIError) -> bool:
    """True when the server could not be reached or the connection broke: SQLSTATE class 08,
    a server shutting down (57P01-57P03), or no SQLSTATE at all (a connection never made).
    Not a value the server refuses (class 22, 54: a limit), which psycopg also raises as an
    ``OperationalError``."""
    if error.connection_invalidated:
        return True
    state = sqlstate(error)
    if state:
        return state.startswith("08") or state in ("57P01", "57P02", "57P03")
    return isinstance(error, exc.OperationalError)


class PostgresStore:
    """Items, tsvector full-text search, pgvector search and both caches in one database."""

    kind = "postgres"

    def __init__(self, url: str | URL, dim: int = VECTOR_DIM, connect_timeout: int = 10,
                 pool_size: int = 5) -> None:
        self.url = normalize_url(url)
        self.location = mask_url(self.url)
        self.engine = create_engine(self.url, pool_pre_ping=True, pool_size=pool_size,
                                    connect_args={"connect_timeout": connect_timeout})
        self.sessions: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)
        # a current schema is only read (a SELECT-only role opens a populated store); the
        # schema is created, under its lock, only when something is missing
        with self.db_errors("read the store metadata"), self.engine.connect() as conn:
            meta = current_meta(conn, self.location, dim)
        if meta is None:
            with self.db_errors("create the schema"), self.engine.begin() as conn:
                meta = create_schema(conn, self.location, dim)
        self.meta = meta
        self.dim = int(self.meta["vector_dim"])
        self.fts_config = self.meta.get("fts_config", FTS_CONFIG)
        self.items = ItemRepo(self.sessions, self.dim)
        """Items and item vectors."""
        self.embeddings = EmbeddingCacheRepo(self.sessions)
        """The embedding cache."""
        self.packs = PackRepo(self.sessions, self.location)
        """Audit packs (``evidence_packs``)."""

    # -- errors ----------------------------------------------------------------------------
    @contextmanager
    def db_errors(self, doing: str) -> Iterator[None]:
        """Turn driver errors into a :class:`StoreError` naming the (masked) URL and what was
        being done (:class:`~aiblox.stores.base.StoreReadOnly` for a write the role may not
        do: ``permission denied for table ...``); repositories on this store's engine (the
        chunk cache, the evidence bundle tracking tables) wrap their calls in it too."""
        try:
            yield
        except StoreError:
            raise
        except exc.DBAPIError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()
            # a URL or connection string in the driver's text shown without its password;
            # the rest as it is (the password's text replaced anywhere garbled the message:
            # with password "x", "server closed the connection une***pectedly")
            reason_text = mask_url_passwords(reason[0] if reason else type(e).__name__)
            if _unreachable(e):
                raise StoreError(f"PostgreSQL at {self.location} is unreachable or dropped the "
                                 f"connection ({doing}): {reason_text}") from None
            if sqlstate(e) == "42501":  # insufficient_privilege: a role that may only read
                raise StoreReadOnly(f"PostgreSQL at {self.location} failed to {doing}: "
                                    f"{reason_text}") from None
            raise StoreError(f"PostgreSQL at {self.location} failed to {doing}: "
                             f"{reason_text}") from e

    # -- items -----------------------------------------------------------------------------
    def check_item(self, item: ItemRecord) -> None:
        """Raise :class:`~aiblox.stores.base.ItemRefused` (file, line, id and field) when
        PostgreSQL cannot hold ``item`` (:mod:`.limits`: an id over 2000 bytes, a full-text
        entry over 1 MiB), writing nothing: an ingest checks every document first."""
        with self.db_errors("check a document"):
            check_item(self.sessions, item)

    def upsert_items(self, items: Iterable[ItemRecord]) -> UpsertReport:
        batch = list(items)
        for item in batch:  # the rule every write keeps, not only what the server refuses
            check_id(item)
        with self.db_errors("upsert items"):
            try:
                return self.items.upsert(batch)
            except exc.DBAPIError as e:
                if not is_data_error(e):
                    raise
                refused = locate_refused(self.sessions, batch)  # which document, which field
                if refused is None:
                    raise
                raise refused from None

    def delete_items(self, ids: Sequence[str]) -> int:
        with self.db_errors("delete items"):
            return self.items.delete(ids)

    def get_items(self, ids: Sequence[str]) -> dict[str, ItemRecord]:
        with self.db_errors("read items"):
            return self.items.get(ids)

    def item_hashes(self) -> dict[str, str]:
        with self.db_errors("read item hashes"):
            return self.items.hashes()

    def iter_items(self, batch_size: int = 10000) -> Iterator[list[ItemRecord]]:
        with self.db_errors("read items"):
            yield from self.items.batches(batch_size)

    def iter_item_texts(self, batch_size: int = 10000) -> Iterator[list[ItemText]]:
        with self.db_errors("read items"):
            yield from self.items.text_batches(batch_size)

    def matching_ids(self, filters: dict[str, Any]) -> list[str]:
        with self.db_errors("filter items"):
            return self.items.matching(filters)

    def count_items(self) -> int:
        with self.db_errors("count items"):
            return self.items.count()

    def set_item_vectors(self, model_id: str,
                         rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        with self.db_errors("write item vectors"):
            return self.items.set_vectors(model_id, rows)

    def set_item_vectors_from_cache(self, model_id: str,
                                    rows: Sequence[tuple[str, str]]) -> int:
        found = self.get_embeddings(model_id, [h for _, h in rows])
        lacking = sum(h not in found for _, h in rows)
        if lacking:
            raise StoreError(f"{self.location}: the embedding cache lacks {lacking} of "
                             f"{len(rows)} texts' {model_id} vectors")
        damaged = damaged_vectors(found, self.dim)  # pgvector holds no NaN: a wrong length
        if damaged:
            raise DamagedCachedVectors(f"{self.location}: {len(damaged)} cached {model_id} "
                                       f"vectors are damaged (not {self.dim} finite values)",
                                       damaged)
        return self.set_item_vectors(model_id, [(i, h, found[h]) for i, h in rows])

    def item_vector_hashes(self, model_id: str) -> dict[str, str]:
        with self.db_errors("read item vector hashes"):
            return self.items.vector_hashes(model_id)

    def item_vectors(self, model_id: str) -> tuple[list[str], np.ndarray]:
        with self.db_errors("read item vectors"):
            return self.items.vectors(model_id)

    def iter_item_vectors(self, model_id: str, batch_size: int = 50_000
                          ) -> Iterator[tuple[list[str], np.ndarray]]:
        with self.db_errors("read item vectors"):
            yield from self.items.vector_batches(model_id, batch_size)

    def check_readable(self) -> None:
        """Nothing to check: the server verifies its own pages as it reads them."""

    def vector_count(self, model_id: str) -> int:
        with self.db_errors("count item vectors"):
            return self.items.vector_count(model_id)

    def read_meta(self) -> dict[str, str]:
        with self.db_errors("read the store metadata"):
            return self.items.read_meta()

    def write_meta(self, values: dict[str, str | None]) -> None:
        with self.db_errors("write the store metadata"):
            self.items.write_meta(values)

    # -- search ----------------------------------------------------------------------------
    def fts_search_many(self, queries: Sequence[str], k: int, cfg: FtsConfig | None = None,
                        filters: dict[str, Any] | None = None) -> list[RankedList]:
        """Full-text top ``k`` per query (tsquery per ``cfg.mode``, ranked by ``cfg.rank_func``)
        in one statement; score desc, id asc."""
        cfg = cfg or FtsConfig()
        results: list[RankedList] = [[] for _ in queries]
        if not queries:
            return results
        stmt, params = fts_batch_query(queries, k, cfg, self.fts_config, filters)
        with self.db_errors("run a full-text search"):
            try:
                with self.sessions.begin() as s:
                    rows = s.execute(stmt, params).all()
            except exc.ProgrammingError as e:
                raise self._fts_error(queries, cfg, e) from None
            except exc.DataError as e:
                raise self._fts_error(queries, cfg, e) from None
        for qidx, doc_id, score in rows:
            results[qidx].append((doc_id, float(score)))
        return results

    def _fts_error(self, queries: Sequence[str], cfg: FtsConfig, error: Exception) -> StoreError:
        """A clear error for a failed full-text batch: the query that does not parse, or the
        configuration that does not exist."""
        reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
        for q in queries:
            stmt, params = tsquery_check(q, cfg, self.fts_config)
            try:
                with self.sessions.begin() as s:
                    s.execute(stmt, params)
            except exc.DBAPIError as e:
                why = str(getattr(e, "orig", e)).strip().splitlines()[0]
                if "configuration" in why:
                    return StoreError(f"full-text configuration {cfg.config!r} is not known to "
                                      f"PostgreSQL at {self.location}: {why}")
                return StoreError(f"full-text query {q!r} does not parse in mode "
                                  f"{cfg.mode!r}: {why}")
        return StoreError(f"full-text search failed at {self.location}: {reason}")

    def vector_search_many(self, vectors: np.ndarray, model_id: str, k: int,
                           cfg: VectorConfig | None = None,
                           filters: dict[str, Any] | None = None,
                           index: str | None = None, ef_search: int | None = None
                           ) -> list[RankedList]:
        """Vector top ``k`` per query vector (higher similarity first, then id asc).

        ``index`` / ``ef_search`` override ``cfg.index`` / ``cfg.ef_search``: ``exact`` scans
        every vector; ``hnsw`` walks the HNSW index of ``cfg.distance`` with ``ef_search``
        candidates (default ``max(40, k)``), so it returns at most ``ef_search`` hits per query
        and, under filters, only those among the candidates that pass.
        """
        cfg = cfg or VectorConfig()
        index = index or cfg.index
        if index == "auto":  # the native path reads auto as exact
            index = "exact"
        ef_search = ef_search if ef_search is not None else cfg.ef_search
        if index not in ("exact", "hnsw"):
            raise StoreError(f"unknown vector index {index!r}: use 'exact' or 'hnsw'")
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        results: list[RankedList] = [[] for _ in range(len(vectors))]
        if len(vectors) == 0:
            return results
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise StoreError(f"{self.location}: query vectors of shape {vectors.shape}, store "
                             f"holds {self.dim}-dim vectors")
        stmt, params = vector_batch_query(vectors, model_id, k, cfg.distance, self.dim, index,
                                          filters)
        with self.db_errors("run a vector search"), self.sessions.begin() as s:
            for name, value in planner_settings(index, ef_search, k):
                s.execute(text("SELECT set_config(:n, :v, true)"), {"n": name, "v": value})
            rows = s.execute(stmt, params).all()
        for qidx, doc_id, score in rows:
            score = float(score)
            if math.isnan(score) or (cfg.min_score is not None and score < cfg.min_score):
                continue
            results[qidx].append((doc_id, score))
        for r in results:
            r.sort(key=lambda hit: (-hit[1], hit[0]))
        return results

    def explain_vector_search(self, vector: np.ndarray, model_id: str, k: int,
                              cfg: VectorConfig | None = None, index: str = "exact") -> str:
        """PostgreSQL's plan for one vector search (to check which index serves it)."""
        cfg = cfg or VectorConfig()
        stmt, params = vector_batch_query(np.atleast_2d(vector), model_id, k, cfg.distance,
                                          self.dim, index)
        with self.db_errors("explain a vector search"), self.sessions.begin() as s:
            for name, value in planner_settings(index, None, k):
                s.execute(text("SELECT set_config(:n, :v, true)"), {"n": name, "v": value})
            plan = s.execute(text("EXPLAIN " + stmt.text), params).scalars().all()
        return "\n".join(plan)

    # -- caches ----------------------------------------------------------------------------
    def get_embeddings(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        with self.db_errors("read the embedding cache"):
            return self.embeddings.get(model_id, text_hashes)

    def cached_hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        with self.db_errors("read the embedding cache"):
            return self.embeddings.hashes(model_id, text_hashes)

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
                       replace: bool = False) -> int:
        with self.db_errors("write the embedding cache"):
            return self.embeddings.put(model_id, rows, replace=replace)

    # -- audit packs ---------------------------------------------------------------------
    def put_evidence_pack(self, pack_id: str, parent_pack_id: str | None, sha256: str,
                          json_text: str, *, tenant_id: str = "default",
                          trace_id: str | None = None, created_at: str | None = None,
                          signed: bool = False) -> bool:
        with self.db_errors("store an evidence pack"):
            return self.packs.put_pack(pack_id, parent_pack_id, sha256, json_text,
                                          tenant_id=tenant_id, trace_id=trace_id,
                                          created_at=created_at, signed=signed)

    def get_evidence_pack(self, pack_id: str) -> dict[str, Any] | None:
        with self.db_errors("read an evidence pack"):
            return self.packs.get_pack(pack_id)

    def list_evidence_packs(self, with_json: bool = False) -> list[dict[str, Any]]:
        with self.db_errors("list evidence packs"):
            return self.packs.list_packs(with_json)

    def chunk_cache(self) -> ChunkCacheRepo:
        """The store's chunk cache (the ``chunk_cache`` table), its errors named as the
        store's (:meth:`db_errors`)."""
        return ChunkCacheRepo(self.sessions, errors=self.db_errors)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
