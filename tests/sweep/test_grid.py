"""Exact grids: decimal ranges and weight simplices (regression test vs ranx's float-sum filter)."""

from decimal import Decimal
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.sweep.grid import GridError, decimal_range, simplex


def test_step_005_gives_exactly_21_weights_written_as_decimals():
    values = decimal_range(0, 1, 0.05)
    assert len(values) == 21
    assert values[0] == 0.0 and values[-1] == 1.0
    assert values[3] == 0.15  # a float loop gives 0.15000000000000002
    assert [repr(v) for v in values[:4]] == ["0.0", "0.05", "0.1", "0.15"]
    assert values == [float(Decimal(i) * Decimal("0.05")) for i in range(21)]


def test_float_accumulation_would_drift():  # why the decimal grid exists
    w, drifted = 0.0, []
    for _ in range(20):
        w += 0.05
        drifted.append(w)
    assert drifted[2] != 0.15
    assert decimal_range(0, 1, 0.05)[3] == 0.15


@pytest.mark.parametrize("args", [(0, 1, 0.3), (0, 1, 0), (1, 0, 0.1), (0, 1, -0.1)])
def test_a_step_that_does_not_divide_the_range_is_refused(args):
    with pytest.raises(GridError):
        decimal_range(*args)


def test_three_way_simplex_keeps_every_combination_ranx_drops_some():
    from ranx.fusion_optimization.optimize_weights import get_possible_weights, get_trial_configs

    ours = simplex(3, 0.1)
    assert len(ours) == comb(10 + 2, 2) == 66
    assert (0.2, 0.7, 0.1) in ours
    assert len(set(ours)) == 66
    ranx_trials = {tuple(t) for t in get_trial_configs(get_possible_weights(0.1), 3)}
    assert (0.2, 0.7, 0.1) not in ranx_trials  # the peer defect this grid avoids
    assert len(ranx_trials) < 66
    assert ranx_trials < set(ours)


def test_simplex_integer_parts_and_order():
    assert simplex(2, 0.5) == [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0)]
    assert simplex(1, 0.25) == [(1.0,)]
    with pytest.raises(GridError):
        simplex(3, 0.3)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), m=st.integers(1, 20))
def test_simplex_count_and_exact_decimal_sums(n, m):
    step = Decimal(1) / Decimal(m)
    if step != step.quantize(Decimal("0.0001")):  # only steps with a finite decimal form
        return
    weights = simplex(n, str(step))
    assert len(weights) == comb(m + n - 1, n - 1)
    for w in weights:
        assert sum(Decimal(repr(x)) for x in w) == 1


def test_a_spec_expands_its_grid_once_and_a_changed_copy_its_own(sample_spec, monkeypatch):
    """The command counts the grid, then runs it: one expansion (a dense grid's takes a tenth
    of a second); a copy with another grid expands its own."""
    from aiblox.sweep.spec import SweepSpec

    monkeypatch.setattr("aiblox.sweep.points._REMEMBERED", {})
    calls = []
    real = SweepSpec._grid_points
    monkeypatch.setattr(SweepSpec, "_grid_points", lambda self: calls.append(1) or real(self))
    first, again = sample_spec.grid_points(), sample_spec.grid_points()
    assert first == again and first is not again and len(calls) == 1
    fewer = sample_spec.model_copy(
        update={"grid": sample_spec.grid.model_copy(update={"depth": [10]})})
    assert 0 < len(fewer.grid_points()) < len(first) and len(calls) == 2
