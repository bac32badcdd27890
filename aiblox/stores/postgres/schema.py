"""Idempotent, versioned creation of the PostgreSQL schema.

Creating twice changes nothing; a database made by another schema version, or holding vectors of
another dimension, is refused with a clear error instead of being silently altered. Concurrent
creators are serialised by a transaction-scoped advisory lock.

A store whose schema is complete and current is opened by reading alone (:func:`current_meta`:
no lock, no DDL, no insert), so a role granted only ``SELECT`` can search and score a populated
store; only a store with something to create goes through :func:`create_schema`.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from aiblox.stores.base import StoreError
from aiblox.stores.postgres.models import FTS_CONFIG, VECTOR_DIM, Base, MetaRow

__all__ = ["SCHEMA_VERSION", "create_schema", "current_meta", "read_meta"]

SCHEMA_VERSION = "1"
"""Version of the tables in :mod:`aiblox.stores.postgres.models`; stored in ``aiblox_meta``."""
_LOCK_KEY = 0x_A1B1_0C5E
"""Advisory lock id held while the schema is created."""


def read_meta(conn: Connection) -> dict[str, str]:
    """``aiblox_meta`` as a dict (empty when the table does not exist yet)."""
    exists = conn.execute(text("SELECT to_regclass('aiblox_meta') IS NOT NULL")).scalar_one()
    if not exists:
        return {}
    return dict(conn.execute(select(MetaRow.key, MetaRow.value)).all())


def _defaults(dim: int) -> dict[str, str]:
    """The metadata every store of this schema holds (written once, by its creator)."""
    return {"schema_version": SCHEMA_VERSION, "vector_dim": str(dim), "fts_config": FTS_CONFIG}


def _check_dim(location: str, dim: int) -> None:
    if dim != VECTOR_DIM:
        raise StoreError(f"{location}: the PostgreSQL store holds {VECTOR_DIM}-dim vectors "
                         f"(vector({VECTOR_DIM}) with an HNSW index), asked for {dim}")


def _check_meta(meta: dict[str, str], location: str, dim: int) -> None:
    """Refuse a store of another schema version or vector dimension (:class:`StoreError`)."""
    version = meta.get("schema_version")
    if version is not None and version != SCHEMA_VERSION:
        raise StoreError(f"{location}: schema version {version}, this aiblox reads "
                         f"{SCHEMA_VERSION}")
    if meta.get("vector_dim") not in (None, str(dim)):
        raise StoreError(f"{location}: store holds {meta['vector_dim']}-dim vectors, "
                         f"asked for {dim}")


def current_meta(conn: Connection, location: str, dim: int = VECTOR_DIM) -> dict[str, str] | None:
    """The stored metadata when the schema is complete and current: every table of
    :mod:`.models` exists (so the ``vector`` extension does: its columns need it) and
    ``aiblox_meta`` holds this schema version, ``dim`` and every default key; else None
    (:func:`create_schema` has something to do). Reads only, so a role granted only
    ``SELECT`` opens a populated store; a store of another version or dimension is refused
    here as :func:`create_schema` refuses it."""
    _check_dim(location, dim)
    names = sorted(Base.metadata.tables)
    present = conn.execute(text("SELECT count(*) FROM unnest(CAST(:names AS text[])) AS t(name) "
                                "WHERE to_regclass(t.name) IS NOT NULL"),
                           {"names": names}).scalar_one()
    if present != len(names):
        return None
    meta = read_meta(conn)
    _check_meta(meta, location, dim)
    if any(meta.get(k) is None for k in _defaults(dim)):
        return None
    return meta


def create_schema(conn: Connection, location: str, dim: int = VECTOR_DIM) -> dict[str, str]:
    """Create the extension, tables and indexes if missing; returns the stored metadata.

    Runs inside the caller's transaction on ``conn``.
    """
    _check_dim(location, dim)
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    meta = read_meta(conn)
    _check_meta(meta, location, dim)
    has_vector = conn.execute(
        text("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")).scalar_one()
    if not has_vector:
        try:
            with conn.begin_nested():
                conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        except Exception as exc:
            raise StoreError(f"{location}: the pgvector extension is not installed and cannot "
                             f"be created here; run 'CREATE EXTENSION vector' as a superuser "
                             f"({str(exc).splitlines()[0]})") from exc
    Base.metadata.create_all(conn, checkfirst=True)
    conn.execute(pg_insert(MetaRow).on_conflict_do_nothing(index_elements=[MetaRow.key]),
                 [{"key": k, "value": v} for k, v in sorted(_defaults(dim).items())])
    return read_meta(conn)
