"""ranx on prebuilt typed lists gives exactly the numbers of ranx's own Qrels/Run route (the
reference below, which is what ``evaluate_run`` did before it moved onto ``QrelsScorer``);
bpref is trec_eval's, not ranx's (checked against trec_eval in
``tests/data/test_trec_conformance.py``, at its edges here)."""

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aiblox.hashing import canonical_json
from aiblox.metrics import QrelsScorer, evaluate_run, ranked_run, setup_numba_cache

METRICS = ["ndcg@10", "recall@5", "mrr@10", "map@100", "r-precision", "ndcg@3-l2"]
DOCS = [f"d{i}" for i in range(15)]


def reference_evaluate_run(qrels, run, metrics):
    """ranx's documented route: Qrels and Run from dicts, make_comparable, per-query scores."""
    import warnings

    setup_numba_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ranx import Qrels, Run, evaluate

        judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs}
        scores = ranked_run(run)
        r = Run.from_dict({q: scores.get(q, {}) for q in judged})
        means = evaluate(Qrels.from_dict(judged), r, list(metrics), make_comparable=True)
    if not isinstance(means, dict):
        means = {metrics[0]: means}
    per_query = {m: {q: float(v) for q, v in sorted(r.scores[m].items())} for m in metrics}
    return {m: float(v) for m, v in means.items()}, per_query

qrels_st = st.dictionaries(
    st.sampled_from(["q1", "q2", "q3", "q4"]),
    st.dictionaries(st.sampled_from(DOCS[:10]), st.integers(0, 3), max_size=5),
    min_size=1, max_size=4)
run_st = st.dictionaries(
    st.sampled_from(["q1", "q2", "q3", "q4", "q9"]),
    st.lists(st.sampled_from(DOCS), max_size=12, unique=True), max_size=5)


@settings(max_examples=25, deadline=None)
@given(qrels=qrels_st, ranking=run_st)
def test_equals_evaluate_run(qrels, ranking):
    run = {q: [[d, float(len(ds) - i)] for i, d in enumerate(ds)] for q, ds in ranking.items()}
    if not any(qrels.values()):
        return
    metrics = METRICS
    try:
        expected = reference_evaluate_run(qrels, run, metrics)
    except ValueError:  # ranx's Run.from_dict cannot hold a run with no documents at all
        assume(False)
    sm = QrelsScorer(qrels)
    got = sm.evaluate(run, metrics)
    assert canonical_json(nan_free(got)) == canonical_json(nan_free(expected))
    assert canonical_json(nan_free(evaluate_run(qrels, run, metrics))) == \
        canonical_json(nan_free(expected))
    # the compact path (codes and counts, run queries in any order, extra queries ignored)
    qids = sorted(run, reverse=True)
    codes = sm.codes([d for q in qids for d, _ in run[q]])
    compact = sm.evaluate_arrays(qids, codes, np.array([len(run[q]) for q in qids]), metrics)
    assert canonical_json(nan_free(compact)) == canonical_json(nan_free(expected))


def nan_free(value):
    """NaN as a string, to compare."""
    if isinstance(value, dict):
        return {k: nan_free(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [nan_free(v) for v in value]
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def test_an_empty_run_scores_zero():  # where ranx's own Run.from_dict raises
    means, _ = QrelsScorer({"q1": {"d0": 1}}).evaluate({}, ["ndcg@10", "recall@5"])
    assert means == {"ndcg@10": 0.0, "recall@5": 0.0}


def test_one_metric_and_by_hand():
    sm = QrelsScorer({"q1": {"a": 1}, "q2": {"b": 2, "c": 1}})
    means, per_query = sm.evaluate({"q1": [["x", 2.0], ["a", 1.0]]}, ["mrr@10"])
    assert per_query == {"mrr@10": {"q1": 0.5, "q2": 0.0}}  # q2 retrieved nothing
    assert means == {"mrr@10": 0.25}


def test_bpref_is_trec_eval_s_at_its_edges():
    """trec_eval's bpref where ranx's differs: a query judging no document non-relevant (most
    BEIR collections: ranx gives NaN), a negative grade (trec_eval: unjudged; ranx: judged
    non-relevant), and a query with no relevant document (0, as every measure)."""
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "d": 0}, "q3": {"e": 0},
             "q4": {"f": 2, "g": -1}}
    run = {"q1": [["x", 3.0], ["a", 2.0]], "q2": [["d", 2.0], ["c", 1.0]],
           "q3": [["e", 1.0]], "q4": [["g", 2.0], ["f", 1.0]]}
    means, per_query = QrelsScorer(qrels).evaluate(run, ["bpref", "bpref-l2"])
    assert per_query["bpref"] == {"q1": 0.5, "q2": 0.0, "q3": 0.0, "q4": 1.0}
    assert means["bpref"] == 0.375
    # at level 2 only f is relevant, and the grade-1 documents are judged non-relevant
    assert per_query["bpref-l2"] == {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 1.0}


