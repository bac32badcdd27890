"""Retrieval: the hybrid retriever over a store, an embedder and the fusion scorer."""

from aiblox.retrieval.retriever import EvidenceBuilder, HybridRetriever, Retriever, SignalRuns

__all__ = ["EvidenceBuilder", "HybridRetriever", "Retriever", "SignalRuns"]
