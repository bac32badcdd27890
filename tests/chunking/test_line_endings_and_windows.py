"""Sentence breaks at blank lines of any line ending, and token windows that always move on
(sentences v2, headings v3, token_window v2)."""

from __future__ import annotations

import pytest

from aiblox.chunking import get_chunker
from aiblox.chunking._spans import sentence_spans

ENDINGS = pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])


@ENDINGS
def test_a_blank_line_ends_a_sentence_whatever_the_line_endings(nl: str) -> None:
    text = f"Introduction{nl}{nl}the method works well{nl} {nl}results are good"
    pieces = ["Introduction", "the method works well", "results are good"]
    assert [text[s:e] for s, e in sentence_spans(text)] == pieces
    for name in ("sentences", "headings"):
        chunks = get_chunker(name, max_chunk_tokens=4).chunk("d", text, "h")
        assert [c.text for c in chunks] == pieces, name


@ENDINGS
def test_one_line_ending_is_not_a_blank_line(nl: str) -> None:
    text = f"first line{nl}second line"
    assert [text[s:e] for s, e in sentence_spans(text)] == [text]


def test_headings_split_a_section_at_crlf_blank_lines_as_at_lf_ones() -> None:
    def texts(nl: str) -> list[str]:
        text = f"# Title{nl}{nl}Intro line{nl}{nl}the body goes on{nl}{nl}more body here"
        chunks = get_chunker("headings", max_chunk_tokens=5, include_headers=False
                             ).chunk("d", text, "h")
        return [c.text for c in chunks]

    assert texts("\r\n") == texts("\r") == texts("\n") == [
        "Intro line", "the body goes on", "more body here"]


def test_a_window_never_lies_inside_the_one_before() -> None:
    # the emoji is two tokens: the second window's end snapped down to the first's end
    # (v1 returned (0, 3), (1, 3), (2, 4): the second inside the first)
    text = "#S\n\U0001F600"
    chunks = get_chunker("token_window", max_chunk_tokens=3, overlap_tokens=2
                         ).chunk("d", text, "h")
    assert [(c.start_idx, c.end_idx) for c in chunks] == [(0, 3), (2, 4)]
    assert all(c.token_count <= 3 for c in chunks)


def test_windows_of_plain_text_are_as_before() -> None:
    text = "one two three four five six seven eight nine ten"
    chunks = get_chunker("token_window", max_chunk_tokens=4, overlap_tokens=2
                         ).chunk("d", text, "h")
    assert [c.text for c in chunks] == ["one two three four", " three four five six",
                                        " five six seven eight", " seven eight nine ten"]
