"""Metric names are checked against ranx's vocabulary before any work: the list is ranx's own,
every accepted name is one ranx computes, and bad names are refused with the known ones."""

from __future__ import annotations

import pytest

from aiblox.metrics import RANX_METRICS, evaluate_run, validate_metrics

QRELS = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}}
RUN = {"q1": [("d2", 3.0), ("d9", 2.0), ("d1", 1.0)], "q2": [("d3", 1.0)]}


def test_the_vocabulary_is_ranxs():
    from ranx.metrics import metric_switch

    for name in RANX_METRICS:
        assert callable(metric_switch(name)), name
    for name in ("bogus", "ndcg@10", "NDCG", "mrr@"):
        with pytest.raises(ValueError):
            metric_switch(name)


GOOD = ["ndcg@10", "ndcg", "recall@100", "mrr@10", "map@100", "precision@5", "hits@3",
        "hit_rate@1", "f1@5", "r-precision", "bpref", "dcg@3", "dcg_burges@3",
        "ndcg_burges@10", "rbp.95", "rbp@8", "ndcg@10-l2", "map-l2", "recall@100-l1"]


def test_accepted_names_are_computed_by_ranx():
    assert validate_metrics(GOOD) == GOOD
    means, _ = evaluate_run(QRELS, RUN, GOOD)
    assert set(means) == set(GOOD)
    assert all(v >= 0.0 for v in means.values())  # bpref too: trec_eval's, never NaN
    assert means["ndcg@10-l2"] != means["ndcg@10"]  # the level is read, not dropped


@pytest.mark.parametrize(("name", "words"), [
    ("bogus@10", "unknown metric 'bogus'"),
    ("NDCG@10", "unknown metric 'NDCG' (ranx's name: ndcg@10)"),
    ("P@5", "unknown metric 'P' (ranx's name: precision@5)"),  # other tools' names: ranx's
    ("P_5", "unknown metric 'P_5' (ranx's name: precision@5)"),
    ("ndcg_cut_10", "(ranx's name: ndcg@10)"),
    ("recip_rank", "(ranx's name: mrr)"),
    ("bogus_3", "unknown metric 'bogus_3'"),
    ("ndcg@-3", "cutoff @k must be a positive integer, got '-3'"),
    ("ndcg@0", "got '0'"),
    ("ndcg@", "got ''"),
    ("ndcg@1.5", "got '1.5'"),
    ("ndcg@10@5", "got '10@5'"),
    ("ndcg.10", "the cutoff is written @k, e.g. ndcg@10"),
    ("rbp", "rbp needs its persistence"),
    ("rbp.0", "rbp needs its persistence"),
    ("ndcg@10-l0", "relevance level after -l must be a positive integer"),
    ("ndcg@10-l2-l3", "given twice"),
    ("", "unknown metric ''"),
    # a cutoff a metric has no use for: bpref@5 was its own column, plain bpref's value (QA)
    ("bpref@5", "'bpref@5': bpref takes no cutoff @k (it reads the whole run, as trec_eval's "
                "bpref does, and ranx ignores a k)"),
    ("r-precision@1", "r-precision takes no cutoff @k (it reads the whole run, as trec_eval's "
                      "Rprec does"),
    ("bpref@5-l2", "bpref takes no cutoff"),
])
def test_bad_names_are_refused_with_the_known_ones(name, words):
    with pytest.raises(ValueError) as err:
        validate_metrics(["ndcg@10", name])
    message = str(err.value)
    assert words in message
    assert "ndcg@10'" not in message.split("Known:")[0].replace(f"'{name}'", "")
    assert "Known: bpref, dcg" in message and "\n" not in message


def test_every_bad_name_is_listed_at_once():
    with pytest.raises(ValueError, match=r"bad metric names: 'a@1': .*; 'ndcg@-1': "):
        validate_metrics(["a@1", "ndcg@10", "ndcg@-1"])
    with pytest.raises(ValueError, match="no metric named"):
        validate_metrics([])


def test_a_name_given_twice_is_refused_where_a_user_wrote_it():
    assert validate_metrics(["ndcg@10", "ndcg@10"]) == ["ndcg@10", "ndcg@10"]  # internal lists
    with pytest.raises(ValueError, match="metric 'ndcg@10' is named twice"):
        validate_metrics(["ndcg@10", "map", "ndcg@10"], distinct=True)
    assert validate_metrics(["ndcg@10", "ndcg@5"], distinct=True) == ["ndcg@10", "ndcg@5"]


def test_evaluate_run_refuses_before_ranx_runs():
    with pytest.raises(ValueError, match="unknown metric 'bogus'"):
        evaluate_run(QRELS, RUN, ["bogus@10"])
    with pytest.raises(ValueError, match="positive integer"):
        evaluate_run(QRELS, RUN, ["ndcg@-3"])  # ranx itself fails in a compiled kernel
