"""Ingest items into a store: upsert by content hash, then vectors through the embedding cache.

Idempotent: ingesting the same items again changes nothing and embeds nothing. A changed item
gets a new content hash, a rebuilt full-text entry (the index is marked stale) and a new vector.

:func:`ingest_items` adds and updates; :func:`sync_dataset` makes a store hold exactly one
dataset's items (adding, changing and deleting, vectors and chunk-cache entries included), binds
the store to that dataset and records what it holds (:mod:`aiblox.stores.identity`).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Sized
from itertools import islice

from pydantic import BaseModel, ConfigDict

from aiblox.contracts.items import ItemRecord
from aiblox.embedding.cache import CachedEmbedder
from aiblox.hashing import canonical_json, sha256_text
from aiblox.progress import phase, progress_bar
from aiblox.stores.base import (
    DamagedCachedVectors,
    Store,
    StoreError,
    StoreMismatch,
    UpsertReport,
    store_writes,
)
from aiblox.stores.chunk_cache import default_chunk_cache
from aiblox.stores.identity import (
    DatasetBinding,
    SyncMark,
    SyncRecord,
    in_sync,
    items_digest,
    read_binding,
    read_mark,
    read_sync,
    store_vectors_digest,
)

__all__ = ["COPY_ROWS", "PHASE_ITEMS", "IngestReport", "ingest_items", "sync_dataset"]

PHASE_ITEMS = 50_000
"""From this many items on, the steps after the batches (the item vectors' copy from the
embedding cache, their digest) each say so while they run (21 s and 12 s at 1M)."""

COPY_ROWS = 1_000_000
"""Item vectors an ingest gathers before it copies them from the embedding cache (when the
store is the cache), then at its end: each copy reads the whole cache once. At 1M documents
one copy takes 21 s (and the store checkpoints after it: see ``DuckDBStore._checkpoint``),
four copies of 250k took 24 s and left 1 GB of the file free for good."""


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
    """True when the store's sync record already described this dataset (and the vectors
    files given held nothing new): nothing was written."""
    vector_rows: int = 0
    """Rows of the vectors files given (``--vectors``), every one checked."""
    vectors_imported: int = 0
    """Of those, the rows new to the embedding cache or replacing the vector it held."""
    completed: str | None = None
    """When this sync completed one that was interrupted: the time that one started."""

    def changes(self) -> str:
        """What the sync changed, in the words every command uses (``aiblox ingest``, and
        ``aiblox eval`` when it syncs): ``1 new, 1 updated, 1 deleted, 27 unchanged; 2 vectors
        written (2 embedded, 0 from cache)``. Embedded and cached count texts, each once: the
        documents whose text another one written with them has too are counted apart (``1460
        vectors written (0 embedded, 1458 from cache, 2 sharing their text with another
        document)``)."""
        i = self.items
        texts = self.embedding_cache_misses + self.embedding_cache_hits
        shared = self.vectors_written - texts
        same = (f", {shared} sharing their text with another document" if shared > 1
                else ", 1 sharing its text with another document" if shared == 1 else "")
        return (f"{i.inserted} new, {i.updated} updated, {i.deleted} deleted, {i.unchanged} "
                f"unchanged; {self.vectors_written} vectors written "
                f"({self.embedding_cache_misses} embedded, {self.embedding_cache_hits} from "
                f"cache{same})")


def ingest_items(store: Store, items: Iterable[ItemRecord], embedder: CachedEmbedder | None,
                 batch_size: int = 2000, progress: bool = True,
                 total: int | None = None,
                 refresh: Collection[str] | bool = ()) -> IngestReport:
    """Upsert ``items`` (any iterable: read once, a batch at a time, so memory is bounded by
    one batch) and give each a vector for ``embedder``'s model, batch by batch. ``refresh``:
    ids of items whose vector is written again even though their text did not change (their
    cached vector was replaced), or True for every item."""
    counts = UpsertReport()
    report = IngestReport(items=counts)
    n = len(items) if isinstance(items, Sized) else total
    bar = progress_bar(n, "ingest", unit="doc", enabled=progress)
    model = embedder.model_id if embedder is not None else None
    have = store.item_vector_hashes(model) if model is not None else {}
    stored = store.item_hashes() if model is not None else {}
    hits = embedder.hits if embedder is not None else 0
    misses = embedder.misses if embedder is not None else 0
    refresh_all = refresh is True
    refresh_ids: Collection[str] = () if isinstance(refresh, bool) else refresh
    # the store is the embedding cache: vectors are copied inside it, many batches at a time
    in_store = embedder is not None and embedder.cache is store
    copies: dict[str, str] = {}  # item id -> text hash (a later row of an id wins)
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
                    or stored.get(x.id, x.content_hash) != x.content_hash
                    or refresh_all or x.id in refresh_ids]
            texts = [x.embedding_text for x, _ in todo]
            if todo and in_store:
                embedder.ensure_cached(texts, [h for _, h in todo])
                copies.update((x.id, h) for x, h in todo)
                if len(copies) >= COPY_ROWS:
                    report.vectors_written += _copy_vectors(store, embedder, copies, progress)
                    copies = {}
            elif todo:
                vectors = embedder.embed(texts)
                report.vectors_written += store.set_item_vectors(
                    model, [(x.id, h, v) for (x, h), v in zip(todo, vectors, strict=True)])
        bar.update(len(batch))
    bar.close()
    if copies and embedder is not None:
        report.vectors_written += _copy_vectors(store, embedder, copies, progress)
    if embedder is not None:
        report.embedding_cache_hits = embedder.hits - hits
        report.embedding_cache_misses = embedder.misses - misses
    return report


def _copy_vectors(store: Store, embedder: CachedEmbedder, copies: dict[str, str],
                  progress: bool) -> int:
    """Write ``copies`` (item id -> text hash) as item vectors from the embedding cache (said
    while it runs from :data:`PHASE_ITEMS` on). A cached vector the store finds damaged as it
    copies it (:class:`DamagedCachedVectors`: nothing was written) is embedded again from its
    item's text, upserted before, and the copy made once more."""
    model = embedder.model_id
    with phase(f"item vectors: {len(copies):,} copied from the embedding cache",
               enabled=progress and len(copies) >= PHASE_ITEMS):
        try:
            return store.set_item_vectors_from_cache(model, list(copies.items()))
        except DamagedCachedVectors as exc:
            damaged = exc.hashes
        items = store.get_items(sorted(i for i, h in copies.items() if h in damaged))
        texts = {h: x.embedding_text for x in items.values()
                 if (h := sha256_text(x.embedding_text)) in damaged}
        embedder.embed_again(list(texts.values()), list(texts))
        return store.set_item_vectors_from_cache(model, list(copies.items()))


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cycle collector run 100x less often (as mypy does), then as it was. A sync
    keeps millions of objects that form no cycles (the ids and hashes it compares) and makes
    millions more; collecting them again and again cost 5-10% of a 1M-document ingest."""
    before = gc.get_threshold()
    gc.set_threshold(100 * before[0], *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@_fewer_collections()
def sync_dataset(store: Store, binding: DatasetBinding, corpus_hash: str,
                 items: Iterable[ItemRecord], embedder: CachedEmbedder | None, *,
                 replace: bool = False, batch_size: int = 2000,
                 progress: bool = True, total: int | None = None,
                 prepare: Callable[[], Collection[str]] | None = None,
                 mark: SyncMark | None = None) -> IngestReport:
    """Make ``store`` hold exactly ``items``, the dataset ``binding`` names, with a vector per
    item for ``embedder``'s model (when given), and record it. ``items`` is read once, in
    batches (a stream from the corpus file never sits in memory whole).

    - A store bound to another dataset (name or source folder), or holding items without a
      binding, is refused with :class:`StoreMismatch` naming both, before anything is
      written, unless ``replace``: then its items, vectors and chunk-cache entries are deleted.
    - Items the dataset no longer holds are deleted with their vectors and chunk-cache entries;
      new and changed ones are written, unchanged ones left alone.
    - ``prepare`` (an import of vectors into the embedding cache) runs once the store is
      marked, before any item is written; it returns the ids of the items whose cached vector
      it replaced, whose item vectors are then written again.
    - Before its first change the store is marked ``syncing`` (``mark``, a
      :class:`~aiblox.stores.identity.SyncMark` naming the command that completes it), in a
      transaction of its own; the sync record is written and the mark deleted in the last one.
      A sync killed (or failed) at any point leaves a store that every reader refuses
      (:func:`~aiblox.stores.identity.check_sync_complete`) until a sync completes it.
    - When the store's sync record already names ``corpus_hash`` (the hash of the corpus the
      items come from) and the embedder's vectors, and there is nothing to ``prepare``, nothing
      is read or written (``up_to_date``).
    """
    model_id = embedder.model_id if embedder is not None else None
    done = in_sync(store, binding, corpus_hash, model_id)
    if done is not None and prepare is None:
        return IngestReport(items=UpsertReport(unchanged=done.n_items), up_to_date=True)
    with store_writes(store):  # a shared store is held alone once, for the whole sync
        return _sync(store, binding, corpus_hash, items, embedder, replace=replace,
                     batch_size=batch_size, progress=progress, total=total, prepare=prepare,
                     mark=mark)


def _sync(store: Store, binding: DatasetBinding, corpus_hash: str,
          items: Iterable[ItemRecord], embedder: CachedEmbedder | None, *, replace: bool,
          batch_size: int, progress: bool, total: int | None,
          prepare: Callable[[], Collection[str]] | None, mark: SyncMark | None) -> IngestReport:
    model_id = embedder.model_id if embedder is not None else None
    current = read_binding(store)
    record = read_sync(store)
    interrupted = read_mark(store)
    if interrupted is not None and interrupted.running():  # another ingest's, under way now
        raise StoreError(interrupted.describe(store.location))
    stored = store.item_hashes()
    if current != binding and (current is not None or stored):
        if not replace:
            held = (f"dataset {current.describe()}" if current is not None
                    else f"{len(stored)} items of no recorded dataset")
            half = (" (half-synced: its last ingest was interrupted)"
                    if interrupted is not None else "")
            raise StoreMismatch(
                f"store {store.location} holds {held}{half}, not {binding.describe()}; use "
                f"another --db (each dataset has its own default store) or replace its items "
                f"(`aiblox ingest {binding.source} --db {store.location} --replace`)")
        replacing = True
    else:
        replacing = False
    again = interrupted is not None and interrupted.refresh_vectors  # an import was stopped
    mark = (mark or SyncMark.now()).model_copy(update={
        "source": binding.source, "corpus_hash": corpus_hash,
        "refresh_vectors": again or prepare is not None})
    if mark.embedder is None and embedder is not None:
        mark = mark.model_copy(update={"embedder": _embedder_option(embedder)})
    # the mark first, committed: from here on every reader refuses the store until the end
    store.write_meta({"dataset": canonical_json(binding.model_dump()), "sync": None,
                      "syncing": json.dumps(mark.model_dump(mode="json"), sort_keys=True)})
    replaced = _drop_items(store, sorted(stored)) if replacing else 0
    if replacing:
        stored = {}
    # after a stopped import, which cached vectors it replaced is unknown: all items again
    refresh: Collection[str] | bool = again
    if prepare is not None:
        ids = prepare()
        refresh = refresh or ids
    wanted: dict[str, str] = {}

    def noted(stream: Iterable[ItemRecord]) -> Iterator[ItemRecord]:
        for it in stream:
            if it.id in wanted:
                raise StoreError(f"duplicate item id in one dataset: {it.id!r}")
            wanted[it.id] = it.content_hash
            yield it

    report = ingest_items(store, noted(items), embedder, batch_size=batch_size,
                          progress=progress,
                          total=len(items) if isinstance(items, Sized) else total,
                          refresh=refresh)
    gone = sorted(set(stored) - set(wanted))
    deleted = _drop_items(store, gone) if gone else 0
    report.items.deleted = deleted + replaced  # --replace: every item of the dataset before
    if report.items.updated or deleted or replaced:
        report.chunks_pruned = default_chunk_cache(store).prune(wanted)
    if refresh:  # their cached passages may hold a vector replaced (a one-passage document's)
        stale = set(wanted) if isinstance(refresh, bool) else set(refresh)
        report.chunks_pruned += default_chunk_cache(store).prune(
            {i: h for i, h in wanted.items() if i not in stale})
    untouched = not (report.items.inserted or report.items.updated or deleted or replaced
                     or report.vectors_written)
    vectors: dict[str, str] = {}
    for model in sorted({*(record.vectors if record else {}), *([model_id] if model_id else [])}):
        if untouched and record is not None and model in record.vectors:
            vectors[model] = record.vectors[model]  # nothing written: the digest stands
        elif store.vector_count(model) == len(wanted):  # changed items lost their vectors
            with phase(f"item vectors: {model} digest",
                       enabled=progress and len(wanted) >= PHASE_ITEMS):
                vectors[model] = store_vectors_digest(store, model)
    final = SyncRecord(corpus_hash=corpus_hash, items=items_digest(wanted),
                       n_items=len(wanted), vectors=vectors)
    # the record and the end of the mark in one transaction
    store.write_meta({"sync": json.dumps(final.model_dump(), sort_keys=True), "syncing": None})
    report.completed = (interrupted.started or "at an unknown time") \
        if interrupted is not None else None
    return report


def _embedder_option(embedder: CachedEmbedder) -> str:
    """The ``--embedder`` value that builds ``embedder``'s model: its registered name, else
    the model folder it loads, else its model id."""
    from aiblox.embedding.base import registry

    name = registry.name_of(embedder.model_id)
    if name is not None:
        return name
    folder = getattr(getattr(embedder, "embedder", None), "model_path", None)
    return str(folder) if folder is not None else embedder.model_id


def _drop_items(store: Store, ids: list[str]) -> int:
    """Delete items (with their vectors) in batches."""
    n = 0
    for start in range(0, len(ids), 10000):
        n += store.delete_items(ids[start:start + 10000])
    return n
