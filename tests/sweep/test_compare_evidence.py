"""Evidence that entered or left per query between two selection-policy runs (by hand)."""

from __future__ import annotations

from aiblox.sweep.compare import evidence_changes


def test_entered_left_kept_and_order_of_the_changes():
    a = {"q1": ["c1", "c2", "c3"], "q2": ["c1"], "q3": ["c5", "c6"], "q4": [], "only_a": ["x"]}
    b = {"q1": ["c1", "c4"], "q2": ["c1"], "q3": ["c6", "c5"], "q4": ["c9"], "only_b": ["y"]}
    changes, summary = evidence_changes(a, b)
    by = {c.query_id: c for c in changes}
    assert set(by) == {"q1", "q3", "q4"}  # q2 is unchanged; only_a/only_b are not paired
    assert by["q1"].entered == ["c4"] and by["q1"].left == ["c2", "c3"] and by["q1"].kept == 1
    assert by["q3"].entered == [] and by["q3"].left == [] and by["q3"].reordered
    assert by["q4"].entered == ["c9"] and by["q4"].kept == 0
    # largest change first (q1: 3 chunks), then q4 (1), then q3 (0, reordered); ties by id
    assert [c.query_id for c in changes] == ["q1", "q4", "q3"]
    assert summary == {"queries": 4, "changed": 3, "entered": 2, "left": 2, "kept": 4}
