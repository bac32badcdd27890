"""Canonical JSON and sha256: the one way aiblox hashes a config, a dataset, a run or a prompt.

Canonical JSON means sorted keys, compact separators, UTF-8 (no ASCII escaping) and floats
written with ``repr`` (shortest round-tripping form), so the same value gives the same bytes in
any process, whatever ``PYTHONHASHSEED`` is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

__all__ = ["SHORT_HASH", "canonical_json", "canonical_plain_json", "sha256_bytes", "sha256_hex",
           "sha256_text", "short_hash", "to_plain"]

SHORT_HASH = 16
"""Hex digits of a hash shown in a table or a line (its start: the prefix every command shows,
and a prefix ``aiblox compare`` and ``aiblox eval verify`` accept)."""


def to_plain(value: Any) -> Any:
    """Turn pydantic models, tuples and sets into plain JSON-able values (sets sorted)."""
    if isinstance(value, BaseModel):
        return to_plain(value.model_dump(mode="python"))
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted(to_plain(v) for v in value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [to_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    return value


def canonical_json(value: Any) -> str:
    """Serialise ``value`` to canonical JSON text (NaN and infinity are refused)."""
    return json.dumps(
        to_plain(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def canonical_plain_json(value: Any) -> str:
    """:func:`canonical_json` of plain data (dicts with string keys, lists, tuples, str, int,
    float, bool, None) without :func:`to_plain`'s recursive pass, which costs a second for a run
    of 10^5 hits: the same bytes. Anything else (pydantic models, numpy scalars, sets) takes
    the general path. Dicts with non-string keys must not come here (``json`` sorts them before
    turning them into strings)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except TypeError:
        return canonical_json(value)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of raw bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_hex(value: Any) -> str:
    """Hex sha256 of the canonical JSON of ``value``."""
    return sha256_text(canonical_json(value))


def short_hash(digest: str) -> str:
    """The start of a hex digest as every command shows it (:data:`SHORT_HASH` digits)."""
    return digest[:SHORT_HASH]
