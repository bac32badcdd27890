"""Cut a sanitised text to its longest prefix within a token budget that ends a sentence: the
per-chunk cap (``max_chunk_token_ratio``) of chunk selection (step 2).

The cut is a prefix: words are never changed, reordered or summarised, only the tail beyond the
budget is left out. Word prefixes are searched by bisection on the word count, and the cut then
steps back to the last word that ends a sentence (a full stop, question or exclamation mark,
or a CJK one, closing quotes and brackets after it; not ``e.g.``, ``Dr.`` or an initial): the
words before a cut can say the opposite of the sentence they open ("Aspirin reduces mortality"
of "Aspirin reduces mortality in no trial"), and a reader quotes sentences. Only when no
sentence ends within the budget is the longest word prefix kept. A first word that alone
exceeds the budget (CJK text has no spaces) is cut by user-perceived characters (Unicode
grapheme clusters, the pattern ``\\X``) the same way, after its last sentence terminator
where one fits, so a cut never separates a base letter from its combining marks, a Thai or
Devanagari vowel sign from its consonant, an emoji from its variation selector or ZWJ
sequence, or a flag's two letters. Deterministic for a given encoding.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

from aiblox.text.tokens import count_tokens

_GRAPHEME = regex.compile(r"\X")
_CLOSERS = "\"'\u2019\u201d\u00bb)\\]\u3009\u300b\u300d\u300f\u3011\uff09"
_ENDS_SENTENCE = regex.compile(rf"[.!?\u3002\uff01\uff1f][{_CLOSERS}]*$")
"""A word that ends a sentence: its terminator, then closing quotes or brackets."""
_ABBREVIATION = regex.compile(r"\(?(?:\p{L}\.)+|(?i:mr|mrs|ms|dr|prof|st|vs|etc|no|fig|cf)\.")
"""A word whose full stop does not end a sentence: an initial or ``e.g.``, a title."""
_TERMINATOR = regex.compile(rf"[\u3002\uff01\uff1f!?.][{_CLOSERS}]*")
"""Where a sentence ends inside a run without spaces (CJK)."""

__all__ = ["truncate_to_token_budget"]


def _longest_prefix(n: int, fits: Callable[[int], bool]) -> int:
    """Largest k in [0, n] with ``fits(k)`` true, for a predicate true at 0 (bisection, then a
    short downward scan in case the count is not monotone at the boundary)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not fits(lo):
        lo -= 1
    return lo


def truncate_to_token_budget(text: str, max_tokens: int, encoding: str) -> tuple[str, bool]:
    """``(text, False)`` when it fits in ``max_tokens``; else its longest fitting word prefix
    (or character prefix of the first word) and ``True``."""
    if count_tokens(text, encoding) <= max_tokens:
        return text, False
    words = text.split(" ")
    k = _longest_prefix(
        len(words), lambda k: count_tokens(" ".join(words[:k]), encoding) <= max_tokens
    )
    if k > 0:
        whole = next((j for j in range(k, 0, -1) if _ENDS_SENTENCE.search(words[j - 1])
                      and not _ABBREVIATION.fullmatch(words[j - 1])), k)
        return " ".join(words[:whole]), True
    first = words[0]
    ends = [0, *(m.end() for m in _GRAPHEME.finditer(first))]  # prefixes of 0, 1, ... clusters
    c = _longest_prefix(len(ends) - 1,
                        lambda c: count_tokens(first[:ends[c]], encoding) <= max_tokens)
    cut = first[:ends[c]]
    stop = max((m.end() for m in _TERMINATOR.finditer(cut)), default=0)
    return (cut[:stop] if stop else cut), True
