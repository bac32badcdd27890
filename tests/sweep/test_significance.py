"""Holm's correction by hand, paired tests against scipy, seeded bootstrap intervals."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ttest_rel

from aiblox.metrics import bootstrap_ci, compare_to_baseline, holm


def test_holm_by_hand():
    # sorted: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_holm_properties(ps):
    adj = holm(ps)
    assert all(p <= a <= 1.0 for p, a in zip(ps, adj, strict=True))
    order = sorted(range(len(ps)), key=lambda i: (ps[i], i))
    assert [adj[i] for i in order] == sorted(adj[i] for i in order)
    assert holm(ps) == adj  # deterministic


BASE = {"ndcg@10": {"q1": 0.5, "q2": 0.2, "q3": 0.9, "q4": 0.4}}
BETTER = {"ndcg@10": {"q1": 0.7, "q2": 0.3, "q3": 0.9, "q4": 0.6, "q9": 1.0}}


def test_paired_t_test_matches_scipy_and_counts_wins():
    [c] = compare_to_baseline(BASE, [("better", BETTER)], ["ndcg@10"])
    expected = ttest_rel([0.5, 0.2, 0.9, 0.4], [0.7, 0.3, 0.9, 0.6]).pvalue
    assert c.p_value == pytest.approx(expected)
    assert c.p_holm == c.p_value  # a family of one
    assert (c.wins, c.ties, c.losses) == (3, 1, 0)  # q9 is unpaired and left out
    assert c.delta == pytest.approx(0.125)
    assert c.significant == (c.p_holm <= 0.05)


def test_identical_candidate_is_not_significant_and_holm_spans_candidates():
    out = compare_to_baseline(BASE, [("same", BASE), ("better", BETTER)], ["ndcg@10"])
    same, better = out
    assert same.p_value == 1.0 and not same.significant and same.ties == 4
    assert better.p_holm == pytest.approx(min(1.0, 2 * better.p_value))


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = {f"q{i}": (i % 7) / 7 for i in range(50)}
    a = bootstrap_ci(values)
    assert a == bootstrap_ci(dict(reversed(list(values.items()))))  # key order does not matter
    mean, low, high = a
    assert low <= mean <= high
    assert mean == pytest.approx(sum(values.values()) / 50)
    assert bootstrap_ci([]) == (0.0, 0.0, 0.0)
