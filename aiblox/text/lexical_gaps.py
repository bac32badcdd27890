"""Texts a lexical analyser cannot see: which documents or queries give BM25 no token at all.

DuckDB's full-text index (the DuckDB store's BM25) lower-cases, strips accents and then drops
every run matching ``ignore = '(\\.|[^a-z])+'``: whatever is not a Latin letter ``a-z`` after
accent stripping is a separator. A document written in Chinese, Japanese, Korean, Cyrillic,
Greek, Arabic, ... or made of emoji or digits alone gives no token, so BM25 never retrieves it
and a query in such a script matches nothing; dense retrieval still sees both. Nothing fails:
the scores are just silently worse. :func:`lexical_gaps` finds such texts for a *named*
analyser, so the check follows the engine when the lexical index changes (register the new
analyser in :data:`ANALYZERS`).

A text is reported when the analyser gives it no token while it holds content (letters of any
script, digits or symbols); an empty or punctuation-only text is not reported (no analyser
could index it). A text made only of stop words still gives tokens before stop-word removal,
so it is not reported either: the analysers differ in stop words, not in what they can read.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aiblox.text.analysis import TOKEN_PATTERN

__all__ = ["ANALYZERS", "DUCKDB_FTS", "LexicalGaps", "analyzer_tokens", "lexical_gaps"]

DUCKDB_FTS = "duckdb-fts"
"""DuckDB's fts tokenizer as the DuckDB store configures it: ``lower=1, strip_accents=1,
ignore='(\\.|[^a-z])+'`` (the terms before stop words and stemming)."""

_DUCKDB_IGNORE = re.compile(r"(?:\.|[^a-z])+")
_MARKS = frozenset({"Mn", "Mc", "Me"})


def _strip_accents(text: str) -> str:
    """DuckDB's ``strip_accents`` (utf8proc's ``STRIPMARK``): canonical decomposition, every
    mark dropped, non-spacing, spacing and enclosing (``ﬁ`` and ``½`` stay: no compatibility
    decomposition). Checked against DuckDB on each of Unicode's 458 spacing and enclosing
    marks between two letters."""
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) not in _MARKS)


def _duckdb_fts_tokens(text: str) -> list[str]:
    """DuckDB's ``tokenize`` macro: ``string_split_regex(regexp_replace(lower(strip_accents(s)),
    ignore, ' ', 'g'), '\\s+')``, empty strings dropped."""
    if text.isascii():  # nothing to strip: the common case, without normalisation
        return [t for t in _DUCKDB_IGNORE.split(text.lower()) if t]
    return [t for t in _DUCKDB_IGNORE.split(_strip_accents(text.lower())) if t]


_ASCII_LETTER = re.compile(r"[A-Za-z]")


def _duckdb_fts_sees(text: str) -> bool:
    """Whether :func:`_duckdb_fts_tokens` gives a token (an ASCII letter always survives)."""
    return _ASCII_LETTER.search(text) is not None or bool(_duckdb_fts_tokens(text))


_ALNUM_RUN = re.compile(r"[^\W_]+")
_BM25S_TOKEN = re.compile(TOKEN_PATTERN)


def _lexical_v1_tokens(text: str) -> list[str]:
    return _ALNUM_RUN.findall(text.lower())


def _bm25s_tokens(text: str) -> list[str]:
    return _BM25S_TOKEN.findall(text.lower())


ANALYZERS: dict[str, Callable[[str], list[str]]] = {
    DUCKDB_FTS: _duckdb_fts_tokens,
    "bm25s": _bm25s_tokens,
    "lexical-v1": _lexical_v1_tokens,
}
"""Tokenizers by analyser name: text to the tokens the analyser indexes (before stop words and
stemming). ``lexical-v1`` is :func:`aiblox.text.lexical.analyze`'s split (runs of letters and
digits of every script), the late-chunking text signal; ``bm25s`` is bm25s's (and
scikit-learn's) token pattern ``(?u)\\b\\w\\w+\\b``: runs of two or more word characters of any
script (emoji and single-character texts give none)."""


def _bm25s_sees(text: str) -> bool:
    """Whether :func:`_bm25s_tokens` gives a token (the first match, not all of them)."""
    return _BM25S_TOKEN.search(text.lower()) is not None


_SEES: dict[str, Callable[[str], bool]] = {DUCKDB_FTS: _duckdb_fts_sees, "bm25s": _bm25s_sees}
"""Fast "gives at least one token" checks, where an analyser has one."""


def analyzer_tokens(name: str) -> Callable[[str], list[str]]:
    """The tokenizer of analyser ``name`` (see :data:`ANALYZERS`)."""
    try:
        return ANALYZERS[name]
    except KeyError:
        raise ValueError(f"unknown lexical analyser {name!r}; known: {sorted(ANALYZERS)}") \
            from None


def _script(c: str) -> str | None:
    """What a content character is, for people: its script (first word of its Unicode name,
    e.g. ``CJK``, ``HIRAGANA``, ``CYRILLIC``), ``digits`` or ``symbols/emoji``; None for
    punctuation, spaces and marks."""
    cat = unicodedata.category(c)
    if cat[0] == "L":
        name = unicodedata.name(c, "")
        return name.split(" ", 1)[0] if name else "letters"
    if cat[0] == "N":
        return "digits"
    if cat[0] == "S":
        return "symbols/emoji"
    return None


@dataclass(frozen=True)
class LexicalGaps:
    """Texts the analyser gives no token although they hold content."""

    analyzer: str
    total: int
    """Texts checked."""
    ids: tuple[str, ...] = ()
    """Ids of the texts with no token, in input order."""
    scripts: dict[str, int] = field(default_factory=dict)
    """Per script (or ``digits``, ``symbols/emoji``): how many of those texts hold it."""

    def __bool__(self) -> bool:
        return bool(self.ids)

    def describe(self, what: str = "documents", one: str = "doc") -> str:
        """One line for people, e.g. ``12 of 40 documents (e.g. doc 'd7') have text BM25
        cannot index (CJK 10, symbols/emoji 2); dense retrieval still sees it``."""
        kinds = ", ".join(f"{s} {n}" for s, n in
                          sorted(self.scripts.items(), key=lambda x: (-x[1], x[0]))[:4])
        return (f"{len(self.ids)} of {self.total} {what} (e.g. {one} {self.ids[0]!r}) have text "
                f"BM25 cannot index under {self.analyzer} ({kinds}); dense retrieval still "
                f"sees it")


def lexical_gaps(texts: Iterable[tuple[str, str]], analyzer: str = DUCKDB_FTS) -> LexicalGaps:
    """The ``(id, text)`` pairs whose text gives ``analyzer`` no token while holding content.

    Pure; at most one pass of the analyser's tokenizer over each text.
    """
    tokens = analyzer_tokens(analyzer)
    sees = _SEES.get(analyzer) or (lambda text: bool(tokens(text)))
    total, ids, scripts = 0, [], Counter[str]()
    for item_id, text in texts:
        total += 1
        if sees(text):
            continue
        found = {s for s in map(_script, text) if s is not None}
        if found:
            ids.append(item_id)
            scripts.update(found)
    return LexicalGaps(analyzer, total, tuple(ids), dict(scripts))
