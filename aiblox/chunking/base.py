"""The chunk record, the ``Chunker`` protocol and the helpers every built-in chunker shares.

A chunk is a contiguous span of its document: ``text == document[start_idx:end_idx]`` holds
exactly (Python ``str`` offsets, i.e. code points). Its id is derived from what makes it, so the
same document, content hash, chunker (with its parameters) and position always give the same id
in any process, and a changed document or chunker gives a new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from aiblox.contracts.retrieval import EvidenceChunk
from aiblox.hashing import sha256_hex

__all__ = [
    "CHUNK_ID_HEX_CHARS",
    "Chunk",
    "Chunker",
    "chunks_match_document",
    "format_chunker_id",
    "make_chunk_id",
    "to_evidence_chunk",
]

CHUNK_ID_HEX_CHARS = 24
"""Length of a chunk id: the first 24 hex characters (96 bits) of a sha256."""


class Chunk(BaseModel):
    """One chunk of a document, as a chunker makes it (before any scoring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    item_id: str
    """Id of the item (document) the chunk was cut from."""
    chunk_id: str
    """Stable id: see :func:`make_chunk_id`."""
    text: str
    """The chunk text; exactly ``document_text[start_idx:end_idx]``."""
    start_idx: int = Field(ge=0)
    """Character (code point) offset of the chunk start in the document text."""
    end_idx: int = Field(ge=0)
    """Character offset one past the chunk end in the document text."""
    token_count: int = Field(ge=0)
    """Tokens in ``text`` under the chunker's encoding (the text encoded on its own)."""
    position: int = Field(ge=0)
    """0-based position of the chunk among the document's chunks, in text order."""
    heading_path: list[str] | None = None
    """Markdown heading titles enclosing the chunk, outermost first ([] before any heading);
    None for chunkers that do not read headings."""
    chunker_id: str
    """Id of the chunker that made the chunk, parameters included."""
    content_hash: str
    """Content hash of the document text the chunk was cut from, as given by the caller."""


@runtime_checkable
class Chunker(Protocol):
    """Splits a document's text into chunks. Pure: no I/O, same input gives the same chunks."""

    chunker_id: str
    """Name and parameters, e.g. ``token_window(max=256,overlap=32,enc=cl100k_base,v=2)``."""

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        """Chunks of ``text`` in text order (none for empty or whitespace-only text)."""
        ...


def make_chunk_id(item_id: str, content_hash: str, chunker_id: str, position: int) -> str:
    """First 24 hex characters of the sha256 of the canonical JSON of the four inputs."""
    return sha256_hex(
        {
            "item_id": item_id,
            "content_hash": content_hash,
            "chunker_id": chunker_id,
            "position": position,
        }
    )[:CHUNK_ID_HEX_CHARS]


def chunks_match_document(chunks: Sequence[Chunk], item_id: str, text: str,
                          content_hash: str, chunker_id: str) -> bool:
    """True when ``chunks`` could have been made from this document by this chunker.

    For chunks read back from a cache: every chunk names this item, content hash and chunker,
    positions run 0, 1, 2, ..., each id is the one :func:`make_chunk_id` derives, and each text
    is exactly the document's text at its offsets. (It does not re-run the chunker.)
    """
    for position, c in enumerate(chunks):
        if (c.item_id != item_id or c.content_hash != content_hash
                or c.chunker_id != chunker_id or c.position != position
                or c.chunk_id != make_chunk_id(item_id, content_hash, chunker_id, position)
                or not 0 <= c.start_idx <= c.end_idx <= len(text)
                or text[c.start_idx:c.end_idx] != c.text):
            return False
    return True


def format_chunker_id(name: str, params: Mapping[str, Any]) -> str:
    """``name(k=v,...)`` with parameters in the given order; booleans as ``true``/``false``."""

    def fmt(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return f"{name}({','.join(f'{k}={fmt(v)}' for k, v in params.items())})"


def to_evidence_chunk(
    chunk: Chunk,
    score: float,
    *,
    score_text: float | None = None,
    score_vec: float | None = None,
    anchors: dict[str, Any] | None = None,
) -> EvidenceChunk:
    """The retrieval contract's :class:`EvidenceChunk` for a scored chunk."""
    return EvidenceChunk(
        item_id=chunk.item_id,
        chunk_id=chunk.chunk_id,
        text=chunk.text,
        start_idx=chunk.start_idx,
        end_idx=chunk.end_idx,
        token_count=chunk.token_count,
        score=score,
        score_text=score_text,
        score_vec=score_vec,
        heading_path=None if chunk.heading_path is None else list(chunk.heading_path),
        anchors=anchors,
    )
