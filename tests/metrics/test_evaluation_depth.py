"""The evaluation depth (aiblox.metrics.depth): how deep a run must be for its metrics, the
rule worked out by hand on small cases, and ``evaluate_retrieval`` following it: depths left
unset retrieve as deep as the metrics read (the CLI's run, hash for hash), depths set too
shallow are refused before anything is retrieved."""

from __future__ import annotations

import pytest

from aiblox.contracts import RetrievalPrefs
from aiblox.contracts.problems import valid_values, value_problem
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.metrics import (
    DEFAULT_DEPTH,
    WHOLE_RUN_DEPTH,
    DepthError,
    check_depth,
    evaluation_depth,
    evaluation_prefs,
    metric_cutoff,
)
from aiblox.metrics.depth import metrics_within, run_limits, shallow_limit
from aiblox.retrieval import HybridRetriever


def prefs(**kw) -> RetrievalPrefs:
    return RetrievalPrefs(query_text="", **kw)


@pytest.mark.parametrize(("name", "cutoff"), [
    ("ndcg@10", 10), ("recall@1000", 1000), ("ndcg@10-l2", 10), ("map@100", 100),
    ("map", None), ("ndcg", None), ("r-precision", None), ("bpref", None), ("rbp.95", None),
    ("precision@5-l2", 5), ("hits@3", 3)])
def test_metric_cutoffs(name, cutoff):
    assert metric_cutoff(name) == cutoff


def test_the_evaluation_depth():
    assert DEFAULT_DEPTH == 100 and WHOLE_RUN_DEPTH == 1000
    assert evaluation_depth(["ndcg@10", "recall@100"]) == 100
    assert evaluation_depth(["ndcg@10"]) == 100  # never below the default: one depth everywhere
    assert evaluation_depth(["recall@1000", "ndcg@10"]) == 1000
    assert evaluation_depth(["recall@5000"]) == 5000
    assert evaluation_depth(["map", "ndcg@10"]) == 1000  # TREC's runs are 1,000 deep
    assert evaluation_depth(["map", "recall@2000"]) == 2000


def test_unset_depths_follow_the_metrics_and_set_ones_are_kept():
    p = evaluation_prefs(prefs(), ["recall@1000"])
    assert (p.top_k_items, p.fts.top_k, p.vector.top_k) == (1000, 1000, 1000)
    p = evaluation_prefs(prefs(top_k_items=300, fts={"k1": 0.9}), ["ndcg@10"])
    assert (p.top_k_items, p.fts.top_k, p.vector.top_k, p.fts.k1) == (300, 100, 100, 0.9)
    p = evaluation_prefs(prefs(vector={"top_k": 7}), ["recall@100"])
    assert p.vector.top_k == 7 and p.fts.top_k == 100  # kept: check_depth decides
    assert RetrievalPrefs(query_text="").top_k_items == 20  # search keeps the seed's default


def test_run_limits_by_mode():
    # hybrid: the union of two lists is as deep as the deeper one
    assert [(lim.fields, lim.depth) for lim in run_limits(prefs(
        top_k_items=500, fts={"top_k": 30}, vector={"top_k": 200}))] == [
        (("top_k_items",), 500), (("fts.top_k", "vector.top_k"), 200)]
    assert run_limits(prefs(mode="bm25", fts={"top_k": 30}))[1].fields == ("fts.top_k",)
    assert run_limits(prefs(mode="dense", vector={"top_k": 40}))[1].depth == 40
    no_vec = prefs(mode="hybrid", fts={"top_k": 30}, vector={"embed_query": False})
    assert run_limits(no_vec)[1] == run_limits(prefs(mode="bm25", fts={"top_k": 30}))[1]
    hnsw = prefs(mode="dense", vector={"top_k": 100, "index": "hnsw", "ef_search": 50,
                                       "engine": "native"})
    assert (run_limits(hnsw)[1].fields, run_limits(hnsw)[1].depth) == (("vector.ef_search",), 50)
    # the derived HNSW index walks max(ef_search, top_k): its run is top_k deep (it was capped
    # at ef_search, so a valid configuration was refused; only pgvector's stops at ef_search)
    derived = prefs(mode="dense", vector={"top_k": 100, "index": "hnsw", "ef_search": 50})
    assert (run_limits(derived)[1].fields, run_limits(derived)[1].depth) == \
        (("vector.top_k",), 100)
    # the tightest bound is the one named
    tight = shallow_limit(prefs(top_k_items=50, fts={"top_k": 20}, vector={"top_k": 20}),
                          ["recall@100"])
    assert tight is not None and tight.depth == 20
    assert shallow_limit(prefs(top_k_items=100), ["recall@100", "map"]) is None
    assert metrics_within(prefs(top_k_items=50), ["ndcg@10", "recall@100", "map"]) == [
        "ndcg@10", "map"]


