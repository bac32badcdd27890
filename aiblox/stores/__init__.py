"""Stores behind one protocol: DuckDB (embedded default) and PostgreSQL (reference backend)."""

from __future__ import annotations

import re
from pathlib import Path

from aiblox.inputs import mask_url_passwords
from aiblox.stores.base import (
    FILTER_FIELDS,
    DamagedCachedVectors,
    FilterClause,
    Store,
    StoreError,
    StoreMismatch,
    StoreReadOnly,
    UpsertReport,
    parse_filters,
    store_writes,
)
from aiblox.stores.chunk_cache import (
    ChunkCache,
    ChunkCacheEntry,
    ChunkCacheKey,
    ChunkCacheLookup,
    DuckDBChunkCache,
    InMemoryChunkCache,
)
from aiblox.stores.duckdb_lock import StoreBusy
from aiblox.stores.duckdb_store import DuckDBStore
from aiblox.stores.identity import DatasetBinding, SyncRecord, check_searchable, store_fingerprint
from aiblox.stores.ingest import IngestReport, ingest_items, sync_dataset

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def mask_password(db: str | Path) -> str:
    """``db`` with the passwords of a URL shown as ``***``
    (:func:`~aiblox.inputs.mask_url_passwords`). A file path is unchanged."""
    text = str(db)
    return mask_url_passwords(text) if _URL.match(text) else text


STORE_FORMS = ("a DuckDB file path, duckdb:///PATH or a PostgreSQL URL (postgresql+psycopg://, "
               "postgresql://, postgres://)")
"""What names a store (``--db``, a sweep spec's ``db``)."""


def store_backend(db: str | Path) -> str:
    """The backend ``db`` names: ``postgres`` for a PostgreSQL URL (``postgresql+psycopg://``,
    ``postgresql://``, ``postgres://``; any text starting ``postgresql``, which
    :func:`~aiblox.stores.postgres.normalize_url` checks), ``duckdb`` for a file path,
    ``duckdb:///PATH`` or ``:memory:``. Any other ``scheme://`` is a :class:`StoreError`
    naming the scheme, never the URL (its password): it was taken for a DuckDB file path, so
    ``mysql://user:pw@host/db`` or a misspelt ``postgress://`` made a store under the working
    folder, the password in a folder's name."""
    text = str(db)
    scheme = _URL.match(text)
    if text.startswith(("postgresql", "postgres://")):
        return "postgres"
    if scheme is None or text.startswith("duckdb:///"):
        return "duckdb"
    raise StoreError(f"unknown store scheme {scheme.group(0)!r}: a store is {STORE_FORMS}")


def open_store(db: str | Path, dim: int | None = 384, shared: bool = False) -> Store:
    """Open a store from a file path, ``duckdb:///path``, ``:memory:`` or a PostgreSQL URL
    (``postgresql+psycopg://user:pass@host/db``, needs the ``postgres`` extra). ``dim``: the
    vectors' dimension, a store holding another refused (:class:`StoreError`); None: the one
    the store holds (a new store: 384), as a reader opens a store whatever its embedder.
    ``shared``: a DuckDB file is held alone only while written
    (:mod:`aiblox.stores.duckdb_lock`). Any other ``scheme://`` is refused before anything is
    made (:func:`store_backend`)."""
    text = str(db)
    if store_backend(text) == "postgres":
        try:
            from aiblox.stores.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError("the PostgreSQL backend needs: pip install 'aiblox[postgres]' "
                             f"({exc})") from exc
        return PostgresStore(text) if dim is None else PostgresStore(text, dim=dim)
    if text.startswith("duckdb:///"):
        text = text[len("duckdb:///"):]
    return DuckDBStore(text, dim=dim, shared=shared)


__all__ = [
    "ChunkCache",
    "ChunkCacheEntry",
    "ChunkCacheKey",
    "ChunkCacheLookup",
    "DamagedCachedVectors",
    "DatasetBinding",
    "DuckDBChunkCache",
    "DuckDBStore",
    "FILTER_FIELDS",
    "FilterClause",
    "InMemoryChunkCache",
    "IngestReport",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreMismatch",
    "StoreReadOnly",
    "SyncRecord",
    "UpsertReport",
    "check_searchable",
    "ingest_items",
    "mask_password",
    "open_store",
    "parse_filters",
    "store_backend",
    "store_fingerprint",
    "store_writes",
    "sync_dataset",
]
