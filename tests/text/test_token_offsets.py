"""Token boundaries mapped to character offsets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.text import get_encoding, token_char_offsets, utf8_safe

TEXTS = st.text(alphabet="ab .\n中é😀\u0301", max_size=200) | st.text(max_size=100)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, encoding=st.sampled_from(["cl100k_base", "o200k_base"]))
def test_offsets_are_monotone_and_span_the_text(text: str, encoding: str) -> None:
    bounds = token_char_offsets(text, encoding).tolist()
    enc = get_encoding(encoding)
    tokens = enc.encode_ordinary(text)
    assert len(bounds) == len(tokens) + 1
    assert bounds[0] == 0 and bounds[-1] == len(text)
    assert all(a <= b for a, b in zip(bounds, bounds[1:], strict=False))
    # Each boundary is where the token starts, snapped down to its character's start: the bytes
    # of the tokens before it reach into that character but not past it.
    data_before = 0
    for i, token in enumerate(tokens):
        char = bounds[i]
        assert len(text[:char].encode("utf-8")) <= data_before
        assert data_before < len(text[:char + 1].encode("utf-8")) or char == len(text)
        data_before += len(enc.decode_single_token_bytes(token))


def test_ascii_offsets_are_token_lengths() -> None:
    assert token_char_offsets("hello world").tolist() == [0, 5, 11]


def test_emoji_split_across_tokens_snaps_down() -> None:
    # cl100k_base spells 😀 with more than one token; every boundary inside it is its start.
    text = "a😀b"
    bounds = token_char_offsets(text).tolist()
    assert bounds[0] == 0 and bounds[-1] == 3
    assert set(bounds) <= {0, 1, 2, 3}
    assert len(bounds) - 1 == len(get_encoding().encode_ordinary(text))


def test_lone_surrogates_keep_their_length() -> None:
    assert utf8_safe("a\ud800b") == "a\ufffdb"
    assert utf8_safe("fine") == "fine"
    assert token_char_offsets("a\ud800b").tolist()[-1] == 3


def test_lone_surrogates_count_as_tiktoken_counts_them() -> None:
    """A lone surrogate became ``?``, tiktoken encodes U+FFFD in its place: ``"a?\\ud800?b"``
    was 3 tokens in a chunk's token_count and 5 in tiktoken's."""
    from aiblox.chunking import get_chunker

    enc = get_encoding()
    for text in ("a?\ud800?b", "x \udc00 y. Then \ud800? a second sentence here.", "\udfff"):
        assert len(token_char_offsets(text)) - 1 == len(enc.encode_ordinary(text))
        for name in ("whole", "sentences", "token_window"):
            for c in get_chunker(name, max_chunk_tokens=8).chunk("d", text, "h"):
                assert c.token_count == len(enc.encode_ordinary(c.text)), (name, c.text)
