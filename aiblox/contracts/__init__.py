"""Contracts: the pydantic models that every layer exchanges."""

from aiblox.contracts.items import ItemRecord, embedding_text
from aiblox.contracts.retrieval import (
    CacheConfig,
    CancellationToken,
    CancelledError,
    CandidateItem,
    ChunkingConfig,
    EvidenceChunk,
    FtsConfig,
    RequestContext,
    RetrievalBundle,
    RetrievalPrefs,
    RetrievalStats,
    ScoringConfig,
    SnippetConfig,
    VectorConfig,
)

__all__ = [
    "CacheConfig",
    "CancellationToken",
    "CancelledError",
    "CandidateItem",
    "ChunkingConfig",
    "EvidenceChunk",
    "FtsConfig",
    "ItemRecord",
    "RequestContext",
    "RetrievalBundle",
    "RetrievalPrefs",
    "RetrievalStats",
    "ScoringConfig",
    "SnippetConfig",
    "VectorConfig",
    "embedding_text",
]
