"""Word overlap ratio of a candidate chunk with a kept one, the near-duplicate measure of chunk
selection (step 2).

The ratio is the share of the candidate's words that the kept chunk already has: ``|C & K| /
|C|`` over the texts' word sets, words being casefolded ``\\w+`` runs. It is 1.0 when the
candidate's words are all in the kept chunk (a chunk repeated inside a longer, better-ranked
one) and, for two chunks of one size (the overlapping windows of a sliding chunker), it is the
share they have in common. It is directional: a longer candidate that merely contains a short
kept chunk ("Results are shown." then a paragraph ending "results are shown in table 2") adds
its other words, and is no duplicate; the symmetric overlap coefficient ``|A & B| / min(|A|,
|B|)`` used before dropped it and turned answerable questions into refusals. 0.0 when either
text has no words, except that two texts equal after casefolding count as full overlap (1.0)
even with no words (``🙂🙂`` twice): chunk selection treats equal sanitised texts as
duplicates the same way.
"""

from __future__ import annotations

import re

__all__ = ["overlap_ratio", "word_set"]

_WORD = re.compile(r"\w+")


def word_set(text: str) -> frozenset[str]:
    """Casefolded ``\\w+`` words of ``text``."""
    return frozenset(m.group(0) for m in _WORD.finditer(text.casefold()))


def overlap_ratio(candidate: str | frozenset[str], kept: str | frozenset[str]) -> float:
    """The share of ``candidate``'s words found in ``kept`` (texts or precomputed word sets);
    1.0 for two non-empty texts equal after casefolding."""
    if isinstance(candidate, str) and isinstance(kept, str) and candidate \
            and candidate.casefold() == kept.casefold():
        return 1.0
    sc = word_set(candidate) if isinstance(candidate, str) else candidate
    sk = word_set(kept) if isinstance(kept, str) else kept
    if not sc or not sk:
        return 0.0
    return len(sc & sk) / len(sc)
