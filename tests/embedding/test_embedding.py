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


@pytest.mark.parametrize("bad", [np.ones(383, dtype=np.float32), np.ones(385, dtype=np.float32),
                                 np.array([np.nan] * 384, dtype=np.float32),
                                 np.array([1.0] * 383 + [np.inf], dtype=np.float32),
                                 np.zeros(0, dtype=np.float32)])
def test_a_damaged_cached_vector_is_embedded_again_and_replaced(bad):
    """A cached vector of another length made np.stack fail (``all input arrays must have the
    same shape``) and a NaN one was served, to fail later as JSON; each is damaged: counted,
    warned of, embedded again and its row replaced."""
    emb = CachedEmbedder(HashingEmbedder(), InMemoryEmbeddingCache())
    texts = ["x y", "z", "x y"]
    good = emb.embed(texts)
    emb.cache.put_embeddings(emb.model_id, [(sha256_text("z"), bad)], replace=True)
    with pytest.warns(UserWarning, match=r"embedding cache: 1 cached hashing-v1-384 vector "
                                         r"damaged \(not 384 finite values\); embedded again"):
        again = emb.embed(texts)
    assert np.array_equal(again, good) and again.shape == (3, 384)
    assert (emb.hits, emb.misses, emb.damaged) == (1, 3, 1)
    cached = emb.cache.get_embeddings(emb.model_id, [sha256_text("z")])[sha256_text("z")]
    assert np.array_equal(cached, good[1])  # the row was replaced
    emb.embed(texts)  # and is sound now: no warning, all hits
    assert (emb.hits, emb.misses, emb.damaged) == (3, 3, 1)


def test_damaged_vectors_are_found_by_length_and_finite_values():
    from aiblox.embedding.cache import damaged_vectors

    ok = np.ones(4, dtype=np.float32)
    found = {"ok": ok, "short": ok[:3], "nan": np.array([1, np.nan, 1, 1], dtype=np.float32),
             "inf": np.array([-np.inf, 0, 0, 0], dtype=np.float32), "empty": ok[:0],
             "huge": np.array([1e20, 0, 0, 0], dtype=np.float32), "ok2": ok * 2}
    assert damaged_vectors(found, 4) == {"short", "nan", "inf", "empty", "huge"}
    assert damaged_vectors({}, 4) == set() and damaged_vectors({"ok": ok}, 4) == set()
    assert damaged_vectors({"short": ok[:3]}, 4) == {"short"}


def test_an_embedder_giving_a_damaged_vector_is_refused_before_it_is_cached():
    class Faulty(HashingEmbedder):
        def embed(self, texts):
            out = super().embed(texts)
            out[-1, 0] = np.nan
            return out

    emb = CachedEmbedder(Faulty(), InMemoryEmbeddingCache())
    with pytest.raises(ValueError, match=r"gave 2 texts vectors of shape \(2, 384\), not 384 "
                                         r"finite values each: not cached"):
        emb.embed(["a", "b"])
    assert emb.cache.cached_hashes(emb.model_id, [sha256_text("a"), sha256_text("b")]) == set()


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
