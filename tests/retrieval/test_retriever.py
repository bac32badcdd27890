"""Hybrid retrieval end to end on the sample dataset in a real DuckDB file."""

import asyncio

import pytest

from aiblox.contracts import CancelledError, RequestContext, RetrievalPrefs
from aiblox.retrieval import HybridRetriever


def _search(store, emb, **prefs):
    return asyncio.run(HybridRetriever(store, emb).search(
        RequestContext(), RetrievalPrefs(query_text=prefs.pop("q"), **prefs)))


def test_hybrid_candidates_carry_both_signals(sample_store):
    store, emb = sample_store
    bundle = _search(store, emb, q="BM25 term frequency saturation", top_k_items=5)
    assert len(bundle.candidates) == 5
    top = bundle.candidates[0]
    assert top.item_id == "d01" and top.rank_text == 1 and top.rank_vec is not None
    assert top.title and top.snippet and len(top.snippet) <= 360 and top.snippet_from == "doc"
    scores = [(-c.score, c.item_id) for c in bundle.candidates]
    assert scores == sorted(scores)
    assert bundle.stats.counts["candidates"] == 5 and "fts_ms" in bundle.stats.timing_ms
    assert bundle.stats.params["store"] == "duckdb"


def test_modes_use_one_signal(sample_store):
    store, emb = sample_store
    bm25 = _search(store, emb, q="inverted index", mode="bm25")
    dense = _search(store, emb, q="inverted index", mode="dense")
    assert all(c.rank_vec is None and c.rank_text for c in bm25.candidates)
    assert all(c.rank_text is None and c.rank_vec for c in dense.candidates)


def test_linear_blend_and_filters(sample_store):
    store, emb = sample_store
    b = _search(store, emb, q="evaluation metrics", scoring={"blend": "linear",
                "normalize": "minmax", "w_text": 1.0, "w_vec": 0.0},
                filters={"metadata.topic": "evaluation"})
    assert b.candidates and all(c.metadata["topic"] == "evaluation" for c in b.candidates)
    assert b.candidates[0].score == pytest.approx(1.0)


def test_cancelled_context_stops(sample_store):
    store, emb = sample_store
    ctx = RequestContext()
    ctx.cancellation.cancel()
    with pytest.raises(CancelledError):
        asyncio.run(HybridRetriever(store, emb).search(ctx, RetrievalPrefs(query_text="x")))


def test_ignore_identical_ids(sample_store):
    store, emb = sample_store
    d01 = store.get_items(["d01"])["d01"]
    kept = _search(store, emb, q=d01.title, query_id="d01")
    dropped = _search(store, emb, q=d01.title, query_id="d01", ignore_identical_ids=True)
    assert "d01" in [c.item_id for c in kept.candidates]
    assert "d01" not in [c.item_id for c in dropped.candidates]


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_ignore_identical_ids_keeps_each_list_as_deep(sample_store, mode):
    """BEIR's way: the identical id is dropped from lists retrieved deeper, then each is cut to
    its depth, so a 5-deep list holds 5 documents, the 6-deep list without the query's own id
    (it was one short: the document at depth + 1 lost, recall@depth wrong with no warning)."""
    store, emb = sample_store
    d01 = store.get_items(["d01"])["d01"]
    r = HybridRetriever(store, emb)

    def signals(k, drop):
        prefs = RetrievalPrefs(query_text=d01.title, query_id="d01", mode=mode,
                               ignore_identical_ids=drop, fts={"top_k": k},
                               vector={"top_k": k})
        return r.signals([prefs])

    deep, cut = signals(6, False), signals(5, True)
    for deeper, dropped in ((deep.text[0], cut.text[0]), (deep.vec[0], cut.vec[0])):
        if not deeper:  # the mode has no such list
            assert dropped == []
            continue
        assert "d01" in [d for d, _ in deeper]
        assert dropped == [h for h in deeper if h[0] != "d01"][:5] and len(dropped) == 5


def test_deterministic_and_batched_equals_single(sample_store):
    store, emb = sample_store
    r = HybridRetriever(store, emb)
    queries = ["card catalogue history", "vector index HNSW", "chunking by tokens"]
    single = [r.search_many([RetrievalPrefs(query_text=q)])[0] for q in queries]
    batched = r.search_many([RetrievalPrefs(query_text=q) for q in queries])
    for a, b in zip(single, batched, strict=True):
        assert [c.model_dump() for c in a.candidates] == [c.model_dump() for c in b.candidates]
