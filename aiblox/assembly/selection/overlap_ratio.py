"""Word overlap ratio between two texts, the near-duplicate measure of chunk selection (step 2).

The ratio is the overlap coefficient (Szymkiewicz-Simpson) of the two texts' word sets:
``|A & B| / min(|A|, |B|)``, words being casefolded ``\\w+`` runs. It is 1.0 when one text's
words are all contained in the other's (the overlapping windows of a sliding chunker, a chunk
repeated inside a longer one) and 0.0 when either text has no words, except that two texts
equal after casefolding count as full overlap (1.0) even with no words (``🙂🙂`` twice): chunk
selection treats equal sanitised texts as duplicates the same way.
"""

from __future__ import annotations

import re

__all__ = ["overlap_ratio", "word_set"]

_WORD = re.compile(r"\w+")


def word_set(text: str) -> frozenset[str]:
    """Casefolded ``\\w+`` words of ``text``."""
    return frozenset(m.group(0) for m in _WORD.finditer(text.casefold()))


def overlap_ratio(a: str | frozenset[str], b: str | frozenset[str]) -> float:
    """Overlap coefficient of the word sets of ``a`` and ``b`` (texts or precomputed sets);
    1.0 for two non-empty texts equal after casefolding."""
    if isinstance(a, str) and isinstance(b, str) and a and a.casefold() == b.casefold():
        return 1.0
    sa = word_set(a) if isinstance(a, str) else a
    sb = word_set(b) if isinstance(b, str) else b
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))