def test_packed_metrics_round_trip_through_the_stage_cache(tmp_path):
    """The metrics stage stores arrays (names, query ids, means, per-query matrix): read back,
    they unpack to the very floats and ids, non-ASCII ids and NaN included."""
    from aiblox.engine.cache import StageCache
    from aiblox.metrics import pack_metrics, unpack_metrics

    qids = ["q1", "q10", "qé-😀"]
    matrix = np.array([[0.1, 1 / 3, 0.0], [float("nan"), 1e-300, 1.0]])
    packed = pack_metrics(["ndcg@10", "bpref"], qids, [float(np.mean(matrix[0])), 0.5], matrix)
    cache = StageCache(tmp_path)
    rec, _ = cache.run("metrics", "2", {"m": 1}, ["k"], lambda: packed, codec="arrays")
    back = unpack_metrics(StageCache(tmp_path).load("metrics", rec.key))
    assert list(back["per_query"]) == ["ndcg@10", "bpref"]
    assert back["per_query"]["ndcg@10"] == {"q1": 0.1, "q10": 1 / 3, "qé-😀": 0.0}
    assert math.isnan(back["per_query"]["bpref"]["q1"])
    assert back["per_query"]["bpref"]["q10"] == 1e-300
    assert back["means"] == {"ndcg@10": float(np.mean(matrix[0])), "bpref": 0.5}


EVERY_KIND = ["hits@3", "hit_rate@5", "precision@4", "precision", "recall", "recall@5", "mrr",
              "map", "map@3", "dcg@5", "dcg_burges@5", "ndcg", "ndcg_burges@10-l2", "ndcg@3-l2",
              "mrr@2-l2", "f1@5", "r-precision", "rbp.95"]


@settings(max_examples=60, deadline=None)
@given(qrels=qrels_st, ranking=run_st)
def test_compiled_metrics_are_ranx_numbers_bit_for_bit(qrels, ranking):
    """Every metric the compiled kernel covers (hits, hit rate, precision, recall, mrr, map,
    dcg, nDCG, the Burges forms, relevance levels, k = 0 and k past the run) gives ranx's
    documented route's doubles exactly, next to those it leaves to ranx (f1, r-precision,
    rbp); runs with unjudged documents, judgements of grade 0 and queries run empty."""
    run = {q: [[d, float(len(ds) - i)] for i, d in enumerate(ds)] for q, ds in ranking.items()}
    if not any(qrels.values()):
        return
    try:
        expected = reference_evaluate_run(qrels, run, EVERY_KIND)
    except ValueError:  # ranx's Run.from_dict cannot hold a run with no documents at all
        assume(False)
    got = QrelsScorer(qrels).evaluate(run, EVERY_KIND)
    assert canonical_json(nan_free(got)) == canonical_json(nan_free(expected))


@settings(max_examples=60, deadline=None)
@given(qrels=qrels_st, lengths=st.lists(st.integers(0, 12), min_size=4, max_size=4),
       seed=st.integers(0, 2**16),
       metrics=st.sampled_from([["ndcg@3", "recall@5", "mrr@2"], ["precision@4", "map@3"],
                                ["ndcg@10", "map"], ["f1@3", "ndcg@3"], ["hits@1"]]))
