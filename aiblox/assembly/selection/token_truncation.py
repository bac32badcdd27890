"""Cut a sanitised text to its longest word prefix within a token budget: the per-chunk cap
(``max_chunk_token_ratio``) of chunk selection (step 2).

The cut is a prefix: words are never changed, reordered or summarised, only the tail beyond the
budget is left out. Word prefixes are searched by bisection on the word count; a first word that
alone exceeds the budget is cut by user-perceived characters (Unicode grapheme clusters, the
pattern ``\\X``) the same way, so a cut never separates a base letter from its combining marks,
a Thai or Devanagari vowel sign from its consonant, an emoji from its variation selector or ZWJ
sequence, or a flag's two letters. Deterministic for a given encoding.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

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
        return " ".join(words[:k]), True
    first = words[0]
    ends = [0, *(m.end() for m in _GRAPHEME.finditer(first))]  # prefixes of 0, 1, ... clusters
    c = _longest_prefix(len(ends) - 1,
                        lambda c: count_tokens(first[:ends[c]], encoding) <= max_tokens)
    return first[:ends[c]], True
