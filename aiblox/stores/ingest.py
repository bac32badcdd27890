"""Ingest items into a store: upsert by content hash, then vectors through the embedding cache.

Idempotent: ingesting the same items again changes nothing and embeds nothing. A changed item
gets a new content hash, a rebuilt full-text entry (the index is marked stale) and a new vector.

:func:`ingest_items` adds and updates; :func:`sync_dataset` makes a store hold exactly one
dataset's items (adding, changing and deleting, vectors and chunk-cache entries included), binds
the store to that dataset and records what it holds (:mod:`aiblox.stores.identity`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from aiblox.contracts.items import ItemRecord
from aiblox.embedding.cache import CachedEmbedder
from aiblox.hashing import canonical_json, sha256_text
from aiblox.stores.base import Store, StoreMismatch, UpsertReport
from aiblox.stores.chunk_cache import default_chunk_cache
from aiblox.stores.identity import (
    DatasetBinding,
    SyncRecord,
    in_sync,
    items_digest,
    read_binding,
    read_sync,
    store_vectors_digest,
)

__all__ = ["IngestReport", "ingest_items", "sync_dataset"]


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
    chunks_pruned: int = 0
    """Chunk-cache entries dropped with deleted or changed items."""
    up_to_date: bool = False
    """True when the store's sync record already described this dataset: nothing was read."""


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


def sync_dataset(store: Store, binding: DatasetBinding, corpus_hash: str,
                 items: Sequence[ItemRecord], embedder: CachedEmbedder | None, *,
                 replace: bool = False, batch_size: int = 2000,
                 progress: bool = True) -> IngestReport:
    """Make ``store`` hold exactly ``items``, the dataset ``binding`` names, with a vector per
    item for ``embedder``'s model (when given), and record it.

    - A store bound to another dataset (name or source folder), or holding items without a
      binding, is refused with :class:`StoreMismatch` naming both, unless ``replace``: then
      its items, vectors and chunk-cache entries are deleted first.
    - Items the dataset no longer holds are deleted with their vectors and chunk-cache entries;
      new and changed ones are written, unchanged ones left alone.
    - The store is marked ``syncing`` first and the sync record written last: a sync killed at
      any point leaves a store that searches refuse and the next sync completes.
    - When the store's sync record already names ``corpus_hash`` (the hash of the corpus the
      items come from) and the embedder's vectors, nothing is read or written (``up_to_date``).
    """
    model_id = embedder.model_id if embedder is not None else None
    done = in_sync(store, binding, corpus_hash, model_id)
    if done is not None:
        return IngestReport(items=UpsertReport(unchanged=done.n_items), up_to_date=True)
    current = read_binding(store)
    record = read_sync(store)
    stored = store.item_hashes()
    if current != binding and (current is not None or stored):
        if not replace:
            held = (f"dataset {current.describe()}" if current is not None
                    else f"{len(stored)} items of no recorded dataset")
            raise StoreMismatch(
                f"store {store.location} holds {held}, not {binding.describe()}; use another "
                f"--db (each dataset has its own default store) or replace its items "
                f"(`aiblox ingest {binding.source} --db {store.location} --replace`)")
        replaced = _drop_items(store, sorted(stored))
        stored = {}
    else:
        replaced = 0
    store.write_meta({"dataset": canonical_json(binding.model_dump()), "sync": None,
                      "syncing": corpus_hash})
    wanted = {it.id: it.content_hash for it in items}
    gone = sorted(set(stored) - set(wanted))
    deleted = _drop_items(store, gone) if gone else 0
    report = ingest_items(store, items, embedder, batch_size=batch_size, progress=progress)
    report.items.deleted = deleted
    if report.items.updated or deleted or replaced:
        report.chunks_pruned = default_chunk_cache(store).prune(wanted)
    untouched = not (report.items.inserted or report.items.updated or deleted or replaced
                     or report.vectors_written)
    vectors: dict[str, str] = {}
    for model in sorted({*(record.vectors if record else {}), *([model_id] if model_id else [])}):
        if untouched and record is not None and model in record.vectors:
            vectors[model] = record.vectors[model]  # nothing written: the digest stands
        elif store.vector_count(model) == len(wanted):  # changed items lost their vectors
            vectors[model] = store_vectors_digest(store, model)
    final = SyncRecord(corpus_hash=corpus_hash, items=items_digest(wanted),
                       n_items=len(wanted), vectors=vectors)
    store.write_meta({"sync": json.dumps(final.model_dump(), sort_keys=True), "syncing": None})
    return report


def _drop_items(store: Store, ids: list[str]) -> int:
    """Delete items (with their vectors) in batches."""
    n = 0
    for start in range(0, len(ids), 10000):
        n += store.delete_items(ids[start:start + 10000])
    return n
