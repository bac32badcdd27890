"""Fusion math with expected values worked out by hand."""

import math

import pytest

from aiblox.contracts import ScoringConfig
from aiblox.fusion import HybridScorer, linear, rrf
from aiblox.fusion.normalize import minmax, sigmoid, zscore

TEXT = [("a", 10.0), ("b", 6.0), ("c", 2.0)]
VEC = [("c", 0.9), ("a", 0.5), ("d", 0.1)]


def test_rrf_hand_worked():
    fused = dict(rrf([TEXT, VEC], k=60))
    assert fused["a"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 2))
    assert fused["c"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert fused["b"] == pytest.approx(1 / (60 + 2))
    assert fused["d"] == pytest.approx(1 / (60 + 3))
    assert [d for d, _ in rrf([TEXT, VEC], k=60)] == ["a", "c", "b", "d"]


def test_rrf_weights_and_k():
    fused = dict(rrf([TEXT, VEC], k=0, weights=[2.0, 0.5]))
    assert fused["a"] == pytest.approx(2.0 / 1 + 0.5 / 2)
    assert fused["d"] == pytest.approx(0.5 / 3)
    with pytest.raises(ValueError, match="2 runs but 1 weights"):
        rrf([TEXT, VEC], weights=[1.0])


def test_rrf_counts_a_document_once_per_list_at_its_first_position():
    """A document repeated inside one list has one rank there, its first (best) position (the
    retriever seed's 1/(k + rank_text) + 1/(k + rank_vec); ranx runs hold one score per
    document): it was summed once per occurrence, beating documents ranked above it."""
    text = [("a", 9.0), ("b", 8.0), ("b", 7.0), ("b", 6.0)]
    vec = [("c", 0.9), ("a", 0.8)]
    fused = dict(rrf([text, vec], k=60))
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 61)
    assert [d for d, _ in rrf([text, vec], k=60)] == ["a", "c", "b"]
    # repeats are skipped; the other documents keep their positions (y is third, not second)
    assert rrf([[("x", 1.0), ("x", 0.5), ("y", 0.4)]], k=0) == [("x", 1.0), ("y", 1 / 3)]


def test_normalisers_hand_worked():
    assert minmax([10.0, 6.0, 2.0]) == [1.0, 0.5, 0.0]
    assert minmax([3.0, 3.0]) == [1.0, 1.0]
    z = zscore([10.0, 6.0, 2.0])  # mean 6, population std sqrt(32/3)
    s = math.sqrt(32 / 3)
    assert z == pytest.approx([4 / s, 0.0, -4 / s])
    assert zscore([5.0, 5.0]) == [0.0, 0.0]
    assert sigmoid([10.0, 6.0, 2.0]) == pytest.approx([1 / (1 + math.exp(-4 / s)), 0.5,
                                                       1 / (1 + math.exp(4 / s))])


def test_linear_minmax_missing_zero():
    fused = dict(linear([TEXT, VEC], weights=[0.5, 0.5], normalize="minmax", missing="zero"))
    # text minmax: a 1, b .5, c 0; vec minmax: c 1, a .5, d 0
    assert fused == pytest.approx({"a": 0.75, "b": 0.25, "c": 0.5, "d": 0.0})


def test_linear_missing_list_min_differs_from_zero():
    run1 = [("a", 3.0), ("b", 2.0)]
    run2 = [("c", 1.0), ("a", 0.0)]
    zero = dict(linear([run1, run2], [1.0, 1.0], normalize="none", missing="zero"))
    lmin = dict(linear([run1, run2], [1.0, 1.0], normalize="none", missing="list_min"))
    assert zero["c"] == 1.0 and lmin["c"] == 1.0 + 2.0  # c absent from run1: 0 vs run1's min 2
    assert zero["b"] == 2.0 and lmin["b"] == 2.0 + 0.0
    with pytest.raises(ValueError, match="missing-document policy"):
        linear([run1], [1.0], missing="floor")


def test_ties_break_by_id():
    fused = rrf([[("b", 1.0)], [("a", 1.0)]], k=60)
    assert fused == [("a", 1 / 61), ("b", 1 / 61)]


def test_hybrid_scorer_carries_signals():
    hits = HybridScorer(ScoringConfig(blend="rrf")).fuse(TEXT, VEC, top_k=3)
    assert [h.doc_id for h in hits] == ["a", "c", "b"]
    a = hits[0]
    assert (a.rank_text, a.rank_vec, a.score_text, a.score_vec) == (1, 2, 10.0, 0.5)
    b = hits[2]
    assert (b.rank_vec, b.score_vec) == (None, None)
    lin = HybridScorer(ScoringConfig(blend="linear", normalize="minmax", w_text=1.0, w_vec=0.0))
    assert [h.doc_id for h in lin.fuse(TEXT, VEC)] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("value", [0.1, 0.7, 1e-300, -3.3, 12.345678901234567])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 100])
def test_zscore_and_sigmoid_of_equal_scores_are_0_and_half_in_both_routes(value, n):
    """``fsum([0.1] * 3) / 3`` is not 0.1: the variance was a few ulps above 0 and every
    z-score +-1 (sigmoid 0.27 or 0.73), so the rank of a document tied in one list depended on
    the rounding of the tied value (QA)."""
    import numpy as np

    from aiblox.fusion import kernels

    assert zscore([value] * n) == [0.0] * n
    assert sigmoid([value] * n) == [0.5] * n
    raw = np.asarray([value] * n + [1.0, 2.0], dtype=np.float64)
    offsets = np.asarray([0, n, n + 2], dtype=np.int64)
    for logistic, same in ((False, 0.0), (True, 0.5)):
        normed, _ = kernels.zscore_lists(raw, offsets, logistic, 2.0)
        assert normed[:n].tolist() == [same] * n
        assert normed[n:].tolist() == (sigmoid if logistic else zscore)([1.0, 2.0])


def test_a_blend_ties_a_list_of_equal_scores_whatever_their_value():
    orders = set()
    for v in (0.1, 0.5, 0.7):
        text = [("a", v), ("b", v), ("c", v)]
        vec = [("d", 0.9), ("a", 0.5), ("e", 0.1)]
        orders.add(tuple(d for d, _ in linear([text, vec], [0.5, 0.5], normalize="zscore")))
    assert len(orders) == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_linear_refuses_a_score_that_is_not_finite_naming_the_document(bad):
    """A NaN in a list came back in the fused run out of score order, silently."""
    text = [("a", 3.0), ("b", bad), ("c", 1.0), ("d", 0.5)]
    with pytest.raises(ValueError, match=r"linear fusion: document 'b' has score .*: the scores "
                                         r"blended must be finite numbers"):
        linear([text, [("a", 1.0)]], [0.5, 0.5], normalize="minmax")
    assert [d for d, _ in rrf([text])] == ["a", "b", "c", "d"]  # ranks alone: fine
