"""Dense document scores from passages (MaxP, mean of the top k): equal to an independent numpy
computation, each passage embedded once, the default (``first``) unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from aiblox.chunking import get_chunker
from aiblox.contracts import RetrievalPrefs
from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import VectorConfig
from aiblox.embedding import CachedEmbedder, HashingEmbedder, InMemoryEmbeddingCache
from aiblox.indexes import PassageIndex, PassageStats
from aiblox.retrieval import HybridRetriever
from aiblox.stores.chunk_cache import InMemoryChunkCache

WORDS = ("retrieval", "ranking", "passage", "vector", "query", "index", "token", "score",
         "model", "document", "evidence", "answer", "chunk", "window", "budget", "sentence",
         "lexical", "dense", "sparse", "fusion")


def _items(n: int = 12) -> list[ItemRecord]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        length = int(rng.integers(5, 120))  # some one passage long, some several
        text = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), length)) + "."
        out.append(ItemRecord(id=f"d{i:02d}", kind="doc", source="t", title=f"title {i}",
                              text=text))
    return out


CFG = {"passage_chunker": "token_window", "passage_tokens": 24, "passage_overlap": 4}


def _reference(items, queries, cfg: VectorConfig, embedder) -> np.ndarray:
    """Document scores computed independently: chunk, embed each passage alone, cosines."""
    chunker = get_chunker(cfg.passage_chunker, max_chunk_tokens=cfg.passage_tokens,
                          overlap_tokens=cfg.passage_overlap)
    k = cfg.passage_k
    out = np.zeros((len(queries), len(items)))
    for j, it in enumerate(sorted(items, key=lambda x: x.id)):
        texts = [c.text for c in chunker.chunk(it.id, it.embedding_text, "x")]
        vecs = np.stack([embedder.embed([t])[0] for t in texts]).astype(np.float64)
        cos = np.asarray(queries, np.float64) @ vecs.T
        top = -np.sort(-cos, axis=1)[:, :min(k, len(texts))]
        out[:, j] = top.max(axis=1) if k == 1 else top.mean(axis=1)
    return out


@pytest.mark.parametrize("doc_score", ["maxp", "mean_top2", "mean_top3"])
def test_doc_scores_equal_numpy(doc_score):
    items = _items()
    emb = HashingEmbedder(64)
    cfg = VectorConfig(doc_score=doc_score, **CFG)
    index = PassageIndex.build(items, cfg, emb)
    assert index.ids == sorted(it.id for it in items)
    assert index.counts.max() >= 3 and index.counts.min() == 1  # long and short documents
    queries = emb.embed(["ranking passage score", "dense fusion window", "lexical answer"])
    got = index.doc_scores(queries, doc_score)
    want = _reference(items, queries, cfg, HashingEmbedder(64))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # the ranked lists: score desc, then id asc, cut to k
    runs = index.search(queries, 5, doc_score)
    for row, run in zip(want, runs, strict=True):
        order = sorted(range(len(items)), key=lambda j: (-row[j], index.ids[j]))[:5]
        assert [d for d, _ in run] == [index.ids[j] for j in order]


def test_mean_top_k_differs_from_max_and_allowed_mask():
    items = _items()
    emb = HashingEmbedder(64)
    index = PassageIndex.build(items, VectorConfig(doc_score="maxp", **CFG), emb)
    q = emb.embed(["ranking passage score"])
    mx, mean2 = index.doc_scores(q, "maxp"), index.doc_scores(q, "mean_top2")
    multi = index.counts > 1
    assert np.all(mean2[0, multi] <= mx[0, multi] + 1e-12)
    assert np.any(mean2[0, multi] < mx[0, multi] - 1e-6)
    np.testing.assert_allclose(mean2[0, ~multi], mx[0, ~multi])  # one passage: the same
    allowed = np.array([i % 2 == 0 for i in range(len(index.ids))])
    run = index.search(q, 50, "maxp", allowed=allowed)[0]
    assert {d for d, _ in run} == {index.ids[i] for i in np.flatnonzero(allowed)}
    assert index.search(q, 50, "maxp", min_score=1.1) == [[]]


def test_each_passage_embedded_once_and_chunk_cache_reused():
    items = _items()
    cache = InMemoryEmbeddingCache()
    emb = CachedEmbedder(HashingEmbedder(64), cache)
    # whole-document vectors first (as a store's ingest makes them)
    emb.embed([it.embedding_text for it in items])
    whole = emb.misses
    chunks = InMemoryChunkCache()
    cfg = VectorConfig(doc_score="maxp", **CFG)
    stats = PassageStats()
    index = PassageIndex.build(items, cfg, emb, chunks, stats=stats)
    single = int((index.counts == 1).sum())
    assert single >= 1
    # a one-passage document is its own text: its vector came from the embedding cache
    assert emb.hits == single
    assert emb.misses == whole + index.n_passages - single
    assert stats.chunked == len(items) and stats.written == len(items)
    # a second build (a new process would do the same) reads the chunk cache: nothing embedded
    before = (emb.hits, emb.misses)
    again = PassageIndex.build(items, cfg, emb, chunks, stats=(s2 := PassageStats()))
    assert (emb.hits, emb.misses) == before and s2.cache_hits == len(items)
    np.testing.assert_array_equal(again.vectors, index.vectors)
    # other passage sizes are other passages (and other cache keys)
    other = PassageIndex.build(items, VectorConfig(doc_score="maxp", passage_tokens=40), emb,
                               chunks, stats=(s3 := PassageStats()))
    assert s3.cache_hits == 0 and other.chunker_id != index.chunker_id


def test_bad_doc_score_and_settings_refused():
    for bad in ("max", "mean_top1", "mean_top", "MAXP", "mean_top02"):
        with pytest.raises(ValidationError, match="doc_score must be one of"):
            VectorConfig(doc_score=bad)
    with pytest.raises(ValidationError, match="needs engine 'index'"):
        VectorConfig(doc_score="maxp", engine="native")
    with pytest.raises(ValidationError, match="distance 'cosine' or 'ip'"):
        VectorConfig(doc_score="maxp", distance="l2")
    with pytest.raises(ValueError, match="not its passages"):
        PassageIndex.build(_items(3), VectorConfig(doc_score="maxp"), HashingEmbedder(8)) \
            .doc_scores(np.zeros((1, 8)), "first")


def test_default_first_leaves_dumps_unchanged():
    plain = RetrievalPrefs(query_text="q")
    assert "doc_score" not in plain.model_dump()["vector"]
    assert set(plain.model_dump()["vector"]) == {
        "engine", "embed_query", "distance", "min_score", "top_k", "index", "hnsw_m",
        "ef_construction", "ef_search"}
    # passage settings play no part in "first": the same dump
    assert RetrievalPrefs(query_text="q", vector={"passage_tokens": 64}).model_dump() \
        == plain.model_dump()
    maxp = RetrievalPrefs(query_text="q", vector={"doc_score": "maxp"}).model_dump()["vector"]
    assert maxp["doc_score"] == "maxp" and maxp["passage_chunker"] == "token_window"


def test_retriever_dense_maxp_end_to_end(sample_store):
    store, emb = sample_store
    r = HybridRetriever(store, emb)
    q = "term frequency saturation in BM25"
    first = r.search_many([RetrievalPrefs(query_text=q, mode="dense", top_k_items=5)])[0]
    maxp = r.search_many([RetrievalPrefs(query_text=q, mode="dense", top_k_items=5,
                                         vector={"doc_score": "maxp", "passage_tokens": 64})])[0]
    again = HybridRetriever(store, emb).search_many([RetrievalPrefs(
        query_text=q, mode="dense", top_k_items=5,
        vector={"doc_score": "maxp", "passage_tokens": 64})])[0]
    ids = [c.item_id for c in maxp.candidates]
    assert len(ids) == 5 and ids == [c.item_id for c in again.candidates]
    assert [c.score for c in maxp.candidates] == [c.score for c in again.candidates]
    # passages' cosines are not the whole documents'
    assert [c.score_vec for c in maxp.candidates] != [c.score_vec for c in first.candidates]
    # the independent computation over the store's items
    items = list(store.get_items(store.matching_ids({})).values())
    cfg = VectorConfig(doc_score="maxp", passage_tokens=64)
    want = _reference(items, emb.embed([q]), cfg, emb)[0]
    ids_sorted = sorted(it.id for it in items)
    best = sorted(range(len(ids_sorted)), key=lambda j: (-want[j], ids_sorted[j]))[:5]
    assert ids == [ids_sorted[j] for j in best]
    with pytest.raises(ValueError, match="unknown chunker 'nope'"):
        r.search_many([RetrievalPrefs(query_text=q, mode="dense",
                                      vector={"doc_score": "maxp", "passage_chunker": "nope"})])


_RUN = """
import hashlib, json, sys
sys.path.insert(0, {tests!r})
from test_passages import CFG, _items
from aiblox.contracts.retrieval import VectorConfig
from aiblox.embedding import HashingEmbedder
from aiblox.indexes import PassageIndex
emb = HashingEmbedder(64)
index = PassageIndex.build(_items(), VectorConfig(doc_score="maxp", **CFG), emb)
q = emb.embed(["ranking passage score", "dense fusion window"])
runs = [index.search(q, 8, d) for d in ("maxp", "mean_top2")]
print(hashlib.sha256(json.dumps(runs).encode()).hexdigest())
"""


def test_ranked_lists_identical_in_a_new_process():
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    code = _RUN.format(tests=str(here))
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1 and len(next(iter(outs)).strip()) == 64
