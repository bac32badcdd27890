"""Idempotent, versioned creation of the PostgreSQL schema.

Creating twice changes nothing; a database made by another schema version, or holding vectors of
another dimension, is refused with a clear error instead of being silently altered. Concurrent
creators are serialised by a transaction-scoped advisory lock.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from aiblox.stores.base import StoreError
from aiblox.stores.postgres.models import FTS_CONFIG, VECTOR_DIM, Base, MetaRow

__all__ = ["SCHEMA_VERSION", "create_schema", "read_meta"]

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


def create_schema(conn: Connection, location: str, dim: int = VECTOR_DIM) -> dict[str, str]:
    """Create the extension, tables and indexes if missing; returns the stored metadata.

    Runs inside the caller's transaction on ``conn``.
    """
    if dim != VECTOR_DIM:
        raise StoreError(f"{location}: the PostgreSQL store holds {VECTOR_DIM}-dim vectors "
                         f"(vector({VECTOR_DIM}) with an HNSW index), asked for {dim}")
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    meta = read_meta(conn)
    version = meta.get("schema_version")
    if version is not None and version != SCHEMA_VERSION:
        raise StoreError(f"{location}: schema version {version}, this aiblox reads "
                         f"{SCHEMA_VERSION}")
    if meta.get("vector_dim") not in (None, str(dim)):
        raise StoreError(f"{location}: store holds {meta['vector_dim']}-dim vectors, "
                         f"asked for {dim}")
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
    defaults = {"schema_version": SCHEMA_VERSION, "vector_dim": str(dim),
                "fts_config": FTS_CONFIG}
    conn.execute(pg_insert(MetaRow).on_conflict_do_nothing(index_elements=[MetaRow.key]),
                 [{"key": k, "value": v} for k, v in sorted(defaults.items())])
    return read_meta(conn)
