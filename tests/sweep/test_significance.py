"""Holm's correction by hand, paired tests against scipy, seeded bootstrap intervals."""

import warnings

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
    assert c.p_adjusted == c.p_value  # a family of one
    assert (c.wins, c.ties, c.losses) == (3, 1, 0)  # q9 is unpaired and left out
    assert c.delta == pytest.approx(0.125)
    assert c.significant == (c.p_adjusted <= 0.05)


def test_the_adjusted_p_is_named_p_adjusted_everywhere_and_old_summaries_still_read():
    """`sweep --json` said p_holm (even for a Bonferroni correction) where `compare --json`
    and the experiment table say p_adjusted (QA 27); a summary logged before still reads."""
    from aiblox.metrics.significance import Comparison
    from aiblox.sweep.report import _adjusted_named

    [c] = compare_to_baseline(BASE, [("better", BETTER)], ["ndcg@10"], correction="bonferroni")
    dumped = c.model_dump(mode="json")
    assert "p_adjusted" in dumped and "p_holm" not in dumped
    old = {k: v for k, v in dumped.items() if k != "p_adjusted"} | {"p_holm": c.p_adjusted}
    assert Comparison.model_validate(old) == c and c.p_holm == c.p_adjusted
    assert _adjusted_named(old)["p_adjusted"] == c.p_adjusted
    assert _adjusted_named(dumped) is dumped


def test_identical_candidate_is_not_significant_and_holm_spans_candidates():
    out = compare_to_baseline(BASE, [("same", BASE), ("better", BETTER)], ["ndcg@10"])
    same, better = out
    assert same.p_value == 1.0 and not same.significant and same.ties == 4
    assert better.p_adjusted == pytest.approx(min(1.0, 2 * better.p_value))


@pytest.mark.parametrize("test", ["student", "fisher", "wilcoxon"])
def test_a_nan_value_leaves_its_query_out_pairwise_and_is_counted(test):
    """A NaN is no score: the query is left out of the means, the test and the counts, and
    counted; the p-value is the test of the other queries (it was 1.0: NaN made every test
    undefined), whatever side the NaN is on."""
    from aiblox.metrics.marks import counts_text

    nan = float("nan")
    base = {"m": {**BASE["ndcg@10"], "q5": nan, "q6": 0.1}}
    cand = {"m": {**BETTER["ndcg@10"], "q5": 0.8, "q6": nan}}
    [c] = compare_to_baseline(base, [("better", cand)], ["m"], test=test)
    [want] = compare_to_baseline(BASE, [("better", BETTER)], ["ndcg@10"], test=test)
    assert c.dropped == 2 and want.dropped == 0
    assert (c.p_value, c.wins, c.ties, c.losses) == (want.p_value, 3, 1, 0)
    assert c.p_value < 1.0
    assert (c.baseline_mean, c.candidate_mean, c.delta) == \
        (want.baseline_mean, want.candidate_mean, want.delta)
    assert counts_text(c.wins, c.ties, c.losses, c.dropped) == "3/1/0 (2 NaN left out)"
    assert counts_text(3, 1, 0) == "3/1/0"


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = {f"q{i}": (i % 7) / 7 for i in range(50)}
    a = bootstrap_ci(values)
    assert a == bootstrap_ci(dict(reversed(list(values.items()))))  # key order does not matter
    mean, low, high = a
    assert low <= mean <= high
    assert mean == pytest.approx(sum(values.values()) / 50)
    assert bootstrap_ci([]) == (0.0, 0.0, 0.0)


def _metric_like(rng, n: int, kind: int):
    """Per-query value pairs shaped as the sweep's metrics: continuous, nearly equal, binary
    (recall at a small cutoff), rounded with many ties and zeros, a constant shift."""
    import numpy as np

    a = rng.random(n)
    if kind == 0:
        b = rng.random(n)
    elif kind == 1:
        b = a + rng.normal(0, 1e-4, n)
    elif kind == 2:
        a, b = (rng.integers(0, 2, n).astype(float) for _ in range(2))
    elif kind == 3:
        a = np.where(rng.random(n) < 0.3, 0.0, np.round(a, 3))
        b = np.where(rng.random(n) < 0.7, a, np.round(rng.random(n), 3))
    else:
        b = a + 0.25  # zero variance of the differences
    return a, b


def test_student_p_value_is_bit_identical_to_ranx():
    """The t-test from its formula (no ranx, no scipy.stats) returns ranx's
    ``paired_student_t_test`` p-value bit for bit, through ``paired_p_value`` too."""
    import numpy as np
    from ranx.statistical_tests import paired_student_t_test

    from aiblox.metrics.significance import paired_p_value, student_t_p_value

    rng = np.random.default_rng(26)
    sizes = [0, 1, 2, 3, 5, 30, 300, 809, *rng.integers(2, 1500, 40).tolist()]
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in sizes:
            for kind in range(5):
                a, b = _metric_like(rng, int(n), kind)
                ranx_p, _ = paired_student_t_test(a, b)
                ours = student_t_p_value(a, b)
                assert np.isnan(ours) == np.isnan(ranx_p), (n, kind)
                if not np.isnan(ours):
                    assert float(ranx_p).hex() == ours.hex(), (n, kind, ranx_p, ours)
                expected = 1.0 if np.array_equal(a, b) or np.isnan(ranx_p) else float(ranx_p)
                assert paired_p_value(a, b).hex() == expected.hex()
                checked += 1
    assert checked == len(sizes) * 5


def test_student_p_value_on_real_metric_values(tmp_path, sample_spec, sweep_db, sample_dataset,
                                               small_spec):
    """On real per-query values (a sweep over the sample store: every pair of its points, every
    metric, both splits, as the conclusion reads them from the stage cache), bit-identical to
    ranx's ``paired_student_t_test``."""
    import numpy as np
    from ranx.statistical_tests import paired_student_t_test

    from aiblox.engine.cache import StageCache
    from aiblox.engine.outputs import logged_per_query
    from aiblox.metrics.significance import student_t_p_value
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.2, 0.5, 0.8], depth=[20],
                      rrf_k=[60])
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset,
                  jobs=1)
    cache = StageCache(tmp_path)
    compared = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for split in spec.splits:
            values = [logged_per_query(cache, p.manifest.splits[split].stages) for p in r.points]
            for i, a in enumerate(values):
                for b in values[i + 1:]:
                    for metric in spec.metrics:
                        qids = sorted(set(a[metric]) & set(b[metric]))
                        va = np.array([a[metric][q] for q in qids])
                        vb = np.array([b[metric][q] for q in qids])
                        ranx_p, _ = paired_student_t_test(va, vb)
                        ours = student_t_p_value(va, vb)
                        assert np.isnan(ours) == np.isnan(ranx_p)
                        if not np.isnan(ours):
                            assert float(ranx_p).hex() == ours.hex(), (split, metric)
                            compared += 1
    assert compared >= 10  # distinct points, defined p-values
