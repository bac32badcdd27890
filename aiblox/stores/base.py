"""The store protocol every backend implements (DuckDB embedded default, PostgreSQL reference)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.fusion.types import RankedList

__all__ = ["FILTER_FIELDS", "Store", "StoreError", "UpsertReport", "parse_filters"]

FILTER_FIELDS = ("id", "kind", "source", "source_ref")
"""Item columns a filter may name directly; anything else must be ``metadata.<key>``."""


class StoreError(RuntimeError):
    """A store operation that cannot be done (bad filter, dimension mismatch, closed store)."""


class UpsertReport(BaseModel):
    """What an upsert changed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inserted: int = 0
    """Items that were not in the store."""
    updated: int = 0
    """Items whose content hash changed."""
    unchanged: int = 0
    """Items already stored with the same content hash."""


def parse_filters(filters: dict[str, Any]) -> list[tuple[str, str | None, list[Any]]]:
    """Validate filters into ``(column, metadata_key, allowed_values)`` triples, sorted.

    ``{"kind": "doc", "metadata.year": [2020, 2021]}`` means kind = 'doc' AND the metadata field
    ``year`` is 2020 or 2021 (compared as strings).
    """
    parsed = []
    for key in sorted(filters):
        value = filters[key]
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        if key in FILTER_FIELDS:
            parsed.append((key, None, [str(v) for v in values]))
        elif key.startswith("metadata.") and len(key) > len("metadata."):
            parsed.append(("metadata", key[len("metadata."):], [str(v) for v in values]))
        else:
            raise StoreError(
                f"unknown filter field {key!r}: use one of {FILTER_FIELDS} or 'metadata.<key>'"
            )
    return parsed


@runtime_checkable
class Store(Protocol):
    """Items, a full-text index, item vectors and the embedding cache behind one interface."""

    kind: str
    """Backend name, e.g. ``duckdb`` or ``postgres``."""
    location: str
    """Where the store lives (file path or URL with the password masked)."""

    def upsert_items(self, items: Iterable[ItemRecord]) -> UpsertReport:
        """Insert new items and replace changed ones (by content hash), atomically."""
        ...

    def delete_items(self, ids: Sequence[str]) -> int:
        """Delete items (and their vectors); returns how many existed."""
        ...

    def get_items(self, ids: Sequence[str]) -> dict[str, ItemRecord]:
        """Stored items by id (unknown ids are absent)."""
        ...

    def item_hashes(self) -> dict[str, str]:
        """``{item_id: content_hash}`` of every stored item."""
        ...

    def count_items(self) -> int:
        """Number of stored items."""
        ...

    def set_item_vectors(self, model_id: str,
                         rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Store ``(item_id, text_sha256, vector)`` rows for ``model_id``; returns rows written."""
        ...

    def item_vector_hashes(self, model_id: str) -> dict[str, str]:
        """``{item_id: text_sha256}`` of the vectors stored for ``model_id``."""
        ...

    def fts_search_many(self, queries: Sequence[str], k: int, cfg: FtsConfig | None = None,
                        filters: dict[str, Any] | None = None) -> list[RankedList]:
        """Full-text top ``k`` for each query, best first (score desc, id asc)."""
        ...

    def vector_search_many(self, vectors: np.ndarray, model_id: str, k: int,
                           cfg: VectorConfig | None = None,
                           filters: dict[str, Any] | None = None) -> list[RankedList]:
        """Vector top ``k`` for each query vector (higher similarity first, then id asc)."""
        ...

    def get_embeddings(self, model_id: str, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Embedding cache lookup."""
        ...

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]]) -> int:
        """Embedding cache insert; returns rows new."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
