"""``ignore_identical_ids`` (BEIR's protocol where queries are documents of the corpus, as in
ArguAna and Quora) holds in every stage that retrieves, not only in a pipeline's first: after
RM3, Bo1 or Rocchio feedback the second ``bm25`` or ``dense`` search found the query's own
document again and scored it (mrr 0.75 where it is 1.0 once it is dropped)."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.evaluate import evaluate_retrieval
from tests.stages.dense_fixtures import write_beir

DOCS = {
    "a1": "cats purr and sleep all day in the sun",
    "a2": "dogs bark at cats in the yard",
    "a3": "cats and dogs sleep together in the sun",
    "a4": "the stock market fell today on rate fears",
    "a5": "markets rally as stock prices rise",
    "a6": "sleeping cats dream of fish and sun",
    "a7": "rate fears drive the bond market",
}
QUERIES = {"a1": "cats purr sleep sun", "a4": "stock market rate fears"}
QRELS = [("a1", "a3"), ("a1", "a6"), ("a4", "a5"), ("a4", "a7")]


@pytest.fixture(scope="module")
def own_ids(tmp_path_factory):
    """A BEIR folder whose query ids are ids of documents (each query's own), and its
    workspace."""
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace

    root = write_beir(tmp_path_factory.mktemp("own_ids"), DOCS, QUERIES, QRELS)
    ds = load_dataset(root)
    with open_workspace(ds, str(root / "store.duckdb"), "hashing", progress=False) as ws:
        yield ds, ws


@pytest.mark.parametrize(("pipeline", "full"), [
    ("bm25 >> rm3(fb_docs=2, fb_terms=5) >> bm25", False),
    ("bm25 >> bo1(fb_docs=2, fb_terms=5) >> bm25", False),
    ("bm25 >> rocchio(k=2) >> dense", True),
    ("(bm25 >> bo1(fb_docs=2, fb_terms=5) >> bm25) + dense", True),
])
def test_no_stage_that_retrieves_brings_the_query_back(own_ids, pipeline, full):
    """``full``: the last search ranks every document (dense), so each list stays 5 deep
    without the query's own; BM25 leaves out documents sharing no term, and a list that held
    every match is one shorter without it."""
    ds, ws = own_ids

    def run(drop: bool) -> dict:
        prefs = RetrievalPrefs(query_text="", top_k_items=5, fts={"top_k": 5},
                               vector={"top_k": 5}, ignore_identical_ids=drop)
        return evaluate_retrieval(ws, ds, "test", prefs, ["mrr@5", "recall@5"],
                                  pipeline=pipeline, progress=False)

    kept, dropped = run(False), run(True)
    assert any(q in [d for d, _ in kept.run[q]] for q in QUERIES), kept.run  # it can fail
    for q in QUERIES:
        assert q not in [d for d, _ in dropped.run[q]], (q, dropped.run[q])
        own = q in [d for d, _ in kept.run[q]]
        assert len(dropped.run[q]) == (5 if full else len(kept.run[q]) - own)
    assert dropped.metrics["mrr@5"] == 1.0 > kept.metrics["mrr@5"]
    assert dropped.hashes["config"] != kept.hashes["config"]
