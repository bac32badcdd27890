"""SQLAlchemy 2 ORM models of the PostgreSQL store: the same tables as the DuckDB store.

- ``aiblox_meta``: schema version, vector dimension and the full-text configuration.
- ``items``: id, kind, source, source_ref, title, text, metadata (JSONB), content_hash, and
  ``tsv``, a STORED generated ``tsvector`` over ``title || ' ' || text`` (regconfig
  ``english``) with a GIN index, so the full-text index is never stale. A document whose id or
  ``tsvector`` exceeds PostgreSQL's limits is refused before an ingest writes (:mod:`.limits`).
- ``item_vectors``: one ``vector(384)`` per (item, embedding model) with the sha256 of the text
  embedded, and one HNSW index per pgvector operator class (cosine, L2, inner product).
- ``embedding_cache``: vectors by (model id, text sha256), any dimension.
- ``chunk_cache``: the late-chunking cache, the same encoded rows as ``DuckDBChunkCache``.
- ``evidence_packs``: the audit pack of each answer, insert-only, the same columns as the
  DuckDB store's.

The evidence bundle tracking tables are not here: :mod:`aiblox.bundles` declares and creates
them when bundles are used.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    Boolean,
    Computed,
    Double,
    Index,
    Integer,
    LargeBinary,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "Base",
    "ChunkCacheRow",
    "EmbeddingCacheRow",
    "EvidencePackRow",
    "FTS_CONFIG",
    "HNSW_OPS",
    "ItemRow",
    "ItemVectorRow",
    "MetaRow",
    "VECTOR_DIM",
]

VECTOR_DIM = 384
"""Dimension of ``item_vectors.vector`` (pgvector's HNSW index needs a fixed dimension)."""
FTS_CONFIG = "english"
"""Text search configuration of the stored ``items.tsv`` column."""
HNSW_OPS = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops", "ip": "vector_ip_ops"}
"""pgvector operator class of the HNSW index serving each ``VectorConfig.distance``."""
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


class Base(DeclarativeBase):
    """Declarative base of the aiblox PostgreSQL schema."""

    __table__: ClassVar[Table]
    """Every model here maps one ``Table`` (SQLAlchemy types it as the wider ``FromClause``,
    which has no ``indexes`` and which ``insert`` does not take)."""


class MetaRow(Base):
    """A key/value row of store metadata (``schema_version``, ``vector_dim``, ``fts_config``)."""

    __tablename__ = "aiblox_meta"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ItemRow(Base):
    """One stored item; ``tsv`` is computed by PostgreSQL on every insert and update."""

    __tablename__ = "items"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)
    source_ref: Mapped[str | None] = mapped_column(Text, nullable=True)
    title: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB)
    content_hash: Mapped[str] = mapped_column(Text)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed(f"to_tsvector('{FTS_CONFIG}'::regconfig, title || ' ' || text)",
                           persisted=True))

    __table_args__ = (Index("ix_items_tsv", "tsv", postgresql_using="gin"),)


class ItemVectorRow(Base):
    """The vector of an item's embedding text under one embedding model."""

    __tablename__ = "item_vectors"

    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    model_id: Mapped[str] = mapped_column(Text, primary_key=True)
    text_sha256: Mapped[str] = mapped_column(Text)
    vector: Mapped[np.ndarray] = mapped_column(VECTOR(VECTOR_DIM))

    __table_args__ = tuple(
        Index(f"ix_item_vectors_hnsw_{name}", "vector", postgresql_using="hnsw",
              postgresql_with={"m": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION},
              postgresql_ops={"vector": ops})
        for name, ops in HNSW_OPS.items())


class EmbeddingCacheRow(Base):
    """A cached embedding of a text (by sha256) under one model."""

    __tablename__ = "embedding_cache"

    model_id: Mapped[str] = mapped_column(Text, primary_key=True)
    text_sha256: Mapped[str] = mapped_column(Text, primary_key=True)
    vector: Mapped[np.ndarray] = mapped_column(VECTOR())


class ChunkCacheRow(Base):
    """A chunk cache entry, encoded by :func:`aiblox.stores.chunk_cache.encode_entry`."""

    __tablename__ = "chunk_cache"

    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    content_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    chunker_id: Mapped[str] = mapped_column(Text, primary_key=True)
    embedding_model_id: Mapped[str] = mapped_column(Text, primary_key=True)
    chunks_json: Mapped[str] = mapped_column(Text)
    vectors: Mapped[bytes] = mapped_column(LargeBinary)
    dim: Mapped[int] = mapped_column(Integer)
    n_chunks: Mapped[int] = mapped_column(Integer)
    payload_sha256: Mapped[str] = mapped_column(Text)
    precomputed: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[float] = mapped_column(Double)


class EvidencePackRow(Base):
    """A stored audit pack (:class:`aiblox.evidence.EvidencePack`, JSON verbatim), insert-only."""

    __tablename__ = "evidence_packs"

    pack_id: Mapped[str] = mapped_column(Text, primary_key=True)
    parent_pack_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    tenant_id: Mapped[str] = mapped_column(Text)
    trace_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[str | None] = mapped_column(Text, nullable=True)
    sha256: Mapped[str] = mapped_column(Text)
    signed: Mapped[bool] = mapped_column(Boolean)
    json: Mapped[str] = mapped_column(Text)
