"""Metric directions (costs are lower-is-better), wins under them, the corrections and the
Wilcoxon test, by hand and against scipy."""

import pytest
from scipy.stats import wilcoxon

from aiblox.metrics import adjust, compare_to_baseline, metric_direction, paired_p_value
from aiblox.metrics.pareto import infer_direction


@pytest.mark.parametrize("name", ["evidence_tokens", "selected_tokens", "selected_chunks",
                                  "candidates", "prompt_tokens", "latency_ms", "answer_time",
                                  "status:REFUSED", "status:FAILED"])
def test_costs_and_failure_rates_are_lower_is_better(name):
    assert metric_direction(name) == "lower"


@pytest.mark.parametrize("name", ["ndcg@10", "recall@100", "max_passage:ndcg@10", "answer_f1",
                                  "answer_recall@5", "evidence_answer_recall", "mrr@10",
                                  "status:ANSWERED", "hit_rate@10"])
def test_quality_metrics_are_higher_is_better(name):
    assert metric_direction(name) == "higher"


def test_objectives_infer_from_the_same_table_but_status_rates_need_a_direction():
    assert infer_direction("selected_tokens") == "minimize"
    assert infer_direction("latency_ms") == "minimize"
    assert infer_direction("ndcg@10") == "maximize"
    assert infer_direction("status:ANSWERED") == "maximize"
    assert infer_direction("status:REFUSED") is None


def test_a_cost_decrease_is_a_win():
    base = {"selected_tokens": {"q1": 40.0, "q2": 30.0, "q3": 20.0},
            "ndcg@10": {"q1": 0.5, "q2": 0.5, "q3": 0.5}}
    cand = {"selected_tokens": {"q1": 10.0, "q2": 30.0, "q3": 25.0},
            "ndcg@10": {"q1": 0.6, "q2": 0.5, "q3": 0.4}}
    rows = {c.metric: c for c in compare_to_baseline(base, [("b", cand)],
                                                     ["selected_tokens", "ndcg@10"])}
    tok, ndcg = rows["selected_tokens"], rows["ndcg@10"]
    assert (tok.direction, tok.wins, tok.ties, tok.losses) == ("lower", 1, 1, 1)
    assert tok.delta == pytest.approx(-25.0 / 3)
    assert (ndcg.direction, ndcg.wins, ndcg.ties, ndcg.losses) == ("higher", 1, 1, 1)
    # q1: fewer tokens (a win), q3: more (a loss), whatever the sign convention of delta
    more = {"selected_tokens": {"q1": 50.0, "q2": 40.0, "q3": 30.0}}
    worse = compare_to_baseline({"selected_tokens": base["selected_tokens"]}, [("c", more)],
                                ["selected_tokens"])[0]
    assert (worse.wins, worse.losses) == (0, 3)


def test_corrections():
    ps = [0.01, 0.04, 0.03]
    assert adjust(ps, "holm") == pytest.approx([0.03, 0.06, 0.06])
    assert adjust(ps, "bonferroni") == pytest.approx([0.03, 0.12, 0.09])
    assert adjust([0.5, 0.6], "bonferroni") == [1.0, 1.0]
    assert adjust(ps, "none") == ps
    with pytest.raises(ValueError, match="holm, bonferroni, none"):
        adjust(ps, "sidak")  # type: ignore[arg-type]


def test_wilcoxon_is_scipy_s_and_deterministic():
    import numpy as np

    a = np.array([0.1, 0.4, 0.35, 0.8, 0.5, 0.2, 0.9])
    b = np.array([0.3, 0.5, 0.30, 0.9, 0.7, 0.2, 1.0])
    p = paired_p_value(a, b, "wilcoxon")
    assert p == wilcoxon(a, b).pvalue == paired_p_value(a, b, "wilcoxon")
    assert paired_p_value(a, a, "wilcoxon") == 1.0
    with pytest.raises(ValueError, match="student, fisher, wilcoxon"):
        paired_p_value(a, b, "z")  # type: ignore[arg-type]


def test_wilcoxon_on_few_pairs_with_zeros_or_ties_is_scipy_s_sign_flip_test():
    """Up to 13 pairs with a zero difference or tied magnitudes, scipy runs an exact
    permutation test (every sign flip); aiblox computes it at once, to the same bits."""
    import numpy as np

    from aiblox.metrics.significance import _wilcoxon_sign_flip_p

    rng = np.random.default_rng(7)
    checked = 0
    cases = [(n, grid) for n in (1, 2, 3, 5, 8) for grid in (4, 10, 3)] + [(13, 10)]
    for n, grid in cases:  # metric values on a coarse grid: ties and zeros are common
        a = rng.integers(0, grid + 1, n) / grid
        b = rng.integers(0, grid + 1, n) / grid
        mine = _wilcoxon_sign_flip_p(a, b)
        if np.array_equal(a, b):
            continue
        if mine is None:  # no zero, no tie: scipy's own exact distribution, unchanged
            d = np.abs(a - b)
            assert (d > 0).all() and len(set(d)) == n
            continue
        assert mine == wilcoxon(a, b).pvalue == paired_p_value(a, b, "wilcoxon"), (a, b)
        checked += 1
    assert checked >= 8  # 10 with this seed
    a = np.array([0.1, 0.4, 0.35, 0.8, 0.5, 0.2, 0.9])  # no tie, no zero: scipy decides
    assert _wilcoxon_sign_flip_p(a, a + np.arange(1, 8) / 100) is None
    assert _wilcoxon_sign_flip_p(np.arange(14.0), np.zeros(14)) is None  # 14 pairs: asymptotic
    assert _wilcoxon_sign_flip_p(a.astype(np.float32), a[::-1].astype(np.float32)) is None
