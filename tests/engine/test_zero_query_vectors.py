"""A query whose vector is all zeros retrieves nothing on the dense side: the hashing embedder's
vector of a query with no letter or digit (``"?!"``) has cosine 0 with every document, and the
dense list held every document at score 0 in id order, which earned credit (QA 16)."""

from __future__ import annotations

import numpy as np
import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.retrieval.retriever import zero_emptied
from tests.stages.dense_fixtures import write_beir

DOCS = {"d1": "apple banana", "d2": "zebra lion", "d3": "kiwi melon", "d4": "apple kiwi"}
QUERIES = {"q1": "apple", "q2": "?!"}
QRELS = [("q1", "d1"), ("q2", "d1")]  # d1 comes first by id: credit for nothing, before


@pytest.fixture(scope="module")
def zero(tmp_path_factory):
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace

    root = write_beir(tmp_path_factory.mktemp("zero"), DOCS, QUERIES, QRELS)
    ds = load_dataset(root)
    with open_workspace(ds, str(root / "store.duckdb"), "hashing", progress=False) as ws:
        assert not np.any(ws.embedder.embed(["?!"]))  # the premise: a zero vector
        yield ds, ws


@pytest.mark.parametrize(("mode", "pipeline"), [
    ("dense", None), ("hybrid", None), ("hybrid", "dense >> rocchio(k=1) >> dense")])
def test_a_zero_query_vector_retrieves_nothing(zero, mode, pipeline):
    ds, ws = zero
    prefs = RetrievalPrefs(query_text="", mode=mode, top_k_items=3, fts={"top_k": 3},
                           vector={"top_k": 3})
    r = evaluate_retrieval(ws, ds, "test", prefs, ["ndcg@3"], pipeline=pipeline,
                           progress=False)
    assert r.run.get("q2", []) == []
    assert r.per_query["ndcg@3"]["q2"] == 0.0
    assert r.run["q1"] and r.per_query["ndcg@3"]["q1"] > 0


def test_zero_emptied_keeps_every_other_list():
    runs = [[("a", 0.5)], [("b", 0.0)], [("c", 0.1)]]
    vectors = np.array([[0.1, 0.0], [0.0, 0.0], [0.0, -1e-30]], dtype=np.float32)
    assert zero_emptied(runs, vectors) == [[("a", 0.5)], [], [("c", 0.1)]]
