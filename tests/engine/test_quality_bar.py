"""The issue's quality bar on real collections (MiniLM vectors imported from ../shared)."""

import pytest

from aiblox.contracts import RetrievalPrefs
from aiblox.data import load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.engine.workspace import prepare_store
from aiblox.retrieval import HybridRetriever
from aiblox.stores import DuckDBStore
from tests.conftest import shared_dataset


def _scores(tmp_path, name, modes):
    ds = load_dataset(shared_dataset(name), splits=["test"])
    with DuckDBStore(tmp_path / f"{name}.duckdb") as store:
        emb = CachedEmbedder(get_embedder("minilm"), store)
        prepare_store(store, ds, emb if modes != ("bm25",) else None, progress=False)
        r = HybridRetriever(store, emb)
        out = {m: evaluate_retrieval(r, ds, "test", RetrievalPrefs(query_text="", mode=m,
                                                                  top_k_items=100),
                                     progress=False) for m in modes}
        assert emb.misses == 0  # every vector came from the imported files: no model load
    return {m: res.metrics["ndcg@10"] for m, res in out.items()}


@pytest.mark.slow
def test_scifact_bm25_dense_hybrid(tmp_path):
    s = _scores(tmp_path, "scifact", ("bm25", "dense", "hybrid"))
    assert s["bm25"] >= 0.66
    assert abs(s["dense"] - 0.645) <= 0.01
    assert s["hybrid"] > max(s["bm25"], s["dense"])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "floor"), [("cranfield", 0.36), ("medline", 0.68)])
def test_bm25_floor(tmp_path, name, floor):
    assert _scores(tmp_path, name, ("bm25",))["bm25"] >= floor
