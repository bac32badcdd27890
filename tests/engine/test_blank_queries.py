"""A judged query with no text retrieves nothing and scores 0 in every pipeline, as it does
searched by its text (the loader's warning says so): after ``rocchio`` it carried the empty
string's embedding as its vector, ranked every document and got credit for them (ndcg@3 0.82
where it is 0.5)."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.evaluate import evaluate_retrieval
from tests.stages.dense_fixtures import write_beir

DOCS = {"d1": "apple banana", "d2": "zebra lion", "d3": "kiwi melon", "d4": "apple kiwi"}
QUERIES = {"q1": "apple", "q2": ""}
QRELS = [("q1", "d1"), ("q2", "d2")]


@pytest.fixture(scope="module")
def blank(tmp_path_factory):
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace

    root = write_beir(tmp_path_factory.mktemp("blank"), DOCS, QUERIES, QRELS)
    with pytest.warns(UserWarning):  # the loader names the query with no text
        ds = load_dataset(root)
    with open_workspace(ds, str(root / "store.duckdb"), "hashing", progress=False) as ws:
        yield ds, ws


@pytest.mark.parametrize("pipeline", [
    "dense", "dense >> rocchio(k=1) >> dense", "bm25 >> rocchio(k=1) >> dense",
    "bm25 >> rm3(fb_docs=1, fb_terms=3) >> bm25", "bm25 >> bo1(fb_docs=1, fb_terms=3) >> bm25",
])
def test_a_query_with_no_text_retrieves_nothing_in_any_pipeline(blank, pipeline):
    ds, ws = blank
    prefs = RetrievalPrefs(query_text="", top_k_items=3, fts={"top_k": 3}, vector={"top_k": 3})
    r = evaluate_retrieval(ws, ds, "test", prefs, ["ndcg@3"], pipeline=pipeline,
                           progress=False)
    assert r.run.get("q2", []) == []
    assert r.per_query["ndcg@3"]["q2"] == 0.0
    assert r.metrics["ndcg@3"] == r.per_query["ndcg@3"]["q1"] / 2


def test_topics_with_a_query_of_no_text_are_keyed_apart(blank, sample_dataset, tmp_path):
    """A run a stage after feedback cached before the fix (its blank query ranked documents)
    is not read back: such topics have a key of their own; others keep theirs."""
    from aiblox.engine.cache import StageCache
    from aiblox.engine.context import RunContext
    from aiblox.engine.settings import SweepSettings
    from aiblox.engine.task import stage_key

    ds, ws = blank
    keys = {}
    for name, dataset in (("blank", ds), ("sample", sample_dataset)):
        ctx = RunContext(SweepSettings(name="s", embedder="hashing", metrics=("ndcg@3",)),
                         dataset, StageCache(tmp_path / name), ws.db, ws.store.kind, ["test"],
                         progress=False)
        keys[name] = ctx.topics("test").key
        ctx.close()
    assert keys["sample"] == stage_key("topics", "1", {"dataset": sample_dataset.hash,
                                                       "split": "test", "limit": None})
    assert keys["blank"] != stage_key("topics", "1", {"dataset": ds.hash, "split": "test",
                                                      "limit": None})
