"""Fisher's randomisation test: exact p-values worked out by hand, the Monte Carlo estimate
against full enumeration, and the same p-value for a seed in any process and thread count
(ranx's numba-parallel test gave about half the exact p with two threads, and a different p
on every call)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from aiblox.metrics import paired_p_value
from aiblox.metrics.significance import FISHER_PERMUTATIONS, fisher_p_value
from tests.conftest import REPO


@pytest.mark.parametrize(("d", "expected"), [
    # +-1 +-2 +-3: sums 6 4 2 0 0 -2 -4 -6; |sum| >= 6 for 2 of the 8 flips
    ([1.0, 2.0, 3.0], 2 / 8),
    # +-3 +-1 +-0: sums +-4 (4 flips) and +-2 (4 flips): a zero difference flips to itself
    ([3.0, 1.0, 0.0], 4 / 8),
    # observed 0.5; 0.5 +-0.3 +-0.1 +-0.2 gives 1.1 0.9 0.7 0.5 0.5 0.3 0.1 -0.1, and as many
    # negated: 10 of 16 at least 0.5 away from 0, two of them ties (0.3 - 0.1 - 0.2 is not 0
    # in floats: the tolerance counts them)
    ([0.3, -0.1, -0.2, 0.5], 10 / 16),
    ([0.0, 0.0, 0.0], 1.0),  # no difference: every flip is as extreme
])
def test_exact_p_value_by_hand(d, expected):
    b = np.array([0.25] * len(d))
    assert fisher_p_value(b + np.array(d), b) == expected
    assert paired_p_value(b + np.array(d), b, "fisher") == expected


def test_no_pair_or_a_nan_is_undefined():
    assert fisher_p_value(np.array([]), np.array([])) == 1.0
    assert fisher_p_value(np.array([0.5, np.nan]), np.array([0.1, 0.2])) == 1.0


def _exact(d: np.ndarray) -> float:
    """Every flip of ``d`` counted, meet in the middle: the sums of each half's flips, added
    pairwise (2**20 sums for 20 pairs, 8 MB)."""
    def flips(x):
        sums = np.zeros(1)
        for v in x:
            sums = np.concatenate((sums + v, sums - v))
        return sums
    half = d.shape[0] // 2
    sums = (flips(d[:half])[:, None] + flips(d[half:])[None, :]).ravel()
    return float(np.mean(np.abs(sums) >= abs(d.sum()) - 1e-12))


def _metric_pairs(n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    a = rng.choice([0.0, 1 / 3, 0.5, 1.0], size=n)
    return a, np.clip(a + rng.normal(0.0, 0.25, n), 0.0, 1.0)


def test_monte_carlo_estimate_agrees_with_full_enumeration():
    a, b = _metric_pairs(20)
    exact = _exact(a - b)
    assert 0.05 < exact < 0.95  # a p-value the estimate can miss either way
    se = np.sqrt(exact * (1 - exact) / FISHER_PERMUTATIONS)
    estimates = [fisher_p_value(a, b, seed=s) for s in range(20)]
    assert all(abs(p - exact) < 4 * se for p in estimates)
    assert abs(np.mean(estimates) - exact) < 4 * se / np.sqrt(len(estimates))  # unbiased


def test_a_monte_carlo_p_value_is_never_zero():
    """No random flip reaches a 40-query difference this large: the p-value is the observed
    arrangement's own share, 1 / 1,001, not 0 (which a correction would keep at 0)."""
    a = np.linspace(0.1, 0.5, 40)
    b = a + 0.3
    assert fisher_p_value(a, b) == 1 / (FISHER_PERMUTATIONS + 1)
    assert fisher_p_value(a, b, permutations=9) == 0.1
    # where flips reach it, each counts once more than the observed arrangement
    c, e = _metric_pairs(20)
    hits = round(fisher_p_value(c, e) * (FISHER_PERMUTATIONS + 1)) - 1
    assert 0 < hits < FISHER_PERMUTATIONS


_SCRIPT = """
import json, sys
import numpy as np
from aiblox.metrics import paired_p_value
rng = np.random.default_rng(1)
a = rng.random(12); b = a + rng.normal(0.05, 0.1, 12)   # 12 pairs: every flip counted
c = rng.random(40); e = c + rng.normal(0.02, 0.2, 40)   # 40 pairs: 1,000 random flips
print(json.dumps([paired_p_value(a, b, "fisher", 42), paired_p_value(c, e, "fisher", 42),
                  paired_p_value(c, e, "fisher", 42), paired_p_value(c, e, "fisher", 7)]))
"""


def test_same_p_value_in_every_process_and_thread_count():
    seen = []
    for threads, hash_seed in (("1", "1"), ("2", "4242")):
        env = {**os.environ, "NUMBA_NUM_THREADS": threads, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=env,
                             capture_output=True, text=True, check=True)
        seen.append(json.loads(out.stdout))
    assert seen[0] == seen[1]
    small, large, again, other_seed = seen[0]
    assert large == again  # same seed, same call, same p
    assert large != other_seed  # the seed draws the flips
    rng = np.random.default_rng(1)
    a = rng.random(12)
    b = a + rng.normal(0.05, 0.1, 12)
    assert small == _exact(a - b) == paired_p_value(a, b, "fisher", 0)  # no seed needed
