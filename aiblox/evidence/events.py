"""UI event payloads built from packer output: ``rag.sources`` and ``rag.debug``.

The packer does not emit events itself (evidence packer seed); the orchestrator calls these to
get plain, JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiblox.contracts.retrieval import RetrievalStats
from aiblox.evidence.source_cards import PackDebug, SourceItem
from aiblox.hashing import to_plain

__all__ = ["rag_debug_event", "rag_sources_event"]


def rag_sources_event(sources: Sequence[SourceItem]) -> dict[str, Any]:
    """``{"type": "rag.sources", "payload": {"sources": [SourceItem, ...]}}`` as plain JSON."""
    return {
        "type": "rag.sources",
        "payload": {"sources": [s.model_dump(mode="json") for s in sources]},
    }


def rag_debug_event(
    stats: RetrievalStats | Mapping[str, Any] | None = None,
    pack_debug: PackDebug | None = None,
) -> dict[str, Any]:
    """``{"type": "rag.debug", "payload": {"retrieval": stats, "packer": debug}}``; a part that
    is None is left out of the payload."""
    payload: dict[str, Any] = {}
    if stats is not None:
        payload["retrieval"] = (
            stats.model_dump(mode="json") if isinstance(stats, RetrievalStats) else to_plain(stats)
        )
    if pack_debug is not None:
        payload["packer"] = pack_debug.model_dump(mode="json")
    return {"type": "rag.debug", "payload": payload}
