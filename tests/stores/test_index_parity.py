"""One behaviour on every store: with the default (index) engines, DuckDB and PostgreSQL give
the same ranked lists and scores for bm25, dense and hybrid; the native engines stay available
by name."""

from __future__ import annotations

import pytest

from aiblox.contracts import RetrievalPrefs
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.engine.workspace import prepare_store
from aiblox.retrieval import HybridRetriever
from aiblox.stores import DuckDBStore


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_duckdb_and_postgres_rank_alike(tmp_path, pg_store, sample_dataset, mode):
    runs = {}
    with DuckDBStore(tmp_path / "d.duckdb") as duck:
        for name, store in (("duckdb", duck), ("postgres", pg_store)):
            emb = CachedEmbedder(HashingEmbedder(), store)
            prepare_store(store, sample_dataset, emb, progress=False)
            r = evaluate_retrieval(HybridRetriever(store, emb), sample_dataset, "test",
                                   RetrievalPrefs(query_text="", mode=mode), progress=False)
            runs[name] = r
    assert runs["duckdb"].run == runs["postgres"].run
    assert runs["duckdb"].metrics == runs["postgres"].metrics


def test_native_engines_are_named_choices(sample_store):
    store, emb = sample_store
    r = HybridRetriever(store, emb)
    native = RetrievalPrefs(query_text="BM25 saturation", mode="bm25",
                            fts={"engine": "native"})  # type: ignore[arg-type]
    index = RetrievalPrefs(query_text="BM25 saturation", mode="bm25")
    a, b = r.signals([native]).text[0], r.signals([index]).text[0]
    assert a and b and a[0][0] == b[0][0] == "d01"
    assert a != b  # DuckDB's fts macro (Porter analysis) scores otherwise than the index
