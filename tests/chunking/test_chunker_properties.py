"""Properties every built-in chunker must hold, for any text and parameters (hypothesis)."""

from __future__ import annotations

from bisect import bisect_left

import pytest
from chunk_strategies import texts
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiblox.chunking import Chunk, get_chunker
from aiblox.chunking._spans import sentence_spans
from aiblox.text import count_tokens, token_char_offsets

SETTINGS = settings(max_examples=120, deadline=None)
ENCODINGS = st.sampled_from(["cl100k_base", "o200k_base"])


@st.composite
def budgets(draw: st.DrawFn) -> tuple[int, int]:
    max_tokens = draw(st.integers(1, 48))
    return max_tokens, draw(st.integers(0, max_tokens - 1))


def check_common(text: str, chunks: list[Chunk], chunker_id: str, encoding: str) -> None:
    """Offsets slice back, positions and order, true token counts, provenance fields."""
    assert [c.position for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.start_idx:c.end_idx] == c.text
        assert c.text.strip(), "no empty or whitespace-only chunks"
        assert c.token_count == count_tokens(c.text, encoding)
        assert c.chunker_id == chunker_id and c.item_id == "doc-1" and c.content_hash == "h1"
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.start_idx < b.start_idx
        assert a.end_idx < b.end_idx, "no chunk lies inside the one before it"
    if not text.strip():
        assert chunks == []


def check_budget(chunks: list[Chunk], max_tokens: int) -> None:
    """Within budget, except a chunk that is one character needing more tokens on its own."""
    for c in chunks:
        assert c.token_count <= max_tokens or len(c.text) == 1, (c.token_count, c.text)


def check_covers_non_whitespace(text: str, chunks: list[Chunk]) -> None:
    covered = bytearray(len(text))
    for c in chunks:
        covered[c.start_idx:c.end_idx] = b"\x01" * (c.end_idx - c.start_idx)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"characters not in any chunk at {missing[:5]}"


@SETTINGS
@given(text=texts, budget=budgets(), encoding=ENCODINGS)
@example(text="The cat sat. \r\n\r\n \r\r The cat sat.", budget=(3, 2),
         encoding="cl100k_base")  # two whitespace windows dropped: the next two abut
def test_token_window_properties(text: str, budget: tuple[int, int], encoding: str) -> None:
    max_tokens, overlap = budget
    chunker = get_chunker("token_window", max_chunk_tokens=max_tokens, overlap_tokens=overlap,
                          encoding=encoding)
    chunks = chunker.chunk("doc-1", text, "h1")
    check_common(text, chunks, chunker.chunker_id, encoding)
    check_budget(chunks, max_tokens)
    check_covers_non_whitespace(text, chunks)
    for c in chunks:
        assert c.heading_path is None
    # Consecutive windows overlap by ``overlap`` of the document's tokens (counted as token
    # starts inside the shared span). In ASCII text no token splits a character, so the count
    # is exact up to one token; elsewhere windows still share or abut. (Between two windows
    # there may be dropped whitespace-only windows: then they share nothing, as in
    # 'sat. \r\n\r\n \r\r The' at 3 tokens, overlap 2, where two abut.)
    bounds = token_char_offsets(text, encoding).tolist()
    for a, b in zip(chunks, chunks[1:], strict=False):
        if b.start_idx >= a.end_idx:  # apart or abutting: whitespace-only windows between
            assert not text[a.end_idx:b.start_idx].strip()
            continue
        shared = bisect_left(bounds, a.end_idx) - bisect_left(bounds, b.start_idx)
        if text.isascii() and not text[b.start_idx:a.end_idx].isspace():
            assert abs(shared - overlap) <= 1, (shared, overlap)


@SETTINGS
@given(text=texts, budget=budgets(), encoding=ENCODINGS)
def test_sentences_properties(text: str, budget: tuple[int, int], encoding: str) -> None:
    max_tokens, overlap = budget
    chunker = get_chunker("sentences", max_chunk_tokens=max_tokens, overlap_tokens=overlap,
                          encoding=encoding)
    chunks = chunker.chunk("doc-1", text, "h1")
    check_common(text, chunks, chunker.chunker_id, encoding)
    check_budget(chunks, max_tokens)
    check_covers_non_whitespace(text, chunks)
    for c in chunks:
        assert c.text == c.text.strip(), "sentence chunks are trimmed"
        assert c.heading_path is None
    if overlap == 0:  # without overlap, chunks do not share characters
        for a, b in zip(chunks, chunks[1:], strict=False):
            assert a.end_idx <= b.start_idx


