"""What a PostgreSQL store cannot hold, found before anything is written.

Two limits of PostgreSQL refuse a document the DuckDB store takes:

- an item id is a key of btree indexes (``items``, ``item_vectors``, ``chunk_cache``), whose
  entries hold at most 2704 bytes: ids over :data:`MAX_ID_BYTES` bytes (UTF-8) are refused,
  leaving room for the model and chunker ids beside them;
- the full-text column (``tsv``, a ``tsvector`` over ``title || ' ' || text``) holds at most
  :data:`TSVECTOR_MAX_BYTES` of lexemes and positions: a long document of many distinct words
  (a log, a hash dump) exceeds it.

Such a document is refused (file, line, id and field named), not indexed differently (a
truncated full-text entry would rank otherwise than the DuckDB store's BM25, silently): a
refusal before the sync's first write leaves the store as it was. A title and text under
:data:`TSVECTOR_SAFE_BYTES` cannot reach the tsvector limit and are not sent to the server;
a larger one not already stored with the same content is measured by the server
(``to_tsvector``, nothing written). :func:`locate_refused` finds, after a failed write, the
item of a batch PostgreSQL refuses, whatever the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import exc, select, text
from sqlalchemy.orm import Session, sessionmaker

from aiblox.contracts.items import ItemRecord
from aiblox.stores.base import ItemRefused
from aiblox.stores.postgres.models import FTS_CONFIG, ItemRow

__all__ = [
    "MAX_ID_BYTES",
    "TSVECTOR_MAX_BYTES",
    "TSVECTOR_SAFE_BYTES",
    "check_id",
    "check_item",
    "is_data_error",
    "locate_refused",
    "sqlstate",
]

MAX_ID_BYTES = 2000
"""Longest item id (UTF-8 bytes) a PostgreSQL store takes: a btree index entry holds 2704
bytes, the id sharing it with the other key columns of ``chunk_cache``."""
TSVECTOR_MAX_BYTES = 1_048_575
"""PostgreSQL's limit on a ``tsvector``'s lexemes and positions (``MAXSTRPOS``)."""
TSVECTOR_SAFE_BYTES = TSVECTOR_MAX_BYTES // 8
"""A title and text of fewer UTF-8 bytes than this cannot make a ``tsvector`` over the limit:
each token costs at most its lexeme (hyphenated words and URLs give their parts too), two bytes
of position, two of count and one of alignment, well under 8 bytes a byte of text."""

_DATA_CLASSES = ("22", "54")
"""SQLSTATE classes of a value PostgreSQL cannot store: data exception, program limit."""


def sqlstate(error: BaseException) -> str:
    """The SQLSTATE of a driver error (``""`` when it has none: a connection never made)."""
    return str(getattr(getattr(error, "orig", error), "sqlstate", None) or "")


def is_data_error(error: BaseException) -> bool:
    """True for an error about a value written (SQLSTATE class 22 or 54), not the server."""
    return sqlstate(error)[:2] in _DATA_CLASSES


def _reason(error: BaseException) -> str:
    lines = str(getattr(error, "orig", error)).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _too_long_id(item: ItemRecord) -> ItemRefused | None:
    n = len(item.id.encode("utf-8"))
    if n <= MAX_ID_BYTES:
        return None
    return ItemRefused(item, "_id", f"an id of {n} bytes (UTF-8): a PostgreSQL store holds ids "
                                    f"of at most {MAX_ID_BYTES} bytes (each is a key of btree "
                                    f"indexes, whose entries hold 2704); shorten the id, or "
                                    f"use a DuckDB store")


def check_id(item: ItemRecord) -> None:
    """Raise :class:`~aiblox.stores.base.ItemRefused` for an id over :data:`MAX_ID_BYTES`."""
    refused = _too_long_id(item)
    if refused is not None:
        raise refused


def _too_long_text(item: ItemRecord, reason: str) -> ItemRefused:
    return ItemRefused(item, "text", f"its title and text are too large for PostgreSQL's "
                                     f"full-text index ({reason}); split the document, or use "
                                     f"a DuckDB store")


def _large(item: ItemRecord) -> bool:
    """True when ``item``'s title and text may make a ``tsvector`` over the limit."""
    chars = len(item.title) + len(item.text) + 1
    if 4 * chars < TSVECTOR_SAFE_BYTES:  # at most 4 bytes a character
        return False
    return len(item.title.encode("utf-8")) + len(item.text.encode("utf-8")) + 1 \
        >= TSVECTOR_SAFE_BYTES


def check_item(sessions: sessionmaker[Session], item: ItemRecord) -> None:
    """Raise :class:`~aiblox.stores.base.ItemRefused` when the store cannot hold ``item``: its
    id too long, or (a large document not stored already with the same content) its
    ``tsvector`` over PostgreSQL's limit, measured by the server without writing."""
    check_id(item)
    if not _large(item):
        return
    with sessions.begin() as s:
        stored = s.scalar(select(ItemRow.content_hash).where(ItemRow.id == item.id))
        if stored == item.content_hash:
            return
        try:
            with s.begin_nested():
                s.execute(text(f"SELECT length(to_tsvector('{FTS_CONFIG}'::regconfig, "
                               f"CAST(:title AS text) || ' ' || CAST(:text AS text)))"),
                          {"title": item.title, "text": item.text})
            return
        except exc.DBAPIError as e:
            if not is_data_error(e):
                raise
            refused = _too_long_text(item, _reason(e))
    raise refused


def locate_refused(sessions: sessionmaker[Session], items: Sequence[ItemRecord]
                   ) -> ItemRefused | None:
    """The first of ``items`` that PostgreSQL refuses to store (a write of them failed with a
    data error), found by inserting each into a temporary copy of ``items`` in a transaction
    rolled back at the end; None when every one is taken alone."""
    for item in items:
        refused = _too_long_id(item)
        if refused is not None:
            return refused
    with sessions() as s:
        s.execute(text("CREATE TEMPORARY TABLE aiblox_probe (LIKE items INCLUDING ALL)"))
        try:
            for item in items:
                try:
                    with s.begin_nested():
                        s.execute(text(
                            "INSERT INTO aiblox_probe (id, kind, source, source_ref, title, "
                            "text, metadata, content_hash) VALUES (:id, :kind, :source, :ref, "
                            ":title, :text, CAST(:meta AS jsonb), :hash)"), _row(item))
                except exc.DBAPIError as e:
                    if not is_data_error(e):
                        raise
                    reason = _reason(e)
                    if "tsvector" in reason:
                        return _too_long_text(item, reason)
                    field = "_id" if "index row" in reason else "document"
                    return ItemRefused(item, field, f"PostgreSQL cannot store it: {reason}")
        finally:
            s.rollback()  # the probe table goes with the transaction
    return None


def _row(item: ItemRecord) -> dict[str, Any]:
    import json

    return {"id": item.id, "kind": item.kind, "source": item.source, "ref": item.source_ref,
            "title": item.title, "text": item.text, "meta": json.dumps(item.metadata),
            "hash": item.content_hash}
