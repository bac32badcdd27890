"""Embedders: the hashing embedder, the cache, and MiniLM against the precomputed vectors."""

import gzip
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from aiblox.contracts import embedding_text
from aiblox.embedding import (
    CachedEmbedder,
    HashingEmbedder,
    InMemoryEmbeddingCache,
    get_embedder,
    registry,
)
from aiblox.hashing import sha256_text
from tests.conftest import SHARED


def test_registry_names_and_error():
    assert {"hashing", "minilm"} <= set(registry.names())
    with pytest.raises(ValueError, match="unknown embedder 'x'; known: hashing, minilm"):
        get_embedder("x")


def test_hashing_embedder_is_deterministic_unit_vectors():
    e = HashingEmbedder()
    a, b = e.embed(["The quick brown fox", "the QUICK brown fox!"])
    assert np.array_equal(a, b) and a.dtype == np.float32
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert not e.embed([""]).any()


def test_cached_embedder_embeds_each_text_once():
    calls = []

    class Counting(HashingEmbedder):
        def embed(self, texts):
            calls.append(list(texts))
            return super().embed(texts)

    cache = InMemoryEmbeddingCache()
    emb = CachedEmbedder(Counting(), cache)
    first = emb.embed(["x y", "z", "x y"])
    second = emb.embed(["z", "x y"])
    assert calls == [["x y", "z"]] or calls == [["z", "x y"]]
    assert np.array_equal(first[0], second[1]) and (emb.hits, emb.misses) == (2, 2)


def test_minilm_reproduces_the_shared_precomputed_vectors():
    """The live model and the imported vectors agree, so the cache can stand in for the model."""
    table = pq.read_table(SHARED / "embeddings/scifact/corpus.all-MiniLM-L6-v2.parquet")
    rows = table.slice(0, 6).to_pylist()
    wanted = {r["_id"] for r in rows}
    docs = {}
    with gzip.open(SHARED / "datasets/scifact/corpus.jsonl.gz", "rt") as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in wanted:
                docs[d["_id"]] = d
            if len(docs) == len(wanted):
                break
    texts = [embedding_text(docs[r["_id"]]["title"], docs[r["_id"]]["text"]) for r in rows]
    assert [sha256_text(t) for t in texts] == [r["text_sha256"] for r in rows]
    live = get_embedder("minilm").embed(texts)
    ref = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    assert live.shape == (6, 384)
    assert np.min(np.sum(live * ref, axis=1)) > 0.9999
