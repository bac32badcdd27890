"""Ingest items into a store: upsert by content hash, then vectors through the embedding cache.

Idempotent: ingesting the same items again changes nothing and embeds nothing. A changed item
gets a new content hash, a rebuilt full-text entry (the index is marked stale) and a new vector.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from aiblox.contracts.items import ItemRecord
from aiblox.embedding.cache import CachedEmbedder
from aiblox.hashing import sha256_text
from aiblox.stores.base import Store, UpsertReport

__all__ = ["IngestReport", "ingest_items"]


class IngestReport(BaseModel):
    """What an ingest did."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    items: UpsertReport
    """Inserted, updated and unchanged item counts."""
    vectors_written: int = 0
    """Item vectors (re)computed or taken from the embedding cache and written."""
    embedding_cache_hits: int = 0
    """Texts whose vector came from the embedding cache."""
    embedding_cache_misses: int = 0
    """Texts the embedder had to embed."""


def ingest_items(store: Store, items: Sequence[ItemRecord], embedder: CachedEmbedder | None,
                 batch_size: int = 2000, progress: bool = True) -> IngestReport:
    """Upsert ``items`` in batches, then give every item a vector for ``embedder``'s model."""
    total = UpsertReport()
    bar = tqdm(total=len(items), desc="ingest items", unit="doc", disable=not progress)
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        r = store.upsert_items(batch)
        total.inserted += r.inserted
        total.updated += r.updated
        total.unchanged += r.unchanged
        bar.update(len(batch))
    bar.close()
    report = IngestReport(items=total)
    if embedder is None:
        return report
    have = store.item_vector_hashes(embedder.model_id)
    hashed = [(it, sha256_text(it.embedding_text)) for it in items]
    todo = [(it, h) for it, h in hashed if have.get(it.id) != h]
    hits, misses = embedder.hits, embedder.misses
    for start in range(0, len(todo), batch_size):
        pending = todo[start:start + batch_size]
        vectors = embedder.embed([it.embedding_text for it, _ in pending])
        report.vectors_written += store.set_item_vectors(
            embedder.model_id,
            [(it.id, h, v) for (it, h), v in zip(pending, vectors, strict=True)])
    report.embedding_cache_hits = embedder.hits - hits
    report.embedding_cache_misses = embedder.misses - misses
    return report