def test_check_depth_names_the_metrics_the_setting_and_the_fix():
    with pytest.raises(DepthError) as err:
        check_depth(prefs(top_k_items=20), ["ndcg@10", "recall@100", "map@100", "map"])
    assert str(err.value) == (
        "recall@100, map@100 read 100 documents per query, but top_k_items = 20 cuts the run "
        "at 20: they would be computed over 20 documents under the name @100; retrieve at "
        "least 100, or use cutoffs of at most 20")
    with pytest.raises(DepthError, match=r"^recall@1000 reads 1000 documents per query, but "
                                         r"--depth 500 retrieves at most 500 candidates per "
                                         r"list \(a hybrid run is as deep as its deeper list\)"):
        check_depth(prefs(top_k_items=1000, fts={"top_k": 500}, vector={"top_k": 500}),
                    ["recall@1000"], {"fts.top_k": "--depth", "vector.top_k": "--depth"})
    check_depth(prefs(top_k_items=5), ["map", "bpref"])  # no cutoff: whatever the run holds


def test_value_problems_say_the_valid_values():
    assert valid_values(RetrievalPrefs, ("fts", "top_k")) == \
        "a whole number >= 1 (at most 2147483647)"  # a depth's machine limit, said after
    assert valid_values(RetrievalPrefs, ("fts", "b")) == "a finite number from 0 to 1"
    assert valid_values(RetrievalPrefs, ("vector", "ef_search")) == \
        "a whole number from 1 to 4096, or none"
    assert valid_values(RetrievalPrefs, ("scoring", "blend")) is None  # not a number
    assert valid_values(RetrievalPrefs, ("nope",)) is None
    err = {"type": "finite_number", "loc": ("scoring", "w_text"), "msg": "Input should be ..."}
    assert value_problem(RetrievalPrefs, err) == \
        "not a finite number; valid: a finite number >= 0"


def test_weights_are_finite_and_not_all_zero():
    for bad in ({"w_text": float("nan")}, {"w_vec": float("inf")}, {"k1": float("inf")}):
        section = "fts" if "k1" in bad else "scoring"
        with pytest.raises(ValueError, match="finite number"):
            prefs(**{section: bad})
    with pytest.raises(ValueError, match=r"linear fusion's weights sum to 0 \(w_text 0, w_vec 0\)"):
        prefs(scoring={"blend": "linear", "w_text": 0, "w_vec": 0.0})
    with pytest.raises(ValueError, match=r"RRF's weights sum to 0"):
        prefs(scoring={"rrf_w_text": 0, "rrf_w_vec": 0})
    # one weight 0 is an ablation, and RRF ignores the linear weights
    prefs(scoring={"blend": "linear", "w_text": 0, "w_vec": 1})
    prefs(scoring={"blend": "rrf", "w_text": 0, "w_vec": 0})


class _Counting(HybridRetriever):
    """The real retriever, counting the batches it is asked to retrieve."""

    calls = 0

    def signals(self, group, ctx=None, timings=None):  # type: ignore[override]
        type(self).calls += 1
        return super().signals(group, ctx, timings)


def test_evaluate_retrieval_retrieves_as_deep_as_its_metrics(sample_store, sample_dataset):
    store, emb = sample_store
    r = _Counting(store, emb)
    plain = evaluate_retrieval(r, sample_dataset, "test", prefs(), progress=False)
    assert plain.config["prefs"]["top_k_items"] == 100  # not the seed's 20
    assert plain.config["prefs"]["fts"]["top_k"] == plain.config["prefs"]["vector"]["top_k"] == 100
    # the CLI's run: everything explicit at 100 gives the same config and run hashes
    explicit = evaluate_retrieval(r, sample_dataset, "test", prefs(
        top_k_items=100, fts={"top_k": 100}, vector={"top_k": 100}), progress=False)
    assert explicit.hashes == plain.hashes and explicit.metrics == plain.metrics
    deep = evaluate_retrieval(r, sample_dataset, "test", prefs(), ["recall@1000"],
                              progress=False)
    assert deep.config["prefs"]["top_k_items"] == 1000
    # set explicitly below a cutoff: refused before anything is retrieved
    before = _Counting.calls
    with pytest.raises(DepthError, match=r"recall@100, map@100 read 100 documents per query, "
                                         r"but top_k_items = 20 cuts the run at 20.*set "
                                         r"top_k_items to 100 or more, or leave it unset"):
        evaluate_retrieval(r, sample_dataset, "test", prefs(top_k_items=20), progress=False)
    with pytest.raises(DepthError, match="fts.top_k = 50 cuts the run at 50"):
        evaluate_retrieval(r, sample_dataset, "test", prefs(mode="bm25", fts={"top_k": 50}),
                           progress=False)
    assert _Counting.calls == before
