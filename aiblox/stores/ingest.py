"""Ingest items into a store: upsert by content hash, then vectors through the embedding cache.

Idempotent: ingesting the same items again changes nothing and embeds nothing. A changed item
gets a new content hash, a rebuilt full-text entry (the index is marked stale) and a new vector.

:func:`ingest_items` adds and updates; :func:`sync_dataset` makes a store hold exactly one
dataset's items (adding, changing and deleting, vectors and chunk-cache entries included), binds
the store to that dataset and records what it holds (:mod:`aiblox.stores.identity`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sized
from itertools import islice

from pydantic import BaseModel, ConfigDict

from aiblox.contracts.items import ItemRecord
from aiblox.embedding.cache import CachedEmbedder
from aiblox.hashing import canonical_json, sha256_text
from aiblox.progress import progress_bar
from aiblox.stores.base import Store, StoreError, StoreMismatch, UpsertReport
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


def ingest_items(store: Store, items: Iterable[ItemRecord], embedder: CachedEmbedder | None,
                 batch_size: int = 2000, progress: bool = True,
                 total: int | None = None) -> IngestReport:
    """Upsert ``items`` (any iterable: read once, a batch at a time, so memory is bounded by
    one batch) and give each a vector for ``embedder``'s model, batch by batch."""
    counts = UpsertReport()
    report = IngestReport(items=counts)
    n = len(items) if isinstance(items, Sized) else total
    bar = progress_bar(n, "ingest", unit="doc", enabled=progress)
    model = embedder.model_id if embedder is not None else None
    have = store.item_vector_hashes(model) if model is not None else {}
    stored = store.item_hashes() if model is not None else {}
    hits = embedder.hits if embedder is not None else 0
    misses = embedder.misses if embedder is not None else 0
    it = iter(items)
    while batch := list(islice(it, batch_size)):
        r = store.upsert_items(batch)
        counts.inserted += r.inserted
        counts.updated += r.updated
        counts.unchanged += r.unchanged
        if embedder is not None and model is not None:
            # a changed item lost its vector in the upsert; an unchanged one keeps it
            todo = [(x, h) for x in batch
                    if (h := sha256_text(x.embedding_text)) != have.get(x.id)
                    or stored.get(x.id, x.content_hash) != x.content_hash]
            if todo:
                vectors = embedder.embed([x.embedding_text for x, _ in todo])
                report.vectors_written += store.set_item_vectors(
                    model, [(x.id, h, v) for (x, h), v in zip(todo, vectors, strict=True)])
        bar.update(len(batch))
    bar.close()
    if embedder is not None:
        report.embedding_cache_hits = embedder.hits - hits
        report.embedding_cache_misses = embedder.misses - misses
    return report


def sync_dataset(store: Store, binding: DatasetBinding, corpus_hash: str,
                 items: Iterable[ItemRecord], embedder: CachedEmbedder | None, *,
                 replace: bool = False, batch_size: int = 2000,
                 progress: bool = True, total: int | None = None) -> IngestReport:
    """Make ``store`` hold exactly ``items``, the dataset ``binding`` names, with a vector per
    item for ``embedder``'s model (when given), and record it. ``items`` is read once, in
    batches (a stream from the corpus file never sits in memory whole).

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
    wanted: dict[str, str] = {}

    def noted(stream: Iterable[ItemRecord]) -> Iterator[ItemRecord]:
        for it in stream:
            if it.id in wanted:
                raise StoreError(f"duplicate item id in one dataset: {it.id!r}")
            wanted[it.id] = it.content_hash
            yield it

    report = ingest_items(store, noted(items), embedder, batch_size=batch_size,
                          progress=progress,
                          total=len(items) if isinstance(items, Sized) else total)
    gone = sorted(set(stored) - set(wanted))
    deleted = _drop_items(store, gone) if gone else 0
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
