"""The store protocol every backend implements (DuckDB embedded default, PostgreSQL reference)."""

from __future__ import annotations

import contextlib
import decimal
import errno
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from aiblox.contracts.filter_rule import FILTER_FIELDS, FilterError, filter_values
from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.embedding.cache import CacheReadOnly
from aiblox.fusion.types import RankedList

__all__ = [
    "DamagedCachedVectors",
    "FILTER_FIELDS",
    "FilterClause",
    "ItemRefused",
    "ItemText",
    "PACK_COLUMNS",
    "PACK_ID_RE",
    "SHA256_RE",
    "Store",
    "StoreError",
    "StoreMismatch",
    "StoreReadOnly",
    "UpsertReport",
    "check_pack_row",
    "is_disk_full",
    "parse_filters",
    "plan_upsert",
    "store_writes",
]


PACK_COLUMNS = ("pack_id", "parent_pack_id", "tenant_id", "trace_id", "created_at", "sha256",
                "signed")
"""Columns of an audit pack row (``evidence_packs``, besides its JSON)."""
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
PACK_ID_RE = re.compile(r"^pack_[0-9a-f]{16}$")


class ItemText(NamedTuple):
    """An item's id and the fields an index reads (:meth:`Store.iter_item_texts`)."""

    id: str
    title: str
    text: str


class StoreError(RuntimeError):
    """A store operation that cannot be done (bad filter, dimension mismatch, closed store)."""


class DamagedCachedVectors(StoreError):
    """Cached vectors a store found damaged as it copied them into item vectors
    (:meth:`Store.set_item_vectors_from_cache`): not the store's dimension in finite values.
    ``hashes``: their texts' sha256, to embed again
    (:meth:`~aiblox.embedding.cache.CachedEmbedder.embed_again`) before copying once more."""

    def __init__(self, message: str, hashes: set[str]) -> None:
        super().__init__(message)
        self.hashes = hashes


class StoreMismatch(StoreError):
    """The store holds something other than what was asked for (another dataset, an unfinished
    ingest, missing vectors); the message says what differs and what to run."""


class StoreReadOnly(StoreError, CacheReadOnly):
    """A write the store's role may not do (PostgreSQL's ``insufficient_privilege``, SQLSTATE
    42501: a role granted only ``SELECT``), naming the store and what was written. A cache
    write met with it at search time is skipped (:class:`~aiblox.embedding.cache.CacheReadOnly`:
    the vector, chunks or scores are used and not kept); every other write fails with it."""


class ItemRefused(StoreError):
    """A document the store cannot hold (a limit of its backend: PostgreSQL's on ids and
    full-text entries), naming where it comes from (``where``: its file and line, its
    ``source_ref`` unless given), its id and the field at fault."""

    def __init__(self, item: ItemRecord, field: str, reason: str, where: str | None = None,
                 note: str = "") -> None:
        self.item, self.field, self.reason, self.note = item, field, reason, note
        self.where = where or item.source_ref or "a document"
        shown = item.id if len(item.id) <= 60 else f"{item.id[:40]}... ({len(item.id)} chars)"
        super().__init__(f"{self.where}: field {field!r} of document {shown!r}: {reason}{note}")

    def located(self, where: str, note: str = "") -> ItemRefused:
        """The same refusal naming ``where`` (the file's full path and line) and ``note``."""
        return ItemRefused(self.item, self.field, self.reason, where, note)


DISK_FULL_TEXTS = ("No space left on device", "database or disk is full")
"""How DuckDB and SQLite (MLflow's store) word a full disk in their errors."""


def is_disk_full(exc: BaseException | None) -> bool:
    """True when ``exc``, or an exception it was raised from or while handling, is a full
    disk: an ``OSError`` ENOSPC (or EDQUOT, a quota), or a database error saying so."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(t in str(exc) for t in DISK_FULL_TEXTS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class UpsertReport(BaseModel):
    """What an upsert changed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inserted: int = 0
    """Items that were not in the store."""
    updated: int = 0
    """Items whose content hash changed."""
    unchanged: int = 0
    """Items already stored with the same content hash."""
    deleted: int = 0
    """Items removed: those the dataset no longer holds (a sync), or every item of the dataset
    a ``--replace`` replaced."""


