"""Embedders (by name), the embedding cache and import of precomputed vectors."""

from aiblox.embedding.base import (
    Embedder,
    EmbedderRegistry,
    get_embedder,
    register_embedder,
    registry,
)
from aiblox.embedding.cache import CachedEmbedder, EmbeddingCache, InMemoryEmbeddingCache
from aiblox.embedding.hashing import HashingEmbedder
from aiblox.embedding.vectors import VectorImportError, import_vectors, read_vectors


def _minilm(**params):  # the optional dependency is imported inside the factory
    from aiblox.embedding.minilm import MiniLMEmbedder

    return MiniLMEmbedder(**params)


register_embedder("hashing", HashingEmbedder)
register_embedder("minilm", _minilm)

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbedderRegistry",
    "EmbeddingCache",
    "HashingEmbedder",
    "InMemoryEmbeddingCache",
    "VectorImportError",
    "get_embedder",
    "import_vectors",
    "read_vectors",
    "register_embedder",
    "registry",
]
