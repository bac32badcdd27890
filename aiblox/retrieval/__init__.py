"""Retrieval: the hybrid retriever over a store, an embedder and the fusion scorer."""

from aiblox.retrieval.late_chunking import (
    LateChunker,
    ScoredChunk,
    default_chunk_cache,
    make_retriever,
)
from aiblox.retrieval.retriever import EvidenceBuilder, HybridRetriever, Retriever, SignalRuns

__all__ = [
    "EvidenceBuilder",
    "HybridRetriever",
    "LateChunker",
    "Retriever",
    "ScoredChunk",
    "SignalRuns",
    "default_chunk_cache",
    "make_retriever",
]
