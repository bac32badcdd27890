"""What a store holds: the dataset it is bound to and the record of its last complete sync.

Two keys of the store's metadata (:meth:`Store.read_meta`) carry this:

- ``dataset``: the :class:`DatasetBinding` (name and resolved source folder). The first sync of
  an empty store writes it; a sync of another dataset is refused with :class:`StoreMismatch`
  (unless asked to replace the store's items), so no ingest overwrites another dataset's
  documents.
- ``sync``: the :class:`SyncRecord` of the last sync that finished: the hash of the corpus it
  synced to, the digest of the items and, per embedding model, the digest of the item vectors. Every
  write to items or vectors deletes it in the write's own transaction, so a record present is a
  record of the content as it is.
- ``syncing``: the :class:`SyncMark` of a sync under way, written and committed before the
  sync's first change (a replace's deletions and a vectors import included) and deleted in the
  transaction that writes the sync record. A store whose last ingest was killed (or failed: a
  full disk) keeps it, and every reader refuses the store (:func:`check_sync_complete`, called
  by :func:`check_searchable`) with the command that completes it, until a sync does.
- ``vectors_replaced``: per embedding model, a digest chained over every import that replaced
  vectors already in the embedding cache (:func:`note_replaced_vectors`): query vectors come
  from that cache too, so :func:`store_fingerprint` folds it into the model's vectors digest
  and a stage computed with the old vectors is never reused.

Digests are equal across backends holding the same items and vectors: the items digest is a
sha256 over sorted ``id<TAB>content_hash`` lines, a model's vectors digest a sha256 over the
model id, the sorted item ids and the float32 little-endian bytes of their vectors (the values
themselves: vectors imported from a file and vectors embedded here differ in their last bits).
Stage keys include them (:func:`store_fingerprint`): a cached result is only reused on a store
holding the same content.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from aiblox.processes import pid_alive
from aiblox.stores.base import Store, StoreError, StoreMismatch

__all__ = [
    "DatasetBinding",
    "SyncMark",
    "SyncRecord",
    "check_searchable",
    "check_sync_complete",
    "in_sync",
    "items_digest",
    "note_replaced_vectors",
    "read_binding",
    "read_mark",
    "read_sync",
    "store_fingerprint",
    "store_vectors_digest",
    "stored_counts",
    "vectors_digest",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class DatasetBinding(_Strict):
    """The dataset a store belongs to."""

    name: str
    """Dataset name (``scifact``, or a folder's name)."""
    source: str
    """Where it was loaded from: the resolved dataset folder."""

    def describe(self) -> str:
        """``'scifact' (/path/to/scifact)``."""
        return f"{self.name!r} ({self.source})"


class SyncRecord(_Strict):
    """The content a finished sync left in the store."""

    corpus_hash: str
    """sha256 of the corpus the store was synced to (the dataset's corpus file)."""
    items: str
    """Digest of the stored items (:func:`items_digest`)."""
    n_items: int
    """Items stored."""
    vectors: dict[str, str] = Field(default_factory=dict)
    """Per embedding model whose vectors are complete: their digest (:func:`vectors_digest`)."""


class SyncMark(_Strict):
    """A sync under way (the ``syncing`` key): who started it, when, and the command that
    completes it."""

    started: str | None = None
    """When it started (UTC, ``2025-01-31T12:00:00Z``); None for a mark of an older version."""
    source: str | None = None
    """The dataset folder it syncs to."""
    corpus_hash: str | None = None
    """The hash of that dataset's corpus."""
    embedder: str | None = None
    """The ``--embedder`` value that gives its vectors (a registered name or a model folder);
    None for a sync without vectors."""
    vectors: tuple[str, ...] = ()
    """Vectors files it imports (``--vectors``)."""
    refresh_vectors: bool = False
    """It replaced vectors in the embedding cache: the sync completing it writes every item
    vector again from the cache."""
    host: str = ""
    """The machine it ran on."""
    pid: int = 0
    """Its process id."""

    @classmethod
    def parse(cls, raw: str) -> SyncMark:
        """A mark as stored (an older version stored the corpus hash alone)."""
        try:
            return cls.model_validate(json.loads(raw))
        except ValueError:
            return cls(corpus_hash=raw)

    @classmethod
    def now(cls, **fields: Any) -> SyncMark:
        """A mark for a sync starting now in this process."""
        return cls(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   host=socket.gethostname(), pid=os.getpid(), **fields)

    def rerun(self, location: str) -> str:
        """The command that completes the sync."""
        parts = ["aiblox", "ingest", _arg(self.source or "DATASET"), "--db", _arg(location)]
        if self.embedder is not None:
            parts += ["--embedder", _arg(self.embedder)]
        for f in self.vectors:
            parts += ["--vectors", _arg(f)]
        return " ".join(parts)

    def running(self) -> bool:
        """True when the process that wrote the mark still runs (on this machine, another
        process): its sync is under way, not interrupted."""
        if not self.pid or self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        return pid_alive(self.pid)

    def describe(self, location: str) -> str:
        """``store STORE was left half-synced by an interrupted ingest (started ...); rerun:
        aiblox ingest ...`` (or, while the ingest still runs, that it is under way)."""
        when = self.started or "at an unknown time"
        if self.running():
            return (f"store {location} is being synced by an ingest still running (pid "
                    f"{self.pid}, started {when}): wait for it to finish (if it was stopped, "
                    f"rerun: {self.rerun(location)})")
        who = f" by pid {self.pid} on {self.host}" if self.pid else ""
        return (f"store {location} was left half-synced by an interrupted ingest (started "
                f"{when}{who}); rerun: {self.rerun(location)}")


def _arg(text: str) -> str:
    """``text`` as one shell word."""
    import shlex

    return shlex.quote(text)


def _digest(lines: dict[str, str], head: str = "") -> str:
    h = hashlib.sha256(head.encode("utf-8"))
    for key in sorted(lines):
        h.update(f"{key}\t{lines[key]}\n".encode())
    return h.hexdigest()


def items_digest(hashes: dict[str, str]) -> str:
    """Digest of ``{item_id: content_hash}``."""
    return _digest(hashes)


def _ids_hasher(model_id: str, ids: list[str]) -> Any:
    """sha256 over a vectors digest's header and item ids (ascending), before the vectors."""
    if list(ids) != sorted(ids):
        raise ValueError("vectors_digest needs item ids in ascending order")
    h = hashlib.sha256(f"{model_id}\n{len(ids)}\n".encode())
    for item_id in ids:
        h.update(f"{item_id}\n".encode())
    return h


def vectors_digest(model_id: str, ids: list[str], matrix: np.ndarray) -> str:
    """Digest of one model's item vectors (``ids`` ascending, ``matrix`` row for row)."""
    h = _ids_hasher(model_id, ids)
    h.update(np.ascontiguousarray(matrix, dtype="<f4").tobytes())
    return h.hexdigest()


def store_vectors_digest(store: Store, model_id: str) -> str:
    """:func:`vectors_digest` of the vectors ``store`` holds for ``model_id``, read in batches
    (two passes: the ids, then the vectors), so memory is bounded by one batch."""
    ids: list[str] = []
    for batch_ids, _ in store.iter_item_vectors(model_id):
        ids += batch_ids
    h = _ids_hasher(model_id, ids)
    n = 0
    for batch_ids, batch in store.iter_item_vectors(model_id):
        if batch_ids != ids[n:n + len(batch_ids)]:
            raise StoreError(f"{store.location}: vectors of {model_id} changed while their "
                             f"digest was taken")
        h.update(np.ascontiguousarray(batch, dtype="<f4").tobytes())
        n += len(batch_ids)
    return h.hexdigest()


def read_binding(store: Store) -> DatasetBinding | None:
    """The dataset the store is bound to, or None."""
    raw = store.read_meta().get("dataset")
    return DatasetBinding.model_validate(json.loads(raw)) if raw else None


def read_mark(store: Store) -> SyncMark | None:
    """The mark of a sync under way (or interrupted), or None."""
    raw = store.read_meta().get("syncing")
    return SyncMark.parse(raw) if raw else None


def read_sync(store: Store) -> SyncRecord | None:
    """The record of the store's last finished sync, or None (never synced, or written since)."""
    raw = store.read_meta().get("sync")
    return SyncRecord.model_validate(json.loads(raw)) if raw else None


def in_sync(store: Store, binding: DatasetBinding, corpus_hash: str,
            model_id: str | None) -> SyncRecord | None:
    """The sync record when ``store`` already holds the corpus ``corpus_hash`` of the dataset
    ``binding`` names (with complete vectors for ``model_id`` when given), else None. The
    record alone says so, so the tables it speaks for are checked to read back
    (:meth:`~aiblox.stores.base.Store.check_readable`: a damaged file is a
    :class:`~aiblox.stores.base.StoreError`, not "up to date")."""
    meta = store.read_meta()
    if not meta.get("sync") or not meta.get("dataset"):
        return None
    record = SyncRecord.model_validate(json.loads(meta["sync"]))
    if (DatasetBinding.model_validate(json.loads(meta["dataset"])) != binding
            or record.corpus_hash != corpus_hash
            or (model_id is not None and model_id not in record.vectors)):
        return None
    store.check_readable()
    return record


def store_fingerprint(store: Store, model_id: str | None) -> dict[str, str | None]:
    """``{"items": digest, "vectors": digest or None}``: what a retrieval stage read from the
    store, for its key. Taken from the sync record when there is one (no scan), else computed."""
    meta = store.read_meta()
    record = SyncRecord.model_validate(json.loads(meta["sync"])) if meta.get("sync") else None
    if record is not None and (model_id is None or model_id in record.vectors):
        items = record.items
        vectors = record.vectors[model_id] if model_id is not None else None
    else:
        items = items_digest(store.item_hashes())
        vectors = store_vectors_digest(store, model_id) if model_id is not None else None
    replaced = json.loads(meta.get("vectors_replaced") or "{}").get(model_id)
    if vectors is not None and replaced:  # cached (query) vectors were replaced by an import
        vectors = hashlib.sha256(f"{vectors}\n{replaced}".encode()).hexdigest()
    return {"items": items, "vectors": vectors}


def note_replaced_vectors(store: Store, model_id: str, digest: str) -> None:
    """Record that an import replaced vectors of ``model_id`` already in the embedding cache
    (``digest``: of the rows written), before it writes them: the model's vectors digest in
    :func:`store_fingerprint` moves, so nothing computed from the old vectors is reused."""
    replaced = json.loads(store.read_meta().get("vectors_replaced") or "{}")
    replaced[model_id] = hashlib.sha256(
        f"{replaced.get(model_id, '')}\n{digest}".encode()).hexdigest()
    store.write_meta({"vectors_replaced": json.dumps(replaced, sort_keys=True)})


def check_sync_complete(store: Store) -> None:
    """Raise :class:`StoreMismatch` (one line, with the command that completes it) when the
    store's last ingest, replace or delete did not finish: its content is half-synced."""
    mark = read_mark(store)
    if mark is not None:
        raise StoreMismatch(mark.describe(store.location))


def stored_counts(store: Store, model_id: str | None) -> tuple[int, int | None]:
    """``(items, items with a model_id vector)``, the second None without ``model_id``: read
    from the sync record while it stands (every write to items or vectors deletes it in the
    same transaction), counted otherwise (a join of 1M vectors costs ~0.6 s a search)."""
    record = read_sync(store)
    n_items = record.n_items if record is not None else store.count_items()
    if model_id is None:
        return n_items, None
    if record is not None and model_id in record.vectors:
        return n_items, n_items
    return n_items, store.vector_count(model_id)


def check_searchable(store: Store, model_id: str | None) -> None:
    """Raise :class:`StoreMismatch` when a search on ``store`` would silently miss documents:
    a store whose last ingest did not finish (:func:`check_sync_complete`), an empty store, or
    (``model_id`` given) items without a vector for that model."""
    check_sync_complete(store)
    meta = store.read_meta()
    binding = DatasetBinding.model_validate(json.loads(meta["dataset"])) \
        if meta.get("dataset") else None
    again = (f"run `aiblox ingest {binding.source} --db {store.location}`"
             if binding is not None else "ingest the dataset again")
    n_items, n_vec = stored_counts(store, model_id)
    if n_items == 0:
        raise StoreMismatch(f"store {store.location} holds no items: run `aiblox ingest "
                            f"DATASET --db {store.location}` first")
    if n_vec is not None and n_vec < n_items:
        raise StoreMismatch(f"store {store.location}: {n_items - n_vec} of {n_items} items "
                            f"have no {model_id} vector, so vector and hybrid search would "
                            f"miss them; {again} with that embedder")
