"""A small deterministic lexical analyser and BM25 over a handful of texts.

This is the "text signal" for scoring the chunks of a few candidate documents against a query
(late chunking), where a full-text index would be overkill. The analyser lower-cases, splits on
anything that is not a letter or digit, drops Lucene's English stop words and applies the Porter
stemmer (PyStemmer's ``porter``, a core dependency). Scores are Okapi BM25 (Robertson et al.,
"Okapi at TREC-3", 1994) with Lucene's non-negative idf, statistics taken over the given texts
only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = ["ANALYZER_ID", "ENGLISH_STOP_WORDS", "analyze", "bm25_scores", "stem"]

ANALYZER_ID = "lexical-v1(lower,alnum,lucene-en-stop,porter)"
"""Names the analysis; record it with scores it produced."""

ENGLISH_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
})
"""Lucene's classic English stop word set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``)."""

_TOKEN = re.compile(r"[^\W_]+")


def _load_stemmer() -> Callable[[str], str]:
    import Stemmer  # PyStemmer

    stemmer = Stemmer.Stemmer("porter")
    return stemmer.stemWord


stem: Callable[[str], str] = _load_stemmer()
"""Porter stem of a lower-case word (PyStemmer's ``porter``)."""


def analyze(text: str) -> list[str]:
    """Terms of ``text``: lower-cased letter/digit runs, stop words dropped, Porter-stemmed."""
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in ENGLISH_STOP_WORDS]


def bm25_scores(query: str, texts: Sequence[str], k1: float = 1.2,
                b: float = 0.75) -> list[float]:
    """BM25 score of each text for ``query``, with idf and average length over ``texts``.

    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``; each distinct query term counts once and
    terms are summed in order of first appearance in the query, so equal inputs give equal
    floats. A text with no query term scores 0.0.
    """
    if k1 < 0 or not 0.0 <= b <= 1.0:
        raise ValueError(f"bm25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
    terms = list(dict.fromkeys(analyze(query)))
    docs = [Counter(analyze(t)) for t in texts]
    if not terms or not docs:
        return [0.0] * len(docs)
    n = len(docs)
    lengths = [sum(d.values()) for d in docs]
    avgdl = sum(lengths) / n
    idf = {}
    for term in terms:
        df = sum(1 for d in docs if term in d)
        idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    scores = []
    for doc, length in zip(docs, lengths, strict=True):
        norm = k1 * (1.0 - b + b * length / avgdl) if avgdl > 0 else k1
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf:
                score += idf[term] * tf * (k1 + 1.0) / (tf + norm)
        scores.append(score)
    return scores
