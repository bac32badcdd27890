"""Character offsets of tiktoken token boundaries, computed once per text.

tiktoken works on UTF-8 bytes, so a token may end inside a multi-byte character. This module
encodes a text once (``encode_ordinary``), turns each token into its byte length through a
per-encoding lookup table, and maps every token boundary to the character offset of the
character it falls in (snapped *down* to the start of that character). Slicing the text
between two such offsets always gives whole characters, and no per-character Python loop runs.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from aiblox.text.tokens import DEFAULT_ENCODING, get_encoding

__all__ = ["token_char_offsets", "utf8_safe"]


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (same length, encodable as UTF-8).

    U+FFFD is what tiktoken encodes in a surrogate's place (its ``encode_ordinary`` decodes the
    text as UTF-16 with ``errors="replace"``), so chunk token counts are tiktoken's own; ``?``
    (UTF-8's replacement on encoding) counted ``"a?\\ud800?b"`` as 3 tokens, tiktoken as 5.
    One difference remains: a high and a low surrogate held as two code points, which tiktoken
    joins into the one character they encode in UTF-16, are two U+FFFD here (the length must
    stay). Valid text is returned unchanged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


@lru_cache(maxsize=8)
def _token_byte_lengths(encoding: str) -> np.ndarray:
    """Byte length of every token id of ``encoding`` (0 for ids that are not tokens)."""
    enc = get_encoding(encoding)
    lengths = np.zeros(enc.n_vocab, dtype=np.int64)
    for token in range(enc.n_vocab):
        try:
            lengths[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:
            continue
    return lengths


def token_char_offsets(text: str, encoding: str = DEFAULT_ENCODING) -> np.ndarray:
    """Character offsets of the ``n + 1`` boundaries of the ``n`` tokens of ``text``.

    Entry ``i`` is where token ``i`` starts (entry ``n`` is ``len(text)``), snapped down to the
    start of the character that contains it. The array is non-decreasing; two entries are equal
    only where a token lies inside one multi-byte character. Special-token text is encoded as
    ordinary text, as in :func:`aiblox.text.tokens.count_tokens`.
    """
    safe = utf8_safe(text)
    ids = get_encoding(encoding).encode_ordinary(safe)
    byte_bounds = np.zeros(len(ids) + 1, dtype=np.int64)
    if ids:
        np.cumsum(_token_byte_lengths(encoding)[np.asarray(ids, dtype=np.int64)],
                  out=byte_bounds[1:])
    data = safe.encode("utf-8")
    if int(byte_bounds[-1]) != len(data):  # pragma: no cover - tiktoken invariant
        raise RuntimeError(f"tiktoken {encoding!r} tokens do not add up to the text's bytes")
    if len(data) == len(safe):  # ASCII: bytes are characters
        return byte_bounds
    raw = np.frombuffer(data, dtype=np.uint8)
    is_start = np.ones(len(data) + 1, dtype=bool)
    is_start[:-1] = (raw & 0xC0) != 0x80
    starts_before = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(is_start[:-1], out=starts_before[1:])
    # A boundary at a character start is that character's index; inside a character, the index
    # of the character it is inside (one less than the count of starts before it).
    return starts_before[byte_bounds] - (~is_start[byte_bounds]).astype(np.int64)
