"""Late chunking through the retriever on the sample dataset in real DuckDB files."""

import numpy as np
import pytest

from aiblox.contracts import RetrievalPrefs
from aiblox.contracts.items import ItemRecord
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.retrieval import LateChunker, make_retriever
from aiblox.stores import DuckDBChunkCache, DuckDBStore, ingest_items
from aiblox.stores.chunk_cache import ChunkCacheEntry, encode_entry
from aiblox.text import bm25_scores, make_snippet

Q = "How does BM25 saturate term frequency, and what value of k1 is typical?"
HEADINGS = {"chunker_id": "headings", "max_chunk_tokens": 128}


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def _prefs(**kw):
    kw.setdefault("chunking", HEADINGS)
    return RetrievalPrefs(query_text=kw.pop("q", Q), **kw)


def _search(retriever, **kw):
    return retriever.search_many([_prefs(**kw)])[0]


def _ev(bundle):
    return [(e.chunk_id, e.item_id, e.start_idx, e.end_idx, e.score) for e in bundle.evidence]


def test_evidence_slices_back_and_is_ranked(sample_store):
    store, emb = sample_store
    b = _search(make_retriever(store, emb), top_k_items=10, top_k_chunks=8,
                per_item_chunk_cap=2)
    assert len(b.evidence) == 8
    candidates = {c.item_id for c in b.candidates}
    texts = {i: it.text for i, it in store.get_items(sorted(candidates)).items()}
    for e in b.evidence:
        assert e.item_id in candidates
        assert texts[e.item_id][e.start_idx:e.end_idx] == e.text
        assert e.token_count and e.token_count <= 128
        assert e.heading_path is not None and e.score_vec is not None
    order = [(-e.score, e.chunk_id) for e in b.evidence]
    assert order == sorted(order)
    per_item = {}
    for e in b.evidence:
        per_item[e.item_id] = per_item.get(e.item_id, 0) + 1
    assert max(per_item.values()) <= 2
    assert b.evidence[0].item_id == "d01"
    assert b.stats.counts["evidence"] == 8 and "chunking_ms" in b.stats.timing_ms


def test_per_item_cap_and_global_pool(sample_store):
    store, emb = sample_store
    r = make_retriever(store, emb)
    capped = _search(r, top_k_items=5, top_k_chunks=50, per_item_chunk_cap=1)
    assert len(capped.evidence) == len({e.item_id for e in capped.evidence}) <= 5
    full = _search(r, top_k_items=5, top_k_chunks=50, per_item_chunk_cap=50)
    assert len(full.evidence) == full.stats.counts["chunks_scored"] > len(capped.evidence)
    # capped evidence is each item's best chunk from the uncapped pool
    best = {}
    for e in full.evidence:
        best.setdefault(e.item_id, e.chunk_id)
    assert {e.item_id: e.chunk_id for e in capped.evidence} == best


def test_scores_blend_cosine_and_normalised_bm25(sample_store):
    store, emb = sample_store
    b = _search(make_retriever(store, emb), top_k_items=4, top_k_chunks=100,
                per_item_chunk_cap=100)
    texts = [e.text for e in b.evidence]
    bm25 = bm25_scores(Q, texts)
    qv = emb.embed([Q])[0].astype(np.float64)
    cv = emb.embed(texts).astype(np.float64)
    for e, lex, vec in zip(b.evidence, bm25, cv @ qv, strict=True):
        assert e.score_text == pytest.approx(lex)
        assert e.score_vec == pytest.approx(vec, abs=1e-6)
        assert e.score == pytest.approx(0.8 * vec + 0.2 * lex / max(bm25), abs=1e-6)


