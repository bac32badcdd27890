"""Evidence: source cards (``rag.sources``), bounded evidence bundles and audit packs."""

from aiblox.evidence.events import rag_debug_event, rag_sources_event
from aiblox.evidence.packer import (
    PACKER_VERSION,
    DefaultEvidencePacker,
    EvidencePacker,
    EvidencePackOptions,
    PackDebug,
    PackResult,
    SourceItem,
    cut_snippet,
    retrieval_rank,
    safe_metadata,
)

__all__ = [
    "DefaultEvidencePacker",
    "EvidencePackOptions",
    "EvidencePacker",
    "PACKER_VERSION",
    "PackDebug",
    "PackResult",
    "SourceItem",
    "cut_snippet",
    "rag_debug_event",
    "rag_sources_event",
    "retrieval_rank",
    "safe_metadata",
]
