"""``QrelsScorer.score_fusions``: many fusion settings of one split in one compiled pass give,
byte for byte, what each setting's own fusion (``BatchFusion.fuse_arrays``) and metrics
(``QrelsScorer.evaluate_positions``) give, the route a sweep point takes one at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.contracts.retrieval import ScoringConfig
from aiblox.fusion import BatchFusion
from aiblox.metrics import QrelsScorer
from tests.fusion.lists import ranked

DOCS = [f"d{i:02d}" for i in range(60)]
# coarse scores: ties within and across lists are common (the order's tie-break is tested)
score = st.sampled_from([-1.5, -0.25, -0.0, 0.0, 0.25, 0.5, 1.0, 2.0, 7.5, 11.0])


# up to 50 hits a list: segments of 32 positions or more take the radix sort, shorter the
# partial quicksort
lists = st.lists(st.tuples(st.sampled_from(DOCS), score), max_size=50).map(ranked)
families = st.one_of(
    st.builds(lambda ks, wt, wv: [ScoringConfig(blend="rrf", rrf_k=k, rrf_w_text=wt,
                                                rrf_w_vec=wv) for k in ks],
              st.lists(st.integers(0, 100), min_size=1, max_size=4),
              st.sampled_from([0.5, 1.0]), st.sampled_from([1.0, 2.5])),
    st.builds(lambda ws, n, m: [ScoringConfig(blend="linear", w_text=w, w_vec=1.0 - w,
                                              normalize=n, missing=m) for w in ws],
              st.lists(st.sampled_from([0.0, 0.05, 0.35, 0.5, 0.7, 1.0]), min_size=1,
                       max_size=5),
              st.sampled_from(["minmax", "zscore", "sigmoid", "none"]),
              st.sampled_from(["zero", "list_min"])),
)
METRIC_SETS = [
    ["ndcg@10", "recall@5", "mrr@10", "map@5"],   # cutoffs: only the first 10 ranks read
    ["ndcg", "map", "precision@3", "hit_rate@2", "ndcg_burges@4", "recall@100"],  # all ranks
    ["ndcg@5-l2", "map@10-l2", "mrr"],           # relevance levels
    ["ndcg@10", "bpref"],                         # one metric outside the pass: no metrics
]


def one_at_a_time(index, scorer, codes, cfgs, top_k, metrics):
    out = []
    for cfg in cfgs:
        fused = index.fuse_arrays(cfg, top_k)
        out.append((fused, scorer.evaluate_positions(list(index.qids), codes, fused.positions,
                                                     fused.counts, metrics)))
    return out


@settings(max_examples=120, deadline=None)
@given(pairs=st.lists(st.tuples(lists, lists), min_size=1, max_size=6), cfgs=families,
       top_k=st.sampled_from([None, 1, 5, 40]), metrics=st.sampled_from(METRIC_SETS),
       judged=st.lists(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=8),
                       min_size=1, max_size=8))
def test_many_settings_at_once_are_each_setting_s_own_bytes(pairs, cfgs, top_k, metrics,
                                                              judged):
    index = BatchFusion([f"q{i}" for i in range(len(pairs))], [t for t, _ in pairs],
                        [v for _, v in pairs])
    # judged queries beyond the index's (judged, never run: an empty run's 0) and index
    # queries never judged (left out of the metrics)
    qrels = {f"q{2 * i}": docs for i, docs in enumerate(judged)}
    scorer = QrelsScorer(qrels)
    codes = scorer.codes(index.docs)
    expect = one_at_a_time(index, scorer, codes, cfgs, top_k, metrics)
    got = scorer.score_fusions(index, cfgs, top_k, codes, metrics)
    assert len(got) == len(cfgs)
    outside = any(m.startswith("bpref") for m in metrics) or not scorer.qids
    for (fused, values), (ref_fused, ref_values) in zip(got, expect, strict=True):
        for a, b in zip(fused, ref_fused, strict=True):
            assert a.dtype == b.dtype
            assert a.tobytes() == b.tobytes()
        if outside:
            assert values is None
            continue
        assert values is not None
        assert sorted(values) == sorted(ref_values)
        for name in ref_values:
            assert values[name].dtype == ref_values[name].dtype
            assert values[name].tobytes() == ref_values[name].tobytes(), name


def test_settings_of_different_blends_are_refused():
    index = BatchFusion(["q0"], [[("d1", 1.0)]], [[("d2", 0.5)]])
    scorer = QrelsScorer({"q0": {"d1": 1}})
    mixed = [ScoringConfig(blend="linear", normalize="minmax"),
             ScoringConfig(blend="linear", normalize="zscore")]
    with pytest.raises(ValueError, match="one blend, normalisation"):
        scorer.score_fusions(index, mixed, 10, scorer.codes(index.docs), ["ndcg@10"])


def test_a_fused_run_computed_ahead_carries_its_hash_and_stays_read_only():
    from aiblox.engine.cache_bytes import HashedArrays, arrays_sha256

    arrays = {"positions": np.arange(5, dtype=np.int32), "counts": np.asarray([5], np.int32),
              "scores": np.linspace(1.0, 0.0, 5)}
    hashed = HashedArrays(arrays)
    assert hashed.sha256 == arrays_sha256(arrays) == arrays_sha256(hashed)
    with pytest.raises(ValueError, match="read-only"):
        hashed["scores"][0] = 9.0
    assert arrays["scores"].flags.writeable  # views: the caller's arrays are not frozen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_segments_and_settings_far_apart_or_near(seed):
    """Segments of a few hundred positions (radix sorted) cut to 100, settings a step apart
    (a setting orders only what can still be kept) and then shuffled (most of a segment can):
    each setting's own bytes."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:04d}" for i in range(3000)]
    text, vec = [], []
    for _ in range(12):
        picks = rng.choice(len(docs), 400, replace=False)
        scores = np.round(rng.gamma(2.0, 3.0, 400), 2)  # rounded: ties
        hits = [(docs[i], float(x)) for i, x in zip(picks, scores, strict=True)]
        text.append(ranked(hits[:200]))
        vec.append(ranked(hits[150:]))
    index = BatchFusion([f"q{i}" for i in range(12)], text, vec)
    qrels = {f"q{i}": {docs[int(j)]: int(rng.integers(0, 3)) for j in rng.choice(3000, 30)}
             for i in range(12)}
    scorer = QrelsScorer(qrels)
    codes = scorer.codes(index.docs)
    near = [ScoringConfig(blend="linear", w_text=w / 100, w_vec=1 - w / 100,
                          normalize="minmax") for w in range(0, 101, 1)]
    far = [near[i] for i in rng.permutation(len(near))]
    rrf = [ScoringConfig(blend="rrf", rrf_k=k) for k in (1, 10, 60, 61, 1000)]
    metrics = ["ndcg@10", "recall@100", "map"]
    for cfgs in (near, far, rrf):
        expect = one_at_a_time(index, scorer, codes, cfgs, 100, metrics)
        got = scorer.score_fusions(index, cfgs, 100, codes, metrics)
        for (fused, values), (ref_fused, ref_values) in zip(got, expect, strict=True):
            assert all(a.tobytes() == b.tobytes() for a, b in zip(fused, ref_fused, strict=True))
            assert all(values[k].tobytes() == ref_values[k].tobytes() for k in ref_values)


