"""Snippets: collapsed whitespace, word-boundary cuts, never longer than max_chars."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.text import ELLIPSIS, make_snippet


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("short text", 360, "short text"),
        ("  many\n\n spaces\tcollapse  ", 360, "many spaces collapse"),
        ("exactly ten", 11, "exactly ten"),
        # "Hello wonderful" + "…" is 16 characters; "Hello wonderful world…" would be 22.
        ("Hello   wonderful\n world, this is long", 20, "Hello wonderful…"),
        # A separator before the cut is dropped.
        ("one, two, three", 9, "one, two…"),
        ("one, two, three", 8, "one…"),
        # A single word longer than the room is cut inside the word.
        ("Supercalifragilistic word", 8, "Superca…"),
        ("abc", 1, "…"),
        ("", 5, ""),
    ],
)
def test_examples(text: str, max_chars: int, expected: str) -> None:
    assert make_snippet(text, max_chars) == expected


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_bad_max_chars(bad: object) -> None:
    with pytest.raises(ValueError, match="max_chars"):
        make_snippet("x", bad)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab cd\n\t,.é", max_size=120), max_chars=st.integers(1, 60))
def test_properties(text: str, max_chars: int) -> None:
    snippet = make_snippet(text, max_chars)
    collapsed = " ".join(text.split())
    assert len(snippet) <= max_chars
    if len(collapsed) <= max_chars:
        assert snippet == collapsed
        return
    assert snippet.endswith(ELLIPSIS)
    head = snippet[: -len(ELLIPSIS)]
    assert collapsed.startswith(head)
    first = collapsed.split(" ")[0]
    if first[0].isalnum() and len(first) <= max_chars - len(ELLIPSIS):
        # Cut at a word end: after the kept head come only separators, then a space or the end.
        assert head
        assert re.match(r"[,;:.!?\-\u2013\u2014]*( |$)", collapsed[len(head):]), (head, collapsed)
        assert not head.endswith((" ", ",", ";", ":", "-"))
