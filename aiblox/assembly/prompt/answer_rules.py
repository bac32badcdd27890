"""Patterns of the answer rules Prompt Contract V1 states (its citation and output format
contracts), shared by answer validation (step 6) and the extractive reader (step 5):
citation-like markers, evidence metadata and meta commentary."""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

__all__ = ["METADATA_PATTERN", "META_COMMENTARY_PATTERN", "is_quotable", "malformed_citations"]

METADATA_PATTERN = re.compile(r"chunk_id|knowledge_id|\bsource\s*=|\[C\d+\s*\|", re.IGNORECASE)
"""Evidence metadata fields or an evidence header."""

META_COMMENTARY_PATTERN = re.compile(
    r"\b(?:provided|given|supplied|above) (?:evidence|context|documents?|passages?|chunks?)\b"
    r"|\b(?:the|this) (?:evidence|prompt|system prompt)\b"
    r"|\bevidence (?:block|section|chunks?)\b"
    r"|\b(?:my|these|the) instructions\b"
    r"|\bas an ai\b|\blanguage model\b",
    re.IGNORECASE,
)
"""Talk about the evidence, the prompt, the instructions or being an AI."""

_EXACT = re.compile(r"\[C[0-9]+\]")
"""An exact citation marker, ASCII as the contract writes it (``[C0]``)."""
_MARK = "\x00"
"""What an exact marker is masked with (one per character) before the search for malformed
ones: a control character, never in evidence (the sanitiser removes it) and refused in an
answer by itself."""
_QUOTES = "\u201a\u201e\u301d\u301e\u301f"
"""Quotation marks Unicode files as opening or closing punctuation (``‚ „ 〝 〞 〟``): not
brackets here (a low-9 mark stands in for a comma in some texts)."""
_NOT_GLUED = "()"
"""Round parentheses: an exact marker in parentheses (``(see [C0])``, ``([C0])``) is still one
marker."""
_NOT_NUMBERED = "(){}<>"
"""A number in parentheses (a year ``(1994)``, a list item ``(1)``), braces (a set ``{0,1}``,
LaTeX ``_{ 2}``) or angle brackets is not a numbered reference."""


@cache
def _malformed_pattern() -> re.Pattern[str]:
    """Citation-like text left once the exact markers are masked (built on first use: the
    bracket classes are read from the Unicode database, about 30 ms)."""
    brackets = [chr(c) for c in range(0x10000) if chr(c) not in _QUOTES
                and unicodedata.category(chr(c)) in ("Ps", "Pe")]
    opens = "".join(c for c in brackets if unicodedata.category(c) == "Ps") + "<"
    closes = "".join(c for c in brackets if unicodedata.category(c) == "Pe") + ">"

    def cls(chars: str, drop: str = "") -> str:
        return "".join(re.escape(c) for c in chars if c not in drop)

    o, c = cls(opens), cls(closes)
    o_num, c_num = cls(opens, _NOT_NUMBERED), cls(closes, _NOT_NUMBERED)
    o_glue, c_glue = cls(opens, _NOT_GLUED), cls(closes, _NOT_GLUED)
    sp = r"[^\S\n]*"  # spaces within a line
    anchor = rf"\b[cC]{sp}\d+\b"
    return re.compile(
        # an anchor-like token inside any brackets: [c0] [C 1] [C0, C1] (C9) 【C9】 [C0 | ...]
        rf"[{o}][^{o}{c}\n]{{0,40}}?{anchor}[^{o}{c}\n]{{0,200}}?[{c}]"
        # or touching one bracket (the other missing): [C0  C0]  (C9
        rf"|[{o}]{sp}{anchor}|{anchor}{sp}[{c}]"
        # a numbered reference in square brackets (or the like): [1] [1, 2] [3-5] 【4】
        rf"|[{o_num}]{sp}\d+(?:{sp}[,;\u2013\u2014-]{sp}\d+)*{sp}[{c_num}]"
        # brackets other than parentheses glued to an exact marker: [[C0]]  [C0]]  【[C0]】
        rf"|[{o_glue}]{sp}{_MARK}+|{_MARK}+{sp}[{c_glue}]"
    )


@lru_cache(maxsize=4096)
def _folded(ch: str) -> str:
    """``ch`` compatibility-folded (NFKC: full-width ``［Ｃ９］`` is ``[C9]``); a format
    character (zero-width space, joiner, soft hyphen, bidi mark) folds to nothing."""
    return "" if unicodedata.category(ch) == "Cf" else unicodedata.normalize("NFKC", ch)


def malformed_citations(text: str) -> list[str]:
    """The citation-like markers in ``text`` that are not exactly ``[C<n>]``, as written there:
    once the exact markers are set aside, an anchor-like token (``C<digits>``, any case, spaced
    or not) in or touching brackets of any kind (``[c0]``, ``[C0, C1]``, ``(C9)``, ``【C9】``,
    ``[C0``), a numbered reference in square brackets or the like (``[1]``, ``[2, 3]``,
    ``【4】``; not ``(1994)`` or ``{0,1}``), or brackets other than parentheses glued to an
    exact marker (``[[C0]]``; not ``([C0])``); full-width letters and brackets are folded
    (NFKC) and format characters ignored first (``［Ｃ9］``, ``[C\\u200b9]``). Every rule stays
    within one line."""
    masked = _EXACT.sub(lambda m: _MARK * len(m.group(0)), text)
    where: list[int] | None = None
    if not masked.isascii():
        chars: list[str] = []
        where = []
        for i, ch in enumerate(masked):
            for part in _folded(ch):
                chars.append(part)
                where.append(i)
        masked = "".join(chars)
    found = []
    for m in _malformed_pattern().finditer(masked):
        start, end = m.span()
        if where is not None:
            start, end = where[start], where[end - 1] + 1
        found.append(text[start:end])
    return found


_HEADING = re.compile(r"#{1,6}\s")


def is_quotable(sentence: str) -> bool:
    """True when quoting ``sentence`` cannot break an answer rule by itself."""
    return not (
        _HEADING.match(sentence)  # a Markdown heading (``# BM25.``): a title, not a claim
        or malformed_citations(sentence)
        or re.search(r"\[C\d+\]", sentence)
        or "NO_EVIDENCE" in sentence
        or METADATA_PATTERN.search(sentence)
        or META_COMMENTARY_PATTERN.search(sentence)
    )