class FilterClause(NamedTuple):
    """One filter of :func:`parse_filters`: the item ``column`` (``metadata`` for a metadata
    field, then ``key`` names it) and the values it may take, in the forms a store compares
    (the rule: :mod:`aiblox.contracts.filter_rule`)."""

    column: str
    key: str | None
    texts: list[str]
    """Every value as text: a column's text, or for a metadata field the text a string or
    boolean field must have (a string itself, ``true``, a number as Python's ``json`` writes
    it)."""
    integers: list[int]
    """The integer values a number field may equal (empty for a column's): the integer numbers
    of the filter, and of its strings that are a number's ``json`` text, below ``2**127``; a
    float by the decimal its text writes (``2.0``: 2, ``1e23``: 10**23)."""
    floats: list[float]
    """The other numbers a number field may equal (compared as float64, exact for them)."""

    @property
    def path(self) -> tuple[str, ...]:
        """A metadata field's path: ``key`` split at its dots (``source.year``: the field
        ``year`` of the object ``source``), each name a key of an object, read the same way by
        every store."""
        return tuple((self.key or "").split("."))


_INTEGER_LIMIT = 2**127
"""An integer of this size or more matches no number field: DuckDB's widest exact integer
(HUGEINT) ends below it, and a float64 comparison would match its neighbours."""


def parse_filters(filters: dict[str, Any]) -> list[FilterClause]:
    """Validate filters into :class:`FilterClause` es, sorted by key: a key a store knows and
    values that are strings, finite numbers or booleans (:func:`aiblox.contracts.filter_rule.
    filter_values`; anything else a :class:`StoreError` naming the key). What each matches
    is the rule of :mod:`aiblox.contracts.filter_rule`, the same on every store: string and
    boolean fields by text, number fields by value (exactly), array fields by an element, a
    dotted key a path into nested objects only."""
    parsed: list[FilterClause] = []
    for key in sorted(filters):
        try:
            values = filter_values(key, filters[key])
        except FilterError as exc:
            raise StoreError(str(exc)) from None
        if key in FILTER_FIELDS:
            parsed.append(FilterClause(key, None, [str(v) for v in values], [], []))
            continue
        integers: list[int] = []
        floats: list[float] = []
        for v in values:
            number = _number_of(v)
            if number is None:
                continue
            if isinstance(number, int):
                if abs(number) < _INTEGER_LIMIT:
                    integers.append(number)
            elif number.is_integer():  # the decimal its text writes: 1e23 is 10**23
                whole = int(decimal.Decimal(repr(number)))
                if abs(whole) < _INTEGER_LIMIT:
                    integers.append(whole)
            else:
                floats.append(number)
        parsed.append(FilterClause("metadata", key[len("metadata."):],
                                   [_json_text(v) for v in values],
                                   sorted(set(integers)), sorted(set(floats))))
    return parsed


