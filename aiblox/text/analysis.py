"""The lexical analysis of the BM25 index: bm25s's tokenizer, made deterministic.

Text is lower-cased (optionally), split into runs of two or more word characters (bm25s's
``(?u)\\b\\w\\w+\\b``, so letters of every script count, CJK included), stop words are dropped,
and the rest is stemmed by a Snowball stemmer through PyStemmer. This gives exactly bm25s's
tokens (``bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"))``); unlike
bm25s, term ids do not depend on set order (``PYTHONHASHSEED``): a vocabulary is numbered by
the caller (:mod:`aiblox.indexes.bm25` numbers it in sorted order).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Analyzer", "TOKEN_PATTERN", "stop_words"]

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s's (and scikit-learn's) token pattern: runs of two or more word characters."""

_LUCENE_EN = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
})


def stop_words(name: str) -> frozenset[str]:
    """A stop-word list by name: ``en`` (Lucene's English list, bm25s's ``en``) or ``none``."""
    if name == "en":
        return _LUCENE_EN
    if name == "none":
        return frozenset()
    raise ValueError(f"unknown stop-word list {name!r}: use 'en' or 'none'")


@dataclass
class Analyzer:
    """Text to terms: lower-case, split, drop stop words, stem (stems cached per word)."""

    lower: bool = True
    stopwords: str = "en"
    stemmer: str | None = "english"
    _split: Callable[[str], list[str]] = field(init=False, repr=False)
    _stop: frozenset[str] = field(init=False, repr=False)
    _stem_many: Callable[[list[str]], list[str]] | None = field(init=False, repr=False)
    _cache: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._split = re.compile(TOKEN_PATTERN).findall
        self._stop = stop_words(self.stopwords)
        self._stem_many = None
        if self.stemmer is not None:
            import Stemmer  # PyStemmer, a core dependency

            if self.stemmer not in Stemmer.algorithms():
                raise ValueError(f"unknown stemmer {self.stemmer!r}; PyStemmer knows: "
                                 f"{', '.join(Stemmer.algorithms())}")
            self._stem_many = Stemmer.Stemmer(self.stemmer).stemWords

    @property
    def id(self) -> str:
        """Names the analysis (recorded with what it produced)."""
        return (f"bm25s-tokens(lower={self.lower},stop={self.stopwords},"
                f"stem={self.stemmer},pattern={TOKEN_PATTERN})")

    def words(self, text: str) -> list[str]:
        """The tokens of ``text`` before stemming (stop words dropped)."""
        if self.lower:
            text = text.lower()
        stop = self._stop
        return [w for w in self._split(text) if w not in stop]

    def terms(self, text: str) -> list[str]:
        """The terms of ``text``, in order, repeats kept."""
        return self.terms_many([text])[0]

    def terms_many(self, texts: Iterable[str]) -> list[list[str]]:
        """The terms of each text; new words are stemmed once, in one call, per batch."""
        words = [self.words(t) for t in texts]
        if self._stem_many is None:
            return words
        cache = self._cache
        new = sorted({w for ws in words for w in ws if w not in cache})
        if new:
            cache.update(zip(new, self._stem_many(new), strict=True))
            if len(cache) > 2_000_000:  # bounded: a long ingest must not grow it forever
                cache.clear()
                cache.update(zip(new, self._stem_many(new), strict=True))
        return [[cache[w] for w in ws] for ws in words]
