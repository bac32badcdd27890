"""Deterministic evidence ids (evidence bundles seed).

``PREFIX`` is the first 12 hex digits of the sha256 of the thing that names the source: the
lake URI (normalised, lake-relative) for lake artifacts, the query key for SQL results and
definitions (so a result and its definition share a prefix), the document id for document and
transcript chunks. The ids therefore stay the same when the content behind a name changes; the
item's ``content_sha256`` records the content.
"""

from __future__ import annotations

from aiblox.hashing import sha256_text

__all__ = [
    "ID_PREFIX_LEN",
    "doc_evidence_id",
    "id_prefix",
    "inline_evidence_id",
    "lake_evidence_id",
    "sql_evidence_id",
    "sqldef_evidence_id",
    "transcript_evidence_id",
]

ID_PREFIX_LEN = 12


def id_prefix(name: str) -> str:
    """First 12 hex digits of sha256 of ``name``."""
    return sha256_text(name)[:ID_PREFIX_LEN]


def inline_evidence_id(index: int) -> str:
    """``inline:N`` for the N-th inline evidence entry (0-based)."""
    return f"inline:{index}"


def lake_evidence_id(lake_uri: str, chunk: int = 0) -> str:
    """``lake:PREFIX:CHUNK`` for a lake artifact (text or HTTP capture)."""
    return f"lake:{id_prefix(lake_uri)}:{chunk}"


def sql_evidence_id(query_key: str, chunk: int = 0) -> str:
    """``sql:PREFIX:CHUNK`` for a SQL result."""
    return f"sql:{id_prefix(query_key)}:{chunk}"


def sqldef_evidence_id(query_key: str) -> str:
    """``sqldef:PREFIX`` for a SQL query definition."""
    return f"sqldef:{id_prefix(query_key)}"


def doc_evidence_id(doc_id: str, chunk: int) -> str:
    """``doc:PREFIX:CHUNK`` for a document chunk."""
    return f"doc:{id_prefix(doc_id)}:{chunk}"


def transcript_evidence_id(transcript_id: str, chunk: int) -> str:
    """``transcript:PREFIX:CHUNK`` for a transcript chunk (the ``doc:`` scheme, own namespace)."""
    return f"transcript:{id_prefix(transcript_id)}:{chunk}"
