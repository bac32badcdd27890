"""Span arithmetic the built-in chunkers share: token windows, sentence units, greedy grouping.

Everything works on ``(start, end)`` character spans of one document. A document is encoded once
(:func:`aiblox.text.token_offsets.token_char_offsets`); token counts used while grouping are
counts of the document's own tokens overlapping a span, and every emitted span is checked by
encoding its text on its own, so a chunk's ``token_count`` never exceeds the budget unless the
chunk is a single character that alone needs more tokens.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from aiblox.chunking.base import Chunk, make_chunk_id
from aiblox.text.terminals import CLOSING_MARKS, OTHER_SENTENCE_TERMINALS
from aiblox.text.token_offsets import token_char_offsets, utf8_safe
from aiblox.text.tokens import get_encoding

Span = tuple[int, int]

# A sentence ends after . ! ? or … (plus closing quotes or brackets) followed by whitespace and a
# character that is not a lower-case ASCII letter ("e.g. the" stays whole); after any other
# Unicode sentence terminator (。！？ ؟ ।: aiblox.text.terminals) whatever follows, since CJK text
# puts no space after one; a blank line always ends one, whatever its line endings: \n, \r\n or
# \r (CommonMark's; a \r\n is one ending, never a blank line by itself).
_EOL = r"(?:\r\n|\r(?!\n)|\n)"
_SENTENCE_BREAK = re.compile(
    rf"""[.!?\u2026]*[{OTHER_SENTENCE_TERMINALS}][.!?\u2026{OTHER_SENTENCE_TERMINALS}]*"""
    rf"""{CLOSING_MARKS}\s*"""  # a terminator of another script, its closers, any space
    r"""|[.!?\u2026]+["'\u201d\u2019\u00bb)\]]*\s+(?=[^\sa-z])"""  # end mark, closers, space
    rf"""|{_EOL}[ \t]*{_EOL}\s*"""  # a blank line
)


class TokenizedDocument:
    """A document with its token boundaries as character offsets."""

    def __init__(self, text: str, encoding: str) -> None:
        self.text = text
        self.encoding = encoding
        self._enc = get_encoding(encoding)
        self.bounds: list[int] = token_char_offsets(text, encoding).tolist()
        self._counts: dict[Span, int] = {(0, len(text)): len(self.bounds) - 1}

    def count(self, start: int, end: int) -> int:
        """Exact token count of ``text[start:end]`` encoded on its own (memoised)."""
        key = (start, end)
        if key not in self._counts:
            piece = utf8_safe(self.text[start:end])
            self._counts[key] = len(self._enc.encode_ordinary(piece))
        return self._counts[key]

    def approx(self, start: int, end: int) -> int:
        """Number of the document's tokens that overlap ``[start, end)``."""
        if end <= start:
            return 0
        first = bisect_right(self.bounds, start) - 1
        last = bisect_left(self.bounds, end)
        return last - first

    def boundaries(self, start: int, end: int) -> list[int]:
        """Token boundaries inside ``[start, end]``, with ``start`` and ``end`` at the ends."""
        lo = bisect_right(self.bounds, start)
        hi = bisect_left(self.bounds, end)
        return [start, *self.bounds[lo:hi], end]


