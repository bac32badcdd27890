"""One sentence rule for the per-chunk cap, the extractive reader and answer validation
(:mod:`aiblox.assembly.sentence_split`): the offsets are the splitter's sentences, and the cap's
mode (``split_ambiguous=False``) only ever drops a boundary after a title,
abbreviation or initials, never adds one."""

from __future__ import annotations

import random

import pytest

from aiblox.assembly.sentence_split import sentence_offsets, split_sentences

PIECES = ["Paris", " is", " big", ".", "!", "?", " ", "\n", "\r\n", "\u2028", "[C0]", " [C1]",
          "e.g.", " the", " The", "Dr.", " St.", " U.S.", " J.", "1.", " 617.", "\u3002", "\u0964",
          '"', ")", "\t", "3.14", " no.", " 5"]


def _texts(n: int = 3000):
    rng = random.Random(7)
    for _ in range(n):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))


def test_spans_are_the_sentences_at_their_offsets() -> None:
    for text in _texts():
        spans = sentence_offsets(text)
        assert [text[s:e] for s, e in spans] == split_sentences(text)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_the_cap_s_mode_only_drops_ambiguous_boundaries() -> None:
    for text in _texts():
        strict = {e for _, e in sentence_offsets(text)}
        joined = {e for _, e in sentence_offsets(text, split_ambiguous=False)}
        assert joined <= strict, text  # a dropped boundary merges two spans


@pytest.mark.parametrize(("text", "splitter", "cap"), [
    ("It stands by St. John's Cathedral.", 2, 1),
    ("It was U.S. Patent 1,655,114.", 2, 1),
    ("Written by Allan L. Benson here.", 2, 1),
    ("As e.g. the rest.", 1, 1),
    ("In female meiosis I. The proteins bind.", 2, 1),
    ("It ends. Then another.", 2, 2),
    ("1. item one\n2. item two", 2, 2),
])
def test_ambiguous_full_stops(text: str, splitter: int, cap: int) -> None:
    assert len(sentence_offsets(text)) == splitter
    assert len(sentence_offsets(text, split_ambiguous=False)) == cap



def test_the_list_item_openers_the_docstring_names_are_the_rule_s() -> None:
    """The docstring of the list-item rule named ``(2).`` as an opener, but the rule has no
    closing parenthesis: ``(2). Second item.`` splits after ``(2).`` (QA, 2026-11-29). Every
    opener it names keeps its line one sentence."""
    import inspect
    import re

    from aiblox.assembly import sentence_split

    source = inspect.getsource(sentence_split).split("_ENUMERATOR = ", 1)[1]
    doc = source.split('"""', 2)[1]  # the docstring under the rule
    listed = re.search(r"\(((?:``[^`]+``,?\s*)+)\)", doc)
    assert listed
    openers = re.findall(r"``([^`]+)``", listed.group(1))
    assert len(openers) >= 3
    for opener in openers:
        assert split_sentences(f"{opener} Second item.") == [f"{opener} Second item."], opener
    assert split_sentences("(2). Second item.") == ["(2).", "Second item."]
