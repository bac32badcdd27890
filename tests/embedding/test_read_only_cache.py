"""A cache its owner may only read (a PostgreSQL role granted only ``SELECT``) refuses writes
with ``CacheReadOnly``: a search's vectors and chunks are used and not kept, said once; an
ingest's vectors, which it copies from the cache, fail with it."""

from __future__ import annotations

import numpy as np
import pytest

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.embedding import CachedEmbedder, HashingEmbedder, InMemoryEmbeddingCache
from aiblox.embedding.cache import CacheReadOnly
from aiblox.retrieval import LateChunker
from aiblox.stores import InMemoryChunkCache


class ReadOnlyCache(InMemoryEmbeddingCache):
    def __init__(self) -> None:
        super().__init__()
        self.offered = 0

    def put_embeddings(self, model_id, rows, replace=False):
        self.offered += 1
        raise CacheReadOnly("store S failed to write the embedding cache: permission denied")


class ReadOnlyChunks(InMemoryChunkCache):
    def put_many(self, entries):
        raise CacheReadOnly("store S failed to write the chunk cache: permission denied")


def test_embed_uses_and_does_not_keep_vectors_a_read_only_cache_refuses():
    cache = ReadOnlyCache()
    emb = CachedEmbedder(HashingEmbedder(), cache)
    with pytest.warns(UserWarning, match="embedding cache: permission denied: the vectors "
                                         "computed now are used and not kept"):
        got = emb.embed(["a query", "another"])
    assert np.allclose(got, HashingEmbedder().embed(["a query", "another"]))
    emb.embed(["a third"])  # not offered again
    assert cache.offered == 1 and not emb.keeps
    with pytest.raises(CacheReadOnly):  # an ingest reads back what it caches: it fails
        emb.ensure_cached(["a document"])


def test_late_chunking_uses_and_does_not_keep_chunks_a_read_only_cache_refuses():
    item = ItemRecord(id="d1", title="t", text="One sentence here. Another sentence there.")
    late = LateChunker(CachedEmbedder(HashingEmbedder(), InMemoryEmbeddingCache()),
                       ReadOnlyChunks())
    prefs = RetrievalPrefs(query_text="sentence")
    with pytest.warns(UserWarning, match="chunk cache: permission denied: the chunks"):
        out = late.prepare(prefs, [item])
    assert out["d1"].chunks and not late.keeps