def trim(text: str, start: int, end: int) -> Span:
    """``(start, end)`` with leading and trailing whitespace removed (may become empty)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def token_windows(doc: TokenizedDocument, start: int, end: int, max_tokens: int,
                  overlap: int, strip: bool = False) -> list[Span]:
    """Windows of ``max_tokens`` tokens over ``[start, end)``, consecutive ones sharing ``overlap``.

    Window edges sit on token boundaries (snapped down to character starts). A window whose text
    (trimmed of whitespace if ``strip``) encodes on its own to more than ``max_tokens`` tokens is
    shortened by whole tokens; the next window starts ``overlap`` tokens before the previous one
    ended. Every window ends after the one before it: one whose end would not pass it (a token
    end snapped down inside a multi-token character) is widened by whole tokens, and left out
    when it must shrink back. With ``strip`` the windows come back trimmed, whitespace-only ones
    left out.
    """
    text = doc.text
    bounds = doc.boundaries(start, end)
    n = len(bounds) - 1
    out: list[Span] = []
    s = 0
    last = start  # where the last window kept ended (untrimmed)

    def span(s: int, e: int) -> Span:
        return trim(text, bounds[s], bounds[e]) if strip else (bounds[s], bounds[e])

    while s < n:
        e = min(s + max_tokens, n)
        while e < n and bounds[e] <= max(bounds[s], last):
            # a window holds at least one character, and one past the last window's end (a
            # token end snapped down inside a character can fall back to it)
            e += 1
        while (e - 1 > s and bounds[e - 1] > bounds[s]
               and doc.count(*span(s, e)) > max_tokens):
            e -= 1
        if e == s + 1 and doc.count(*span(s, e)) > max_tokens:
            # One document token that encodes to more tokens on its own (tiny budgets): cut it
            # at the longest character prefix that fits, as if that were a token boundary.
            for cut in range(bounds[e] - 1, bounds[s], -1):
                piece = trim(text, bounds[s], cut) if strip else (bounds[s], cut)
                if doc.count(*piece) <= max_tokens:
                    bounds.insert(e, cut)
                    n += 1
                    break
        window = span(s, e)
        if window[0] < window[1] and bounds[e] > last:  # not inside the last window
            out.append(window)
            last = bounds[e]
        if e >= n:
            break
        nxt = max(e - overlap, s + 1)
        while nxt < e and bounds[nxt] <= bounds[s]:
            nxt += 1  # the next window starts at a later character
        s = nxt
    return out


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Trimmed, non-empty sentence spans of ``text[start:end]`` in order."""
    end = len(text) if end is None else end
    out: list[Span] = []
    cut = start
    for match in _SENTENCE_BREAK.finditer(text, start, end):
        span = trim(text, cut, match.end())
        if span[0] < span[1]:
            out.append(span)
        cut = match.end()
    span = trim(text, cut, end)
    if span[0] < span[1]:
        out.append(span)
    return out


def group_units(doc: TokenizedDocument, units: Sequence[Span], max_tokens: int,
               overlap: int) -> list[Span]:
    """Greedily group consecutive units (e.g. sentences) into spans of at most ``max_tokens``.

    A unit that alone exceeds the budget is cut into token windows (no overlap), trimmed. With
    ``overlap > 0`` the next span starts with the longest run of whole trailing units of the
    previous span that together hold at most ``overlap`` tokens, provided the new span then
    reaches past the previous one; otherwise it starts at the next unit.
    """
    out: list[Span] = []
    n = len(units)
    i = 0
    must_pass = -1  # the next span must end after this unit index
    while i < n:
        a = units[i][0]
        j = i
        while j + 1 < n and doc.approx(a, units[j + 1][1]) <= max_tokens:
            j += 1
        while j > i and doc.count(a, units[j][1]) > max_tokens:
            j -= 1
        if j <= must_pass:  # an overlap start that brings nothing new: start fresh instead
            i = must_pass + 1
            must_pass = -1
            continue
        if j == i and doc.count(*units[i]) > max_tokens:  # one unit over budget: windows
            out.extend(token_windows(doc, units[i][0], units[i][1], max_tokens, 0, strip=True))
            must_pass = i
            i += 1
            continue
        out.append((a, units[j][1]))
        if j + 1 >= n:
            break
        nxt = j + 1
        if overlap > 0:
            k = j
            while k > i and doc.approx(units[k][0], units[j][1]) <= overlap:
                k -= 1
            k += 1
            if k <= j and doc.approx(units[k][0], units[j][1]) <= overlap:
                nxt = k
        must_pass = j
        i = nxt
    return out


def make_chunks(item_id: str, text: str, content_hash: str, chunker_id: str,
                doc: TokenizedDocument | None, encoding: str,
                spans: Sequence[tuple[int, int, list[str] | None]]) -> list[Chunk]:
    """Chunk records for ``(start, end, heading_path)`` spans, positions in the given order."""
    enc = get_encoding(encoding)
    chunks: list[Chunk] = []
    for position, (start, end, path) in enumerate(spans):
        piece = text[start:end]
        if doc is not None:
            count = doc.count(start, end)
        else:
            count = len(enc.encode_ordinary(utf8_safe(piece)))
        chunks.append(
            Chunk(
                item_id=item_id,
                chunk_id=make_chunk_id(item_id, content_hash, chunker_id, position),
                text=piece,
                start_idx=start,
                end_idx=end,
                token_count=count,
                position=position,
                heading_path=path,
                chunker_id=chunker_id,
                content_hash=content_hash,
            )
        )
    return chunks
