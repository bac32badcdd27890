"""``benchmarks/recommended_pipeline.py``'s leave-one-collection-out table: each collection's
pick is made on the *other* collections only (the rule a user with new data would apply), and
its row reports that pick's difference on the held-out collection."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _module():
    sys.path.insert(0, str(BENCH))
    try:
        import recommended_pipeline
    finally:
        sys.path.remove(str(BENCH))
    return recommended_pipeline


def _result(name: str, shift: dict[str, float]) -> dict:
    """A collection of 20 queries: RRF scores 0.5 on each; a candidate scores 0.5 + its shift."""
    rec = _module()
    per = {key: {f"q{i}": 0.5 + shift.get(key, 0.0) + (0.01 * (i % 3) if key != "rrf" else 0.0)
                 for i in range(20)} for key in rec.CANDIDATES}
    return {"name": name, "per": per}


def test_the_pick_for_a_collection_never_sees_it():
    rec = _module()
    # minmax wins everywhere but "b", where it loses badly; zscore is a small gain everywhere.
    shifts = {"a": {"minmax": 0.05, "zscore": 0.01}, "b": {"minmax": -0.2, "zscore": 0.01},
              "c": {"minmax": 0.05, "zscore": 0.01}}
    others = {k: -0.3 for k in rec.CANDIDATES if k not in ("rrf", "minmax", "zscore")}
    results = [_result(n, {**others, **s}) for n, s in shifts.items()]
    rows = {row[0]: row for row in rec.held_out(results)}
    # Held out "b", the others show minmax's gain only: it is picked, and loses on "b".
    assert rows["b"][1] == "minmax"
    assert float(rows["b"][3]) < -0.19
    # Held out "a" or "c", "b" is among the others: minmax's -0.2 there makes zscore the pick.
    assert rows["a"][1] == rows["c"][1] == "zscore"
    assert float(rows["a"][2]) > 0  # its worst delta over the others
    assert list(rows) == ["a", "b", "c"]


def test_maximin_breaks_ties_by_mean_then_name():
    rec = _module()
    assert rec.maximin({"x": (-0.1, 0.2), "y": (-0.1, 0.3), "z": (-0.2, 0.9)}) == "y"
    assert rec.maximin({"y": (0.0, 0.1), "x": (0.0, 0.1)}) == "x"  # equal: the first name