def test_second_run_hits_the_cache_in_a_new_process(sample_store, tmp_path):
    store, emb = sample_store
    first = _search(make_retriever(store, emb), top_k_items=10)
    c = first.stats.counts
    assert c["chunk_cache_misses"] == 10 and c["chunk_cache_hits"] == 0
    assert c["chunk_cache_writes"] == 10
    path = store.location
    store.close()
    with DuckDBStore(path) as again:
        emb2 = CachedEmbedder(HashingEmbedder(), again)
        second = _search(make_retriever(again, emb2), top_k_items=10)
        c2 = second.stats.counts
        assert c2["chunk_cache_hits"] == 10 and c2["chunk_cache_misses"] == 0
        assert c2["chunk_cache_writes"] == 0
        assert emb2.misses == 0  # only the query was embedded, from the embedding cache
    assert _ev(second) == _ev(first)


def test_cache_switches(sample_store):
    store, emb = sample_store
    cache = DuckDBChunkCache(store)
    r = make_retriever(store, emb, chunk_cache=cache)
    _search(r, top_k_items=5, cache={"write_chunk_cache": False})
    assert cache.count() == 0
    _search(r, top_k_items=5)
    assert cache.count() == 5
    b = _search(r, top_k_items=5, cache={"use_chunk_cache": False})
    assert b.stats.counts["chunk_cache_hits"] == 0 and b.stats.counts["chunk_cache_misses"] == 5


def test_changed_document_never_returns_old_chunks(sample_store):
    store, emb = sample_store
    r = make_retriever(store, emb)
    before = _search(r, top_k_items=3)
    d01 = store.get_items(["d01"])["d01"]
    new_text = "## Preface\n\nA new opening paragraph about k1 and saturation.\n\n" + d01.text
    ingest_items(store, [d01.model_copy(update={"text": new_text})], emb, progress=False)
    store.rebuild_fts()
    after = _search(r, top_k_items=3)
    old_ids = {e.chunk_id for e in before.evidence if e.item_id == "d01"}
    new = [e for e in after.evidence if e.item_id == "d01"]
    assert new and not old_ids & {e.chunk_id for e in new}
    assert all(new_text[e.start_idx:e.end_idx] == e.text for e in new)
    assert after.stats.counts["chunk_cache_misses"] >= 1


def test_corrupt_entry_is_detected_and_rebuilt(sample_store):
    store, emb = sample_store
    r = make_retriever(store, emb)
    first = _search(r, top_k_items=5)
    store.con.execute("UPDATE chunk_cache SET vectors = repeat('\\x00'::BLOB, octet_length("
                      "vectors)) WHERE item_id = 'd01'")
    second = _search(r, top_k_items=5)
    c = second.stats.counts
    assert c["chunk_cache_corrupt"] == 1 and c["chunk_cache_misses"] == 1
    assert c["chunk_cache_hits"] == 4 and c["chunk_cache_writes"] == 1
    assert _ev(second) == _ev(first)
    third = _search(r, top_k_items=5)
    assert third.stats.counts["chunk_cache_hits"] == 5


def test_entry_that_does_not_slice_back_is_not_served(sample_store):
    """An entry with a valid payload hash whose chunk text differs from the document."""
    store, emb = sample_store
    cache = DuckDBChunkCache(store)
    r = make_retriever(store, emb, chunk_cache=cache)
    first = _search(r, top_k_items=5)
    late = r.evidence_builder
    item = store.get_items(["d01"])["d01"]
    key = late.key(item, late.chunker_for(_prefs().chunking))
    entry = cache.get_many([key]).hits[key]
    forged = [c.model_copy(update={"text": "FORGED"}) if c.position == 0 else c
              for c in entry.chunks]
    cache.put_many([ChunkCacheEntry(key=key, chunks=forged, vectors=entry.vectors)])
    assert encode_entry(cache.get_many([key]).hits[key])  # the hash itself checks out
    second = _search(r, top_k_items=5)
    assert second.stats.counts["chunk_cache_corrupt"] == 1
    assert "FORGED" not in {e.text for e in second.evidence}
    assert _ev(second) == _ev(first)


