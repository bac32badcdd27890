"""Embedders (by name, or any sentence-transformers model by folder or package), the device
they run on, the embedding cache and import of precomputed vectors."""

from aiblox.embedding.base import (
    Embedder,
    EmbedderRegistry,
    get_embedder,
    register_embedder,
    registry,
)
from aiblox.embedding.cache import CachedEmbedder, EmbeddingCache, InMemoryEmbeddingCache
from aiblox.embedding.device import DeviceError, resolve_device
from aiblox.embedding.hashing_embedder import HashingEmbedder
from aiblox.embedding.sentence_transformers import SentenceTransformerEmbedder, model_digest
from aiblox.embedding.vectors import VectorImportError, import_vectors, read_vectors


def _minilm(**params):  # the optional dependency is imported inside the factory
    from aiblox.embedding.minilm import MiniLMEmbedder

    return MiniLMEmbedder(**params)


register_embedder("hashing", HashingEmbedder)
register_embedder("minilm", _minilm)

__all__ = [
    "CachedEmbedder",
    "DeviceError",
    "Embedder",
    "EmbedderRegistry",
    "EmbeddingCache",
    "HashingEmbedder",
    "InMemoryEmbeddingCache",
    "SentenceTransformerEmbedder",
    "VectorImportError",
    "get_embedder",
    "import_vectors",
    "model_digest",
    "read_vectors",
    "register_embedder",
    "registry",
    "resolve_device",
]