def test_infinite_or_nan_fused_scores_are_refused_by_every_route():
    """An infinite raw score, unnormalised, times a weight is inf (times a zero weight NaN):
    such documents tie, their order lost. A setting at a time and all settings in one pass
    refuse it alike, as they refuse weights past the largest run score (a 32-bit float)."""
    inf = float("inf")
    text = [[(f"d{i:02d}", inf if i % 7 == 0 else float(50 - i)) for i in range(45)]]
    vec = [[(f"d{i:02d}", float(i % 5)) for i in range(10, 60)]]
    index = BatchFusion(["q0"], text, vec)
    scorer = QrelsScorer({"q0": {"d03": 1, "d14": 2, "d40": 1}})
    codes = scorer.codes(index.docs)
    # 0.5 * inf is inf (past the largest run score); 0 * inf is NaN (not a number: a list holds
    # a score that is not finite)
    for w, said in ((0.5, r"none-normalised scores reach inf, past"),
                    (0.0, r"a none-normalised score is not a number \(a list holds a NaN or "
                          r"infinite score\)")):
        cfg = ScoringConfig(blend="linear", w_text=w, w_vec=1.0, normalize="none")
        with pytest.raises(ValueError, match=said):
            index.fuse_arrays(cfg, 10)
        with pytest.raises(ValueError, match=said):
            scorer.score_fusions(index, [cfg], 10, codes, ["ndcg@10"])
    finite = [ScoringConfig(blend="linear", w_text=w, w_vec=1.0, normalize="none")
              for w in (0.5, 1e30, 0.0)]
    text = [[(d, 0.0 if s == inf else s) for d, s in text[0]]]
    index = BatchFusion(["q0"], text, vec)
    codes = scorer.codes(index.docs)
    expect = one_at_a_time(index, scorer, codes, finite, 10, ["ndcg@10"])
    got = scorer.score_fusions(index, finite, 10, codes, ["ndcg@10"])
    for (fused, _), (ref_fused, _) in zip(got, expect, strict=True):
        assert all(a.tobytes() == b.tobytes() for a, b in zip(fused, ref_fused, strict=True))
