"""Cut a sanitised text to its longest prefix within a token budget that ends a sentence: the
per-chunk cap (``max_chunk_token_ratio``) of chunk selection (step 2).

The cut is a prefix: words are never changed, reordered or summarised, only the tail beyond the
budget is left out. The budget's reach is the longest word prefix that fits (bisection on the
word count), extended by whole user-perceived characters (Unicode grapheme clusters, the
pattern ``\\X``) of the next word: CJK text has no spaces. The cut is the last sentence end
within that reach, sentences as the reader and answer validation split them
(:func:`~aiblox.assembly.sentence_split.sentence_offsets`, read over the whole text), except that a
full stop after a title, abbreviation or initials (``St. John's``, ``U.S. Patent``) is never
taken for a sentence end: the splitter fails closed by splitting there, the cap by not cutting
there. The words before a cut can say the opposite of the sentence they open ("Aspirin reduces
mortality" of "Aspirin reduces mortality in no trial"), and a reader quotes sentences. Only
when no sentence ends within the reach is the longest fitting word prefix kept (of grapheme
clusters of the first word when no word fits), so a cut never separates a base letter from its
combining marks, a Thai or Devanagari vowel sign from its consonant, an emoji from its
variation selector or ZWJ sequence, or a flag's two letters. Deterministic for a given
encoding.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

from aiblox.assembly.sentence_split import sentence_offsets
from aiblox.text.tokens import count_tokens

_GRAPHEME = regex.compile(r"\X")

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


def _fitting_prefixes(text: str, max_tokens: int, encoding: str) -> tuple[int, int]:
    """``(words, reach)``: the length of the longest word prefix of ``text`` within
    ``max_tokens``, and of the longest prefix that also takes whole grapheme clusters of the
    next word (its first word, when no word fits: CJK text has no spaces)."""
    words = text.split(" ")
    k = _longest_prefix(
        len(words), lambda k: count_tokens(" ".join(words[:k]), encoding) <= max_tokens
    )
    head = " ".join(words[:k]) + (" " if k else "")
    if k == len(words):
        return len(text), len(text)
    nxt = words[k]
    ends = [0, *(m.end() for m in _GRAPHEME.finditer(nxt))]  # prefixes of 0, 1, ... clusters
    c = _longest_prefix(len(ends) - 1,
                        lambda c: count_tokens(head + nxt[:ends[c]], encoding) <= max_tokens)
    return len(head.rstrip(" ")) if k else 0, len(head) + ends[c]


def truncate_to_token_budget(text: str, max_tokens: int, encoding: str) -> tuple[str, bool]:
    """``(text, False)`` when it fits in ``max_tokens``; else its prefix within the budget
    ending at the last sentence end there, or, when no sentence ends within it, its longest
    fitting word prefix (of grapheme clusters of the first word when no word fits), and
    ``True``."""
    if count_tokens(text, encoding) <= max_tokens:
        return text, False
    words, reach = _fitting_prefixes(text, max_tokens, encoding)
    for _, end in reversed(sentence_offsets(text, split_ambiguous=False)):
        if end <= reach and count_tokens(text[:end], encoding) <= max_tokens:
            return text[:end], True
    return text[:words or reach].rstrip(" "), True
