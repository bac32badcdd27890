"""Item records: what goes into a store."""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.hashing import sha256_hex, sha256_text

__all__ = ["ItemRecord", "embedding_text"]

_HASHES: dict[tuple[str, str], str] = {}
"""Content hashes of items without metadata by ``(title, text)``: an ingest asks an item's
hash several times (the sync record, the upsert plan, the row written), each a JSON dump and a
sha256; keyed by the values themselves, so a copy with other content never gets a stale one."""
_HASHES_MAX = 1 << 16


def embedding_text(title: str | None, text: str | None) -> str:
    """The text embedded for a document: ``(title + " " + text).strip()``, None counting as "".

    This is the rule the precomputed vectors in ``../shared/embeddings`` were made with.
    """
    return f"{title or ''} {text or ''}".strip()


class ItemRecord(BaseModel):
    """One document (item) as stored: identity, provenance, content and metadata."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    id: str
    """Unique item id (a dataset's ``_id``)."""
    kind: str = "doc"
    """Item kind, e.g. ``doc``."""
    source: str = ""
    """Where the item came from, e.g. the dataset name."""
    source_ref: str | None = None
    """Reference inside the source (URL, path, line)."""
    title: str = ""
    """Title ("" when none)."""
    text: str = ""
    """Full text."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata (JSON-able); filterable as ``metadata.<key>``."""

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical JSON of title, text and metadata: changes when any does
        (without metadata written by hand with ``json``'s own string encoder: the same bytes
        as ``json.dumps``, in half its time, remembered for the last items asked by their title
        and text, never by the object: a ``model_copy(update=...)`` must not carry its
        source's hash)."""
        if not self.metadata:
            key = (self.title, self.text)
            found = _HASHES.get(key)
            if found is None:
                if len(_HASHES) >= _HASHES_MAX:
                    _HASHES.clear()
                found = _HASHES[key] = sha256_text(  # canonical_plain_json(value), by hand
                    f'{{"metadata":{{}},"text":{encode_basestring(self.text)},'
                    f'"title":{encode_basestring(self.title)}}}')
            return found
        return sha256_hex({"metadata": self.metadata, "text": self.text, "title": self.title})

    @property
    def embedding_text(self) -> str:
        """The text the item's vector is computed from."""
        return embedding_text(self.title, self.text)