def _json_text(value: Any) -> str:
    """A metadata filter value as a string or boolean field must read to match it: a boolean
    as JSON spells it (``true``; Python's ``str`` gives ``True``, which no stored boolean ever
    equals), a number as Python's ``json`` writes it."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _number_of(value: Any) -> int | float | None:
    """The number a filter value stands for against a number field: a number itself, a string
    that is a number exactly as Python's ``json`` writes it (``"2"``, ``"1e-07"``; not
    ``"1e-7"``, ``"02"`` or ``"NaN"``), else None (a boolean, any other string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if not isinstance(value, str) or not value[:2].lstrip("-")[:1].isdigit():
        return None
    try:
        number = json.loads(value)
    except ValueError:  # not JSON, or an integer past Python's digit limit
        return None
    if isinstance(number, bool) or not isinstance(number, int | float) \
            or not math.isfinite(number) or json.dumps(number) != value:
        return None
    return number


def plan_upsert(items: Iterable[ItemRecord], existing: dict[str, str]
                ) -> tuple[dict[str, ItemRecord], UpsertReport]:
    """The items an upsert must write (new or changed content hash) and its report.

    ``existing`` maps stored item ids to their content hashes; an id given twice with different
    content in one upsert is an error.
    """
    report = UpsertReport()
    rows: dict[str, ItemRecord] = {}
    for item in items:
        old = existing.get(item.id)
        if old == item.content_hash:
            report.unchanged += 1
            continue
        if item.id in rows:
            raise StoreError(f"duplicate item id in one upsert: {item.id!r}")
        rows[item.id] = item
        if old is None:
            report.inserted += 1
        else:
            report.updated += 1
    return rows, report


def relocated(items: Iterable[ItemRecord], rows: dict[str, ItemRecord],
              places: dict[str, tuple[str, str | None]]) -> list[ItemRecord]:
    """The stored items of an upsert whose content is unchanged (not in ``rows``) but whose
    place in the dataset is not the stored one (``places``: id -> stored ``(source,
    source_ref)``): a line inserted above a document moves its ``corpus.jsonl:N``. Their place
    is rewritten in the store, nothing else (their vectors and indexes stand), so a synced
    store cites what a fresh ingest cites."""
    return [it for it in items if it.id in places and it.id not in rows
            and places[it.id] != (it.source, it.source_ref)]


def check_pack_row(pack_id: str, parent_pack_id: str | None, sha256: str,
                   json_text: str) -> None:
    """Validate ``put_evidence_pack`` arguments: the id is ``pack_`` + the first 16 hex of the
    content sha256, the parent (if any) is a pack id, and there is JSON to store."""
    if not SHA256_RE.match(sha256 or ""):
        raise StoreError(f"evidence pack {pack_id!r}: sha256 must be 64 lowercase hex digits")
    if pack_id != "pack_" + sha256[:16]:
        raise StoreError(f"evidence pack {pack_id!r}: id does not match its sha256 "
                         f"(expected pack_{sha256[:16]})")
    if parent_pack_id is not None and not PACK_ID_RE.match(parent_pack_id):
        raise StoreError(f"evidence pack {pack_id}: parent_pack_id {parent_pack_id!r} is "
                         "not a pack id")
    if not isinstance(json_text, str) or not json_text:
        raise StoreError(f"evidence pack {pack_id}: json_text must be a non-empty string")


def store_writes(store: Any, wait_s: float | None = None) -> ContextManager[None]:
    """Around many writes to ``store``: a shared DuckDB store holds its file alone once for
    all of them (:meth:`~aiblox.stores.DuckDBStore.writable`); other stores need nothing."""
    writable = getattr(store, "writable", None)
    return writable(wait_s) if writable is not None else contextlib.nullcontext()


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

    def iter_items(self, batch_size: int = 10000) -> Iterator[list[ItemRecord]]:
        """Every stored item in batches, item ids ascending (code point order); memory is
        bounded by one batch."""
        ...

    def iter_item_texts(self, batch_size: int = 10000) -> Iterator[list[ItemText]]:
        """:meth:`iter_items` with only the id, title and text of each item (an index build
        reads nothing else: no records to validate, no metadata to parse)."""
        ...

    def matching_ids(self, filters: dict[str, Any]) -> list[str]:
        """Ids of the items that pass ``filters`` (see :func:`parse_filters`), ascending."""
        ...

    def count_items(self) -> int:
        """Number of stored items."""
        ...

    def set_item_vectors(self, model_id: str,
                         rows: Iterable[tuple[str, str, np.ndarray]]) -> int:
        """Store ``(item_id, text_sha256, vector)`` rows for ``model_id``; returns rows written."""
        ...

    def set_item_vectors_from_cache(self, model_id: str,
                                    rows: Sequence[tuple[str, str]]) -> int:
        """Store ``(item_id, text_sha256)`` rows for ``model_id`` (item ids unique) with the
        embedding cache's vector of each text: what :meth:`set_item_vectors` would store
        with those vectors, copied inside the store. A text the cache lacks is a
        :class:`StoreError`, a cached vector that is not the store's dimension in finite values
        (a damaged row) a :class:`DamagedCachedVectors` naming every such text, and nothing is
        written. Returns rows written."""
        ...

    def item_vector_hashes(self, model_id: str) -> dict[str, str]:
        """``{item_id: text_sha256}`` of the vectors stored for ``model_id``."""
        ...

    def vector_count(self, model_id: str) -> int:
        """Stored items that have a vector for ``model_id``."""
        ...

    def item_vectors(self, model_id: str) -> tuple[list[str], np.ndarray]:
        """Every stored item vector of ``model_id``: item ids ascending and the
        ``(n, dim)`` float32 matrix of their vectors, row for row."""
        ...

    def iter_item_vectors(self, model_id: str, batch_size: int = 50_000
                          ) -> Iterator[tuple[list[str], np.ndarray]]:
        """:meth:`item_vectors` in batches (ids ascending across batches): memory is bounded by
        one batch."""
        ...

    def check_readable(self) -> None:
        """Raise :class:`StoreError` naming the store when the items or item vectors it holds
        cannot be read back (a DuckDB file truncated or damaged since it was written), by a
        check that costs milliseconds whatever the store's size; run before a store is
        reported up to date, since that report reads only its metadata."""
        ...

    def read_meta(self) -> dict[str, str]:
        """The store's metadata (``aiblox_meta``): schema version, vector dimension, and the
        dataset binding and sync record of :mod:`aiblox.stores.identity`."""
        ...

    def write_meta(self, values: dict[str, str | None]) -> None:
        """Set metadata keys (None deletes the key), in one transaction.

        Every write to items or item vectors deletes the ``sync`` key in its own transaction, so
        a sync record is only ever present for the content it describes."""
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

    def cached_hashes(self, model_id: str, text_hashes: Sequence[str]) -> set[str]:
        """The hashes among ``text_hashes`` that have a cached vector (none is read)."""
        ...

    def put_embeddings(self, model_id: str, rows: Iterable[tuple[str, np.ndarray]],
                       replace: bool = False) -> int:
        """Embedding cache insert; returns rows new. With ``replace``, a cached vector is
        replaced by the row's and every row given is written (and counted); the first row of
        a hash given twice is the one kept."""
        ...

    # -- audit packs (`EvidencePack`, the record behind each answer; insert-only) -------
    def put_evidence_pack(self, pack_id: str, parent_pack_id: str | None, sha256: str,
                          json_text: str, *, tenant_id: str = "default",
                          trace_id: str | None = None, created_at: str | None = None,
                          signed: bool = False) -> bool:
        """Store one evidence pack; True when written, False when already stored.

        ``sha256`` is the 64-hex sha256 of the pack's hashed content
        (``aiblox.hashing.sha256_hex(aiblox.evidence.pack_content(pack))``) and ``pack_id``
        must be ``"pack_" + sha256[:16]`` (else :class:`StoreError`). ``json_text`` is the
        whole pack (``pack_to_json``), stored verbatim. Insert-only: the same id with the same
        ``sha256`` is a no-op that keeps the first row (a later copy differing only in
        ``created_at`` or signature is not stored: sign before storing); the same id with
        another ``sha256`` is refused with :class:`StoreError`.
        """
        ...

    def get_evidence_pack(self, pack_id: str) -> dict[str, Any] | None:
        """The stored row as a dict with keys ``pack_id``, ``parent_pack_id``, ``tenant_id``,
        ``trace_id``, ``created_at``, ``sha256``, ``signed`` (bool) and ``json`` (str,
        verbatim), or None when there is no such pack."""
        ...

    def list_evidence_packs(self, with_json: bool = False) -> list[dict[str, Any]]:
        """Every stored pack's row, sorted by ``pack_id``: without ``json`` unless
        ``with_json`` (then each row is :meth:`get_evidence_pack`'s, in one query)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