def test_ttl_expires_entries(sample_store):
    store, emb = sample_store
    clock = Clock()
    r = make_retriever(store, emb, chunk_cache=DuckDBChunkCache(store, clock=clock))
    _search(r, top_k_items=4, cache={"ttl_seconds": 30})
    clock.now += 30
    assert _search(r, top_k_items=4, cache={"ttl_seconds": 30}).stats.counts[
        "chunk_cache_hits"] == 4
    clock.now += 31
    c = _search(r, top_k_items=4, cache={"ttl_seconds": 30}).stats.counts
    assert c["chunk_cache_expired"] == 4 and c["chunk_cache_misses"] == 4
    assert _search(r, top_k_items=4, cache={"ttl_seconds": 30}).stats.counts[
        "chunk_cache_hits"] == 4  # rewritten


def test_strategies(sample_store, sample_dataset):
    store, emb = sample_store
    r = make_retriever(store, emb)
    late = _search(r, top_k_items=6)
    pre = _search(r, top_k_items=6, chunking={**HEADINGS, "strategy": "precomputed"})
    assert pre.evidence == [] and pre.stats.counts["precomputed_missing"] == 6
    # chunks made at ingest for a third of the corpus
    items = sorted(sample_dataset.corpus.values(), key=lambda it: it.id)
    some = [it for it in items if it.id in {c.item_id for c in late.candidates[:2]}]
    assert r.evidence_builder.precompute(some, _prefs().chunking) == 2
    assert r.evidence_builder.precompute(some, _prefs().chunking) == 0  # already there
    pre = _search(r, top_k_items=6, chunking={**HEADINGS, "strategy": "precomputed"})
    assert pre.stats.counts["precomputed_hits"] == 2
    assert pre.stats.counts["precomputed_missing"] == 4
    assert {e.item_id for e in pre.evidence} == {it.id for it in some}
    mixed = _search(r, top_k_items=6, chunking={**HEADINGS, "strategy": "mixed"})
    c = mixed.stats.counts
    assert c["precomputed_hits"] == 2 and c["chunk_cache_hits"] == 4
    assert _ev(mixed) == _ev(late)  # same chunks whoever made them


def test_snippets_from_chunk_or_doc(sample_store):
    store, emb = sample_store
    r = make_retriever(store, emb)
    b = _search(r, top_k_items=5, snippet={"max_chars": 80})
    best = {}
    for e in b.evidence:
        best.setdefault(e.item_id, e)
    for c in b.candidates:
        if c.item_id in best:
            assert c.snippet_from == "chunk"
            assert c.snippet == make_snippet(best[c.item_id].text, 80) and len(c.snippet) <= 80
        else:
            assert c.snippet_from == "doc"
    doc = _search(r, top_k_items=5, snippet={"prefer_chunk_snippet": False})
    assert {c.snippet_from for c in doc.candidates} == {"doc"}


def test_disabled_chunking_and_text_only_scoring(sample_store):
    store, emb = sample_store
    b = _search(make_retriever(store, emb), chunking={**HEADINGS, "enabled": False})
    assert b.evidence == []
    r = make_retriever(store, None)
    t = _search(r, mode="bm25", top_k_items=5)
    assert t.evidence and all(e.score_vec is None for e in t.evidence)
    assert t.evidence[0].score == pytest.approx(1.0)  # the best BM25 chunk, normalised


def test_changed_item_record_text_only_changes_the_key(sample_dataset):
    late = LateChunker(None)
    chunker = late.chunker_for(_prefs().chunking)
    it = sample_dataset.corpus["d01"]
    changed = ItemRecord(**{**it.model_dump(), "text": it.text + " More."})
    assert late.key(it, chunker)[0] == late.key(changed, chunker)[0]
    assert late.key(it, chunker)[1] != late.key(changed, chunker)[1]


def test_bad_weights_rejected():
    with pytest.raises(ValueError, match="weights"):
        LateChunker(None, w_vec=0.0, w_text=0.0)
