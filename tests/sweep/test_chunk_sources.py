"""What a sweep's chunk stage reads, as ``aiblox eval --chunks`` reads it: a bm25 point ranks
evidence chunks by their BM25 alone (no embedder), and the ``precomputed`` strategy reads the
chunks ``aiblox index build --chunks`` stored: refused when there are none, keyed by them."""

from __future__ import annotations

import shutil

import pytest

from aiblox.contracts.retrieval import ChunkingConfig, RetrievalPrefs
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.engine.chunk_eval import evaluate_chunks
from aiblox.engine.compute import chunk_output
from aiblox.engine.configs import chunks_config
from aiblox.retrieval import LateChunker, make_retriever
from aiblox.stores import DuckDBStore
from aiblox.stores.chunk_cache import InMemoryChunkCache
from aiblox.sweep import SweepSpec, run_sweep

METRIC = "max_passage:ndcg@10"


def chunk_spec(sample_spec, mode="hybrid", **chunking):
    data = sample_spec.model_dump()
    data["base"] = {**data["base"], "mode": mode, "top_k_chunks": 6, "per_item_chunk_cap": 3,
                    "chunking": chunking}
    data.update({"grid": {"chunking": {"chunker_id": ["sentences"]}}, "baseline": None,
                 "primary": METRIC, "metrics": ["ndcg@10"], "chunk_k": [1, 5]})
    return SweepSpec.model_validate(data)


def eval_chunks(db, dataset, spec, embedder):
    """``aiblox eval --chunks``' numbers for the spec's one point on its report split."""
    (pt,) = spec.grid_points()
    with DuckDBStore(db) as store:
        emb = CachedEmbedder(HashingEmbedder(), store) if embedder else None
        return evaluate_chunks(make_retriever(store, emb), dataset, spec.report_split, pt.prefs,
                               metrics=["ndcg@10"], k_values=[1, 5], progress=False)


def test_a_bm25_point_ranks_chunks_by_bm25_alone_as_eval_does(tmp_path, sample_spec, sweep_db,
                                                              sample_dataset):
    spec = chunk_spec(sample_spec, mode="bm25")
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset)
    swept = r.points[0].metrics[spec.report_split][METRIC]
    alone = eval_chunks(sweep_db, sample_dataset, spec, embedder=False)
    blended = eval_chunks(sweep_db, sample_dataset, spec, embedder=True)
    assert blended.projection_metrics["ndcg@10"] != alone.projection_metrics["ndcg@10"]
    assert swept == alone.projection_metrics["ndcg@10"]
    # keyed with the text-only late chunker's embedder, whatever the sweep's
    (pt,) = spec.grid_points()
    assert chunks_config(pt.prefs, "a")["late"] == chunks_config(pt.prefs, "b")["late"] == \
        LateChunker(None).params
    hybrid = pt.prefs.model_copy(update={"mode": "hybrid"})
    assert chunks_config(hybrid, "a")["late"]["embedder"] == "a"


def test_chunk_output_in_bm25_mode_asks_no_embedder(sample_store):
    store, emb = sample_store
    late = LateChunker(emb, InMemoryChunkCache())
    prefs = RetrievalPrefs(query_text="", mode="bm25", top_k_items=3, top_k_chunks=4)
    calls = emb.hits + emb.misses
    out = chunk_output(late, store, prefs, [("q", "vitamin d bone")],
                       {"q": [[d, 1.0] for d in sorted(store.item_hashes())[:3]]},
                       progress=False)
    assert out["evidence"]["q"] and all(c["score_vec"] is None for c in out["evidence"]["q"])
    assert emb.hits + emb.misses == calls


def test_chunk_output_refuses_precomputed_chunks_that_are_not_there(sample_store):
    store, emb = sample_store
    prefs = RetrievalPrefs(query_text="", top_k_items=3, top_k_chunks=4,
                           chunking=ChunkingConfig(strategy="precomputed"))
    with pytest.raises(ValueError, match="every chunk metric would be 0"):
        chunk_output(LateChunker(emb, InMemoryChunkCache()), store, prefs, [("q", "bone")],
                     {"q": [[d, 1.0] for d in sorted(store.item_hashes())[:3]]},
                     progress=False)


def test_precomputed_chunks_are_refused_when_absent_and_key_the_chunk_stage(
        tmp_path, sample_spec, sweep_db, sample_dataset):
    db = str(tmp_path / "store.duckdb")
    shutil.copy(sweep_db, db)
    spec = chunk_spec(sample_spec, strategy="precomputed")
    cache = tmp_path / "stages"
    # nothing precomputed: refused before any stage computes (the sweep scored 0, silently)
    with pytest.raises(ValueError, match="no chunks precomputed for sentences.*every chunk "
                                         "metric would be 0"):
        run_sweep(spec, cache_dir=cache, db=db, progress=False, dataset=sample_dataset)
    assert not any(p.is_file() for p in cache.rglob("*"))
    (pt,) = spec.grid_points()

    def precompute(n=None):
        with DuckDBStore(db) as store:
            late = make_retriever(store, CachedEmbedder(HashingEmbedder(), store)
                                  ).evidence_builder
            items = store.get_items(sorted(store.item_hashes()))
            late.precompute([items[i] for i in sorted(items)][:n], pt.prefs.chunking)

    precompute(10)  # a quarter of the documents: the others give no evidence
    part = run_sweep(spec, cache_dir=cache, db=db, progress=False, dataset=sample_dataset)
    assert part.computed["chunks"] == 2
    precompute()  # the rest: the chunk stage's key moves, its cached output is not served
    full = run_sweep(spec, cache_dir=cache, db=db, progress=False, dataset=sample_dataset)
    assert full.computed.get("chunks") == 2 and not full.computed.get("signals")
    swept = full.points[0].metrics[spec.report_split][METRIC]
    assert swept == eval_chunks(db, sample_dataset, spec, embedder=True
                                ).projection_metrics["ndcg@10"]
    assert swept != part.points[0].metrics[spec.report_split][METRIC]
    again = run_sweep(spec, cache_dir=cache, db=db, progress=False, dataset=sample_dataset)
    assert not again.computed.get("chunks")  # nothing changed: read back
