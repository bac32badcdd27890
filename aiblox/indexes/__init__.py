"""Derived indexes of a store: BM25 (bm25s's scoring, streamed build) and vectors (exact or
HNSW), built from the store's items, saved beside it, keyed by what they were built from."""

from aiblox.indexes.bm25 import BM25_VERSION, BM25Index
from aiblox.indexes.knn import (
    FILTERED_SEARCH_VERSION,
    KNN_VERSION,
    VectorIndex,
    effective_kind,
    exact_reference,
    filtered_search_key,
)
from aiblox.indexes.passages import PassageIndex, PassageStats, passage_chunker_id
from aiblox.indexes.store_indexes import IndexInfo, StoreIndexes, forget_loaded, index_root

__all__ = [
    "BM25Index",
    "BM25_VERSION",
    "FILTERED_SEARCH_VERSION",
    "IndexInfo",
    "KNN_VERSION",
    "PassageIndex",
    "PassageStats",
    "StoreIndexes",
    "VectorIndex",
    "effective_kind",
    "exact_reference",
    "filtered_search_key",
    "forget_loaded",
    "index_root",
    "passage_chunker_id",
]