def test_gathering_only_the_ranks_read_changes_no_number(qrels, lengths, seed, metrics):
    """The sweep's metrics stage gathers a fused run's first k ranks (k the largest cutoff);
    its numbers are those of the whole run, and a metric reading the whole run (``map``) or
    left to ranx (``f1``) turns the cut off."""
    from aiblox.metrics import ranks_read, segment_heads

    if not any(qrels.values()):
        return
    scorer = QrelsScorer(qrels)
    qids = ["q1", "q2", "q3", "q4"]
    rng = np.random.default_rng(seed)
    doc_codes = scorer.codes(DOCS)
    counts = np.asarray(lengths, dtype=np.int64)
    positions = np.concatenate([rng.permutation(len(DOCS))[:n] for n in lengths]
                               ).astype(np.int32)
    whole = scorer.evaluate_packed(qids, doc_codes[positions], counts, metrics)
    cut = scorer.evaluate_positions(qids, doc_codes, positions, counts, metrics)
    assert whole.keys() == cut.keys()
    assert all(np.array_equal(whole[k], cut[k]) for k in whole)
    depth = ranks_read(metrics)
    assert depth == (None if metrics[0] in ("ndcg@10", "f1@3") else
                     max(int(m.split("@")[1]) for m in metrics))
    if depth is not None:
        heads, kept = segment_heads(positions, counts, depth)
        assert kept.tolist() == [min(n, depth) for n in lengths]
        ends = np.cumsum(counts)
        assert heads.tolist() == [int(p) for q, n in enumerate(lengths)
                                  for p in positions[ends[q] - n:ends[q] - n + min(n, depth)]]


def test_a_run_given_as_doc_score_dicts_is_ranked_by_score():
    """ranx's and pytrec_eval's run form, ``{qid: {doc: score}}``: ranked as trec_eval ranks it
    (score descending, ties by id descending), the numbers of that ranked list (it was once
    iterated as document ids: two-letter ids unpacked into a document and a score, silently
    0)."""
    import pytrec_eval

    qrels = {"q1": {"d1": 1, "d2": 2}, "q2": {"ab": 1}}
    as_dict = {"q1": {"d9": 0.1, "d1": 0.5, "d2": 0.9}, "q2": {"ab": 1.0, "xy": 1.0}}
    as_list = {"q1": [("d2", 0.9), ("d1", 0.5), ("d9", 0.1)], "q2": [("xy", 1.0), ("ab", 1.0)]}
    got = evaluate_run(qrels, as_dict, ["ndcg@10", "map"])
    assert got == evaluate_run(qrels, as_list, ["ndcg@10", "map"])
    te = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(as_dict)
    assert got[1]["map"] == {q: te[q]["map"] for q in qrels} and te["q2"]["map"] == 0.5


def test_scores_given_as_a_mapping_must_be_finite():
    """``{doc: score}`` is ordered by score: a NaN made the result hang on insertion order
    (mrr 1.0 or 0.5 for the same run); it is refused, naming the query and document."""
    import pytest

    qrels = {"q": {"a": 1}}
    for scores in ({"a": float("nan"), "b": 1.0, "c": 0.5}, {"b": 1.0, "a": float("inf")}):
        with pytest.raises(ValueError, match=r"query 'q', document 'a': score (nan|inf) is not"):
            evaluate_run(qrels, {"q": scores}, ["mrr"])
    # given best first, the order is the list's: a score plays no part, NaN or not
    assert evaluate_run(qrels, {"q": [("b", float("nan")), ("a", 1.0)]}, ["mrr"])[0] == {
        "mrr": 0.5}


def test_ranx_objects_and_query_ids_of_another_type():
    import warnings

    import pytest
    from ranx import Qrels, Run

    qrels = {"1": {"a": 1, "b": 2}, "2": {"c": 1}}
    run = {"1": {"a": 0.2, "b": 0.9, "x": 0.5}, "2": {"y": 1.0, "c": 0.1}}
    expected = evaluate_run(qrels, run, ["ndcg@10", "mrr"])
    assert evaluate_run(Qrels(qrels), Run(run), ["ndcg@10", "mrr"]) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert evaluate_run(qrels, {1: run["1"], 2: run["2"]}, ["ndcg@10", "mrr"]) == expected
    with pytest.warns(UserWarning, match="shares no query with the qrels"):
        means, _ = evaluate_run(qrels, {"q1": run["1"]}, ["mrr"])
    assert means == {"mrr": 0.0}