@SETTINGS
@given(text=texts, budget=budgets(), include_headers=st.booleans())
def test_headings_properties(text: str, budget: tuple[int, int], include_headers: bool) -> None:
    max_tokens, overlap = budget
    chunker = get_chunker("headings", max_chunk_tokens=max_tokens, overlap_tokens=overlap,
                          include_headers=include_headers)
    chunks = chunker.chunk("doc-1", text, "h1")
    check_common(text, chunks, chunker.chunker_id, "cl100k_base")
    check_budget(chunks, max_tokens)
    for c in chunks:
        assert isinstance(c.heading_path, list)
    if include_headers:
        check_covers_non_whitespace(text, chunks)
    else:
        # Every non-whitespace character outside heading lines is covered, and no chunk
        # contains a heading line.
        from aiblox.chunking import split_sections

        heading_chars: set[int] = set()
        for s in split_sections(text):
            if s.heading is not None:
                heading_chars.update(range(*s.heading))
        covered: set[int] = set()
        for c in chunks:
            covered.update(range(c.start_idx, c.end_idx))
        assert not covered & heading_chars
        assert all(i in covered for i, ch in enumerate(text)
                   if not ch.isspace() and i not in heading_chars)


@SETTINGS
@given(text=texts, encoding=ENCODINGS)
def test_whole_properties(text: str, encoding: str) -> None:
    chunker = get_chunker("whole", encoding=encoding)
    chunks = chunker.chunk("doc-1", text, "h1")
    check_common(text, chunks, chunker.chunker_id, encoding)
    if text.strip():
        assert len(chunks) == 1
        assert chunks[0].text == text.strip()
    check_covers_non_whitespace(text, chunks)


@pytest.mark.parametrize("name", ["token_window", "sentences", "headings", "whole"])
@pytest.mark.parametrize("text", ["", " ", "\n\t \n", "\u3000"])
def test_blank_text_gives_no_chunks(name: str, text: str) -> None:
    assert get_chunker(name).chunk("doc-1", text, "h1") == []


@pytest.mark.parametrize("name", ["token_window", "sentences", "headings", "whole"])
def test_lone_surrogate_is_chunked_without_error(name: str) -> None:
    text = "Broken \ud800 text. More text here."
    chunks = get_chunker(name, max_chunk_tokens=4, overlap_tokens=1).chunk("d", text, "h")
    assert chunks and all(text[c.start_idx:c.end_idx] == c.text for c in chunks)


@SETTINGS
@given(text=texts, budget=budgets())
def test_sentence_overlap_is_whole_sentences_within_budget(text: str,
                                                           budget: tuple[int, int]) -> None:
    max_tokens, overlap = budget
    chunks = get_chunker("sentences", max_chunk_tokens=max_tokens,
                         overlap_tokens=overlap).chunk("doc-1", text, "h1")
    sentence_starts = {start for start, _ in sentence_spans(text)}
    bounds = token_char_offsets(text).tolist()
    for a, b in zip(chunks, chunks[1:], strict=False):
        if b.start_idx < a.end_idx:
            assert overlap > 0
            shared = bisect_left(bounds, a.end_idx) - bisect_left(bounds, b.start_idx)
            assert shared <= overlap
            assert b.start_idx in sentence_starts  # the repeated part is whole sentences
            assert b.end_idx > a.end_idx  # an overlapping chunk always brings new text


def test_sentence_overlap_hand_worked() -> None:
    text = "One. Two. Three. Four."  # each sentence is 2 tokens: "One" "." / " Two" "."

    def texts_for(overlap: int, max_tokens: int = 4, doc: str = text) -> list[str]:
        chunker = get_chunker("sentences", max_chunk_tokens=max_tokens, overlap_tokens=overlap)
        return [c.text for c in chunker.chunk("d", doc, "h")]

    assert texts_for(0) == ["One. Two.", "Three. Four."]
    assert texts_for(2) == ["One. Two.", "Two. Three.", "Three. Four."]
    assert texts_for(1) == ["One. Two.", "Three. Four."]  # no whole sentence fits in 1 token
    # "Short." would be repeated, but the next sentence does not fit beside it: no overlap.
    doc = "Alpha beta gamma delta. Short. Epsilon zeta eta theta iota."
    assert texts_for(2, 8, doc) == ["Alpha beta gamma delta. Short.",
                                    "Epsilon zeta eta theta iota."]
